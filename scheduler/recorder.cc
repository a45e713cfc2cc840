#include "scheduler/recorder.h"

#include <algorithm>
#include <unordered_map>

#include "scheduler/oracle.h"

namespace cellsched {

ScheduleRecorder::ScheduleRecorder(const Cluster& cluster, const ThroughputOracle& oracle,
                                   Schedule header)
    : cluster_(cluster), oracle_(oracle), schedule_(std::move(header)) {
  for (const Node& n : cluster.nodes) used_.emplace_back(static_cast<size_t>(n.gpus), 0);
}

void ScheduleRecorder::close(size_t entry, double t) {
  ScheduleEntry& e = schedule_.entries[entry];
  e.end_s = t;
  const auto node = static_cast<size_t>(
      std::find_if(cluster_.nodes.begin(), cluster_.nodes.end(),
                   [&](const Node& n) { return n.name == e.node; }) -
      cluster_.nodes.begin());
  for (int g : e.gpu_indices) used_[node][static_cast<size_t>(g)] = 0;
}

void ScheduleRecorder::record(double t, const std::vector<JobState*>& jobs,
                              const std::vector<Allocation>& out) {
  schedule_.rounds.push_back(t);
  // What this round needs, per key, with the job and its copy number.
  struct Need {
    const Job* job;
    int copy;
    int gang_gpus;
  };
  std::map<Key, std::vector<Need>> need;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = *jobs[i]->job;
    auto add = [&](const std::vector<Placement>& gang, int copy) {
      int total = 0;
      for (const Placement& p : gang) total += p.gpus;
      for (const Placement& p : gang)
        need[{job.id, copy > 0, p.node, p.gpus}].push_back({&job, copy, total});
    };
    add(out[i].workers, 0);
    for (size_t c = 0; c < out[i].copies.size(); ++c) add(out[i].copies[c], static_cast<int>(c) + 1);
  }
  // Close what is no longer needed (or needed fewer times).
  for (auto it = open_.begin(); it != open_.end();) {
    auto n = need.find(it->first);
    const size_t keep = n == need.end() ? 0 : std::min(n->second.size(), it->second.size());
    while (it->second.size() > keep) {
      close(it->second.back(), t);
      it->second.pop_back();
    }
    it = it->second.empty() ? open_.erase(it) : std::next(it);
  }
  // Open what is new, on the lowest free GPU indices of its node.
  for (const auto& [key, list] : need) {
    std::vector<size_t>& open = open_[key];
    for (size_t k = open.size(); k < list.size(); ++k) {
      const int node = std::get<2>(key), gpus = std::get<3>(key);
      ScheduleEntry e;
      e.job_id = std::get<0>(key);
      e.copy = list[k].copy;
      e.node = cluster_.nodes[static_cast<size_t>(node)].name;
      e.gpu_type = cluster_.nodes[static_cast<size_t>(node)].gpu_type;
      auto& u = used_[static_cast<size_t>(node)];
      for (size_t g = 0; g < u.size() && static_cast<int>(e.gpu_indices.size()) < gpus; ++g) {
        if (!u[g]) {
          u[g] = 1;
          e.gpu_indices.push_back(static_cast<int>(g));
        }
      }
      e.start_s = t;
      e.end_s = t;
      e.plan = oracle_.plan(*list[k].job, e.gpu_type, list[k].gang_gpus);
      open.push_back(schedule_.entries.size());
      schedule_.entries.push_back(std::move(e));
    }
  }
}

Schedule ScheduleRecorder::finish(const RunRecord& run) {
  std::unordered_map<int64_t, double> completion;
  for (const JobResult& r : run.jobs) completion[r.job_id] = r.completion_s;
  const double last = schedule_.rounds.empty() ? 0 : schedule_.rounds.back() + schedule_.round_s;
  for (auto& [key, list] : open_)
    for (size_t e : list) close(e, last);
  open_.clear();
  for (ScheduleEntry& e : schedule_.entries) {
    auto it = completion.find(e.job_id);
    if (it != completion.end() && it->second >= 0) e.end_s = std::min(e.end_s, it->second);
  }
  std::stable_sort(schedule_.entries.begin(), schedule_.entries.end(),
                   [](const ScheduleEntry& a, const ScheduleEntry& b) {
                     return std::tie(a.start_s, a.job_id, a.copy, a.node) <
                            std::tie(b.start_s, b.job_id, b.copy, b.node);
                   });
  return schedule_;
}

}  // namespace cellsched
