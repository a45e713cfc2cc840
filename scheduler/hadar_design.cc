// hadar-design: Hadar as DESIGN first described it, kept so that the
// difference to `hadar` (scheduler/hadar.cc) stays measurable
// (docs/hadar.md).
//
// Each round every GPU type k has a price that grows exponentially with the
// GPUs already given out this round,
//   p_k(y) = (U_min / 2) * (2 U_max / U_min) ** (y / C_k),
// where U_max / U_min bound the per-GPU utility of the active jobs (recomputed
// every round). A job's utility for an allocation a is w_j / (T(a) - now),
// T(a) = now + remaining / throughput(a), with the consolidated throughput.
// For each job and candidate bottleneck type b the cheapest placement of its W
// workers on types at least as fast (per worker) as b is found exactly (convex
// prices: taking the cheapest next GPU W times is optimal). Payoff = utility
// - sum of prices. Jobs are admitted in order of highest positive payoff with
// lazy re-evaluation; payoff <= 0 waits, even while GPUs idle. Workers of
// each type go on the fewest nodes of that type; a job whose per-type counts
// are unchanged keeps its exact placement.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>

#include "scheduler/hadar_common.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

class HadarDesign : public Policy {
 public:
  std::string name() const override { return "hadar-design"; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    const Cluster& cluster = *ctx.cluster;
    const auto& jobs = *ctx.jobs;
    if (idx_.index(cluster)) {
      cache_.clear();
      classes_.clear();
    }
    // Per-worker throughput of every job on every type (cached per job).
    cache_.prune(jobs);
    caches_.assign(jobs.size(), nullptr);
    for (size_t i = 0; i < jobs.size(); ++i) caches_[i] = &cache_of(ctx, *jobs[i]->job);
    start_round(cluster, jobs);
    const std::vector<std::vector<int>> admitted = admit(jobs, out);
    place(cluster, jobs, admitted, out);
  }

 private:
  struct JobCache {
    std::vector<double> per_worker;          // at the job's own scale, per type
    const ThroughputOracle* oracle = nullptr;
    size_t cls = 0;                          // its (per_worker, gang size) class
  };
  // A class's cheapest placement per bottleneck type b under one round state.
  struct ClassCost {
    unsigned version = ~0u;
    std::vector<double> cost;  // [b]
    std::vector<char> fits;    // [b]: all W workers placed
    std::vector<int> counts;   // [b * K + k]
  };

