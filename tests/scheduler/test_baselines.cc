#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::make_job;

// Node a: 2 x V100 (10 it/s per worker), node b: 2 x K80 (5 it/s); a job
// spread over both nodes runs at half speed. No restart overhead here, so
// every figure below is computed by hand in the comments.
struct Scenario {
  Cluster cluster;
  FakeOracle oracle;
  Trace trace;
  SimOptions options;
  Scenario() {
    cluster.name = "hand";
    cluster.nodes = {{"a", "localhost", "v100", 2}, {"b", "localhost", "k80", 2}};
    oracle.rate = {{"v100", 10}, {"k80", 5}};
    trace.name = "three";
    // J0: 2 GPUs, 7200 it; J1: 4 GPUs, 3600 it; J2: 1 GPU, 1800 it; all at t=0.
    trace.jobs = {make_job(0, 0, 2, 7200), make_job(1, 0, 4, 3600), make_job(2, 0, 1, 1800)};
    options.restart_s = 0;
  }
  RunRecord run(const std::string& policy) {
    auto p = make_policy(policy);
    return simulate(trace, cluster, oracle, *p, options);
  }
};

TEST(Fifo, BackfillsAndComputesExactJctAndCru) {
  Scenario s;
  const RunRecord r = s.run("fifo");
  // t=0: J0 on a (20 it/s -> done at 360); J1 does not fit; J2 backfills on b
  // (5 it/s -> 360). t=360: J1 on a+b, spread, bottleneck K80: 4 x 5 x 0.5 =
  // 10 it/s -> done at 720.
  EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 360);
  EXPECT_DOUBLE_EQ(r.jobs[2].completion_s, 360);
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start_s, 360);
  EXPECT_DOUBLE_EQ(r.jobs[1].completion_s, 720);
  EXPECT_DOUBLE_EQ(r.metrics.jct_mean_s, 480);
  EXPECT_DOUBLE_EQ(r.metrics.jct_median_s, 360);
  EXPECT_DOUBLE_EQ(r.metrics.ttd_s, 720);
  EXPECT_DOUBLE_EQ(r.metrics.queue_mean_s, 120);
  // GPU-s: 2x360 + 1x360 + 4x360 = 2520 over 4 GPUs x 720 s.
  EXPECT_DOUBLE_EQ(r.metrics.cru, 2520.0 / 2880.0);
}

TEST(YarnCs, BlocksAtTheHeadOfTheLineAndConsolidates) {
  Scenario s;
  const RunRecord r = s.run("yarn-cs");
  // t=0: J0 on a (tightest single node; tie -> first); J1 does not fit and
  // blocks J2. t=360: J1 on a+b -> 720. t=720: J2 on a (V100, 10 it/s) -> 900.
  EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 360);
  EXPECT_DOUBLE_EQ(r.jobs[1].completion_s, 720);
  EXPECT_DOUBLE_EQ(r.jobs[2].first_start_s, 720);
  EXPECT_DOUBLE_EQ(r.jobs[2].completion_s, 900);
  EXPECT_DOUBLE_EQ(r.metrics.jct_mean_s, 660);
  EXPECT_DOUBLE_EQ(r.metrics.ttd_s, 900);
  // GPU-s: 720 + 1440 + 180 = 2340 over 4 x 900.
  EXPECT_DOUBLE_EQ(r.metrics.cru, 2340.0 / 3600.0);
}

TEST(ArrivalOrder, SkipsNodesOfATypeTheJobCannotRunOn) {
  // T4 nodes listed first, no throughput on them (as a Gavel table has none):
  // fifo and yarn-cs took the first free GPUs, found the job could not run
  // there, and ran nothing at all. Now each job goes to the V100s.
  for (const std::string policy : {"fifo", "yarn-cs"}) {
    Scenario s;
    s.cluster.nodes = {{"t", "localhost", "t4", 4}, {"a", "localhost", "v100", 2}};
    s.trace.jobs = {make_job(0, 0, 2, 7200), make_job(1, 0, 1, 1800)};
    const RunRecord r = s.run(policy);
    ASSERT_EQ(r.metrics.completed, 2) << policy;
    // J0 on a (20 it/s) -> 360; J1 waits for a GPU of a -> 360 + 180.
    EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 360) << policy;
    EXPECT_DOUBLE_EQ(r.jobs[1].completion_s, 540) << policy;
  }
}

