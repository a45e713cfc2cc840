// Heterogeneity-agnostic, non-preemptive baselines: fifo and yarn-cs.
#include <numeric>

#include "scheduler/policies.h"
#include "scheduler/runnable_placer.h"

namespace cellsched {
namespace {

// Arrival order, gang, no preemption. Running jobs keep their GPUs; waiting
// jobs are considered in arrival order and each one that fits starts
// (`backfill`), or the pass stops at the first that does not (head-of-line
// blocking). Agnostic of speed, not of feasibility: where the first
// placement is one the job cannot run on, RunnablePlacer tries the types it
// can run on (scheduler/runnable_placer.h); only if none of those fits does
// the job count as not fitting. Before, a cluster listing T4 nodes first ran
// no job at all.
class ArrivalOrder : public Policy {
 public:
  ArrivalOrder(std::string name, bool backfill, bool consolidate)
      : name_(std::move(name)), backfill_(backfill), consolidate_(consolidate) {}
  std::string name() const override { return name_; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    std::vector<int> free = free_gpus(*ctx.cluster, out);
    placer_.begin(*ctx.cluster, free);
    long total_free = std::accumulate(free.begin(), free.end(), 0L);
    const auto& jobs = *ctx.jobs;
    for (size_t i = 0; i < jobs.size() && total_free > 0; ++i) {
      if (!out[i].empty()) continue;
      const Job& job = *jobs[i]->job;
      bool placed = false;
      if (job.gpus <= total_free) {
        std::vector<Placement> ps = placer_.place(ctx, job, free, consolidate_);
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
  std::string name_;
  bool backfill_;
  bool consolidate_;
  RunnablePlacer placer_;
};

}  // namespace

// fifo: first fit over nodes in list order, backfilling smaller jobs.
std::unique_ptr<Policy> make_fifo() { return std::make_unique<ArrivalOrder>("fifo", true, false); }

// yarn-cs: head-of-line blocking, consolidated placement (fewest nodes).
std::unique_ptr<Policy> make_yarn_cs() {
  return std::make_unique<ArrivalOrder>("yarn-cs", false, true);
}

}  // namespace cellsched
