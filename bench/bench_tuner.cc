// Tuner speed and plan quality (Google Benchmark).
//
//   BM_TuneEveryCell: every cell (1, 2, 4 ... 64 GPUs of one type, hosts of 8,
//     each stage count dividing the GPUs) of a 48-layer GPT with hidden 8192
//     (fp16, seq 2048, global batch 256), profiles shaped like an A100's.
//   BM_TuneVsExhaustive: a 9-layer model on 4 GPUs in 2 stages; the counter
//     `gap_pct` is the tuner's best plan over the exhaustive best, in percent.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/model.h"
#include "tests/estimator/estimator_fixture.h"
#include "tuner/tuner.h"

namespace {

using namespace cellsched;

ModelSpec gpt48() {
  const auto path = std::filesystem::temp_directory_path() / "cellsched_bench_gpt48.yaml";
  {
    std::ofstream f(path);
    f << "name: gpt-48x8192\nfamily: gpt\nhidden: 8192\nnum_layers: 48\nheads: 64\nseq: 2048\n"
         "vocab: 51200\nbytes_per_value: 2\n";
  }
  ModelSpec m = load_model_yaml(path.string());
  std::filesystem::remove(path);
  return m;
}

void BM_TuneEveryCell(benchmark::State& state) {
  const ModelSpec m = gpt48();
  const auto compute = testing::roofline_compute(m, "a100-80", 312);
  const auto comm = testing::ring_comm("a100-80");
  const estimator::CostModel cm(m, "a100-80", compute, &comm);
  tuner::TuneOptions o;
  o.global_batch = 256;
  size_t cells = 0, feasible = 0;
  long labels = 0;
  for (auto _ : state) {
    const auto all = tuner::tune_all(cm, static_cast<int>(state.range(0)), 8, o);
    cells = all.size();
    feasible = 0;
    labels = 0;
    for (const auto& r : all) {
      feasible += r.feasible;
      labels += r.labels;
    }
    benchmark::DoNotOptimize(all.data());
  }
  state.counters["cells"] = static_cast<double>(cells);
  state.counters["feasible"] = static_cast<double>(feasible);
  state.counters["labels"] = static_cast<double>(labels);
  state.counters["layers"] = m.layers.size();
}
BENCHMARK(BM_TuneEveryCell)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_TuneVsExhaustive(benchmark::State& state) {
  const ModelSpec m = testing::uneven_model(9);
  const auto compute = testing::roofline_compute(m, "a100-80", 19.5);
  const auto comm = testing::ring_comm("a100-80");
  const estimator::CostModel cm(m, "a100-80", compute, &comm);
  const estimator::Cell cell{m.name, "a100-80", 1, 4, 2};
  tuner::TuneOptions o;
  o.global_batch = 32;
  const bool exhaustive = state.range(0) != 0;
  double best = 0;
  for (auto _ : state) {
    const auto r = exhaustive ? tuner::exhaustive(cm, cell, o) : tuner::tune_cell(cm, cell, o);
    best = r.best().estimate.iteration_ms;
  }
  const double ref = tuner::exhaustive(cm, cell, o).best().estimate.iteration_ms;
  state.counters["best_ms"] = best;
  state.counters["gap_pct"] = (best / ref - 1) * 100;
  state.SetLabel(exhaustive ? "exhaustive" : "tuner");
}
BENCHMARK(BM_TuneVsExhaustive)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
