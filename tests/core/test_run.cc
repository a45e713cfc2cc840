#include <gtest/gtest.h>

#include <string>

#include "core/run.h"

namespace cellsched {
namespace {

JobResult job(int64_t id, double arrival, double start, double completion, double gpu_s,
              int gpus = 1) {
  JobResult j;
  j.job_id = id;
  j.gpus = gpus;
  j.arrival_s = arrival;
  j.first_start_s = start;
  j.completion_s = completion;
  j.gpu_seconds = gpu_s;
  return j;
}

TEST(ComputeMetrics, HandChecked) {
  const std::vector<JobResult> jobs = {
      job(0, 0, 10, 110, 100),        // JCT 110, queue 10
      job(1, 5, 5, 305, 600, 2),      // JCT 300, queue 0
      job(2, 20, 100, -1, 50),        // started, not finished: queue 80
      job(3, 30, -1, -1, 0),          // never started
  };
  const RunMetrics m = compute_metrics(jobs, 4, {1, 2, 3, 10}, 12, 3.5);
  EXPECT_EQ(m.jobs, 4);
  EXPECT_EQ(m.completed, 2);
  EXPECT_DOUBLE_EQ(m.jct_mean_s, 205);
  EXPECT_DOUBLE_EQ(m.jct_median_s, 205);
  EXPECT_DOUBLE_EQ(m.jct_p95_s, 290.5);
  EXPECT_DOUBLE_EQ(m.jct_p99_s, 298.1);
  EXPECT_DOUBLE_EQ(m.queue_mean_s, 30);
  EXPECT_DOUBLE_EQ(m.queue_median_s, 10);
  EXPECT_DOUBLE_EQ(m.queue_p95_s, 73);
  EXPECT_DOUBLE_EQ(m.queue_p99_s, 78.6);
  EXPECT_DOUBLE_EQ(m.ttd_s, 305);               // last completion 305 - first arrival 0
  EXPECT_DOUBLE_EQ(m.cru, 750.0 / (4 * 305.0));  // every allocated GPU-second counts
  EXPECT_DOUBLE_EQ(m.decision_mean_ms, 4);
  EXPECT_DOUBLE_EQ(m.decision_p99_ms, 9.79);
  EXPECT_DOUBLE_EQ(m.decision_max_ms, 10);
  EXPECT_EQ(m.rounds, 12);
  EXPECT_DOUBLE_EQ(m.wall_s, 3.5);
}

TEST(ComputeMetrics, FirstArrivalOverAllJobs) {
  // The earliest job never finishes; TTD still starts at its arrival.
  const std::vector<JobResult> jobs = {job(0, 0, -1, -1, 0), job(1, 50, 60, 150, 90)};
  const RunMetrics m = compute_metrics(jobs, 1, {}, 0, 0);
  EXPECT_DOUBLE_EQ(m.ttd_s, 150);
  EXPECT_DOUBLE_EQ(m.cru, 90.0 / 150);
  EXPECT_DOUBLE_EQ(m.jct_mean_s, 100);
  EXPECT_DOUBLE_EQ(m.decision_max_ms, 0);
}

// A run stopped (--horizon) with a job still training: its GPU time after
// the last completion counts over the span up to the stop, so CRU stays a
// share (it read 1.97 under --horizon 1800 on Gavel's physical trace).
TEST(ComputeMetrics, UnfinishedJobsCountOverTheRunsSpan) {
  const std::vector<JobResult> jobs = {job(0, 0, 0, 100, 100), job(1, 0, 0, -1, 1000, 4)};
  const RunMetrics m = compute_metrics(jobs, 5, {}, 0, 0, 250);
  EXPECT_DOUBLE_EQ(m.ttd_s, 100);
  EXPECT_DOUBLE_EQ(m.cru, 1100.0 / (5 * 250));
  EXPECT_LE(m.cru, 1);
  EXPECT_DOUBLE_EQ(compute_metrics(jobs, 5, {}, 0, 0).cru, 1100.0 / (5 * 100));  // without the stop time: as before
}

TEST(ComputeMetrics, NothingFinished) {
  const RunMetrics m = compute_metrics({job(0, 0, 5, -1, 20)}, 8, {}, 3, 1);
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.ttd_s, 0);
  EXPECT_EQ(m.cru, 0);
  EXPECT_EQ(m.jct_mean_s, 0);
  EXPECT_DOUBLE_EQ(m.queue_mean_s, 5);
  // Stopped at 40 s (--horizon) with none done: no TTD, but the 20 GPU-s
  // allocated are a share of the span run (it read 0 with the GPUs busy).
  const RunMetrics stopped = compute_metrics({job(0, 0, 5, -1, 20)}, 8, {}, 3, 1, 40);
  EXPECT_EQ(stopped.ttd_s, 0);
  EXPECT_DOUBLE_EQ(stopped.cru, 20.0 / (8 * 40));
  const RunMetrics empty = compute_metrics({}, 8, {}, 0, 0);
  EXPECT_EQ(empty.jobs, 0);
  EXPECT_EQ(empty.ttd_s, 0);
}

TEST(MetricPairs, StableNamesAndRoundTrip) {
  RunMetrics m = compute_metrics({job(0, 0, 10, 110, 100), job(1, 5, 5, 305, 600, 2)}, 4,
                                 {1, 2, 3}, 7, 2.25);
  m.extra["ttd_over_bound"] = 1.25;
  m.extra["fairness_rho_max"] = 3;
  const auto pairs = metric_pairs(m);
  std::vector<std::string> names;
  for (const auto& [k, v] : pairs) names.push_back(k);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "jobs", "completed", "jct_mean_s", "jct_median_s", "jct_p95_s",
                       "jct_p99_s", "queue_mean_s", "queue_median_s", "queue_p95_s",
                       "queue_p99_s", "ttd_s", "cru", "decision_mean_ms", "decision_p99_ms",
                       "decision_max_ms", "rounds", "wall_s", "fairness_rho_max",
                       "ttd_over_bound"}));
  EXPECT_EQ(pairs[2].second, m.jct_mean_s);
  EXPECT_EQ(pairs[11].second, m.cru);

  const RunMetrics back = metrics_from_pairs(pairs);
  EXPECT_EQ(back.jobs, 2);
  EXPECT_EQ(back.completed, 2);
  EXPECT_EQ(back.rounds, 7);
  EXPECT_EQ(back.jct_p99_s, m.jct_p99_s);
  EXPECT_EQ(back.queue_p95_s, m.queue_p95_s);
  EXPECT_EQ(back.ttd_s, m.ttd_s);
  EXPECT_EQ(back.cru, m.cru);
  EXPECT_EQ(back.decision_p99_ms, m.decision_p99_ms);
  EXPECT_EQ(back.wall_s, 2.25);
  EXPECT_EQ(back.extra, m.extra);
  EXPECT_EQ(metric_pairs(back), pairs);
}

TEST(MetricPairs, UnknownNamesGoToExtra) {
  const RunMetrics m = metrics_from_pairs({{"cru", 0.5}, {"bound_s", 100}, {"rounds", 3}});
  EXPECT_EQ(m.cru, 0.5);
  EXPECT_EQ(m.rounds, 3);
  EXPECT_EQ(m.extra.size(), 1u);
  EXPECT_EQ(m.extra.at("bound_s"), 100);
}

}  // namespace
}  // namespace cellsched
