// Host-scheduler mode (MalleTrain): EASY backfilling, the MILP against brute
// force, leaving claimed nodes within the grace period, primary jobs never
// delayed, and the advisor's fit.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "scheduler/advisor.h"
#include "scheduler/hostsched.h"
#include "scheduler/malle.h"
#include "scheduler/malle_alloc.h"
#include "scheduler/milp.h"

namespace cellsched {
namespace {

HostJob hj(int64_t id, double arrival, int nodes, double runtime) { return {id, arrival, nodes, runtime, runtime}; }

TEST(EasyBackfill, HeadReservesAndShortJobsBackfill) {
  // 4 nodes. A takes 2 until 100; B (4 nodes) waits with a reservation at 100;
  // C (2 nodes, 50 s) ends before it and backfills; D (2 nodes, 200 s) would
  // delay B, so it waits until B is done.
  const std::vector<HostJob> jobs = {hj(0, 0, 2, 100), hj(1, 0, 4, 50), hj(2, 0, 2, 50), hj(3, 0, 2, 200)};
  EXPECT_EQ(host_only_starts(jobs, 4), (std::vector<double>{0, 100, 0, 150}));
}

TEST(EasyBackfill, LongJobsBackfillOnlyOnNodesTheHeadDoesNotNeed) {
  // 4 nodes. A holds 3 until 100; B needs 2 (shadow 100, 2 spare then: 1 idle
  // now + 3 freed - 2). C (1 node, 1000 s) runs past the shadow but fits in the spare.
  const std::vector<HostJob> jobs = {hj(0, 0, 3, 100), hj(1, 0, 2, 10), hj(2, 0, 1, 1000)};
  EXPECT_EQ(host_only_starts(jobs, 4), (std::vector<double>{0, 100, 0}));
}

TEST(EasyBackfill, PredictsIdleNodesClaimedAtTheShadowTime) {
  EasyBackfill host(4);
  host.submit(hj(0, 0, 3, 100));
  host.submit(hj(1, 0, 4, 10));
  ASSERT_EQ(host.schedule(0).size(), 1u);
  const std::vector<double> claims = host.predicted_claims(0);
  ASSERT_EQ(host.idle_nodes(), 1);
  for (int n = 0; n < 4; ++n) EXPECT_DOUBLE_EQ(claims[n], host.owner()[n] == -1 ? 100 : 0);
  host.finish(0);
  host.schedule(100);
  EXPECT_EQ(host.idle_nodes(), 0);
}

TEST(Milp, IntegralityMatters) {
  // max 5x + 4y, 6x + 4y <= 9, x, y in {0, 1, 2}: the LP relaxation gives
  // 8.83 (y = 2, x = 1/6), the integer optimum is 8 (y = 2).
  MixedIntegerProgram mip;
  mip.lp.maximize = true;
  const int x = mip.lp.add_var(5, 0, 2), y = mip.lp.add_var(4, 0, 2);
  mip.lp.add_row(-kLpInf, 9, {x, y}, {6, 4});
  mip.integer = {true, true};
  const MilpSolution s = solve_milp(mip);
  EXPECT_TRUE(s.optimal);
  EXPECT_DOUBLE_EQ(s.objective, 8);
  EXPECT_EQ(s.x, (std::vector<double>{0, 2}));
}

double brute_force(const std::vector<AllocClass>& classes, const std::vector<AllocJob>& jobs) {
  double best = 0;
  std::vector<int> used(classes.size(), 0);
  std::function<void(size_t, double)> go = [&](size_t j, double value) {
    if (j == jobs.size()) {
      best = std::max(best, value);
      return;
    }
    go(j + 1, value);  // not run
    for (size_t c = 0; c < classes.size(); ++c)
      for (int n : candidate_sizes(jobs[j], static_cast<int>(c), classes[c].nodes)) {
        if (used[c] + n > classes[c].nodes) continue;
        used[c] += n;
        go(j + 1, value + alloc_value(classes, jobs[j], static_cast<int>(c), n));
        used[c] -= n;
      }
  };
  go(0, 0);
  return best;
}

TEST(MalleAlloc, MilpMatchesBruteForceOnSmallCases) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<AllocClass> classes;
    const int nc = 1 + static_cast<int>(u(rng) * 2);
    for (int c = 0; c < nc; ++c) classes.push_back({100 + u(rng) * 3000, 1 + static_cast<int>(u(rng) * 8)});
    std::vector<AllocJob> jobs;
    const int nj = 1 + static_cast<int>(u(rng) * 4);
    for (int j = 0; j < nj; ++j) {
      AllocJob a;
      a.curve = amdahl_curve(1 + u(rng) * 5, u(rng) * 0.5, 1 + static_cast<int>(u(rng) * 8));
      a.rescale_s = u(rng) * 400;
      a.remaining = u(rng) < 0.3 ? a.curve.at(1) * 500 : 0;
      if (u(rng) < 0.4) {
        a.current_class = static_cast<int>(u(rng) * nc);
        a.current_nodes = std::min(classes[a.current_class].nodes, 1 + static_cast<int>(u(rng) * 4));
        a.current_nodes = std::min(a.current_nodes, a.curve.max_nodes());
      }
      jobs.push_back(a);
    }
    AllocStats st;
    const std::vector<AllocChoice> choice = allocate_milp(classes, jobs, 5, &st);
    double value = 0;
    std::vector<int> used(classes.size(), 0);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (choice[j].nodes == 0) continue;
      used[choice[j].cls] += choice[j].nodes;
      value += alloc_value(classes, jobs[j], choice[j].cls, choice[j].nodes);
    }
    for (size_t c = 0; c < classes.size(); ++c) EXPECT_LE(used[c], classes[c].nodes);
    EXPECT_NEAR(value, brute_force(classes, jobs), 1e-6 * std::max(1.0, value)) << "trial " << trial;
    // The greedy never beats the optimum.
    double g = 0;
    const std::vector<AllocChoice> greedy = allocate_greedy(classes, jobs);
    for (size_t j = 0; j < jobs.size(); ++j)
      if (greedy[j].nodes > 0) g += alloc_value(classes, jobs[j], greedy[j].cls, greedy[j].nodes);
    EXPECT_LE(g, value + 1e-6);
  }
}

