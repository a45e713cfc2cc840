// The interface every scheduling policy implements, and the state it sees.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/fork.h"
#include "core/job.h"

namespace cellsched {

class ThroughputOracle;

// `gpus` GPUs on node `node` (an index into Cluster::nodes).
struct Placement {
  int node = 0;
  int gpus = 0;
  friend bool operator==(const Placement&, const Placement&) = default;
};

// Where a job runs in one round. `workers` holds its gang (sums to job.gpus);
// `copies` are extra forked copies (HadarE), each a gang of its own.
struct Allocation {
  std::vector<Placement> workers;
  std::vector<std::vector<Placement>> copies;
  bool empty() const { return workers.empty() && copies.empty(); }
  int gpus() const;
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

// What the engine knows of an active (arrived, unfinished) job.
struct JobState {
  const Job* job = nullptr;
  double remaining = 0;          // iterations left
  double attained_gpu_s = 0;     // GPU-seconds received so far (Tiresias' service)
  double executed_s = 0;         // wall seconds it has run
  double first_start_s = -1;
  double waiting_s = 0;          // seconds since it last ran (or since arrival)
  double iterations_done = 0;
  int rounds_run = 0;            // rounds in which it held GPUs
  int restarts = 0;
  Allocation current;            // last round's allocation (empty when waiting)
  double throughput = 0;         // iterations/s on `current` (copies included)
  // Job tracker: iterations each gang trained in the last round; [0] is the
  // main gang (0 when it had none), then one entry per copy.
  std::vector<double> last_round_iterations;
};

struct RoundContext {
  double now = 0;                 // round start, seconds
  double round_s = 360;
  const Cluster* cluster = nullptr;
  const ThroughputOracle* oracle = nullptr;
  // Active jobs in arrival order.
  const std::vector<JobState*>* jobs = nullptr;
  double restart_s = 30;          // what an allocation change costs (SimOptions)
  ForkModel fork;                 // what forked copies are worth (SimOptions)
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Fills `out[i]` with the allocation of (*ctx.jobs)[i] for this round. On
  // entry `out[i]` holds the job's current allocation; an empty allocation
  // means the job waits. The engine checks gang sizes and node capacities.
  virtual void decide(const RoundContext& ctx, std::vector<Allocation>& out) = 0;
  // An elastic policy may give a job any number of workers (its throughput
  // is then the oracle's at that scale); the others must give exactly
  // job.gpus.
  virtual bool elastic() const { return false; }
};

// Names of the policies this build provides, and a factory. Throws
// InputError for an unknown name.
std::vector<std::string> policy_names();
// Settings a user may change from the command line.
struct PolicySettings {
  // hadar, hadare: exponent of the makespan term in rounds with spare
  // capacity (HadarOptions::spare_exponent; docs/hadar.md).
  double hadar_spare_exponent = 0.25;
  // hadar, hadare: exponent and cap (s) of the response-ratio term in rounds
  // where jobs wait (HadarOptions::ratio_exponent, ratio_cap_s).
  double hadar_ratio_exponent = 1;
  double hadar_ratio_cap_s = 2 * 24 * 3600.0;
};
std::unique_ptr<Policy> make_policy(const std::string& name, const PolicySettings& settings = {});

// Free GPUs per node after the allocations in `out` that are non-empty.
std::vector<int> free_gpus(const Cluster& cluster, const std::vector<Allocation>& allocations);

// Placement helpers shared by policies; each returns an empty vector when the
// request does not fit, and never changes `free` unless it succeeds (then it
// subtracts what it placed).
// First fit in node order, any GPU type. `allowed` (optional, per node)
// restricts the nodes considered.
std::vector<Placement> place_first_fit(std::vector<int>& free, int gpus, const std::vector<char>* allowed = nullptr);
// Fewest nodes: one node if any fits (the tightest), else largest free first.
// `allowed` (optional, per node) restricts the nodes considered.
std::vector<Placement> place_fewest_nodes(std::vector<int>& free, int gpus,
                                          const std::vector<char>* allowed = nullptr);
// The same over `nodes` only (ascending node indices): a policy that places
// by GPU type keeps each type's nodes and scans just those.
std::vector<Placement> place_fewest_nodes(std::vector<int>& free, int gpus, const std::vector<int>& nodes);

}  // namespace cellsched
