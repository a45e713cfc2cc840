// The malletrain allocator (issue 16): one MILP over 1,000 idle nodes and 100
// malleable jobs (target <= 1 s, with a time limit and the best incumbent
// past it), against freetrain's greedy on the same input.
#include <benchmark/benchmark.h>

#include <random>

#include "scheduler/malle_alloc.h"

namespace {

using namespace cellsched;

struct Instance {
  std::vector<AllocClass> classes;
  std::vector<AllocJob> jobs;
};

// `nodes` idle nodes in four windows (10 min to the 1 h horizon), `jobs` jobs
// with Amdahl curves up to 4-128 nodes; a third of them already running.
Instance instance(int nodes, int jobs) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  Instance in;
  const double windows[] = {600, 1200, 2400, 3600};
  for (int c = 0; c < 4; ++c) in.classes.push_back({windows[c], nodes / 4});
  const int sizes[] = {4, 8, 16, 32, 64, 128};
  for (int j = 0; j < jobs; ++j) {
    AllocJob a;
    a.curve = amdahl_curve(1 + 9 * u(rng), 0.01 + 0.3 * u(rng), sizes[static_cast<int>(u(rng) * 6)]);
    a.rescale_s = 30 + 90 * u(rng);
    if (j % 3 == 0) {
      a.current_class = j % 4;
      a.current_nodes = std::min(a.curve.max_nodes(), 4);
    }
    in.jobs.push_back(a);
  }
  return in;
}

void BM_MalleMilp(benchmark::State& state) {
  const Instance in = instance(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  AllocStats st;
  long cut = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(allocate_milp(in.classes, in.jobs, 1.0, &st));
    cut += !st.optimal;
  }
  state.counters["variables"] = st.variables;
  state.counters["time_limited"] = static_cast<double>(cut);
  state.counters["objective_node_h"] = st.objective / 3600;
}
BENCHMARK(BM_MalleMilp)->Args({100, 10})->Args({1000, 100})->Unit(benchmark::kMillisecond);

void BM_MalleGreedy(benchmark::State& state) {
  const Instance in = instance(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  double value = 0;
  for (auto _ : state) {
    const auto choice = allocate_greedy(in.classes, in.jobs);
    value = 0;
    for (size_t j = 0; j < choice.size(); ++j)
      if (choice[j].nodes > 0) value += alloc_value(in.classes, in.jobs[j], choice[j].cls, choice[j].nodes);
    benchmark::DoNotOptimize(value);
  }
  state.counters["objective_node_h"] = value / 3600;
}
BENCHMARK(BM_MalleGreedy)->Args({100, 10})->Args({1000, 100})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
