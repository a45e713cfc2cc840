// DESIGN "Metrics": a lower bound on TTD (makespan) from an LP relaxation with
// release times, no gang and no rounds.
#pragma once

#include "core/cluster.h"
#include "core/job.h"
#include "scheduler/lp.h"

namespace cellsched {

class ThroughputOracle;

// A lower bound, in seconds, on (last completion - first arrival) of any
// schedule of `trace` on `cluster` that completes every job some GPU type can
// run (jobs with throughput 0 everywhere are left out; the first arrival is
// taken over all jobs, as the metrics do).
//
// Relaxation: a job's work is divisible over GPU-seconds of any type at its
// best per-GPU rate on that type (max of consolidated and spread figures for
// its W_j workers, / W_j); at most W_j GPUs at a time (no minimum: no gang);
// no rounds, no restart cost. Time is cut at release times, rounded DOWN into
// at most `max_intervals` intervals (earlier release only relaxes). Jobs with
// the same per-GPU rates and gang size form one class whose work released by
// each interval is a cumulative cap; their GPUs-at-a-time cap adds up. Also
// T >= arrival_j + total_j / (W_j x best per-GPU rate) for every job.
//
// `forking` (HadarE: a job may run copies on more than W_j GPUs; elastic
// policies such as crius: a job may be scaled): the per-GPU rate becomes the
// best over 1..max(W_j, max_scale) workers, and the W_j cap goes.
//
// Throws std::runtime_error if the LP solver fails.
double makespan_lower_bound(const Trace& trace, const Cluster& cluster,
                            const ThroughputOracle& oracle, int max_intervals = 64,
                            bool forking = false, int max_scale = 0);

// The same in two steps: build_lower_bound asks the oracle everything it
// needs and returns the LP; solve_lower_bound touches neither the oracle nor
// the trace, so it can run on another thread while a simulation asks the
// oracle (simulate does, to take the bound out of its wall time).
struct LowerBoundLp {
  LinearProgram lp;
  int t_col = -1;     // the makespan column (-1: no LP, the bound is t_min)
  double unit = 1;    // seconds per LP time unit
  double t_min = 0;   // max over jobs of release + best isolated time
};
LowerBoundLp build_lower_bound(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                               int max_intervals = 64, bool forking = false, int max_scale = 0);
double solve_lower_bound(const LowerBoundLp& b);

}  // namespace cellsched
