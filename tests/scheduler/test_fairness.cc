// Finish-time fairness (DESIGN "Metrics") on hand-computed cases.
#include <gtest/gtest.h>

#include "scheduler/engine.h"
#include "scheduler/fairness.h"
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

JobResult done(int64_t id, double arrival, double completion) {
  JobResult r;
  r.job_id = id;
  r.arrival_s = arrival;
  r.first_start_s = arrival;
  r.completion_s = completion;
  return r;
}

TEST(Fairness, AJobAloneOnItsBestTypeHasRhoOne) {
  const Cluster c = nodes({{"a", "h", "v100", 1}, {"b", "h", "k80", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  Trace t;
  t.jobs = {make_job(0, 0, 1, 1000)};
  // Alone (N = 1): its share is the whole cluster, spent on the V100: 100 s.
  EXPECT_DOUBLE_EQ(finish_time_fairness(t, c, o, {done(0, 0, 100)})[0], 1.0);
  EXPECT_DOUBLE_EQ(finish_time_fairness(t, c, o, {done(0, 0, 200)})[0], 2.0);  // on the K80
}

TEST(Fairness, NIsTheJobsPresentAveragedOverTheJobsLifetime) {
  const Cluster c = nodes({{"a", "h", "v100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}};
  Trace t;
  t.jobs = {make_job(0, 0, 1, 1000), make_job(1, 0, 1, 1000)};
  // One after the other, 100 s each. Job 0 saw two jobs throughout (N = 2):
  // alone on half the GPU it takes 200 s, rho 0.5. Job 1 saw two for 100 s
  // and one for 100 s (N = 1.5): 150 s alone, rho 200/150.
  const auto rho = finish_time_fairness(t, c, o, {done(0, 0, 100), done(1, 0, 200)});
  EXPECT_DOUBLE_EQ(rho[0], 0.5);
  EXPECT_DOUBLE_EQ(rho[1], 200.0 / 150.0);
}

TEST(Fairness, StaggeredArrivalsAndAnArrivalAtACompletion) {
  const Cluster c = nodes({{"a", "h", "v100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}};  // 1000 iterations: 100 s alone
  Trace t;
  t.jobs = {make_job(0, 0, 1, 1000), make_job(1, 50, 1, 1000), make_job(2, 120, 1, 1000), make_job(3, 150, 1, 1000)};
  // A [0, 100], B [50, 150], C [120, 130], D arrives when B completes [150, 250].
  // N_A = (50 x 1 + 50 x 2) / 100 = 1.5; N_B = (50 x 2 + 20 x 1 + 10 x 2 + 20 x 1) / 100 = 1.6;
  // N_C = 2 (B throughout); N_D = 1 (B leaves at the instant D arrives).
  const auto rho = finish_time_fairness(t, c, o, {done(0, 0, 100), done(1, 50, 150), done(2, 120, 130), done(3, 150, 250)});
  EXPECT_DOUBLE_EQ(rho[0], 100 / 150.0);
  EXPECT_DOUBLE_EQ(rho[1], 100 / 160.0);
  EXPECT_DOUBLE_EQ(rho[2], 10 / 200.0);
  EXPECT_DOUBLE_EQ(rho[3], 1.0);
}

TEST(Fairness, AnUnfinishedJobCountsTowardN) {
  const Cluster c = nodes({{"a", "h", "v100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}};
  Trace t;
  t.jobs = {make_job(0, 0, 1, 1000), make_job(1, 0, 1, 1000)};
  JobResult open = done(1, 0, 0);
  open.completion_s = -1;
  EXPECT_DOUBLE_EQ(finish_time_fairness(t, c, o, {done(0, 0, 100), open})[0], 0.5);  // N = 2
}

TEST(Fairness, TheIsolatedRunStartsOnceAndHonoursTypeRestrictions) {
  const Cluster c = nodes({{"a", "h", "v100", 1}, {"b", "h", "k80", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  Trace t;
  t.jobs = {make_job(0, 0, 1, 100)};
  // 10 s of work after a 30 s start: rho 1, not 4.
  EXPECT_DOUBLE_EQ(finish_time_fairness(t, c, o, {done(0, 0, 40)}, 30)[0], 1.0);
  // Restricted to K80s: alone it runs there (20 s), not on the V100.
  t.jobs[0].gpu_types = {"k80"};
  const TypeRestrictedOracle restricted(std::make_unique<FakeOracle>(o));
  EXPECT_DOUBLE_EQ(finish_time_fairness(t, c, restricted, {done(0, 0, 20)})[0], 1.0);
  EXPECT_DOUBLE_EQ(finish_time_fairness(t, c, o, {done(0, 0, 20)})[0], 2.0);
  // One result per trace job, in order.
  EXPECT_THROW(finish_time_fairness(t, c, o, {}), std::logic_error);
}

TEST(Fairness, TheShareIsSpentBestRateFirstAndCappedAtOne) {
  const Cluster c = nodes({{"a", "h", "v100", 1}, {"b", "h", "k80", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}};
  Trace t;
  t.jobs = {make_job(0, 0, 1, 1000), make_job(1, 0, 1, 1000), make_job(2, 0, 1, 1000), make_job(3, 0, 1, 1000)};
  // Four jobs present throughout job 0's life (the others finish later):
  // it holds a quarter of each GPU, 0.25 x 10 + 0.25 x 5 = 3.75 it/s.
  const auto rho = finish_time_fairness(t, c, o, {done(0, 0, 100), done(1, 0, 400), done(2, 0, 400), done(3, 0, 400)});
  EXPECT_DOUBLE_EQ(rho[0], 100 / (1000 / 3.75));
  // Two jobs present: half of each GPU is more than the job can use at once;
  // it takes the V100 half first, then half of the K80: 0.5 x 10 + 0.5 x 5.
  t.jobs.resize(2);
  const auto two = finish_time_fairness(t, c, o, {done(0, 0, 100), done(1, 0, 400)});
  EXPECT_DOUBLE_EQ(two[0], 100 / (1000 / 7.5));
}

TEST(Fairness, GangsUseOnlyTypesWideEnoughAndSpreadRatesWhereNoNodeHoldsThem) {
  // 2-GPU gang: the V100s are one node (consolidated), the K80s two (spread,
  // half rate), the single P100 too few.
  const Cluster c = nodes({{"a", "h", "v100", 2}, {"b", "h", "k80", 1}, {"c", "h", "k80", 1}, {"d", "h", "p100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}, {"k80", 5}, {"p100", 100}};
  Trace t;
  t.jobs = {make_job(0, 0, 2, 1000), make_job(1, 0, 2, 1000), make_job(2, 0, 2, 1000), make_job(3, 0, 2, 1000)};
  // N = 4: the job's gang may run a quarter of the time on each type it
  // fits: 0.25 x 20 (V100 pair) + 0.25 x 2 x 5 x 0.5 (spread K80 pair) = 6.25 it/s.
  const auto rho = finish_time_fairness(t, c, o, {done(0, 0, 100), done(1, 0, 400), done(2, 0, 400), done(3, 0, 400)});
  EXPECT_DOUBLE_EQ(rho[0], 100 / (1000 / 6.25));
}

TEST(Fairness, UnfinishedAndUnrunnableJobsHaveNone) {
  const Cluster c = nodes({{"a", "h", "v100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}};
  Trace t;
  t.jobs = {make_job(0, 0, 1, 1000), make_job(1, 0, 2, 1000)};
  JobResult open = done(0, 0, -1);
  open.completion_s = -1;
  const auto rho = finish_time_fairness(t, c, o, {open, done(1, 0, 50)});
  EXPECT_EQ(rho[0], -1);
  EXPECT_EQ(rho[1], -1);  // two GPUs wanted, one in the cluster
  RunMetrics m;
  add_fairness_metrics(rho, m);
  EXPECT_TRUE(m.extra.empty());
  add_fairness_metrics({0.5, -1, 2, 1, 4}, m);
  EXPECT_DOUBLE_EQ(m.extra.at("fairness_rho_mean"), 7.5 / 4);
  EXPECT_DOUBLE_EQ(m.extra.at("fairness_rho_median"), 1.5);
  EXPECT_DOUBLE_EQ(m.extra.at("fairness_rho_max"), 4);
  EXPECT_DOUBLE_EQ(m.extra.at("fairness_unfair_share"), 0.5);
}

TEST(Fairness, EverySimulationReportsIt) {
  const Cluster c = nodes({{"a", "h", "v100", 1}});
  FakeOracle o;
  o.rate = {{"v100", 10}};
  Trace t;
  t.name = "hand";
  t.jobs = {make_job(0, 0, 1, 1000), make_job(1, 0, 1, 1000)};
  auto fifo = make_policy("fifo");
  SimOptions so;
  so.restart_s = 0;
  const RunRecord r = simulate(t, c, o, *fifo, so);
  // fifo runs job 0 first (100 s, job 1 waiting throughout: rho 0.5), then job 1.
  const auto rho = finish_time_fairness(t, c, o, r.jobs);
  EXPECT_DOUBLE_EQ(rho[0], 0.5);
  EXPECT_GT(rho[1], 1);
  EXPECT_DOUBLE_EQ(r.metrics.extra.at("fairness_rho_max"), rho[1]);
  EXPECT_DOUBLE_EQ(r.metrics.extra.at("fairness_rho_mean"), (rho[0] + rho[1]) / 2);
}

}  // namespace
}  // namespace cellsched
