// Heterogeneity-agnostic, non-preemptive baselines: fifo and yarn-cs.
#include <algorithm>
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
    std::vector<int> free = free_gpus(*ctx.cluster, out);
    long total_free = std::accumulate(free.begin(), free.end(), 0L);
    const auto& jobs = *ctx.jobs;
    for (size_t i = 0; i < jobs.size() && total_free > 0; ++i) {
      if (!out[i].empty()) continue;
      const Job& job = *jobs[i]->job;
      bool placed = false;
      if (job.gpus <= total_free) {
        std::vector<Placement> ps = place_runnable(ctx, job, free);
        if (!ps.empty()) {
          total_free -= job.gpus;
          out[i].workers = std::move(ps);
          placed = true;
        }
      }
      if (!placed && !backfill_) break;
    }
  }

 private:
  std::vector<Placement> place(std::vector<int>& free, int gpus, const std::vector<char>* allowed) const {
    return consolidate_ ? place_fewest_nodes(free, gpus, allowed) : place_first_fit(free, gpus, allowed);
  }

  // A placement of `job` that it can run on (see the class comment); empty
  // (and `free` unchanged) if none fits.
  std::vector<Placement> place_runnable(const RoundContext& ctx, const Job& job, std::vector<int>& free) const {
    const Cluster& cluster = *ctx.cluster;
    auto runs = [&](std::vector<Placement>& ps) {
      if (ps.empty()) return false;
      if (allocation_throughput(*ctx.oracle, job, cluster, ps) > 0) return true;
      for (const Placement& p : ps) free[p.node] += p.gpus;  // give back
      ps.clear();
      return false;
    };
    std::vector<Placement> ps = place(free, job.gpus, nullptr);
    if (ps.empty() || runs(ps)) return ps;  // empty: not enough free GPUs anywhere
    std::vector<std::string> types;  // the types it can run on, in node-list order
    for (const std::string& t : cluster.gpu_types())
      if (ctx.oracle->throughput(job, t, job.gpus, true) > 0 || ctx.oracle->throughput(job, t, job.gpus, false) > 0)
        types.push_back(t);
    std::vector<char> allowed(cluster.nodes.size());
    auto allow = [&](auto&& pred) {
      for (size_t n = 0; n < allowed.size(); ++n) allowed[n] = pred(cluster.nodes[n].gpu_type);
    };
    allow([&](const std::string& t) { return std::find(types.begin(), types.end(), t) != types.end(); });
    ps = place(free, job.gpus, &allowed);
    if (runs(ps)) return ps;
    for (const std::string& type : types) {
      allow([&](const std::string& t) { return t == type; });
      ps = place(free, job.gpus, &allowed);
      if (runs(ps)) return ps;
    }
    return {};
  }

  std::string name_;
  bool backfill_;
  bool consolidate_;
};

}  // namespace

// fifo: first fit over nodes in list order, backfilling smaller jobs.
std::unique_ptr<Policy> make_fifo() { return std::make_unique<ArrivalOrder>("fifo", true, false); }

// yarn-cs: head-of-line blocking, consolidated placement (fewest nodes).
std::unique_ptr<Policy> make_yarn_cs() {
  return std::make_unique<ArrivalOrder>("yarn-cs", false, true);
}

}  // namespace cellsched
