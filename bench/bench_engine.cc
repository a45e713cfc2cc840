// Per-round overhead of the simulator engine (policy call included) with a
// given number of active jobs: jobs never finish within the measured rounds.
#include <benchmark/benchmark.h>

#include "core/cluster.h"
#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"

namespace cellsched {
namespace {

class ConstOracle : public ThroughputOracle {
 public:
  double throughput(const Job&, const std::string& type, int workers, bool) const override {
    return workers * (type == "v100" ? 3.0 : type == "p100" ? 2.0 : 1.0);
  }
  std::string source() const override { return "const"; }
};

Cluster cluster_of(int gpus) {
  Cluster c;
  c.name = "bench";
  const char* types[] = {"v100", "p100", "k80"};
  for (int i = 0; i < gpus / 4; ++i) c.nodes.push_back({"n" + std::to_string(i), "localhost", types[i % 3], 4});
  return c;
}

// Jobs of 1/2/4/8 GPUs (70/10/15/5 %), all active from t=0, far too long to finish.
Trace trace_of(int jobs) {
  Trace t;
  t.name = "bench";
  uint64_t x = 42;
  for (int i = 0; i < jobs; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const int r = static_cast<int>((x >> 33) % 100);
    Job j;
    j.id = i;
    j.gpus = r < 70 ? 1 : r < 80 ? 2 : r < 95 ? 4 : 8;
    j.total_iterations = 1e12;
    j.job_type = "bench";
    t.jobs.push_back(j);
  }
  return t;
}

void BM_EngineRound(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const Cluster cluster = cluster_of(static_cast<int>(state.range(1)));
  const Trace trace = trace_of(jobs);
  const ConstOracle oracle;
  auto policy = make_policy(state.range(2) ? "yarn-cs" : "fifo");
  constexpr int kRounds = 50;
  SimOptions so;
  so.horizon_s = kRounds * so.round_s;
  for (auto _ : state) {
    RunRecord r = simulate(trace, cluster, oracle, *policy, so);
    benchmark::DoNotOptimize(r.metrics.rounds);
  }
  state.SetItemsProcessed(state.iterations() * kRounds);
  state.SetLabel(std::string(policy->name()) + ", items = rounds");
}
BENCHMARK(BM_EngineRound)
    ->Args({100, 256, 0})
    ->Args({1000, 2048, 0})
    ->Args({1000, 2048, 1})
    ->Args({4000, 8192, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cellsched

BENCHMARK_MAIN();
