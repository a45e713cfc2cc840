// The host scheduler of a batch cluster: first-come-first-served with EASY
// backfilling over rigid node jobs, as Slurm schedules by default. The
// malletrain mode runs malleable jobs on the nodes it leaves idle.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace cellsched {

// A rigid job of the primary workload.
struct HostJob {
  int64_t id = 0;
  double arrival_s = 0;
  int nodes = 1;          // whole nodes, > 0
  double runtime_s = 0;   // how long it really runs, > 0
  double walltime_s = 0;  // the time limit the user asked for (>= runtime: EASY's estimate)
};

struct HostStart {
  int64_t job = 0;
  std::vector<int> nodes;  // node indices it runs on
};

inline constexpr double kNoClaim = std::numeric_limits<double>::infinity();

// FCFS + EASY: the queue's head starts as soon as it fits; while it waits,
// it holds a reservation at the shadow time (when enough running jobs will
// have ended by their walltimes), and later jobs start out of order only if
// they fit now and either end before the shadow time or use only the nodes
// the head will not need then.
class EasyBackfill {
 public:
  explicit EasyBackfill(int nodes);

  void submit(const HostJob& job);
  // Frees the nodes of a running job.
  void finish(int64_t job);
  // Starts what FCFS + EASY starts at `now`. Among idle nodes it takes those
  // with `avoid[node]` false first (nodes a malleable job holds come last).
  std::vector<HostStart> schedule(double now, const std::vector<char>& avoid = {});
  // When each node is next predicted to be claimed: the current time for a
  // busy node, the head's reservation (shadow time) for idle nodes while jobs
  // wait, kNoClaim for idle nodes when the queue is empty (the next arrival
  // is not known in advance).
  std::vector<double> predicted_claims(double now) const;

  int nodes() const { return static_cast<int>(owner_.size()); }
  int idle_nodes() const;
  const std::vector<int64_t>& owner() const { return owner_; }  // -1 = idle
  size_t queued() const { return queue_.size(); }
  size_t running() const { return running_.size(); }

 private:
  struct Running {
    double predicted_end = 0;  // start + walltime
    std::vector<int> nodes;
  };
  // Shadow time of the head and the nodes spare then; head must not fit now.
  void shadow(double now, int free, double& shadow_t, int& extra) const;
  HostStart start(const HostJob& job, double now, const std::vector<char>& avoid);

  std::vector<int64_t> owner_;
  std::vector<HostJob> queue_;  // arrival order
  std::map<int64_t, Running> running_;
};

// The primary workload alone: each job's start time (index = position in
// `jobs`, which must be sorted by arrival). The baseline that primary-job
// delay under malleable jobs is measured against.
std::vector<double> host_only_starts(const std::vector<HostJob>& jobs, int nodes);

}  // namespace cellsched
