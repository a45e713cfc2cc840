// The round-based simulator (DESIGN "Policies": rounds, restart overhead).
#pragma once

#include <functional>

#include "core/cluster.h"
#include "core/job.h"
#include "core/run.h"

namespace cellsched {

class Policy;
class ThroughputOracle;

struct SimOptions {
  double round_s = 360;          // round length
  double restart_s = 30;         // paid in a round whose allocation differs from the last
  double horizon_s = -1;         // stop after this much simulated time (< 0: run to the end)
  bool record_utilization = true;
  // Called after each round with (now, finished jobs, total jobs); may be empty.
  std::function<void(double, long, long)> progress;
};

// Replays `trace` on `cluster` under `policy`. Semantics:
//  - Rounds start at the first arrival and follow every round_s. A job that
//    arrives mid-round is first considered at the next round start. While no
//    job is active the clock jumps to the next arrival.
//  - A job whose allocation differs from the previous round's (a start, a
//    move, a resize) runs nothing for min(restart_s, round_s) seconds of that
//    round, holding its GPUs.
//  - Progress within a round is throughput x time; a job completes at the
//    exact moment its remaining iterations reach zero, and its GPUs become
//    free at the next round start.
//  - If no job runs, none can be placed and none will arrive, the run stops
//    and the jobs left count as unfinished.
// Deterministic: the same inputs give the same record.
RunRecord simulate(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                   Policy& policy, const SimOptions& options = {});

}  // namespace cellsched