TEST(MalleAlloc, ShortWindowsAreNotWorthARescale) {
  const std::vector<AllocClass> classes = {{50, 4}};  // 50 s left
  AllocJob a;
  a.curve = amdahl_curve(1, 0.1, 4);
  a.rescale_s = 60;
  EXPECT_EQ(allocate_milp(classes, {a}, 1)[0].nodes, 0);
  a.current_class = 0;  // already there: staying costs nothing
  a.current_nodes = 2;
  EXPECT_EQ(allocate_milp(classes, {a}, 1)[0], (AllocChoice{0, 2}));
}

// A job that finishes in the window trains the same at every size that
// finishes it: the smallest won, so a lone linear job kept 1 node of 4 idle
// ones and did not finish where the greedy did. Sooner now wins the tie, but
// never a node another job would train on for the whole window.
TEST(MalleAlloc, AJobThatFinishesInTheWindowTakesTheSizeThatFinishesItSoonest) {
  const std::vector<AllocClass> classes = {{2000, 4}};
  AllocJob a;
  a.curve = amdahl_curve(1, 0, 4);  // linear, 1 iteration/s a node
  a.remaining = 1000;
  a.rescale_s = 10;
  EXPECT_EQ(allocate_milp(classes, {a}, 1)[0], (AllocChoice{0, 4}));
  EXPECT_GT(alloc_value(classes, a, 0, 4), alloc_value(classes, a, 0, 1));
  // Staying at 1 finishes 1000 s in; moving to 4 (10 s rescale) at 260 s: it moves.
  a.current_class = 0;
  a.current_nodes = 1;
  EXPECT_EQ(allocate_milp(classes, {a}, 1)[0], (AllocChoice{0, 4}));
  // A job with no end in sight trains 2000 s on each node it gets: it gets 3.
  AllocJob b;
  b.curve = amdahl_curve(1, 0, 4);
  const auto both = allocate_milp(classes, {a, b}, 1);
  EXPECT_EQ(both[0], (AllocChoice{0, 1}));
  EXPECT_EQ(both[1], (AllocChoice{0, 3}));
}

MalleableJob mj(int64_t id, int max_nodes, double sigma, double iterations, double rescale) {
  MalleableJob j;
  j.id = id;
  j.name = "m" + std::to_string(id);
  j.iterations = iterations;
  j.rescale_s = rescale;
  j.truth = amdahl_curve(1, sigma, max_nodes);
  j.declared = j.truth;
  return j;
}

