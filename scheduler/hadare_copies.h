// HadarE's copies: after Hadar's allocation, the GPUs still idle go to forked
// copies of the jobs (a copy: up to W GPUs of one node) whose copy adds most
// there, counted as core/fork.h counts them. Private to scheduler/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace cellsched::hadar_detail {

// A job's rates on one node, kept by the caller from round to round.
struct CopyRates {
  const std::vector<double>* packed = nullptr;  // [type]: > 0 where a gang of the job fits one node
  std::vector<std::vector<double>>* copy = nullptr;  // [type][c]: rate on c GPUs of one node (< 0: not asked yet)
};

class CopyPlacer {
 public:
  CopyPlacer();
  ~CopyPlacer();
  CopyPlacer(const CopyPlacer&) = delete;
  CopyPlacer& operator=(const CopyPlacer&) = delete;

  // Node by node, a node with g idle GPUs (free[n], taken as copies are
  // placed) gets a copy of min(W, g) GPUs of the job that gains most there:
  // the most weighted iterations it adds this round relative to its remaining
  // work, keeping last round's copy there on a tie. Under the noise model a
  // copy that adds under a tenth of what a first copy adds is not placed.
  // main_rate[i]: the rate of job i's own gang this round (0: none);
  // rates[i]: job i's per-type figures (below). Fills out[i].copies.
  void place(const RoundContext& ctx, const std::vector<std::string>& types, const std::vector<size_t>& type_of_node,
             const std::vector<double>& main_rate, const std::vector<CopyRates>& rates, std::vector<int>& free,
             std::vector<Allocation>& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellsched::hadar_detail
