#include <gtest/gtest.h>

#include <future>
#include <string>

#include "core/cluster.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "scheduler/bound.h"
#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::make_job;

Cluster nodes(std::vector<Node> n) {
  Cluster c;
  c.name = "hand";
  c.nodes = std::move(n);
  return c;
}

Trace trace_of(std::vector<Job> jobs) {
  Trace t;
  t.name = "hand";
  t.jobs = std::move(jobs);
  return t;
}

FakeOracle v100_k80() {
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  return o;
}

TEST(Bound, OneJobTakesItsIsolatedTimeOnTheFastestType) {
  const Cluster c = nodes({{"a", "localhost", "v100", 1}, {"b", "localhost", "k80", 1}});
  const FakeOracle o = v100_k80();
  const Trace t = trace_of({make_job(0, 50, 1, 3600)});
  EXPECT_NEAR(makespan_lower_bound(t, c, o), 360, 1e-5);
  // Forked copies may use both GPUs at once: 3600 / (10 + 5).
  EXPECT_NEAR(makespan_lower_bound(t, c, o, 64, true), 240, 1e-5);
}

TEST(Bound, TwoIdenticalJobsOnOneGpuTakeTwiceAsLong) {
  const Cluster c = nodes({{"a", "localhost", "v100", 1}});
  const FakeOracle o = v100_k80();
  const Trace t = trace_of({make_job(0, 0, 1, 3600), make_job(1, 0, 1, 3600)});
  EXPECT_NEAR(makespan_lower_bound(t, c, o), 720, 1e-5);
}

TEST(Bound, AGangRunsAtMostOnItsOwnGpus) {
  // 4 GPUs, but the 2-GPU job can use only 2 at a time: 3600 / (2 x 10).
  const Cluster c = nodes({{"a", "localhost", "v100", 4}});
  const FakeOracle o = v100_k80();
  const Trace t = trace_of({make_job(0, 0, 2, 3600)});
  EXPECT_NEAR(makespan_lower_bound(t, c, o), 180, 1e-5);
  // Two such jobs share the 4 GPUs: still 180.
  const Trace t2 = trace_of({make_job(0, 0, 2, 3600), make_job(1, 0, 2, 3600)});
  EXPECT_NEAR(makespan_lower_bound(t2, c, o), 180, 1e-5);
}

TEST(Bound, HonoursReleaseTimes) {
  // One GPU at 1 it/s. A at 100 (1000 it) and B at 600 (1000 it): the GPU
  // cannot start before 100, so 2000 s after the first arrival.
  const Cluster c = nodes({{"a", "localhost", "v100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 1}};
  EXPECT_NEAR(makespan_lower_bound(trace_of({make_job(0, 100, 1, 1000), make_job(1, 600, 1, 1000)}),
                                   c, o),
              2000, 1e-5);
  // B late enough that the GPU idles in between: 5100 + 1000 - 100.
  EXPECT_NEAR(makespan_lower_bound(
                  trace_of({make_job(0, 100, 1, 1000), make_job(1, 5100, 1, 1000)}), c, o),
              6000, 1e-5);
  // Needs the intervals (neither total work, 3000 s, nor any single job's
  // release + time, 6000 s, gives it): A at 0, then B and C at 5000 -> 7000.
  EXPECT_NEAR(makespan_lower_bound(trace_of({make_job(0, 0, 1, 1000), make_job(1, 5000, 1, 1000),
                                             make_job(2, 5000, 1, 1000)}),
                                   c, o),
              7000, 1e-5);
}

// 2 V100s and 2 K80s, and 40 jobs of mixed sizes arriving ever further apart.
Cluster two_nodes() { return nodes({{"a", "localhost", "v100", 2}, {"b", "localhost", "k80", 2}}); }
Trace forty_jobs() {
  std::vector<Job> jobs;
  for (int i = 0; i < 40; ++i)
    jobs.push_back(make_job(i, i * i * 37.0, 1 + i % 2, 2000 + 500 * (i % 7)));
  return trace_of(jobs);
}

TEST(Bound, CoarserIntervalsOnlyLowerIt) {
  const Cluster c = two_nodes();
  const FakeOracle o = v100_k80();
  const Trace t = forty_jobs();
  const double exact = makespan_lower_bound(t, c, o, 1000);
  for (int m : {1, 2, 5, 16}) EXPECT_LE(makespan_lower_bound(t, c, o, m), exact * (1 + 1e-9)) << m;
  EXPECT_GT(exact, 0);
  EXPECT_THROW(makespan_lower_bound(t, c, o, 0), std::invalid_argument);
}

// simulate solves the bound's LP on its own thread while the policies run
// (and solve their own LPs): the split gives the same value, on any thread.
TEST(Bound, SolvedOnAnotherThreadWhileAnotherLpRuns) {
  const Cluster c = two_nodes();
  const FakeOracle o = v100_k80();
  const Trace t = forty_jobs();
  for (bool forking : {false, true}) {
    const double whole = makespan_lower_bound(t, c, o, 64, forking, forking ? 16 : 0);
    LowerBoundLp lp = build_lower_bound(t, c, o, 64, forking, forking ? 16 : 0);
    auto there = std::async(std::launch::async, [&lp] { return solve_lower_bound(lp); });
    const double here = makespan_lower_bound(t, c, o, 16, forking, forking ? 16 : 0);
    EXPECT_EQ(there.get(), whole) << forking;
    EXPECT_LE(here, whole * (1 + 1e-9));
  }
  EXPECT_EQ(build_lower_bound(trace_of({}), c, o).t_col, -1);
  EXPECT_EQ(solve_lower_bound(build_lower_bound(trace_of({}), c, o)), 0);
}

TEST(Bound, LeavesOutJobsNoTypeCanRun) {
  const Cluster c = nodes({{"a", "localhost", "t4", 1}});
  const FakeOracle o = v100_k80();  // knows nothing of T4
  EXPECT_EQ(makespan_lower_bound(trace_of({make_job(0, 0, 1, 100)}), c, o), 0);
  EXPECT_EQ(makespan_lower_bound(trace_of({}), c, o), 0);
}

TEST(Bound, NeverExceedsAnyPolicysTtd) {
  const ThroughputTable table =
      load_gavel_throughputs(CELLSCHED_EXAMPLES "/data/gavel/simulation_throughputs.json");
  const TableOracle oracle(table);
  GenerateOptions g;
  g.jobs = 40;
  g.mean_interarrival_s = 600;
  g.seed = 7;
  const Trace trace = generate_trace(table, g);
  const Cluster cluster = parse_cluster_shorthand("v100:8,p100:8,k80:8");
  const double bound = makespan_lower_bound(trace, cluster, oracle);
  const double bound_fork = makespan_lower_bound(trace, cluster, oracle, 64, true);
  // Elastic policies (crius) may scale a job up to 16 GPUs.
  const double bound_elastic = makespan_lower_bound(trace, cluster, oracle, 64, true, 16);
  EXPECT_GT(bound_fork, 0);
  EXPECT_LE(bound_fork, bound * (1 + 1e-9));
  EXPECT_LE(bound_elastic, bound_fork * (1 + 1e-9));
  for (const std::string& name : policy_names()) {
    auto policy = make_policy(name);
    const RunRecord r = simulate(trace, cluster, oracle, *policy);
    ASSERT_EQ(r.metrics.completed, r.metrics.jobs) << name;
    const double b = policy->elastic() ? bound_elastic : name == "hadare" ? bound_fork : bound;
    EXPECT_LE(b, r.metrics.ttd_s) << name;
  }
}

}  // namespace
}  // namespace cellsched
