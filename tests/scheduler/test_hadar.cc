#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"
#include "scheduler/policy.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::make_job;

// Runs one policy decision on `jobs` (all waiting) and returns the allocations.
std::vector<Allocation> decide_once(Policy& p, const Cluster& c, const ThroughputOracle& o,
                                    std::vector<JobState>& states, double round_s = 360, ForkModel fork = {}) {
  std::vector<JobState*> active;
  for (JobState& s : states) active.push_back(&s);
  std::vector<Allocation> out(active.size());
  for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
  RoundContext ctx{0, round_s, &c, &o, &active, 30, fork};
  p.decide(ctx, out);
  return out;
}

JobState state_of(const Job& j) {
  JobState s;
  s.job = &j;
  s.remaining = j.total_iterations;
  return s;
}

TEST(Hadar, PriceStartsAtHalfUminAndReachesUmaxWhenFull) {
  EXPECT_DOUBLE_EQ(hadar_price(2, 50, 8, 0), 1.0);
  EXPECT_DOUBLE_EQ(hadar_price(2, 50, 8, 8), 50.0);
  double last = 0;
  for (int y = 0; y <= 8; ++y) {
    const double p = hadar_price(2, 50, 8, y);
    EXPECT_GT(p, last) << "price must rise as the type fills, y=" << y;
    last = p;
  }
  // (1)(50)^(4/8) at half full
  EXPECT_NEAR(hadar_price(2, 50, 8, 4), std::sqrt(50.0), 1e-12);
}

TEST(Hadar, SplitsAGangOverTypesWhenThatIsTheOnlyWayAndRunsAtTheBottleneck) {
  Cluster c;
  c.name = "3v100+1k80";
  c.nodes = {{"a", "localhost", "v100", 3}, {"b", "localhost", "k80", 1}};
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 4}};
  o.spread_factor = 1.0;
  const Job j = make_job(0, 0, 4, 1e5);
  std::vector<JobState> states = {state_of(j)};
  auto hadar = make_hadar();
  const auto out = decide_once(*hadar, c, o, states);
  ASSERT_EQ(out[0].workers.size(), 2u);
  EXPECT_EQ(out[0].workers[0], (Placement{0, 3}));
  EXPECT_EQ(out[0].workers[1], (Placement{1, 1}));
  EXPECT_TRUE(out[0].copies.empty());
  // Bottleneck K80: 4 workers x 4 it/s.
  EXPECT_DOUBLE_EQ(allocation_throughput(o, j, c, out[0].workers), 16.0);
}

TEST(Hadar, PrefersTheFastTypeWhenItIsFree) {
  Cluster c;
  c.name = "4v100+4k80";
  c.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "k80", 4}};
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 4}};
  const Job j = make_job(0, 0, 2, 1e5);
  std::vector<JobState> states = {state_of(j)};
  auto hadar = make_hadar();
  const auto out = decide_once(*hadar, c, o, states);
  ASSERT_EQ(out[0].workers.size(), 1u);
  EXPECT_EQ(out[0].workers[0], (Placement{0, 2}));
}

// Gavel's small_test shape: 20 jobs of 1, 2 and 4 GPUs that all fit at once
// on 8 V100, 16 P100 and 24 K80 GPUs (4-GPU nodes). The prices once sent
// 2-GPU jobs, the longest among them, to K80s while a P100 node sat idle
// (TTD 2.1x fifo's); no gang may now run slower than it would on a node
// still left with room for it.
TEST(Hadar, LeavesNoGangSlowerThanANodeWithRoomForItWouldRunIt) {
  Cluster c;
  c.name = "gavel-physical";
  for (int n = 0; n < 12; ++n)
    c.nodes.push_back({"n" + std::to_string(n), "localhost", n < 2 ? "v100" : n < 6 ? "p100" : "k80", 4});
  FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}, {"k80", 2.5}};
  std::vector<Job> js;
  for (int i = 0; i < 20; ++i) js.push_back(make_job(i, 0, i % 7 == 0 ? 4 : i % 3 == 0 ? 2 : 1, 2000.0 + 997 * (i % 5)));
  for (const bool fork : {false, true}) {
    std::vector<JobState> states;
    for (const Job& j : js) states.push_back(state_of(j));
    auto policy = fork ? make_hadare() : make_hadar();
    const auto out = decide_once(*policy, c, o, states);
    std::vector<int> free(c.nodes.size(), 4);
    for (const Allocation& a : out) {
      for (const Placement& p : a.workers) free[static_cast<size_t>(p.node)] -= p.gpus;
      for (const auto& copy : a.copies)
        for (const Placement& p : copy) free[static_cast<size_t>(p.node)] -= p.gpus;
    }
    for (size_t i = 0; i < js.size(); ++i) {
      int workers = 0;
      for (const Placement& p : out[i].workers) workers += p.gpus;
      ASSERT_EQ(workers, js[i].gpus) << policy->name() << ": every job fits";
      const double rate = allocation_throughput(o, js[i], c, out[i].workers);
      for (size_t n = 0; n < c.nodes.size(); ++n)
        if (free[n] >= js[i].gpus) {
          EXPECT_GE(rate, js[i].gpus * o.rate.at(c.nodes[n].gpu_type))
              << policy->name() << ": job " << i << " runs slower than it would on idle node " << n;
        }
    }
  }
}

