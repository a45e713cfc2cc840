// The allocators of malleable jobs onto idle nodes: malletrain's MILP (CBC)
// and freetrain's greedy. Idle nodes come in classes of equal expected
// window (seconds until the host scheduler is predicted to claim them, less
// the grace period, capped at a horizon).
#pragma once

#include <vector>

#include "scheduler/advisor.h"

namespace cellsched {

struct AllocClass {
  double window_s = 0;  // usable seconds expected, > 0
  int nodes = 0;        // idle nodes with that window
};

struct AllocJob {
  ScalingCurve curve;       // what the allocator believes (iterations/s)
  double remaining = 0;     // iterations left (<= 0: unknown, no cap)
  double rescale_s = 0;     // checkpoint + restart
  int current_nodes = 0;    // nodes held now (all in current_class)
  int current_class = -1;   // -1: holds none
  bool moved = false;       // lost nodes already: even staying costs the rescale
  // While the advisor explores the job's scaling: per class, the one size it
  // may start or move to there (0: none); staying as it is stays allowed.
  // Empty: no restriction.
  std::vector<int> explore;
};

struct AllocChoice {
  int cls = -1;   // -1: not run
  int nodes = 0;
  bool operator==(const AllocChoice&) const = default;
};

struct AllocStats {
  double solve_ms = 0;
  bool optimal = true;
  int variables = 0;
  double objective = 0;  // node-equivalent seconds expected
};

// What a second of a window left after a job finishes is worth, in
// node-equivalent seconds: a second of one job's completion is worth a
// node-second of training. Among sizes that all finish the job in the window
// (equal work), the one that finishes it soonest wins; a node that another
// job trains on for the whole window is worth more than the seconds it saves.
// Tried at 0.05, 0.25 and 1 (docs/malletrain.md): 1 gave the lowest JCT.
constexpr double kSoonerCredit = 1.0;

// What running `job` on `nodes` nodes of class `cls` is expected to give over
// the class's window, in node-equivalent seconds (speed-up over one node x
// productive seconds): the rescale is paid unless the job stays as it is, and
// a job that would finish early is credited only until then, plus
// kSoonerCredit for each second of the window it leaves.
double alloc_value(const std::vector<AllocClass>& classes, const AllocJob& job, int cls, int nodes);

// The sizes considered for a job in class `cls` of `class_nodes` nodes: every
// size up to 16, then steps of about a quarter, plus its largest size, the
// class's size and its current size, capped by both. A job that explores
// (`explore` set) gets only its exploration size there and staying as it is.
std::vector<int> candidate_sizes(const AllocJob& job, int cls, int class_nodes);

// malletrain: maximizes the sum of alloc_value with one (class, size) per
// job and each class's nodes as capacity; CBC with `time_limit_s`, the best
// incumbent past it.
std::vector<AllocChoice> allocate_milp(const std::vector<AllocClass>& classes, const std::vector<AllocJob>& jobs,
                                       double time_limit_s, AllocStats* stats = nullptr);

// freetrain: running jobs keep the nodes they still have; free nodes go to
// the jobs in order of declared scaling (speed-up at their largest size over
// that size, best first), each up to its largest size; windows and rescale
// costs are not considered.
std::vector<AllocChoice> allocate_greedy(const std::vector<AllocClass>& classes, const std::vector<AllocJob>& jobs);

}  // namespace cellsched