TEST(MalleSim, LeavesAReservedNodeWithinTheGracePeriod) {
  // 2 nodes: A holds one until 1000, B (2 nodes) is reserved at 1000, so the
  // other node idles until then. The malleable job runs there and leaves at
  // 1000 - grace, checkpointed: nothing lost, nobody delayed.
  const std::vector<HostJob> primary = {hj(0, 0, 1, 1000), hj(1, 0, 2, 500)};
  MalleOptions o;
  o.grace_s = 60;
  for (MallePolicy p : {MallePolicy::malletrain, MallePolicy::freetrain}) {
    const MalleResult r = simulate_malleable(primary, 2, {mj(0, 2, 0.1, 1e9, 10)}, p, o);
    EXPECT_EQ(r.unannounced_claims, 0) << malle_policy_name(p);
    EXPECT_DOUBLE_EQ(r.lost_iterations, 0);
    EXPECT_DOUBLE_EQ(r.primary_delay_max_s, 0);
    EXPECT_NEAR(r.malleable_node_s, 940, 1e-6);  // held 0..940
    EXPECT_NEAR(r.useful_node_s, 930, 1e-6);     // after the 10 s start
    EXPECT_NEAR(r.idle_node_s, 1000, 1e-6);
    EXPECT_DOUBLE_EQ(r.span_s, 1500);
  }
}

TEST(MalleSim, RecordsEachMalleableJobsStartCompletionAndNodeTime) {
  // One idle node from 0 (a primary job holds the other until 10,000): a job
  // of 1,000 iterations at 1 it/s after a 10 s start finishes at 1,010; one of
  // 1e9 iterations arriving at 2,000 is still training at the end.
  const std::vector<HostJob> primary = {hj(0, 0, 1, 10000)};
  MalleableJob small = mj(0, 1, 0, 1000, 10), big = mj(1, 1, 0, 1e9, 10);
  big.arrival_s = 2000;
  const MalleResult r = simulate_malleable(primary, 2, {small, big}, MallePolicy::malletrain, MalleOptions{});
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.malleable_completed, 1);
  const JobResult& a = r.jobs[0];
  EXPECT_EQ(a.job_id, 0);
  EXPECT_DOUBLE_EQ(a.first_start_s, 0);
  EXPECT_NEAR(a.completion_s, 1010, 1e-6);
  EXPECT_NEAR(a.jct_s(), 1010, 1e-6);
  EXPECT_NEAR(a.gpu_seconds, 1010, 1e-6);  // node-seconds held
  EXPECT_NEAR(a.iterations_done, 1000, 1e-6);
  EXPECT_EQ(a.gpus, 1);
  const JobResult& b = r.jobs[1];
  EXPECT_FALSE(b.finished());
  EXPECT_DOUBLE_EQ(b.arrival_s, 2000);
  EXPECT_DOUBLE_EQ(b.first_start_s, 2000);
  EXPECT_NEAR(b.gpu_seconds, 8000, 1e-6);  // until the span's end
  EXPECT_NEAR(b.iterations_done, 7990, 1e-6);
  double held = 0;
  for (const JobResult& j : r.jobs) held += j.gpu_seconds;
  EXPECT_NEAR(held, r.malleable_node_s, 1e-6);
}

std::vector<HostJob> random_workload(uint64_t seed, int n, int nodes) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<HostJob> jobs;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += u(rng) * 600;
    const double runtime = 60 + u(rng) * 7200;
    jobs.push_back({i, t, 1 + static_cast<int>(u(rng) * nodes), runtime, runtime * (1 + u(rng))});
  }
  return jobs;
}

TEST(MalleSim, PrimaryJobsAreNeverDelayedAndClaimsWithoutNoticeCostWorkNotTime) {
  const std::vector<HostJob> primary = random_workload(3, 120, 8);
  const std::vector<MalleableJob> mix = {mj(0, 8, 0.05, 1e9, 30), mj(1, 4, 0.3, 1e9, 90), mj(2, 2, 0.0, 1e9, 60)};
  MalleOptions o;
  long claims = 0;
  for (MallePolicy p : {MallePolicy::malletrain, MallePolicy::freetrain, MallePolicy::advisor}) {
    const MalleResult r = simulate_malleable(primary, 8, mix, p, o);
    EXPECT_DOUBLE_EQ(r.primary_delay_max_s, 0) << malle_policy_name(p);
    EXPECT_GT(r.idle_node_s, 0);
    EXPECT_GT(r.idle_node_time_used(), 0.3);
    EXPECT_LE(r.malleable_node_s, r.idle_node_s + 1e-6);  // never on a node the primary holds
    EXPECT_LE(r.useful_node_s, r.malleable_node_s + 1e-6);
    claims += r.unannounced_claims;
    if (r.unannounced_claims > 0) {
      EXPECT_GT(r.lost_iterations, 0);
    }
  }
  ASSERT_GT(claims, 0);  // walltimes overestimate: jobs end early and claims come unannounced
  // Waiting for the malleable job to checkpoint instead loses nothing and delays the primary.
  o.reclaim = Reclaim::wait;
  const MalleResult w = simulate_malleable(primary, 8, mix, MallePolicy::freetrain, o);
  EXPECT_DOUBLE_EQ(w.lost_iterations, 0);
  if (w.unannounced_claims > 0) {
    EXPECT_GT(w.primary_delay_max_s, 0);
  }
}

