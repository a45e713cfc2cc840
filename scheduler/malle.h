// Host-scheduler mode: a primary workload of rigid node jobs under FCFS +
// EASY backfilling, and malleable training jobs on the nodes it leaves idle
// (MalleTrain, Ma et al., HPDC/ICPE 2024). Jobs leave within a grace period
// when a node is claimed; the primary workload is never delayed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/run.h"
#include "scheduler/advisor.h"
#include "scheduler/hostsched.h"

namespace cellsched {

struct MalleableJob {
  int64_t id = 0;
  std::string name;
  double arrival_s = 0;
  double iterations = 0;  // to train, > 0
  double rescale_s = 60;  // checkpoint + restart at a new size
  ScalingCurve truth;     // how it really scales (iterations/s)
  ScalingCurve declared;  // what its user declared (freetrain's input)
};

enum class MallePolicy { malletrain, freetrain, advisor };
const char* malle_policy_name(MallePolicy p);  // "malletrain", "freetrain", "malletrain-advisor"
// Throws std::invalid_argument on an unknown name.
MallePolicy parse_malle_policy(const std::string& name);

// What happens when the host claims a node a malleable job holds without
// notice (an arrival or backfill starting at once, a job ending before its
// walltime): `preempt` stops the malleable job at once and it loses the
// work since its last checkpoint; `wait` lets it checkpoint within the grace
// period, and the primary job starts that much later.
enum class Reclaim { preempt, wait };

struct MalleOptions {
  double grace_s = 60;            // to checkpoint and leave a claimed node
  double horizon_s = 3600;        // longest window counted on (idle nodes with no claim in sight)
  double checkpoint_s = 600;      // periodic checkpoints of a running malleable job
  double milp_time_limit_s = 1;   // per allocation
  double advisor_noise = 0.03;    // relative noise of a sampled throughput
  double prior_sigma = 0.1;       // the advisor's Amdahl prior before two sizes are sampled
  double probe_s = 60;            // productive seconds at a size before the advisor samples it
  double explore_until = 1;       // the advisor explores until its fit's uncertainty is at most this (ScalingAdvisor::uncertainty)
  uint64_t seed = 0;
  Reclaim reclaim = Reclaim::preempt;
  double end_s = -1;              // measure until (< 0: the primary workload's last arrival, else its last completion)
  std::function<void(double t_s, long done, long total)> progress;  // malleable jobs done of all
};

struct OccupancyPoint {
  double t_s = 0;
  int primary = 0, malleable = 0, idle = 0;
};

struct LearnedCurve {
  int64_t job = 0;
  std::string name;
  double t1 = 0, sigma = 0;  // fitted Amdahl parameters
  int samples = 0;
  double error_after_3 = -1;  // largest relative error vs the true curve after 3 windows (-1: fewer)
  double error = -1;          // the same for the final fit
  std::vector<int> window_sizes;  // nodes in its first 3 sampled windows
};

struct MalleResult {
  std::string policy;
  double span_s = 0;              // measured interval [0, span]
  int nodes = 0;
  double idle_node_s = 0;         // node-seconds the primary workload left idle
  double malleable_node_s = 0;    // node-seconds malleable jobs held
  double useful_node_s = 0;       // node-equivalent seconds trained (speed-up x productive time)
  double iterations = 0;          // malleable iterations trained (lost work excluded)
  double lost_iterations = 0;     // trained, then lost to an unannounced claim
  long rescales = 0, unannounced_claims = 0, decisions = 0;
  long malleable_completed = 0, malleable_jobs = 0, primary_jobs = 0;
  double primary_delay_max_s = 0, primary_delay_mean_s = 0;
  std::vector<double> decision_ms;  // per allocation solved (idle nodes and jobs to place)
  long milp_not_optimal = 0;        // allocations the time limit cut short
  std::vector<OccupancyPoint> occupancy;
  std::vector<LearnedCurve> curves;  // advisor only
  // One per malleable job, in input order: arrival, first start (its first
  // nodes), completion (< 0 if not done by the end), node-seconds held (as
  // gpu_seconds), `gpus` the most nodes its curve uses, iterations kept,
  // restarts = windows started after the first.
  std::vector<JobResult> jobs;
  double idle_node_time_used() const { return idle_node_s > 0 ? malleable_node_s / idle_node_s : 0; }
  double malleable_throughput() const { return span_s > 0 ? useful_node_s / span_s : 0; }  // node-equivalents
};

// Runs the primary workload (sorted by arrival) on `nodes` nodes with the
// malleable jobs (sorted by arrival) under `policy`.
MalleResult simulate_malleable(const std::vector<HostJob>& primary, int nodes,
                               const std::vector<MalleableJob>& malleable, MallePolicy policy,
                               const MalleOptions& options);

}  // namespace cellsched
