// Records what the engine decides, round by round, as a Schedule with GPU
// indices: a gang or copy that stays on a node keeps its GPUs.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/cluster.h"
#include "core/run.h"
#include "core/schedule.h"
#include "scheduler/policy.h"

namespace cellsched {

class ThroughputOracle;

class ScheduleRecorder {
 public:
  ScheduleRecorder(const Cluster& cluster, const ThroughputOracle& oracle, Schedule header);
  // Feed from SimOptions::on_round.
  void record(double t, const std::vector<JobState*>& jobs, const std::vector<Allocation>& out);
  // Closes what is still open (at the job's completion, else one round after
  // the last) and clips every entry at its job's completion.
  Schedule finish(const RunRecord& run);

 private:
  // (job, 0 = own gang / 1 = copy, node, gpus): interchangeable placements.
  using Key = std::tuple<int64_t, int, int, int>;
  void close(size_t entry, double t);

  const Cluster& cluster_;
  const ThroughputOracle& oracle_;
  Schedule schedule_;
  std::vector<std::vector<char>> used_;     // per node, per GPU index
  std::map<Key, std::vector<size_t>> open_;  // open entries by key
};

}  // namespace cellsched
