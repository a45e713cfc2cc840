#include "core/run.h"
#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace cellsched {

RunMetrics compute_metrics(const std::vector<JobResult>& jobs, int total_gpus,
                           const std::vector<double>& decision_ms, long rounds, double wall_s, double end_s) {
  RunMetrics m;
  m.jobs = static_cast<long>(jobs.size());
  std::vector<double> jct, queue;
  double first_arrival = std::numeric_limits<double>::infinity();
  double last_completion = -std::numeric_limits<double>::infinity();
  double gpu_seconds = 0;
  for (const JobResult& j : jobs) {
    first_arrival = std::min(first_arrival, j.arrival_s);
    gpu_seconds += j.gpu_seconds;
    if (j.finished()) {
      jct.push_back(j.jct_s());
      last_completion = std::max(last_completion, j.completion_s);
    }
    if (j.first_start_s >= 0) queue.push_back(j.queueing_s());
  }
  m.completed = static_cast<long>(jct.size());
  m.jct_mean_s = mean(jct);
  m.jct_median_s = percentile(jct, 50);
  m.jct_p95_s = percentile(jct, 95);
  m.jct_p99_s = percentile(jct, 99);
  m.queue_mean_s = mean(queue);
  m.queue_median_s = percentile(queue, 50);
  m.queue_p95_s = percentile(queue, 95);
  m.queue_p99_s = percentile(queue, 99);
  if (!jct.empty()) m.ttd_s = std::max(0.0, last_completion - first_arrival);
  double span = m.ttd_s;
  if (m.completed < m.jobs && end_s > first_arrival) span = std::max(span, end_s - first_arrival);
  // With none finished there is no TTD, but the GPUs were still allocated
  // over the span up to the stop: CRU is that share.
  if (span > 0 && total_gpus > 0) m.cru = gpu_seconds / (total_gpus * span);
  m.decision_mean_ms = mean(decision_ms);
  m.decision_p99_ms = percentile(decision_ms, 99);
  m.decision_max_ms =
      decision_ms.empty() ? 0 : *std::max_element(decision_ms.begin(), decision_ms.end());
  m.rounds = rounds;
  m.wall_s = wall_s;
  return m;
}

namespace {

// The one list of stored metric names; metric_pairs and metrics_from_pairs
// both walk it so they cannot disagree.
template <typename M, typename F>
void for_each_field(M& m, F&& f) {
  f("jobs", m.jobs);
  f("completed", m.completed);
  f("jct_mean_s", m.jct_mean_s);
  f("jct_median_s", m.jct_median_s);
  f("jct_p95_s", m.jct_p95_s);
  f("jct_p99_s", m.jct_p99_s);
  f("queue_mean_s", m.queue_mean_s);
  f("queue_median_s", m.queue_median_s);
  f("queue_p95_s", m.queue_p95_s);
  f("queue_p99_s", m.queue_p99_s);
  f("ttd_s", m.ttd_s);
  f("cru", m.cru);
  f("decision_mean_ms", m.decision_mean_ms);
  f("decision_p99_ms", m.decision_p99_ms);
  f("decision_max_ms", m.decision_max_ms);
  f("rounds", m.rounds);
  f("wall_s", m.wall_s);
}

}  // namespace

std::vector<std::pair<std::string, double>> metric_pairs(const RunMetrics& m) {
  std::vector<std::pair<std::string, double>> out;
  for_each_field(m, [&](const char* name, const auto& v) {
    out.emplace_back(name, static_cast<double>(v));
  });
  for (const auto& [k, v] : m.extra) out.emplace_back(k, v);
  return out;
}

RunMetrics metrics_from_pairs(const std::vector<std::pair<std::string, double>>& pairs) {
  RunMetrics m;
  for (const auto& pair : pairs) {
    const std::string& name = pair.first;  // (not a structured binding: clang 14 cannot capture one)
    const double value = pair.second;
    bool known = false;
    for_each_field(m, [&](const char* field, auto& v) {
      if (!known && name == field) {
        using T = std::remove_reference_t<decltype(v)>;
        if constexpr (std::is_integral_v<T>)
          v = static_cast<T>(std::llround(value));
        else
          v = value;
        known = true;
      }
    });
    if (!known) m.extra[name] = value;
  }
  return m;
}

}  // namespace cellsched
