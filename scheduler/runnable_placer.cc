#include "scheduler/runnable_placer.h"

#include <algorithm>

#include "scheduler/oracle.h"

namespace cellsched {

void RunnablePlacer::begin(const Cluster& cluster, const std::vector<int>& free) {
  if (indexed_ != &cluster || node_type_.size() != cluster.nodes.size()) {
    indexed_ = &cluster;
    types_ = cluster.gpu_types();
    node_type_.assign(cluster.nodes.size(), 0);
    for (size_t n = 0; n < cluster.nodes.size(); ++n)
      node_type_[n] = static_cast<int>(std::find(types_.begin(), types_.end(), cluster.nodes[n].gpu_type) -
                                       types_.begin());
    masks_.clear();
  }
  type_free_.assign(types_.size(), 0);
  for (size_t n = 0; n < free.size() && n < node_type_.size(); ++n)
    type_free_[static_cast<size_t>(node_type_[n])] += free[n];
}

// Nodes whose type is in `types` (a bit per index into types_), cached.
const std::vector<char>& RunnablePlacer::mask(uint64_t types) {
  auto [it, fresh] = masks_.try_emplace(types);
  if (fresh) {
    it->second.resize(node_type_.size());
    for (size_t n = 0; n < node_type_.size(); ++n) it->second[n] = node_type_[n] < 64 && ((types >> node_type_[n]) & 1);
  }
  return it->second;
}

std::vector<Placement> RunnablePlacer::place(const RoundContext& ctx, const Job& job, std::vector<int>& free,
                                             bool consolidate) {
  auto rule = [&](const std::vector<char>* allowed) {
    return consolidate ? place_fewest_nodes(free, job.gpus, allowed) : place_first_fit(free, job.gpus, allowed);
  };
  auto runs = [&](std::vector<Placement>& ps) {
    if (ps.empty()) return false;
    if (allocation_throughput(*ctx.oracle, job, *ctx.cluster, ps) > 0) {
      for (const Placement& p : ps) type_free_[static_cast<size_t>(node_type_[static_cast<size_t>(p.node)])] -= p.gpus;
      return true;
    }
    for (const Placement& p : ps) free[p.node] += p.gpus;  // give back
    ps.clear();
    return false;
  };
  uint64_t runnable = 0;  // the types it can run on (at most 64 are told apart)
  long runnable_free = 0;
  for (size_t t = 0; t < types_.size() && t < 64; ++t)
    if (ctx.oracle->throughput(job, types_[t], job.gpus, true) > 0 ||
        ctx.oracle->throughput(job, types_[t], job.gpus, false) > 0) {
      runnable |= uint64_t{1} << t;
      runnable_free += type_free_[t];
    }
  const bool every_type = types_.size() < 64 && runnable == (uint64_t{1} << types_.size()) - 1;
  if (every_type) {  // the policy's rule as it stands, the others only if it cannot run there
    std::vector<Placement> ps = rule(nullptr);
    if (ps.empty() || runs(ps)) return ps;  // empty: not enough free GPUs anywhere
  }
  if (runnable_free < job.gpus) return {};
  if (!every_type) {
    std::vector<Placement> ps = rule(&mask(runnable));
    if (runs(ps)) return ps;
  }
  for (size_t t = 0; t < types_.size() && t < 64; ++t) {
    if (!((runnable >> t) & 1) || type_free_[t] < job.gpus) continue;
    std::vector<Placement> ps = rule(&mask(uint64_t{1} << t));
    if (runs(ps)) return ps;
  }
  return {};
}

}  // namespace cellsched