TEST(Advisor, FitsAmdahlExactlyFromTwoSizesAndCloselyWithNoise) {
  const ScalingCurve truth = amdahl_curve(3, 0.2, 16);
  ScalingAdvisor exact(16);
  exact.add_sample(2, truth.at(2));
  EXPECT_DOUBLE_EQ(exact.sigma(), 0.1);  // one size: the prior's shape
  exact.add_sample(8, truth.at(8));
  EXPECT_NEAR(exact.sigma(), 0.2, 1e-9);
  EXPECT_NEAR(exact.t1(), 3, 1e-9);
  EXPECT_LT(curve_error(exact.curve(), truth), 1e-9);
  // 3 % noise, three samples at 1, 2 and 4 nodes: within 10 % up to 8 nodes
  // in most trials (extrapolating further spreads the noise).
  const ScalingCurve truth8 = amdahl_curve(3, 0.2, 8);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 0.03);
  int within = 0;
  for (int trial = 0; trial < 50; ++trial) {
    ScalingAdvisor a(8);
    for (int n : {1, 2, 4}) a.add_sample(n, truth8.at(n) * (1 + noise(rng)));
    within += curve_error(a.curve(), truth8) <= 0.10;
  }
  EXPECT_GE(within, 40);
}

TEST(Advisor, WeighsASampleByHowLongItMeasured) {
  // A 100-probe measurement at 8 nodes outweighs a 1-probe one 20 % off.
  const ScalingCurve truth = amdahl_curve(2, 0.15, 16);
  ScalingAdvisor a(16);
  a.add_sample(1, truth.at(1), 100);
  a.add_sample(8, truth.at(8), 100);
  a.add_sample(8, truth.at(8) * 1.2, 1);
  EXPECT_LT(curve_error(a.curve(), truth), 0.01);
  ScalingAdvisor equal(16);  // counted alike, the short one pulls the fit
  for (double thr : {truth.at(1), truth.at(8), truth.at(8) * 1.2}) equal.add_sample(thr == truth.at(1) ? 1 : 8, thr);
  EXPECT_GT(curve_error(equal.curve(), truth), 0.03);
}

TEST(Advisor, ExploresTheEndOfTheSizesFarthestFromThoseSeen) {
  const ScalingCurve truth = amdahl_curve(3, 0.1, 32);
  ScalingAdvisor small(32);
  small.add_sample(2, truth.at(2), 10);
  EXPECT_TRUE(small.exploring(1));
  EXPECT_EQ(small.most_informative(32, 10), 32);
  EXPECT_EQ(small.explore_size(8, 10, 1), 8);  // the largest the window has
  ScalingAdvisor large(16);
  large.add_sample(13, truth.at(13), 10);
  EXPECT_EQ(large.most_informative(16, 10), 1);
  EXPECT_EQ(large.explore_size(16, 10, 1), 1);
  // Both ends measured over 10 probes each: the fit is certain enough.
  large.add_sample(1, truth.at(1), 10);
  EXPECT_LT(large.uncertainty(), 1);
  EXPECT_FALSE(large.exploring(1));
  // Sizes 1 and 2 of 32, each over 50 probes: still unsure at 32, and a
  // window of 2 nodes would not help enough, so it is not worth taking.
  ScalingAdvisor low(32);
  low.add_sample(1, truth.at(1), 50);
  low.add_sample(2, truth.at(2), 50);
  EXPECT_TRUE(low.exploring(1));
  EXPECT_EQ(low.explore_size(2, 50, 1), 0);
  EXPECT_GE(low.explore_size(32, 50, 1), 16);
  // One size is all a one-node job has: nothing to explore.
  ScalingAdvisor one(1);
  one.add_sample(1, 2);
  EXPECT_FALSE(one.exploring(1));
}

