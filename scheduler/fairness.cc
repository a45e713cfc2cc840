#include "scheduler/fairness.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/stats.h"
#include "scheduler/oracle.h"

namespace cellsched {

namespace {

struct TypeCapacity {
  std::string type;
  int gpus = 0;          // G_t
  int largest_node = 0;  // the most GPUs one node of the type holds
};

std::vector<TypeCapacity> capacities(const Cluster& cluster) {
  std::map<std::string, TypeCapacity> by_type;
  for (const Node& n : cluster.nodes) {
    TypeCapacity& c = by_type[n.gpu_type];
    c.type = n.gpu_type;
    c.gpus += n.gpus;
    c.largest_node = std::max(c.largest_node, n.gpus);
  }
  std::vector<TypeCapacity> out;
  for (auto& [type, c] : by_type) out.push_back(std::move(c));
  return out;
}

// The number of jobs in the system (arrived, not finished) integrated over
// time: one step +1 at each arrival, -1 at each completion.
class Presence {
 public:
  explicit Presence(const std::vector<JobResult>& results) {
    for (const JobResult& r : results) {
      events_.push_back({r.arrival_s, +1});
      if (r.finished()) events_.push_back({r.completion_s, -1});
    }
    std::sort(events_.begin(), events_.end());
    area_.reserve(events_.size());
    after_.reserve(events_.size());
    double area = 0;
    long present = 0;
    for (size_t i = 0; i < events_.size(); ++i) {
      if (i > 0) area += present * (events_[i].first - events_[i - 1].first);
      present += events_[i].second;
      area_.push_back(area);    // from the first event up to this one's time
      after_.push_back(present);  // present just after it
    }
  }
  // Average number present over [a, b], b > a.
  double average(double a, double b) const { return (at(b) - at(a)) / (b - a); }

 private:
  double at(double t) const {
    // The last event at or before t; the count after it holds until t.
    const auto it = std::upper_bound(events_.begin(), events_.end(), std::make_pair(t, 2));
    if (it == events_.begin()) return 0;
    const size_t i = static_cast<size_t>(it - events_.begin()) - 1;
    return area_[i] + static_cast<double>(after_[i]) * (t - events_[i].first);
  }
  std::vector<std::pair<double, int>> events_;
  std::vector<double> area_;
  std::vector<long> after_;
};

}  // namespace

std::vector<double> finish_time_fairness(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                                         const std::vector<JobResult>& results, double startup_s) {
  if (results.size() != trace.jobs.size())
    throw std::logic_error("finish_time_fairness: " + std::to_string(results.size()) + " results for " +
                           std::to_string(trace.jobs.size()) + " jobs");
  std::vector<double> rho(results.size(), -1);
  const std::vector<TypeCapacity> types = capacities(cluster);
  const Presence presence(results);
  std::vector<std::pair<double, double>> offers;  // (rate, time share) per type
  for (size_t i = 0; i < results.size(); ++i) {
    const JobResult& r = results[i];
    const Job& job = trace.jobs[i];
    if (!r.finished() || !(r.jct_s() > 0) || !(job.total_iterations > 0) || job.gpus <= 0) continue;
    const double n = std::max(1.0, presence.average(r.arrival_s, r.completion_s));
    offers.clear();
    for (const TypeCapacity& c : types) {
      if (c.gpus < job.gpus) continue;
      const double rate = oracle.throughput(job, c.type, job.gpus, c.largest_node >= job.gpus);
      if (rate > 0) offers.push_back({rate, c.gpus / (n * job.gpus)});
    }
    std::sort(offers.begin(), offers.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    double left = 1, rate = 0;
    for (const auto& [r_t, share] : offers) {
      const double use = std::min(left, share);
      rate += use * r_t;
      left -= use;
      if (left <= 0) break;
    }
    if (rate > 0) rho[i] = r.jct_s() / (std::max(0.0, startup_s) + job.total_iterations / rate);
  }
  return rho;
}

void add_fairness_metrics(const std::vector<double>& rho, RunMetrics& m) {
  std::vector<double> v;
  for (double x : rho)
    if (x >= 0) v.push_back(x);
  if (v.empty()) return;
  const auto unfair = std::count_if(v.begin(), v.end(), [](double x) { return x > 1; });
  m.extra["fairness_rho_mean"] = mean(v);
  m.extra["fairness_rho_median"] = percentile(v, 50);
  m.extra["fairness_rho_p95"] = percentile(v, 95);
  m.extra["fairness_rho_max"] = *std::max_element(v.begin(), v.end());
  m.extra["fairness_unfair_share"] = static_cast<double>(unfair) / static_cast<double>(v.size());
}

}  // namespace cellsched
