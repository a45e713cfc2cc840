// hadar and hadare (DESIGN "Policies").
//
// Hadar: task-level heterogeneity. Each round every GPU type k has a price
// that grows exponentially with the GPUs already given out this round,
//   p_k(y) = (U_min / 2) * (2 U_max / U_min) ** (y / C_k),
// where U_max / U_min bound the per-GPU utility of the active jobs. A job's
// utility for an allocation a is w_j / (T(a) - now), T(a) = now + remaining /
// throughput(a). For each job and candidate bottleneck type b the cheapest
// placement of its W workers on types at least as fast (per worker) as b is
// found exactly: prices are convex, so taking the cheapest next GPU W times is
// optimal. Payoff = utility - sum of prices. Jobs are admitted in order of
// highest positive payoff with lazy re-evaluation (prices only rise within a
// round, so a stale payoff is an upper bound); payoff <= 0 waits. Workers of
// each type go on the fewest nodes of that type; a job whose per-type counts
// are unchanged keeps its exact placement.
//
// HadarE: after Hadar's allocation, every node left with idle GPUs runs a copy
// of the active job that gains most there (a copy uses up to W_j GPUs of that
// one node), until no GPU idles while some job could use it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

class Hadar : public Policy {
 public:
  explicit Hadar(bool fork) : fork_(fork) {}
  std::string name() const override { return fork_ ? "hadare" : "hadar"; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    const Cluster& cluster = *ctx.cluster;
    const auto& jobs = *ctx.jobs;
    index_types(cluster);
    const size_t K = types_.size();

    // Per-worker throughput of every job on every type (cached per job).
    prune_cache(jobs);
    std::vector<JobCache*> caches(jobs.size());
    std::vector<const std::vector<double>*> per_worker(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      caches[i] = &cache_of(ctx, *jobs[i]->job);
      per_worker[i] = &caches[i]->per_worker;
    }

    // Utility bounds: per-GPU utility w * v / remaining over jobs and types.
    double u_max = 0, u_min = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < jobs.size(); ++i) {
      for (size_t k = 0; k < K; ++k) {
        const double v = (*per_worker[i])[k];
        if (v <= 0) continue;
        const double u = jobs[i]->job->weight * v / jobs[i]->remaining;
        u_max = std::max(u_max, u);
        u_min = std::min(u_min, u);
      }
    }

    std::vector<int> capacity(K, 0), free_k(K, 0);
    for (const Node& n : cluster.nodes) capacity[type_of_node_[&n - cluster.nodes.data()]] += n.gpus;
    free_k = capacity;
    std::vector<int> given(K, 0);  // y_k: GPUs given out this round
    auto price = [&](size_t k, int y) { return hadar_price(u_min, u_max, capacity[k], y); };

    // Best (payoff, per-type counts) of job i under the current prices.
    std::vector<int> counts(K), best_counts(K);
    auto evaluate = [&](size_t i, std::vector<int>* chosen) {
      const JobState& s = *jobs[i];
      const int w = s.job->gpus;
      const std::vector<double>& v = *per_worker[i];
      double best = kNever;
      for (size_t b = 0; b < K; ++b) {
        if (v[b] <= 0) continue;
        std::fill(counts.begin(), counts.end(), 0);
        double cost = 0;
        int placed = 0;
        for (; placed < w; ++placed) {
          int pick = -1;
          double pick_price = 0;
          for (size_t k = 0; k < K; ++k) {
            if (v[k] < v[b] || counts[k] >= free_k[k]) continue;
            const double p = price(k, given[k] + counts[k]);
            if (pick < 0 || p < pick_price) pick = static_cast<int>(k), pick_price = p;
          }
          if (pick < 0) break;
          ++counts[pick];
          cost += pick_price;
        }
        if (placed < w) continue;
        const double utility = s.job->weight * w * v[b] / s.remaining;
        if (utility - cost > best) {
          best = utility - cost;
          if (chosen) *chosen = counts;
        }
      }
      return best;
    };

