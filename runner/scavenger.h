// The online scavenger (MalleTrain on Slurm): watches a real Slurm cluster
// (sinfo, squeue; argv, never a shell), launches malleable training jobs on
// the nodes it leaves idle through srun with a time limit that ends before
// the next reservation, and stops them (SIGTERM: checkpoint, then scancel)
// when a waiting job needs their nodes.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "scheduler/advisor.h"

namespace cellsched::runner {

struct SlurmNode {
  std::string name, state;  // sinfo's %T: idle, allocated, mixed, down, ...
};

struct SlurmJob {
  std::string id, name, state;  // squeue's %T: PENDING, RUNNING, ...
  int nodes = 0;
  double start_s = -1;  // expected (pending) or actual (running) start, unix seconds; -1: not known
  std::string reason;
};

// `sinfo -N -h -o %N|%T` (one line per node; a node listed twice counts once).
std::vector<SlurmNode> parse_sinfo(const std::string& text);
// `squeue -h -o %i|%j|%T|%D|%S|%r` (priority order as squeue sorts it).
std::vector<SlurmJob> parse_squeue(const std::string& text);
// Whether a pending job with squeue's reason `reason` waits for nodes
// (Resources, Priority, None): only such a job may claim the idle nodes.
bool pends_for_nodes(const std::string& reason);
// "2026-12-02T01:02:03" (local time, as Slurm prints it) -> unix seconds;
// "N/A", "Unknown" or malformed -> -1.
double parse_slurm_time(const std::string& s);

struct ScavengeJob {
  std::string name;               // [A-Za-z0-9_.-]+, unique
  double iterations = 0;          // to train
  int max_nodes = 1;
  double rescale_s = 30;          // a restart's cost, for the allocator
  ScalingCurve curve;             // declared scaling (speed-up matters, not units)
  std::vector<std::string> command;
};

struct ScavengeOptions {
  std::string state_dir;          // checkpoints, progress and logs, one folder per job
  double interval_s = 2;          // between looks at the cluster
  double grace_s = 10;            // SIGTERM to exit, and the margin before a reservation
  double horizon_s = 3600;        // the time limit where no waiting job has reserved the idle nodes
  double launch_timeout_s = 60;   // a launch Slurm has not started by then is cancelled
  // Kept free before a reservation on top of the grace period. Slurm's
  // backfill scheduler plans in bf_resolution steps (60 s unless
  // SchedulerParameters says otherwise) from when its cycle runs, not from
  // when we asked: a launch whose time limit ends within that of the
  // reservation may never be started (CI, 2026-12-04: cancelled unstarted).
  double plan_margin_s = 60;
  double duration_s = -1;         // stop after (< 0: until every job is done)
  // Put before the command on every node (it sets RANK, WORLD_SIZE and
  // LOCAL_RANK from Slurm's task ids); empty: the command runs as is.
  std::vector<std::string> task_wrapper;
  std::string sinfo = "sinfo", squeue = "squeue", srun = "srun", scancel = "scancel", partition;
  std::function<void(const std::string&)> log;  // one line per event
};

struct ScavengeJobReport {
  std::string name;
  double iterations_done = 0;
  int launches = 0;
  bool done = false;
  // Given up on: kMaxEmptyLaunches launches in a row ended, unasked, having
  // trained nothing (a command that cannot run was relaunched every poll).
  bool failed = false;
  std::string error;  // why, with the last line of the last launch's log
};

// Launches in a row that end by themselves with no iteration trained before
// the scavenger gives up on the job; polls in a row that fail (sinfo or
// squeue erring or silent) before it stops, checkpointing what runs.
constexpr int kMaxEmptyLaunches = 3;
constexpr int kMaxFailedPolls = 5;

struct ScavengeReport {
  long polls = 0, failed_polls = 0, launches = 0, claims = 0, cancelled_launches = 0;
  double release_max_s = 0;   // longest time from seeing a waiting job blocked by ours to their exit
  double node_s = 0;          // node-seconds our jobs held
  std::vector<ScavengeJobReport> jobs;
};

// Runs until every job is done or given up on, `duration_s` passes or
// `*stop` is set; then stops what still runs (checkpointed). A poll whose
// Slurm clients fail is logged and skipped; after kMaxFailedPolls in a row it
// stops what runs, checkpointed, and throws std::runtime_error.
ScavengeReport scavenge(const std::vector<ScavengeJob>& jobs, const ScavengeOptions& options,
                        const std::atomic<bool>* stop = nullptr);

}  // namespace cellsched::runner
