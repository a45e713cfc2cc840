// Decision time of one policy call per round, at 100 / 1,000 / 4,000 active
// jobs on 256 / 2,048 / 8,192 GPUs of four types (V100, V100-32, P100, K80),
// with Gavel's measured throughputs and a Gavel-style generated job mix.
//   BM_Decide/<policy>/<jobs>/<gpus>/<fresh>
// fresh=0: steady state (the policy object and the jobs' current placements
// carry over from the previous round; Gavel reuses its LP solution).
// fresh=1: a new policy object every call (Gavel solves its LP every time).
#include <benchmark/benchmark.h>

#include "core/cluster.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"

namespace cellsched {
namespace {

const char* kPolicies[] = {"fifo", "yarn-cs", "tiresias", "hadar", "hadare", "gavel",
                           "gavel-makespan", "hadar-design"};

const ThroughputTable& table() {
  static const ThroughputTable t =
      load_gavel_throughputs(std::string(CELLSCHED_EXAMPLES) + "/data/gavel/simulation_throughputs.json");
  return t;
}

Cluster cluster_of(int gpus) {
  Cluster c;
  c.name = "bench";
  const char* types[] = {"v100", "v100-32", "p100", "k80"};
  for (int i = 0; i < gpus / 4; ++i) c.nodes.push_back({"n" + std::to_string(i), "localhost", types[i % 4], 4});
  return c;
}

void BM_Decide(benchmark::State& state) {
  const std::string policy_name = kPolicies[state.range(0)];
  const int jobs = static_cast<int>(state.range(1));
  const Cluster cluster = cluster_of(static_cast<int>(state.range(2)));
  const bool fresh = state.range(3) != 0;
  GenerateOptions g;
  g.jobs = jobs;
  g.mean_interarrival_s = 0;
  g.seed = 1;
  const Trace trace = generate_trace(table(), g);
  const TableOracle oracle(table());
  std::vector<JobState> states(trace.jobs.size());
  std::vector<JobState*> active;
  for (size_t i = 0; i < states.size(); ++i) {
    states[i].job = &trace.jobs[i];
    states[i].remaining = trace.jobs[i].total_iterations;
    active.push_back(&states[i]);
  }
  std::vector<Allocation> out(active.size());
  RoundContext ctx{0, 360, &cluster, &oracle, &active, 30, {}};
  auto policy = make_policy(policy_name);
  auto round = [&](Policy& p) {
    for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
    p.decide(ctx, out);
  };
  // Two rounds so that steady state has placements to keep.
  for (int r = 0; r < 2; ++r) {
    round(*policy);
    for (size_t i = 0; i < active.size(); ++i) active[i]->current = out[i];
  }
  for (auto _ : state) {
    if (fresh) {
      auto p = make_policy(policy_name);
      round(*p);
    } else {
      round(*policy);
    }
    benchmark::ClobberMemory();
  }
  long running = 0;
  for (const Allocation& a : out) running += !a.empty();
  state.counters["running"] = static_cast<double>(running);
  state.SetLabel(policy_name + (fresh ? " fresh" : " steady"));
}

void Args(benchmark::internal::Benchmark* b) {
  const std::pair<int, int> sizes[] = {{100, 256}, {1000, 2048}, {4000, 8192}};
  for (int p = 0; p < static_cast<int>(std::size(kPolicies)); ++p) {
    for (const auto& [jobs, gpus] : sizes) {
      b->Args({p, jobs, gpus, 0});
      if (std::string(kPolicies[p]).rfind("gavel", 0) == 0) b->Args({p, jobs, gpus, 1});
    }
  }
}
BENCHMARK(BM_Decide)->Apply(Args)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cellsched

BENCHMARK_MAIN();