  // The round's capacity, what is given out so far, and the prices.
  void start_round(const Cluster& cluster, const std::vector<JobState*>& jobs) {
    const size_t K = idx_.types.size();
    // Utility bounds: per-GPU utility w * v / remaining over jobs and types.
    u_max_ = 0;
    u_min_ = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < jobs.size(); ++i) {
      for (size_t k = 0; k < K; ++k) {
        const double v = caches_[i]->per_worker[k];
        if (v <= 0) continue;
        const double u = jobs[i]->job->weight * v / jobs[i]->remaining;
        u_max_ = std::max(u_max_, u);
        u_min_ = std::min(u_min_, u);
      }
    }
    capacity_.assign(K, 0);
    for (const Node& n : cluster.nodes) capacity_[idx_.type_of_node[&n - cluster.nodes.data()]] += n.gpus;
    free_k_ = capacity_;
    total_free_ = 0;  // sum of free_k_
    for (int f : free_k_) total_free_ += f;
    given_.assign(K, 0);  // y_k: GPUs given out this round
    // hadar_price(u_min, u_max, C_k, y) = u_min/2 * (2 u_max/u_min)^(y/C_k), as
    // a * exp(b_k y) with the logarithm taken once per round: pow() per call
    // was 60 % of this policy's time on the Philly trace.
    priced_ = u_max_ > 0 && u_min_ > 0;
    slope_.assign(K, 0.0);
    for (size_t k = 0; k < K; ++k)
      if (priced_ && capacity_[k] > 0) slope_[k] = std::log(2 * u_max_ / u_min_) / capacity_[k];
    memo_.reset(capacity_);  // each exp() once per round
    // The cheapest placement per bottleneck type depends only on the job's
    // per-worker throughputs and gang size (its class) and on what is given
    // out so far, so it is worked out once per class until the next commit
    // (`version_`): a round's thousands of first evaluations share a few dozen.
    version_ = 0;
    if (round_costs_.size() < classes_.size()) round_costs_.resize(classes_.size());
    for (ClassCost& c : round_costs_) c.version = ~0u;
  }

  double price(size_t k, int y) {
    return priced_ ? memo_.get(k, y, [&](int n) { return u_min_ / 2 * std::exp(slope_[k] * n); }) : 0.0;
  }

  // The cheapest placement of a gang of w on types at least as fast per
  // worker as each bottleneck type b: the cheapest next GPU, w times.
  const ClassCost& class_cost(size_t i, int w) {
    ClassCost& m = round_costs_[caches_[i]->cls];
    if (m.version == version_) return m;
    const size_t K = idx_.types.size();
    m.version = version_;
    m.cost.assign(K, 0.0);
    m.fits.assign(K, 0);
    m.counts.assign(K * K, 0);
    const std::vector<double>& v = caches_[i]->per_worker;
    std::vector<int>& counts = scratch_;
    counts.resize(K);
    for (size_t b = 0; b < K; ++b) {
      if (v[b] <= 0) continue;
      std::fill(counts.begin(), counts.end(), 0);
      double cost = 0;
      int placed = 0;
      for (; placed < w; ++placed) {
        int pick = -1;
        double pick_price = 0;
        for (size_t k = 0; k < K; ++k) {
          if (v[k] < v[b] || counts[k] >= free_k_[k]) continue;
          const double p = price(k, given_[k] + counts[k]);
          if (pick < 0 || p < pick_price) pick = static_cast<int>(k), pick_price = p;
        }
        if (pick < 0) break;
        ++counts[pick];
        cost += pick_price;
      }
      if (placed < w) continue;
      m.fits[b] = 1;
      m.cost[b] = cost;
      std::copy(counts.begin(), counts.end(), m.counts.begin() + static_cast<std::ptrdiff_t>(b * K));
    }
    return m;
  }

  // Best (payoff, per-type counts) of job i under the current prices.
  double evaluate(const JobState& s, size_t i, std::vector<int>* chosen) {
    const int w = s.job->gpus;
    if (total_free_ < w) return kNever;  // no type mix could place it
    const size_t K = idx_.types.size();
    const std::vector<double>& v = caches_[i]->per_worker;
    const ClassCost& m = class_cost(i, w);
    double best = kNever;
    for (size_t b = 0; b < K; ++b) {
      if (!m.fits[b]) continue;
      const double utility = s.job->weight * w * v[b] / s.remaining;
      if (utility - m.cost[b] > best) {
        best = utility - m.cost[b];
        if (chosen) {
          const auto from = m.counts.begin() + static_cast<std::ptrdiff_t>(b * K);
          chosen->assign(from, from + static_cast<std::ptrdiff_t>(K));
        }
      }
    }
    return best;
  }

  // Highest positive payoff first, re-evaluated lazily; per-type counts of
  // each admitted job (empty: waits).
  std::vector<std::vector<int>> admit(const std::vector<JobState*>& jobs, std::vector<Allocation>& out) {
    const size_t K = idx_.types.size();
    using Entry = std::pair<double, size_t>;  // (payoff, job index); ties: lower index first
    auto cmp = [](const Entry& a, const Entry& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    };
    std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)> heap(cmp);
    for (size_t i = 0; i < jobs.size(); ++i) {
      out[i] = Allocation{};
      const double p = evaluate(*jobs[i], i, nullptr);
      if (p > 0) heap.push({p, i});
    }
    std::vector<std::vector<int>> admitted(jobs.size());
    std::vector<int> best_counts(K);
    while (!heap.empty() && total_free_ > 0) {  // with no GPU free, nothing else fits
      const auto [stale, i] = heap.top();
      heap.pop();
      const double p = evaluate(*jobs[i], i, &best_counts);
      if (p <= 0) continue;
      if (!heap.empty() && p < heap.top().first) {
        heap.push({p, i});
        continue;
      }
      admitted[i] = best_counts;
      ++version_;
      for (size_t k = 0; k < K; ++k) {
        given_[k] += best_counts[k];
        free_k_[k] -= best_counts[k];
        total_free_ -= best_counts[k];
      }
    }
    return admitted;
  }

  // Node placement: unchanged jobs keep their GPUs, the rest fill in.
  void place(const Cluster& cluster, const std::vector<JobState*>& jobs,
             const std::vector<std::vector<int>>& admitted, std::vector<Allocation>& out) {
    const size_t K = idx_.types.size();
    std::vector<int> free(cluster.nodes.size());
    for (size_t n = 0; n < free.size(); ++n) free[n] = cluster.nodes[n].gpus;
    std::vector<char> placed(jobs.size(), 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (admitted[i].empty() || jobs[i]->current.workers.empty()) continue;
      if (idx_.counts(jobs[i]->current.workers) != admitted[i]) continue;
      out[i].workers = jobs[i]->current.workers;
      for (const Placement& p : out[i].workers) free[p.node] -= p.gpus;
      placed[i] = 1;
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (admitted[i].empty() || placed[i]) continue;
      bool ok = true;
      for (size_t k = 0; k < K && ok; ++k) {
        if (admitted[i][k] == 0) continue;
        auto ps = place_fewest_nodes(free, admitted[i][k], idx_.nodes_of_type[k]);
        ok = !ps.empty();
        out[i].workers.insert(out[i].workers.end(), ps.begin(), ps.end());
      }
      if (!ok) {  // cannot happen while per-type counts fit; never leave half a gang
        for (const Placement& p : out[i].workers) free[p.node] += p.gpus;
        out[i].workers.clear();
      }
    }
  }

  JobCache& cache_of(const RoundContext& ctx, const Job& job) {
    JobCache& c = cache_[job.id];
    if (c.oracle != ctx.oracle || c.per_worker.size() != idx_.types.size()) {
      c.oracle = ctx.oracle;
      c.per_worker.assign(idx_.types.size(), 0);
      for (size_t k = 0; k < idx_.types.size(); ++k)
        c.per_worker[k] = ctx.oracle->throughput(job, idx_.types[k], job.gpus, true) / job.gpus;
      c.cls = classes_.emplace(std::make_pair(c.per_worker, job.gpus), classes_.size()).first->second;
    }
    return c;
  }

  hadar_detail::TypeIndex idx_;
  hadar_detail::JobCacheMap<JobCache> cache_;
  std::map<std::pair<std::vector<double>, int>, size_t> classes_;  // -> class id
  std::vector<ClassCost> round_costs_;                             // by class id
  // This round's state (start_round).
  std::vector<JobCache*> caches_;  // by job index
  double u_min_ = 0, u_max_ = 0;
  bool priced_ = false;
  std::vector<int> capacity_, free_k_, given_, scratch_;
  int total_free_ = 0;
  std::vector<double> slope_;
  hadar_detail::RoundMemo memo_;
  unsigned version_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_hadar_design() { return std::make_unique<HadarDesign>(); }

}  // namespace cellsched