// Job 0 is worth far more per GPU than job 1 (weight 1e8). In the first
// reading (hadar-design, U bounds over this round's jobs) once job 0 holds
// one of the four V100s the price, (u1/2)(2e8)^(1/4) ~ 59 u1, exceeds job 1's
// utility u1, so job 1 waits though GPUs idle. hadar is work-conserving: job 1
// gets a GPU all the same.
struct Skewed {
  Cluster c;
  FakeOracle o;
  Job a = make_job(0, 0, 1, 1e6), b = make_job(1, 0, 1, 1e6);
  Skewed() {
    c.name = "4v100";
    c.nodes = {{"a", "localhost", "v100", 4}};
    o.rate = {{"v100", 10}};
    a.weight = 1e8;
  }
};

TEST(Hadar, GivesIdleGpusToJobsThatDoNotPayTheirPriceWhereTheFirstReadingLetThemWait) {
  Skewed s;
  for (const bool design : {true, false}) {
    std::vector<JobState> states = {state_of(s.a), state_of(s.b)};
    auto policy = design ? make_hadar_design() : make_hadar();
    const auto out = decide_once(*policy, s.c, s.o, states);
    ASSERT_EQ(out[0].workers.size(), 1u) << policy->name();
    EXPECT_EQ(out[1].gpus(), design ? 0 : 1) << policy->name();
  }
}

TEST(HadarE, ForksOntoTheGpusHadarLeftIdle) {
  Skewed s;
  std::vector<JobState> states = {state_of(s.a), state_of(s.b)};
  auto hadare = make_hadare();
  const auto out = decide_once(*hadare, s.c, s.o, states);
  ASSERT_EQ(out[0].workers.size(), 1u);
  EXPECT_EQ(out[0].gpus() + out[1].gpus(), 4);  // no GPU idles
  // Job 0 (1e6 it at 10 it/s) cannot use more within the round than it has
  // left, so copies go where they add the most: to both, weighted.
  EXPECT_FALSE(out[0].copies.empty() && out[1].copies.empty());
}

// Under the noise model each further copy adds less, and a copy that adds
// less than a tenth of the first one's share is not placed: one long 1-GPU
// job on 20 idle V100s gets 8 copies at e = 0.5 (phi = 2: the k-th gang adds
// 6 / ((2 + k)(1 + k)) of its iterations, >= 0.05 up to k = 9), and one on
// every other GPU under the linear model.
// n nodes of one V100 each.
Cluster one_v100_nodes(int n) {
  Cluster c;
  c.name = std::to_string(n) + "v100";
  for (int i = 0; i < n; ++i) c.nodes.push_back({"n" + std::to_string(i), "localhost", "v100", 1});
  return c;
}

TEST(HadarE, StopsForkingWhereACopyAddsTooLittle) {
  const Cluster c = one_v100_nodes(20);
  FakeOracle o;
  o.rate = {{"v100", 10}};
  const Job j = make_job(0, 0, 1, 1e9);
  for (const ForkScaling scaling : {ForkScaling::noise, ForkScaling::linear}) {
    std::vector<JobState> states = {state_of(j)};
    auto hadare = make_hadare();
    const auto out = decide_once(*hadare, c, o, states, 360, {0.5, scaling});
    ASSERT_EQ(out[0].workers.size(), 1u);
    EXPECT_EQ(out[0].copies.size(), scaling == ForkScaling::noise ? 8u : 19u) << fork_scaling_name(scaling);
  }
  // With perfect copies (e = 1) the noise model is linear: every GPU.
  std::vector<JobState> states = {state_of(j)};
  auto hadare = make_hadare();
  EXPECT_EQ(decide_once(*hadare, c, o, states, 360, {1.0, ForkScaling::noise})[0].copies.size(), 19u);
}