    using Entry = std::pair<double, size_t>;  // (payoff, job index); ties: lower index first
    auto cmp = [](const Entry& a, const Entry& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    };
    std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)> heap(cmp);
    for (size_t i = 0; i < jobs.size(); ++i) {
      out[i] = Allocation{};
      const double p = evaluate(i, nullptr);
      if (p > 0) heap.push({p, i});
    }
    std::vector<std::vector<int>> admitted(jobs.size());
    while (!heap.empty()) {
      const auto [stale, i] = heap.top();
      heap.pop();
      const double p = evaluate(i, &best_counts);
      if (p <= 0) continue;
      if (!heap.empty() && p < heap.top().first) {
        heap.push({p, i});
        continue;
      }
      admitted[i] = best_counts;
      for (size_t k = 0; k < K; ++k) {
        given[k] += best_counts[k];
        free_k[k] -= best_counts[k];
      }
    }

    // Node placement: unchanged jobs keep their GPUs, the rest fill in.
    std::vector<int> free(cluster.nodes.size());
    for (size_t n = 0; n < free.size(); ++n) free[n] = cluster.nodes[n].gpus;
    std::vector<char> placed(jobs.size(), 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (admitted[i].empty() || jobs[i]->current.workers.empty()) continue;
      if (type_counts(jobs[i]->current.workers) != admitted[i]) continue;
      out[i].workers = jobs[i]->current.workers;
      for (const Placement& p : out[i].workers) free[p.node] -= p.gpus;
      placed[i] = 1;
    }
    std::vector<char> allowed(cluster.nodes.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (admitted[i].empty() || placed[i]) continue;
      bool ok = true;
      for (size_t k = 0; k < K && ok; ++k) {
        if (admitted[i][k] == 0) continue;
        for (size_t n = 0; n < allowed.size(); ++n) allowed[n] = type_of_node_[n] == k;
        auto ps = place_fewest_nodes(free, admitted[i][k], &allowed);
        ok = !ps.empty();
        out[i].workers.insert(out[i].workers.end(), ps.begin(), ps.end());
      }
      if (!ok) {  // cannot happen while per-type counts fit; never leave half a gang
        for (const Placement& p : out[i].workers) free[p.node] += p.gpus;
        out[i].workers.clear();
      }
    }
    if (fork_) add_copies(ctx, out, caches, free);
  }

 private:
  struct JobCache {
    std::vector<double> per_worker;          // at the job's own scale, per type
    std::vector<std::vector<double>> copy;   // [type][c]: copy throughput with c GPUs (lazy, <0 unknown)
    const ThroughputOracle* oracle = nullptr;
  };

  void index_types(const Cluster& cluster) {
    if (cluster_ == &cluster && type_of_node_.size() == cluster.nodes.size()) return;
    cluster_ = &cluster;
    types_ = cluster.gpu_types();
    type_of_node_.resize(cluster.nodes.size());
    for (size_t n = 0; n < cluster.nodes.size(); ++n)
      type_of_node_[n] = static_cast<size_t>(
          std::find(types_.begin(), types_.end(), cluster.nodes[n].gpu_type) - types_.begin());
    cache_.clear();
  }

  JobCache& cache_of(const RoundContext& ctx, const Job& job) {
    JobCache& c = cache_[job.id];
    if (c.oracle != ctx.oracle || c.per_worker.size() != types_.size()) {
      c.oracle = ctx.oracle;
      c.per_worker.assign(types_.size(), 0);
      for (size_t k = 0; k < types_.size(); ++k)
        c.per_worker[k] = ctx.oracle->throughput(job, types_[k], job.gpus, true) / job.gpus;
      c.copy.assign(types_.size(), std::vector<double>(job.gpus + 1, -1));
    }
    return c;
  }

  void prune_cache(const std::vector<JobState*>& jobs) {
    if (cache_.size() <= 2 * jobs.size() + 64) return;
    std::unordered_map<int64_t, JobCache> kept;
    for (const JobState* s : jobs) {
      auto it = cache_.find(s->job->id);
      if (it != cache_.end()) kept.emplace(it->first, std::move(it->second));
    }
    cache_.swap(kept);
  }

  std::vector<int> type_counts(const std::vector<Placement>& ps) const {
    std::vector<int> c(types_.size(), 0);
    for (const Placement& p : ps) c[type_of_node_[p.node]] += p.gpus;
    return c;
  }

  // HadarE: fill every idle GPU with copies. For a node with g idle GPUs, the
  // job that gains most is the one whose copy (min(W, g) GPUs there) adds the
  // most weighted iterations it can still use this round, relative to its
  // remaining work; ties go to keeping last round's copy (no restart), then to
  // the earlier job.
  void add_copies(const RoundContext& ctx, std::vector<Allocation>& out,
                  const std::vector<JobCache*>& caches, std::vector<int>& free) {
    const auto& jobs = *ctx.jobs;
    const Cluster& cluster = *ctx.cluster;
    const double full = ctx.round_s;
    const double fresh = std::max(0.0, ctx.round_s - ctx.restart_s);
    // Rate each job already has this round (main gang).
    std::vector<double> rate(jobs.size(), 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (out[i].workers.empty()) continue;
      rate[i] = allocation_throughput(*ctx.oracle, *jobs[i]->job, cluster, out[i].workers);
    }
    // Last round's copies per node: (job index, GPUs).
    std::vector<std::vector<std::pair<size_t, int>>> previous(cluster.nodes.size());
    for (size_t i = 0; i < jobs.size(); ++i)
      for (const auto& copy : jobs[i]->current.copies)
        if (copy.size() == 1) previous[copy[0].node].push_back({i, copy[0].gpus});
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      const size_t k = type_of_node_[n];
      while (free[n] > 0) {
        int best = -1;
        double best_gain = 0, best_raw = 0;
        bool best_kept = false;
        int best_c = 0;
        for (size_t i = 0; i < jobs.size(); ++i) {
          if (caches[i]->per_worker[k] <= 0) continue;
          const JobState& s = *jobs[i];
          const int c = std::min(s.job->gpus, free[n]);
          const double r = copy_rate(ctx, *s.job, *caches[i], k, c);
          if (r <= 0) continue;
          const bool kept = std::find(previous[n].begin(), previous[n].end(),
                                      std::pair<size_t, int>{i, c}) != previous[n].end();
          const double tau = kept ? full : fresh;
          const double useful = std::min(r * tau, std::max(0.0, s.remaining - rate[i] * full));
          const double gain = s.job->weight * useful / s.remaining;
          const double raw = s.job->weight * r / s.remaining;
          const bool better =
              best < 0 || gain > best_gain ||
              (gain == best_gain &&
               ((kept && !best_kept) || (kept == best_kept && raw > best_raw)));
          if (better) best = static_cast<int>(i), best_gain = gain, best_raw = raw,
                      best_kept = kept, best_c = c;
        }
        if (best < 0) break;  // no active job can use this node
        out[best].copies.push_back({{static_cast<int>(n), best_c}});
        rate[best] += copy_rate(ctx, *jobs[best]->job, *caches[best], k, best_c);
        free[n] -= best_c;
      }
    }
  }

  double copy_rate(const RoundContext& ctx, const Job& job, JobCache& jc, size_t k, int c) {
    double& r = jc.copy[k][c];
    if (r < 0) r = ctx.oracle->throughput(job, types_[k], c, true);
    return r;
  }

  bool fork_;
  const Cluster* cluster_ = nullptr;
  std::vector<std::string> types_;
  std::vector<size_t> type_of_node_;
  std::unordered_map<int64_t, JobCache> cache_;
};

}  // namespace

double hadar_price(double u_min, double u_max, int capacity, int given) {
  if (!(u_max > 0) || !(u_min > 0)) return 0;
  return u_min / 2 * std::pow(2 * u_max / u_min, static_cast<double>(given) / capacity);
}

std::unique_ptr<Policy> make_hadar() { return std::make_unique<Hadar>(false); }
std::unique_ptr<Policy> make_hadare() { return std::make_unique<Hadar>(true); }

}  // namespace cellsched
