// Results of a scheduling run (simulated or online) and the metrics of DESIGN.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cellsched {

struct JobResult {
  int64_t job_id = 0;
  std::string job_type;
  int gpus = 0;
  double arrival_s = 0;
  double first_start_s = -1;   // < 0: never started
  double completion_s = -1;    // < 0: not finished
  double gpu_seconds = 0;      // GPU-seconds allocated to it (copies included)
  double iterations_done = 0;
  int restarts = 0;            // allocation changes that cost the restart overhead
  bool finished() const { return completion_s >= 0; }
  double jct_s() const { return finished() ? completion_s - arrival_s : -1; }
  double queueing_s() const { return first_start_s >= 0 ? first_start_s - arrival_s : -1; }
};

// DESIGN "Metrics": one definition, used everywhere.
struct RunMetrics {
  long jobs = 0, completed = 0;
  double jct_mean_s = 0, jct_median_s = 0, jct_p95_s = 0, jct_p99_s = 0;
  double queue_mean_s = 0, queue_median_s = 0, queue_p95_s = 0, queue_p99_s = 0;
  double ttd_s = 0;        // last completion - first arrival (makespan); 0 = none finished
  double cru = 0;          // allocated GPU-seconds / (GPUs x TTD, or the run's span if longer with jobs unfinished)
  double decision_mean_ms = 0, decision_p99_ms = 0, decision_max_ms = 0;
  long rounds = 0;
  double wall_s = 0;       // wall time of the whole run
  std::map<std::string, double> extra;  // later metrics (bound, fairness, ...)
};

// Computes every metric from per-job results. TTD and JCT use finished jobs;
// CRU uses all allocated GPU-seconds, over the TTD or, when some job is left
// unfinished, over the span up to `end_s` (when the run stopped) if that is
// longer: GPU time after the last completion counts in both numerator and
// denominator, so CRU stays a share (it read 1.97 under --horizon).
RunMetrics compute_metrics(const std::vector<JobResult>& jobs, int total_gpus,
                           const std::vector<double>& decision_ms, long rounds, double wall_s,
                           double end_s = -1);

// Flat (name, value) view and back, for storage and JSON.
std::vector<std::pair<std::string, double>> metric_pairs(const RunMetrics& m);
RunMetrics metrics_from_pairs(const std::vector<std::pair<std::string, double>>& pairs);

struct UtilizationPoint {
  double t_s = 0;     // from this time (a round's start, or a job's end within a round)
  int busy_gpus = 0;  // GPUs allocated until the next point
};

struct RunRecord {
  int64_t id = 0;               // store id (0 until saved)
  std::string created_at;       // ISO-8601 UTC, set by the store
  std::string policy;
  std::string trace_name;
  std::string cluster_name;
  int cluster_gpus = 0;
  std::string throughputs;      // source of the throughput oracle
  std::map<std::string, std::string> params;  // round_s, restart_s, seed, ...
  RunMetrics metrics;
  std::vector<JobResult> jobs;
  std::vector<UtilizationPoint> utilization;
};

}  // namespace cellsched