// Copies go where they add most: with one copy already, a job's next copy
// adds less than another job's first, so two equal jobs split the idle GPUs
// under the noise model.
TEST(HadarE, SpreadsCopiesOverJobsUnderTheNoiseModel) {
  const Cluster c = one_v100_nodes(6);
  FakeOracle o;
  o.rate = {{"v100", 10}};
  const Job a = make_job(0, 0, 1, 1e9), b = make_job(1, 0, 1, 1e9);
  std::vector<JobState> states = {state_of(a), state_of(b)};
  auto hadare = make_hadare();
  const auto out = decide_once(*hadare, c, o, states);
  ASSERT_EQ(out[0].workers.size(), 1u);
  ASSERT_EQ(out[1].workers.size(), 1u);
  EXPECT_EQ(out[0].copies.size(), 2u);
  EXPECT_EQ(out[1].copies.size(), 2u);
}

TEST(HadarE, LeavesNoGpuIdleWhileWorkRemains) {
  Cluster c;
  c.name = "mixed";
  c.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "p100", 4},
             {"c", "localhost", "k80", 4}};
  FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}, {"k80", 3}};
  Trace t;
  t.name = "few";
  for (int i = 0; i < 6; ++i) t.jobs.push_back(make_job(i, i * 500.0, 1 << (i % 3), 2e4 + 7e3 * i));
  auto hadare = make_hadare();
  const RunRecord r = simulate(t, c, o, *hadare, {});
  EXPECT_EQ(r.metrics.completed, 6);
  ASSERT_FALSE(r.utilization.empty());
  // Every round (all start on the 360 s grid here: jobs are active from t = 0)
  // uses all 12 GPUs; the other points are jobs ending within a round.
  int rounds = 0;
  for (const auto& u : r.utilization)
    if (std::fmod(u.t_s, 360) == 0) {
      ++rounds;
      EXPECT_EQ(u.busy_gpus, 12) << "round at " << u.t_s;
    }
  EXPECT_EQ(rounds, r.metrics.rounds);
  // Hadar alone idles the GPUs its gangs do not cover and finishes later.
  auto hadar = make_hadar();
  const RunRecord plain = simulate(t, c, o, *hadar, {});
  EXPECT_EQ(plain.metrics.completed, 6);
  EXPECT_LT(r.metrics.ttd_s, plain.metrics.ttd_s);
}

// A fixed allocation every round: main gang on node 0 and the given copies.
struct Scripted : Policy {
  std::vector<std::vector<std::vector<Placement>>> copies_by_round;
  int round = 0;
  std::string name() const override { return "scripted"; }
  void decide(const RoundContext&, std::vector<Allocation>& out) override {
    out[0].workers = {{0, 1}};
    const size_t r = std::min<size_t>(round++, copies_by_round.size() - 1);
    out[0].copies = copies_by_round[r];
  }
};

Cluster two_types() {
  Cluster c;
  c.name = "a-v100x2,b-k80x2";
  c.nodes = {{"a", "localhost", "v100", 2}, {"b", "localhost", "k80", 2}};
  return c;
}

// One long job on two_types() for two rounds: its own gang on a V100 (10
// it/s), copies on the other V100 and on a K80 (5 it/s); restart 30 s,
// consolidation 20 s, first-copy efficiency 0.5.
RunRecord forked_two_rounds(ForkScaling scaling,
                            std::vector<std::vector<std::vector<Placement>>> copies_by_round = {{{{0, 1}}, {{1, 1}}}},
                            double consolidation_s = 20) {
  const Cluster c = two_types();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  Trace t;
  t.name = "one";
  t.jobs = {make_job(0, 0, 1, 1e6)};
  Scripted p;
  p.copies_by_round = std::move(copies_by_round);
  SimOptions so;
  so.restart_s = 30;
  so.consolidation_s = consolidation_s;
  so.fork_efficiency = 0.5;
  so.fork_scaling = scaling;
  so.horizon_s = 720;
  return simulate(t, c, o, p, so);
}

TEST(Engine, ForkedJobFallsByTheSumOfItsCopiesIterations) {
  const RunRecord r = forked_two_rounds(ForkScaling::linear);
  // Rates: main 10, copy on V100 10 x 0.5, copy on K80 5 x 0.5 = 17.5 it/s.
  // Round 1: all gangs new, train from 30 s to 360 - 20 s: 17.5 x 310 = 5425.
  // Round 2: nothing new: 17.5 x 340 = 5950.
  EXPECT_DOUBLE_EQ(r.jobs[0].iterations_done, 5425 + 5950);
  EXPECT_DOUBLE_EQ(r.jobs[0].gpu_seconds, 3 * 720);
  EXPECT_EQ(r.jobs[0].restarts, 1);
}

