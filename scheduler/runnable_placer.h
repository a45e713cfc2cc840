// Placement for the heterogeneity-agnostic policies (fifo, yarn-cs,
// tiresias): where the job's usual placement is one it cannot run on.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace cellsched {

// A job is placed by the policy's rule (first fit, or fewest nodes) over
// every node. Where it cannot run there (throughput 0: a type the table
// lacks or marks out of memory, one the trace rules out, or a spread over
// types one of which cannot run it spread), it is placed on the nodes of the
// types it can run on, then on one such type's nodes alone (types in
// node-list order). Empty, `free` unchanged, when none of those runs.
class RunnablePlacer {
 public:
  // Call at the start of a round, after `free` is known (and again whenever
  // `free` is recomputed); indexes the cluster the first time it is seen.
  void begin(const Cluster& cluster, const std::vector<int>& free);
  // Places `job`, subtracting from `free` on success.
  std::vector<Placement> place(const RoundContext& ctx, const Job& job, std::vector<int>& free,
                               bool consolidate);

 private:
  const std::vector<char>& mask(uint64_t types);

  const Cluster* indexed_ = nullptr;
  std::vector<std::string> types_;  // node-list order
  std::vector<int> node_type_;      // index into types_, per node
  std::map<uint64_t, std::vector<char>> masks_;
  std::vector<long> type_free_;
};

}  // namespace cellsched
