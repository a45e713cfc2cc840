// Pieces scheduler/hadar.cc and scheduler/hadar_design.cc share (private to
// scheduler/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cluster.h"
#include "scheduler/policy.h"

namespace cellsched::hadar_detail {

// The GPU types of a cluster and the type of each node.
struct TypeIndex {
  const Cluster* cluster = nullptr;
  std::vector<std::string> types;
  std::vector<size_t> type_of_node;
  std::vector<std::vector<int>> nodes_of_type;  // ascending

  // Re-indexes when `c` is not the cluster indexed last; true when it did.
  bool index(const Cluster& c) {
    if (cluster == &c && type_of_node.size() == c.nodes.size()) return false;
    cluster = &c;
    types = c.gpu_types();
    type_of_node.resize(c.nodes.size());
    nodes_of_type.assign(types.size(), {});
    for (size_t n = 0; n < c.nodes.size(); ++n) {
      type_of_node[n] = static_cast<size_t>(
          std::find(types.begin(), types.end(), c.nodes[n].gpu_type) - types.begin());
      nodes_of_type[type_of_node[n]].push_back(static_cast<int>(n));
    }
    return true;
  }

  // GPUs per type of a placement.
  std::vector<int> counts(const std::vector<Placement>& ps) const {
    std::vector<int> c(types.size(), 0);
    for (const Placement& p : ps) c[type_of_node[p.node]] += p.gpus;
    return c;
  }
};

// Values per GPU type and count 0..capacity, each computed at most once per
// round: the round's evaluations ask for the same few prices again and again,
// and a pow() or exp() per ask was most of both policies' time on Philly.
class RoundMemo {
 public:
  void reset(const std::vector<int>& capacity) {
    values_.resize(capacity.size());
    for (size_t k = 0; k < capacity.size(); ++k)
      values_[k].assign(static_cast<size_t>(std::max(0, capacity[k])) + 1, std::numeric_limits<double>::quiet_NaN());
  }
  // compute(y) for type k, kept when y is within 0..capacity.
  template <class Compute>
  double get(size_t k, int y, Compute&& compute) {
    if (y < 0 || static_cast<size_t>(y) >= values_[k].size()) return compute(y);
    double& v = values_[k][static_cast<size_t>(y)];
    if (std::isnan(v)) v = compute(y);
    return v;
  }

 private:
  std::vector<std::vector<double>> values_;
};

// Per-job figures kept across rounds; entries of departed jobs are dropped
// once the map has grown well past the active set.
template <class T>
class JobCacheMap {
 public:
  T& operator[](int64_t id) { return map_[id]; }
  void clear() { map_.clear(); }
  void prune(const std::vector<JobState*>& jobs) {
    if (map_.size() <= 2 * jobs.size() + 64) return;
    std::unordered_map<int64_t, T> kept;
    for (const JobState* s : jobs) {
      auto it = map_.find(s->job->id);
      if (it != map_.end()) kept.emplace(it->first, std::move(it->second));
    }
    map_.swap(kept);
  }

 private:
  std::unordered_map<int64_t, T> map_;
};

}  // namespace cellsched::hadar_detail