TEST(Fifo, RestartOverheadIsChargedOnStart) {
  Scenario s;
  s.options.restart_s = 30;
  const RunRecord r = s.run("fifo");
  // J0: 30 s overhead + 7200/20 = 360 s of work does not fit in round 1 (330 s):
  // 6600 done, 600 left at 20 it/s -> 30 s into round 2 -> 390.
  EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 390);
  EXPECT_EQ(r.jobs[0].restarts, 1);
  // J2: 30 + 1800/5 = 390 as well.
  EXPECT_DOUBLE_EQ(r.jobs[2].completion_s, 390);
  // J1 starts at 720 (GPUs free only at the round after 390): 30 + 360 -> 1110.
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start_s, 720);
  EXPECT_DOUBLE_EQ(r.jobs[1].completion_s, 1110);
}

TEST(Fifo, NeverPreemptsARunningJob) {
  Scenario s;
  s.trace.jobs = {make_job(0, 0, 4, 1e6), make_job(1, 10, 1, 10)};
  s.options.horizon_s = 3600;
  const RunRecord r = s.run("fifo");
  EXPECT_LT(r.jobs[1].first_start_s, 0);  // still waiting after an hour
  EXPECT_EQ(r.jobs[0].restarts, 1);
}

TEST(Placement, FewestNodesPrefersTightestSingleNode) {
  std::vector<int> free = {3, 2, 4};
  auto p = place_fewest_nodes(free, 2);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].node, 1);
  EXPECT_EQ(free, (std::vector<int>{3, 0, 4}));
  // 6 GPUs: no single node; largest first: node 2 (4) then node 0 (2 of 3).
  p = place_fewest_nodes(free, 6);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], (Placement{2, 4}));
  EXPECT_EQ(p[1], (Placement{0, 2}));
  EXPECT_EQ(free, (std::vector<int>{1, 0, 0}));
  // Too large: nothing changes.
  EXPECT_TRUE(place_fewest_nodes(free, 2).empty());
  EXPECT_EQ(free, (std::vector<int>{1, 0, 0}));
}

TEST(Placement, FewestNodesOverANodeListMatchesTheMask) {
  // The node-list form (policies that place by GPU type) picks what the mask
  // form picks, on random clusters and requests.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int nodes = 1 + static_cast<int>(rng() % 12);
    std::vector<int> free(nodes);
    std::vector<char> mask(nodes);
    std::vector<int> list;
    for (int n = 0; n < nodes; ++n) {
      free[n] = static_cast<int>(rng() % 9);
      mask[n] = static_cast<char>(rng() % 3 != 0);
      if (mask[n]) list.push_back(n);
    }
    const int gpus = 1 + static_cast<int>(rng() % 12);
    std::vector<int> by_mask = free, by_list = free;
    const auto a = place_fewest_nodes(by_mask, gpus, &mask);
    const auto b = place_fewest_nodes(by_list, gpus, list);
    ASSERT_EQ(a, b) << "trial " << trial;
    ASSERT_EQ(by_mask, by_list) << "trial " << trial;
    for (const Placement& p : b) EXPECT_TRUE(mask[p.node]);
  }
}

TEST(Placement, FirstFitTakesNodesInOrder) {
  std::vector<int> free = {1, 0, 4, 4};
  auto p = place_first_fit(free, 3);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], (Placement{0, 1}));
  EXPECT_EQ(p[1], (Placement{2, 2}));
  EXPECT_TRUE(place_first_fit(free, 7).empty());
  EXPECT_EQ(free, (std::vector<int>{0, 0, 2, 4}));
}

TEST(Policies, UnknownNameIsBadInput) {
  EXPECT_THROW(make_policy("lottery"), InputError);
  EXPECT_EQ(make_policy("yarn-cs")->name(), "yarn-cs");
}

}  // namespace
}  // namespace cellsched
