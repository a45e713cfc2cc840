#include "scheduler/replay.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace cellsched {
namespace {

class Replay : public Policy {
 public:
  Replay(Schedule s, const Cluster& cluster, int64_t id_offset)
      : schedule_(std::move(s)), offset_(id_offset) {
    for (size_t n = 0; n < cluster.nodes.size(); ++n) node_[cluster.nodes[n].name] = static_cast<int>(n);
    for (const ScheduleEntry& e : schedule_.entries)
      if (!node_.count(e.node))
        throw InputError("schedule: node '" + e.node + "' (job " + std::to_string(e.job_id) +
                         ") is not in cluster '" + cluster.name + "'");
  }
  std::string name() const override { return "replay:" + schedule_.policy; }
  // The schedule already holds the gang sizes it chose (crius scales jobs).
  bool elastic() const override { return true; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    if (schedule_.rounds.empty()) return;
    const size_t k = std::min(round_++, schedule_.rounds.size() - 1);
    const double t = schedule_.rounds[k];
    const auto& jobs = *ctx.jobs;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const int64_t id = jobs[i]->job->id - offset_;
      // The job's own gang may span nodes (one entry per node); a forked copy
      // lives on one node (DESIGN), so each copy entry is a gang of its own.
      Allocation a;
      for (const ScheduleEntry& e : schedule_.entries) {
        if (e.job_id != id || !(e.start_s <= t && t < e.end_s)) continue;
        const Placement p{node_.at(e.node), static_cast<int>(e.gpu_indices.size())};
        if (e.copy == 0) a.workers.push_back(p);
        else a.copies.push_back({p});
      }
      out[i] = std::move(a);
    }
  }

 private:
  Schedule schedule_;
  int64_t offset_ = 0;
  std::map<std::string, int> node_;
  size_t round_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_replay(Schedule schedule, const Cluster& cluster,
                                    int64_t id_offset) {
  check_schedule(schedule, cluster);  // file:line errors before anything runs
  return std::make_unique<Replay>(std::move(schedule), cluster, id_offset);
}

}  // namespace cellsched