TEST(Engine, ACopyBesideAnIdenticalGangOfLastRoundIsANewGang) {
  // Round 1: the main gang alone on node 0 (1 GPU). Round 2: the same, plus
  // a copy of the same shape on the same node. Each of last round's gangs
  // answers for one gang only, so the copy is new: it pays the restart and
  // counts one. Before, it matched the main gang and paid nothing.
  const RunRecord r = forked_two_rounds(ForkScaling::linear, {{}, {{{0, 1}}}}, 0);
  // Round 1: 10 x 330. Round 2: main 10 x 360, copy 10 x 0.5 x 330.
  EXPECT_DOUBLE_EQ(r.jobs[0].iterations_done, 3300 + 3600 + 1650);
  EXPECT_EQ(r.jobs[0].restarts, 2);
}

TEST(Engine, ForkedJobFallsByWhatTheNoiseModelSaysItsGangsAreWorth) {
  const RunRecord r = forked_two_rounds(ForkScaling::noise);  // e = 0.5: phi = 2
  // Raw 10 + 10 + 5 = 25 it/s, k = 25 / 10 = 2.5 gangs of the main one's:
  // worth 25 x 3 / 4.5 = 16.67 it/s. Round 1 from 30 s to 340 s, round 2 340 s.
  const double worth = 25.0 * 3 / 4.5;
  EXPECT_NEAR(r.jobs[0].iterations_done, worth * 310 + worth * 340, 1e-6);
  EXPECT_EQ(r.jobs[0].restarts, 1);
}

TEST(Engine, ForkedJobCompletesExactlyAndPaysConsolidation) {
  const Cluster c = two_types();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  Trace t;
  t.name = "one";
  t.jobs = {make_job(0, 0, 1, 1000)};
  Scripted p;
  p.copies_by_round = {{{{0, 1}}, {{1, 1}}}};
  SimOptions so;
  so.consolidation_s = 20;
  so.fork_efficiency = 0.5;
  so.fork_scaling = ForkScaling::linear;
  const RunRecord r = simulate(t, c, o, p, so);
  // 1000 it at 17.5 it/s from t=30: 57.142857 s, then 20 s of consolidation.
  EXPECT_NEAR(r.jobs[0].completion_s, 30 + 1000 / 17.5 + 20, 1e-9);
  EXPECT_NEAR(r.jobs[0].gpu_seconds, 3 * (30 + 1000 / 17.5 + 20), 1e-9);
}

TEST(Engine, OnlyNewGangsPayTheRestart) {
  const Cluster c = two_types();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  Trace t;
  t.name = "one";
  t.jobs = {make_job(0, 0, 1, 1e6)};
  Scripted p;
  p.copies_by_round = {{}, {{{1, 1}}}};  // round 2 adds a copy on the K80 node
  SimOptions so;
  so.horizon_s = 720;
  so.fork_efficiency = 1.0;  // a copy's iterations count in full here
  const RunRecord r = simulate(t, c, o, p, so);
  // Round 1: main 10 x 330 = 3300. Round 2: main keeps running 10 x 360, the
  // new copy trains 5 x 330.
  EXPECT_DOUBLE_EQ(r.jobs[0].iterations_done, 3300 + 3600 + 1650);
  EXPECT_EQ(r.jobs[0].restarts, 2);
}

TEST(Engine, ManyCopiesInAnotherOrderPayNoRestart) {
  // Eleven copies (past the short scan): round 2 lists them in reverse, and
  // only the one that moved from node 3 to node 12 (idle in round 1) is new.
  Cluster c;
  c.name = "v100x2-by-13";
  for (int n = 0; n < 13; ++n) c.nodes.push_back({"n" + std::to_string(n), "localhost", "v100", 2});
  FakeOracle o;
  o.rate = {{"v100", 10}};
  Trace t;
  t.name = "one";
  t.jobs = {make_job(0, 0, 1, 1e6)};
  Scripted p;
  std::vector<std::vector<Placement>> first, second;
  for (int n = 1; n < 12; ++n) first.push_back({{n, 1}});
  for (int n = 11; n >= 1; --n) second.push_back({{n == 3 ? 12 : n, 1}});
  p.copies_by_round = {first, second};
  SimOptions so;
  so.horizon_s = 720;
  so.fork_efficiency = 1.0;
  const RunRecord r = simulate(t, c, o, p, so);
  // Round 1: 12 new gangs at 10 it/s from 30 s: 120 x 330. Round 2: the main
  // gang and 10 kept copies 110 x 360, the moved copy 10 x 330.
  EXPECT_DOUBLE_EQ(r.jobs[0].iterations_done, 120 * 330 + 110 * 360 + 10 * 330);
  EXPECT_EQ(r.jobs[0].restarts, 2);
}

}  // namespace
}  // namespace cellsched
