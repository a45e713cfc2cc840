// The online runner (DESIGN "Online runner contract"): every round it asks a
// scheduling policy for allocations and makes them real through an executor,
// with the SQLite store as the source of truth. See README "cellsched run".
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>
#include <string>

#include "core/cluster.h"
#include "core/fork.h"
#include "core/job.h"
#include "db/online.h"
#include "runner/contract.h"
#include "scheduler/policy.h"

namespace cellsched {
class ThroughputOracle;
class Policy;
}  // namespace cellsched

namespace cellsched::runner {

class Executor;
class CheckpointAverager;

struct RunnerOptions {
  std::string policy = "hadare";
  double round_s = 60;          // round length, seconds
  long max_rounds = -1;         // stop after this many rounds (< 0: no limit)
  bool until_idle = false;      // stop once no job is queued or running
  double grace_s = 10;          // SIGTERM -> SIGKILL
  int max_failures = 3;         // a job fails after this many failed launches + 1
  double poll_s = 0.2;          // progress files and exits are read this often
  std::string work_dir;         // launch directories (logs, exit files, progress)
  bool keep_checkpoints = false;  // keep the copies' checkpoints after averaging
  double fork_efficiency = kDefaultForkEfficiency;  // what the first forked copy adds (core/fork.h)
  ForkScaling fork_scaling = ForkScaling::noise;     // how more copies add
  PolicySettings policy_settings;                    // hadar's terms (scheduler/policy.h)
  double restart_s = 30;          // the policies' restart overhead
  double prior_per_gpu = 1.0;     // iterations/s per GPU for a job nothing knows
  // Replay a `cellsched schedule` file instead of deciding with `policy`:
  // round k applies the schedule's k-th round; job J plays the schedule's
  // job J - schedule_offset.
  std::string schedule_path;
  int64_t schedule_offset = 1;
  // Set (by a signal handler) to stop cleanly: running processes get SIGTERM,
  // their progress is consolidated, and run() returns.
  const std::atomic<bool>* stop = nullptr;
  // Where progress messages go (may be empty).
  std::function<void(const std::string&)> log;
};

class Runner {
 public:
  // `base` (may be null) is the oracle the learned figures refine; `averager`
  // may be null (then a forked job keeps the checkpoint of its copy with the
  // most iterations, and only those iterations count).
  Runner(db::OnlineStore& store, Cluster cluster, const Executor& executor,
         const ThroughputOracle* base, const CheckpointAverager* averager, RunnerOptions options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Reconciles with what a previous runner left, then runs rounds until a
  // stop condition. Throws InputError for a bad policy or node list.
  void run();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Checks a node list for the runner (unique names, GPUs > 0); throws InputError.
void validate_nodes(const Cluster& cluster, const std::string& source);

// The launches a previous runner left running keep their processes and GPUs:
// each must find its nodes, by name, in this node list, with the GPU indices
// it holds and none held twice. Throws InputError naming the launch and node
// (a restart with an edited node list used to double-book GPUs or crash).
void check_live_launches(const db::OnlineStore& store, const Cluster& cluster, const std::string& source);

// What launches of one job that trained side by side are worth together, in
// iterations (core/fork.h): the main gang's (copy 0) plus its copies' at the
// fork model. Callers pick the launches (a planned one has trained nothing).
double launches_worth(const ForkModel& fork, const std::vector<const db::OnlineLaunch*>& launches);

}  // namespace cellsched::runner
