#include "scheduler/hostsched.h"

#include <algorithm>
#include <queue>
#include <stdexcept>

namespace cellsched {

EasyBackfill::EasyBackfill(int nodes) : owner_(static_cast<size_t>(std::max(nodes, 0)), -1) {}

void EasyBackfill::submit(const HostJob& job) {
  if (job.nodes < 1 || job.nodes > nodes())
    throw std::invalid_argument("host job " + std::to_string(job.id) + " asks for " + std::to_string(job.nodes) +
                                " nodes of " + std::to_string(nodes()));
  queue_.push_back(job);
}

void EasyBackfill::finish(int64_t job) {
  auto it = running_.find(job);
  if (it == running_.end()) return;
  for (int n : it->second.nodes) owner_[n] = -1;
  running_.erase(it);
}

int EasyBackfill::idle_nodes() const {
  return static_cast<int>(std::count(owner_.begin(), owner_.end(), -1));
}

HostStart EasyBackfill::start(const HostJob& job, double now, const std::vector<char>& avoid) {
  HostStart s;
  s.job = job.id;
  for (int pass = 0; pass < 2 && static_cast<int>(s.nodes.size()) < job.nodes; ++pass)
    for (int n = 0; n < nodes() && static_cast<int>(s.nodes.size()) < job.nodes; ++n) {
      if (owner_[n] != -1) continue;
      const bool avoided = n < static_cast<int>(avoid.size()) && avoid[n];
      if (avoided != (pass == 1)) continue;
      s.nodes.push_back(n);
    }
  for (int n : s.nodes) owner_[n] = job.id;
  running_[job.id] = Running{now + job.walltime_s, s.nodes};
  return s;
}

void EasyBackfill::shadow(double now, int free, double& shadow_t, int& extra) const {
  const int need = queue_.front().nodes;
  std::vector<std::pair<double, int>> ends;
  ends.reserve(running_.size());
  for (const auto& [id, r] : running_) ends.emplace_back(std::max(r.predicted_end, now), static_cast<int>(r.nodes.size()));
  std::sort(ends.begin(), ends.end());
  int avail = free;
  shadow_t = kNoClaim;
  extra = 0;
  for (const auto& [t, k] : ends) {
    avail += k;
    if (avail >= need) {
      shadow_t = t;
      extra = avail - need;
      return;
    }
  }
}

std::vector<HostStart> EasyBackfill::schedule(double now, const std::vector<char>& avoid) {
  std::vector<HostStart> started;
  int free = idle_nodes();
  while (!queue_.empty() && queue_.front().nodes <= free) {
    started.push_back(start(queue_.front(), now, avoid));
    free -= queue_.front().nodes;
    queue_.erase(queue_.begin());
  }
  if (queue_.empty() || free == 0) return started;
  double shadow_t = 0;
  int extra = 0;
  shadow(now, free, shadow_t, extra);
  for (size_t i = 1; i < queue_.size() && free > 0;) {
    const HostJob& q = queue_[i];
    const bool ends_before = now + q.walltime_s <= shadow_t;
    if (q.nodes <= free && (ends_before || q.nodes <= extra)) {
      started.push_back(start(q, now, avoid));
      free -= q.nodes;
      if (!ends_before) extra -= q.nodes;
      queue_.erase(queue_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  return started;
}

std::vector<double> EasyBackfill::predicted_claims(double now) const {
  std::vector<double> claim(owner_.size(), now);
  double shadow_t = kNoClaim;
  if (!queue_.empty()) {
    int extra = 0;
    shadow(now, idle_nodes(), shadow_t, extra);
  }
  for (size_t n = 0; n < owner_.size(); ++n)
    if (owner_[n] == -1) claim[n] = shadow_t;
  return claim;
}

std::vector<double> host_only_starts(const std::vector<HostJob>& jobs, int nodes) {
  EasyBackfill host(nodes);
  std::vector<double> starts(jobs.size(), -1);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index[jobs[i].id] = i;
  using End = std::pair<double, int64_t>;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  size_t next = 0;
  while (next < jobs.size() || !ends.empty()) {
    const double t = std::min(next < jobs.size() ? jobs[next].arrival_s : kNoClaim,
                              ends.empty() ? kNoClaim : ends.top().first);
    while (!ends.empty() && ends.top().first <= t) {
      host.finish(ends.top().second);
      ends.pop();
    }
    while (next < jobs.size() && jobs[next].arrival_s <= t) host.submit(jobs[next++]);
    for (const HostStart& s : host.schedule(t)) {
      const size_t i = index.at(s.job);
      starts[i] = t;
      ends.emplace(t + jobs[i].runtime_s, s.job);
    }
  }
  return starts;
}

}  // namespace cellsched
