#include <gtest/gtest.h>

#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"
#include "scheduler/policy.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::make_job;

// One round of `p` over `states` (their current allocations as given);
// the result also becomes their current allocation, as the engine would.
std::vector<Allocation> round(Policy& p, const Cluster& c, const ThroughputOracle& o,
                              std::vector<JobState>& states) {
  std::vector<JobState*> active;
  for (JobState& s : states) active.push_back(&s);
  std::vector<Allocation> out(active.size());
  for (size_t i = 0; i < active.size(); ++i) out[i] = active[i]->current;
  RoundContext ctx{0, 360, &c, &o, &active, 30, {}};
  p.decide(ctx, out);
  for (size_t i = 0; i < active.size(); ++i) states[i].current = out[i];
  return out;
}

JobState waiting(const Job& j) {
  JobState s;
  s.job = &j;
  s.remaining = j.total_iterations;
  return s;
}

// Linear scaling: a job's throughput is workers x rate[type].
FakeOracle linear() {
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 2}};
  return o;
}

TEST(Crius, ALoneJobGrowsIntoTheFastTypeByDoubling) {
  Cluster c;
  c.name = "4v100+4k80";
  c.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "k80", 4}};
  const FakeOracle o = linear();
  const Job j = make_job(0, 0, 1, 1e6);
  std::vector<JobState> s = {waiting(j)};
  auto crius = make_crius();
  EXPECT_TRUE(crius->elastic());
  // 1 V100 (10 it/s, the best one-GPU cell); doubling gains 1.0 then 0.5 per
  // GPU (> 0.05): 4 V100. Moving the 4 to K80 would lose.
  const auto out = round(*crius, c, o, s);
  ASSERT_EQ(out[0].workers.size(), 1u);
  EXPECT_EQ(out[0].workers[0], (Placement{0, 4}));
}

TEST(Crius, AnArrivalScalesARunningJobDownWhenNothingIsFree) {
  Cluster c;
  c.name = "4v100";
  c.nodes = {{"a", "localhost", "v100", 4}};
  const FakeOracle o = linear();
  const Job j0 = make_job(0, 0, 1, 1e6), j1 = make_job(1, 10, 1, 1e6);
  std::vector<JobState> s = {waiting(j0)};
  auto crius = make_crius();
  round(*crius, c, o, s);
  ASSERT_EQ(s[0].current.gpus(), 4);
  // Job 1 arrives: no GPU free. Halving job 0 loses (40-20)/40/2 = 0.25 per
  // freed GPU, less than the 1.0 job 1 gains: job 0 -> 2 GPUs, job 1 takes 1,
  // then doubles into the last free one.
  s.push_back(waiting(j1));
  const auto out = round(*crius, c, o, s);
  EXPECT_EQ(out[0].gpus(), 2);
  EXPECT_EQ(out[1].gpus(), 2);
}

TEST(Crius, MovesAJobToAFasterTypeWhenItFreesUp) {
  Cluster c;
  c.name = "1v100+1k80";
  c.nodes = {{"a", "localhost", "v100", 1}, {"b", "localhost", "k80", 1}};
  const FakeOracle o = linear();
  const Job j0 = make_job(0, 0, 1, 1e6), j1 = make_job(1, 0, 1, 1e6);
  std::vector<JobState> s = {waiting(j0), waiting(j1)};
  auto crius = make_crius();
  auto out = round(*crius, c, o, s);
  EXPECT_EQ(out[0].workers[0].node, 0);  // arrival order: job 0 gets the V100
  EXPECT_EQ(out[1].workers[0].node, 1);
  // Job 0 departs: job 1 moves from K80 (2 it/s) to the V100 (10 it/s).
  std::vector<JobState> rest = {s[1]};
  out = round(*crius, c, o, rest);
  ASSERT_EQ(out[0].workers.size(), 1u);
  EXPECT_EQ(out[0].workers[0], (Placement{0, 1}));
}

TEST(Crius, KeepsEverythingWhileNothingArrivesOrDeparts) {
  Cluster c;
  c.name = "4v100+4k80";
  c.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "k80", 4}};
  const FakeOracle o = linear();
  const Job j0 = make_job(0, 0, 2, 1e6), j1 = make_job(1, 0, 2, 1e6);
  std::vector<JobState> s = {waiting(j0), waiting(j1)};
  auto crius = make_crius();
  const auto first = round(*crius, c, o, s);
  const auto second = round(*crius, c, o, s);
  EXPECT_EQ(first, second);
}

TEST(Crius, EndToEndFinishesEveryJobAndBeatsFifo) {
  Cluster c;
  c.name = "mixed";
  c.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "k80", 4}, {"c", "localhost", "k80", 4}};
  const FakeOracle o = linear();
  Trace t;
  t.name = "few";
  for (int i = 0; i < 8; ++i) t.jobs.push_back(make_job(i, i * 900.0, 1 + i % 2, 4e4 + 1e4 * i));
  auto crius = make_crius();
  auto fifo = make_policy("fifo");
  const RunRecord rc = simulate(t, c, o, *crius, {});
  const RunRecord rf = simulate(t, c, o, *fifo, {});
  EXPECT_EQ(rc.metrics.completed, 8);
  EXPECT_LT(rc.metrics.jct_mean_s, rf.metrics.jct_mean_s);
}

}  // namespace
}  // namespace cellsched
