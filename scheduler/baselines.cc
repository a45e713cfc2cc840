// Heterogeneity-agnostic, non-preemptive baselines: fifo and yarn-cs.
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

// Arrival order, gang, no preemption. Running jobs keep their GPUs; waiting
// jobs are considered in arrival order and each one that fits starts
// (`backfill`), or the pass stops at the first that does not (head-of-line
// blocking). Agnostic of speed, not of feasibility: where the first
// placement is one the job cannot run on (throughput 0: a type the table
// lacks, or one the trace rules out), the job is placed on the nodes of the
// types it can run on, then on one such type's nodes alone (in the node
// list's order); only if none of those fits does it count as not fitting.
// Before, a cluster listing T4 nodes first ran no job at all.
class ArrivalOrder : public Policy {
 public:
  ArrivalOrder(std::string name, bool backfill, bool consolidate)
      : name_(std::move(name)), backfill_(backfill), consolidate_(consolidate) {}
  std::string name() const override { return name_; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    index(*ctx.cluster);
    std::vector<int> free = free_gpus(*ctx.cluster, out);
    long total_free = std::accumulate(free.begin(), free.end(), 0L);
    type_free_.assign(types_.size(), 0);
    for (size_t n = 0; n < free.size(); ++n) type_free_[static_cast<size_t>(node_type_[n])] += free[n];
    const auto& jobs = *ctx.jobs;
    for (size_t i = 0; i < jobs.size() && total_free > 0; ++i) {
      if (!out[i].empty()) continue;
      const Job& job = *jobs[i]->job;
      bool placed = false;
      if (job.gpus <= total_free) {
        std::vector<Placement> ps = place_runnable(ctx, job, free);
        if (!ps.empty()) {
          total_free -= job.gpus;
          for (const Placement& p : ps) type_free_[static_cast<size_t>(node_type_[static_cast<size_t>(p.node)])] -= p.gpus;
          out[i].workers = std::move(ps);
          placed = true;
        }
      }
      if (!placed && !backfill_) break;
    }
  }

 private:
  // The cluster's GPU types (node-list order) and each node's; per-type masks.
  void index(const Cluster& cluster) {
    if (indexed_ == &cluster && node_type_.size() == cluster.nodes.size()) return;
    indexed_ = &cluster;
    types_ = cluster.gpu_types();
    node_type_.assign(cluster.nodes.size(), 0);
    for (size_t n = 0; n < cluster.nodes.size(); ++n)
      node_type_[n] = static_cast<int>(std::find(types_.begin(), types_.end(), cluster.nodes[n].gpu_type) - types_.begin());
    masks_.clear();
  }

  // Nodes whose type is in `types` (a bit per index into types_), cached.
  const std::vector<char>& mask(uint64_t types) {
    auto [it, fresh] = masks_.try_emplace(types);
    if (fresh) {
      it->second.resize(node_type_.size());
      for (size_t n = 0; n < node_type_.size(); ++n) it->second[n] = (types >> node_type_[n]) & 1;
    }
    return it->second;
  }

  std::vector<Placement> place(std::vector<int>& free, int gpus, const std::vector<char>* allowed) const {
    return consolidate_ ? place_fewest_nodes(free, gpus, allowed) : place_first_fit(free, gpus, allowed);
  }

  // A placement of `job` that it can run on (see the class comment); empty
  // (and `free` unchanged) if none fits.
  std::vector<Placement> place_runnable(const RoundContext& ctx, const Job& job, std::vector<int>& free) {
    auto runs = [&](std::vector<Placement>& ps) {
      if (ps.empty()) return false;
      if (allocation_throughput(*ctx.oracle, job, *ctx.cluster, ps) > 0) return true;
      for (const Placement& p : ps) free[p.node] += p.gpus;  // give back
      ps.clear();
      return false;
    };
    uint64_t runnable = 0;  // the types it can run on
    long runnable_free = 0;
    for (size_t t = 0; t < types_.size() && t < 64; ++t)
      if (ctx.oracle->throughput(job, types_[t], job.gpus, true) > 0 ||
          ctx.oracle->throughput(job, types_[t], job.gpus, false) > 0) {
        runnable |= uint64_t{1} << t;
        runnable_free += type_free_[t];
      }
    const bool every_type = types_.size() < 64 && runnable == (uint64_t{1} << types_.size()) - 1;
    if (every_type) {  // the placement rule as it stands, the others only if it cannot run there
      std::vector<Placement> ps = place(free, job.gpus, nullptr);
      if (ps.empty() || runs(ps)) return ps;  // empty: not enough free GPUs anywhere
    }
    if (runnable_free < job.gpus) return {};
    if (!every_type) {
      std::vector<Placement> ps = place(free, job.gpus, &mask(runnable));
      if (runs(ps)) return ps;
    }
    for (size_t t = 0; t < types_.size() && t < 64; ++t) {
      if (!((runnable >> t) & 1) || type_free_[t] < job.gpus) continue;
      std::vector<Placement> ps = place(free, job.gpus, &mask(uint64_t{1} << t));
      if (runs(ps)) return ps;
    }
    return {};
  }

  std::string name_;
  bool backfill_;
  bool consolidate_;
  const Cluster* indexed_ = nullptr;
  std::vector<std::string> types_;
  std::vector<int> node_type_;
  std::map<uint64_t, std::vector<char>> masks_;
  std::vector<long> type_free_;
};

}  // namespace

// fifo: first fit over nodes in list order, backfilling smaller jobs.
std::unique_ptr<Policy> make_fifo() { return std::make_unique<ArrivalOrder>("fifo", true, false); }

// yarn-cs: head-of-line blocking, consolidated placement (fewest nodes).
std::unique_ptr<Policy> make_yarn_cs() {
  return std::make_unique<ArrivalOrder>("yarn-cs", false, true);
}

}  // namespace cellsched
