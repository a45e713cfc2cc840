// The round-based simulator (DESIGN "Policies": rounds, restart overhead).
#pragma once

#include <functional>

#include "core/cluster.h"
#include "core/fork.h"
#include "core/job.h"
#include "core/run.h"
#include "scheduler/policy.h"

namespace cellsched {

class ThroughputOracle;

struct SimOptions {
  double round_s = 360;          // round length
  double restart_s = 30;         // paid by each gang that is new in a round
  // Forked jobs (HadarE): what the first copy adds (0..1], how more copies
  // scale (core/fork.h), and the seconds each round that has copies loses
  // to consolidating them.
  double fork_efficiency = kDefaultForkEfficiency;
  ForkScaling fork_scaling = ForkScaling::noise;
  double consolidation_s = 0;
  double horizon_s = -1;         // stop after this much simulated time (< 0: run to the end)
  // Rounds at most: a simulation that would run longer (a job at a rate too
  // small to finish) is bad input, and says so, rather than running forever.
  long max_rounds = 5'000'000;
  // Replay each job's failed attempts (Job::failed_attempts): see simulate().
  bool replay_failures = false;
  bool record_utilization = true;
  // Called after each round with (now, finished jobs, total jobs); may be empty.
  std::function<void(double, long, long)> progress;
  // Called each round with the round start, the active jobs and the
  // allocations just decided for them (checked, not yet applied); may be empty.
  std::function<void(double, const std::vector<JobState*>&, const std::vector<Allocation>&)>
      on_round;
};

// Replays `trace` on `cluster` under `policy`. Semantics:
//  - Rounds start at the first arrival and follow every round_s. A job that
//    arrives mid-round is first considered at the next round start. While no
//    job is active the clock jumps to the next arrival.
//  - Each gang of a job (its workers, and each forked copy) that was not
//    placed exactly so in the previous round (a start, a move, a resize)
//    trains nothing for min(restart_s, round_s) seconds of that round,
//    holding its GPUs. A job with copies also loses consolidation_s at the
//    end of the round (the copies' weights are averaged), and its gangs'
//    iterations are worth fork_worth() of them (core/fork.h: the copies
//    count at a share that falls with their number under the noise model,
//    fork_efficiency each under the linear one), taken from the gangs'
//    rates when the allocation changes; the job's remaining iterations fall
//    by that worth.
//  - Progress within a round is throughput x time; a job completes at the
//    exact moment its remaining iterations reach zero, and its GPUs become
//    free at the next round start.
//  - If no job runs, none can be placed and none will arrive, the run stops
//    and the jobs left count as unfinished.
//  - replay_failures: a job with failed attempts first runs them in order;
//    attempt k fails at the moment it has trained failed_attempts[k]
//    iterations (it cannot complete meanwhile), its work is lost (remaining
//    stays the whole job), its GPUs are free at the next round start and it
//    waits to be placed again (a fresh placement pays the restart). Then the
//    last attempt trains the job. metrics.extra gets failed_attempts and
//    lost_gpu_s (GPU-seconds of failed attempts).
// Deterministic: the same inputs give the same record.
RunRecord simulate(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                   Policy& policy, const SimOptions& options = {});

}  // namespace cellsched