// One job's first windows in holes of random sizes and lengths: the first at
// a size the allocator picks, then the advisor's while it explores (a hole
// not worth it is skipped), else the allocator's again.
double error_after_3_windows(std::mt19937_64& rng, bool explore) {
  std::uniform_real_distribution<double> u(0, 1);
  const int max_nodes = std::vector<int>{4, 8, 16, 32}[static_cast<size_t>(u(rng) * 4)];
  const ScalingCurve truth = amdahl_curve(1 + 9 * u(rng), 0.01 + 0.29 * u(rng), max_nodes);
  ScalingAdvisor a(max_nodes);
  int last = 0;
  for (int window = 0, holes = 0; window < 3 && holes < 1000; ++holes) {
    const int cap = 1 + static_cast<int>(u(rng) * u(rng) * 40);  // mostly small holes
    const double weight = 1 + u(rng) * 59;                         // 60 s to an hour
    int n = 1 + static_cast<int>(u(rng) * std::min(cap, max_nodes));
    if (explore && a.exploring(1)) n = a.explore_size(cap, weight, 1);
    else if (!explore && window > 0) n = std::min({cap, max_nodes, last + 1});  // a neighbouring size
    if (n < 1) continue;
    last = n;
    std::normal_distribution<double> noise(0, 0.03 / std::sqrt(weight));
    a.add_sample(n, truth.at(n) * (1 + noise(rng)), weight);
    ++window;
  }
  return curve_error(a.curve(), truth);
}

TEST(Advisor, ExplorationFitsCurvesWithin10PctAfter3Windows) {
  std::mt19937_64 rng(16);
  int within = 0, within_unexplored = 0;
  double worst = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const double e = error_after_3_windows(rng, true);
    worst = std::max(worst, e);
    within += e <= 0.10;
    within_unexplored += error_after_3_windows(rng, false) <= 0.10;
  }
  EXPECT_EQ(within, 300) << "worst " << worst;
  EXPECT_LE(within_unexplored, 290);  // neighbouring sizes (as the allocator tends to pick) miss often
}

TEST(MalleAlloc, AnExploringJobGetsOnlyItsExplorationSizeOrStays) {
  AllocJob a;
  a.curve = amdahl_curve(1, 0.1, 16);
  a.explore = {16, 0, 1};
  EXPECT_EQ(candidate_sizes(a, 0, 20), (std::vector<int>{16}));
  EXPECT_TRUE(candidate_sizes(a, 1, 20).empty());  // not worth it there
  a.current_class = 1;
  a.current_nodes = 4;
  EXPECT_EQ(candidate_sizes(a, 1, 20), (std::vector<int>{4}));  // staying stays allowed
  EXPECT_EQ(candidate_sizes(a, 2, 3), (std::vector<int>{1}));
  // The MILP takes the large window at 16 nodes, not the 3-node one.
  a.current_class = -1;
  a.current_nodes = 0;
  a.rescale_s = 30;
  const std::vector<AllocClass> classes = {{1000, 20}, {3000, 20}, {3000, 3}};
  EXPECT_EQ(allocate_milp(classes, {a}, 1)[0], (AllocChoice{0, 16}));
}

TEST(Advisor, LearnsCurvesOnlineWithinAFewWindows) {
  const std::vector<HostJob> primary = random_workload(5, 150, 16);
  std::vector<MalleableJob> mix;
  for (int j = 0; j < 4; ++j) mix.push_back(mj(j, 8, 0.05 * (j + 1), 1e9, 30));
  const MalleResult r = simulate_malleable(primary, 16, mix, MallePolicy::advisor, MalleOptions{});
  ASSERT_EQ(r.curves.size(), mix.size());
  for (const LearnedCurve& c : r.curves) {
    EXPECT_GE(c.samples, 2) << c.name;
    EXPECT_GE(c.error, 0);
    EXPECT_LT(c.error, 0.25) << c.name;
    ASSERT_EQ(c.window_sizes.size(), 3u) << c.name;
    EXPECT_LE(c.error_after_3, 0.10) << c.name;
    // The second window explores far from the first (size 4 here): an end of 1..8.
    EXPECT_TRUE(c.window_sizes[1] == 1 || c.window_sizes[1] == 8)
        << c.name << ": windows at " << c.window_sizes[0] << ", " << c.window_sizes[1];
  }
  const MalleResult oracle = simulate_malleable(primary, 16, mix, MallePolicy::malletrain, MalleOptions{});
  EXPECT_GT(r.malleable_throughput(), 0.85 * oracle.malleable_throughput());
}

}  // namespace
}  // namespace cellsched
