// Gavel (Narayanan et al., OSDI 2020): the round mechanism that realises the
// allocation LPs' time fractions (the LPs: scheduler/gavel_lp.cc).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "core/gpu.h"
#include "scheduler/gavel.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

// The round mechanism (Gavel section 5). Each job tracks the seconds it has
// received on each GPU type since it became active; each round (job, type)
// pairs are served in descending priority x[j][k] / (received_k / elapsed)
// (infinite when it has received nothing there yet but x > 0), each job at
// most once, with W_j GPUs of one type on the fewest nodes. Jobs whose LP
// share is 0 on a type fill what is left afterwards (work conservation).
class Gavel final : public Policy {
 public:
  explicit Gavel(bool makespan) : makespan_(makespan) {}
  std::string name() const override { return makespan_ ? "gavel-makespan" : "gavel"; }

  static constexpr double kDustShare = 1e-9;

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    const Cluster& cluster = *ctx.cluster;
    const auto& jobs = *ctx.jobs;
    if (ctx.now < last_now_ || cluster_ != &cluster) reset(cluster);
    last_now_ = ctx.now;

    follow_jobs(ctx);
    const std::vector<Pair>& pairs = rank_pairs(ctx);
    const std::vector<Track*>& tracks = tracks_;

    // 1. Which jobs run on which type, counting GPUs per type.
    std::vector<int> type_free = capacity_;
    std::vector<int> chosen(jobs.size(), -1);
    for (const Pair& p : pairs) {
      if (p.priority <= 0) break;
      const int w = jobs[p.job]->job->gpus;
      if (chosen[p.job] >= 0 || type_free[p.type] < w) continue;
      chosen[p.job] = p.type;
      type_free[p.type] -= w;
    }

    // 2. Place them: first the jobs that stay where they are, then the rest
    // on the fewest nodes of their type, in priority order.
    std::vector<int> free(cluster.nodes.size());
    for (size_t n = 0; n < free.size(); ++n) free[n] = cluster.nodes[n].gpus;
    std::vector<Allocation>& prev = prev_;
    prev.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      prev[i] = std::move(out[i]);
      out[i] = Allocation{};
    }
    std::vector<char> placed(jobs.size(), 0);
    type_free = capacity_;
    auto keep = [&](size_t i, int k) {
      Allocation& a = prev[i];
      if (a.workers.empty() || !a.copies.empty()) return false;
      for (const Placement& p : a.workers)
        if (node_type_[p.node] != k || free[p.node] < p.gpus) return false;
      for (const Placement& p : a.workers) free[p.node] -= p.gpus;
      out[i].workers = std::move(a.workers);  // at most once per job: it is then placed
      return true;
    };
    auto take = [&](size_t i, int k) {
      const int w = jobs[i]->job->gpus;
      if (placed[i] || type_free[k] < w) return;
      if (!keep(i, k)) {
        std::vector<Placement> ps = place_fewest_nodes(free, w, type_nodes_[k]);
        if (ps.empty()) return;
        out[i].workers = std::move(ps);
      }
      placed[i] = 1;
      type_free[k] -= w;
      tracks[i]->received[k] += ctx.round_s;
    };
    for (size_t i = 0; i < jobs.size(); ++i)
      if (chosen[i] >= 0 && keep(i, chosen[i])) {
        placed[i] = 1;
        type_free[chosen[i]] -= jobs[i]->job->gpus;
        tracks[i]->received[chosen[i]] += ctx.round_s;
      }
    for (const Pair& p : pairs)
      if (chosen[p.job] == p.type) take(p.job, p.type);
    // 3. Work conservation: what is still free goes to the remaining pairs,
    // in the same order (zero-share pairs last).
    for (const Pair& p : pairs) take(p.job, p.type);
  }

 private:
  struct Track {
    double first_seen = 0;
    std::vector<double> received;    // seconds received per type
    std::vector<double> throughput;  // X[j][k] (0 where it cannot run)
    std::vector<double> x;           // LP share per type
  };

  struct Pair {
    int job;
    int type;
    double priority;
    double x;
  };

  // Tracks new jobs, forgets departed ones and re-solves the LP when the set
  // changed; tracks_[i] is then jobs[i]'s track.
  void follow_jobs(const RoundContext& ctx) {
    const auto& jobs = *ctx.jobs;
    const size_t K = types_.size();
    // The engine keeps active jobs in arrival order, so a round with the same
    // jobs as the last (most rounds) is told by comparing ids in order, and
    // keeps its Track pointers (a map's elements do not move).
    ids_.clear();
    for (const JobState* s : jobs) ids_.push_back(s->job->id);
    if (ids_ != last_ids_) {
      std::vector<int64_t> sorted_ids = ids_;
      std::sort(sorted_ids.begin(), sorted_ids.end());
      if (sorted_ids != lp_jobs_) {
        std::erase_if(track_, [&](const auto& entry) {
          return !std::binary_search(sorted_ids.begin(), sorted_ids.end(), entry.first);
        });
        for (const JobState* s : jobs) {
          if (track_.count(s->job->id)) continue;
          Track t;
          t.first_seen = ctx.now;
          t.received.assign(K, 0.0);
          t.throughput.assign(K, 0.0);
          // On one node where a node of the type can hold the gang, spread
          // where none can: an 8-GPU job on 4-GPU V100 nodes was valued at
          // the 8-GPU server's rate (LM, batch 20: 497 it/s against the 58.9
          // it can get) and sent there rather than to faster-spread P100s.
          for (size_t k = 0; k < K; ++k)
            if (s->job->gpus <= capacity_[k])
              t.throughput[k] = ctx.oracle->throughput(*s->job, types_[k], s->job->gpus,
                                                       s->job->gpus <= widest_[k]);
          track_.emplace(s->job->id, std::move(t));
        }
        solve(jobs);
        lp_jobs_ = std::move(sorted_ids);
      }
      tracks_.resize(jobs.size());
      for (size_t i = 0; i < jobs.size(); ++i) tracks_[i] = &track_.at(ids_[i]);
      last_ids_ = ids_;
    }

  }

  // This round's (job, type) pairs in serving order.
  const std::vector<Pair>& rank_pairs(const RoundContext& ctx) {
    const auto& jobs = *ctx.jobs;
    const size_t K = types_.size();
    // Candidate (job, type) pairs by descending priority, then LP share, then
    // (job, type): the order a stable sort of the pairs as built gives.
    // Pairs without a share (priority 0) are already in that order, so only
    // the others are sorted.
    std::vector<Pair>& pairs = pairs_;
    std::vector<Pair>& unshared = unshared_;
    pairs.clear();
    unshared.clear();
    const std::vector<Track*>& tracks = tracks_;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Track& t = *tracks[i];
      const double elapsed = ctx.now - t.first_seen;
      for (size_t k = 0; k < K; ++k) {
        if (t.throughput[k] <= 0) continue;
        if (!(t.x[k] > 0)) {
          unshared.push_back({static_cast<int>(i), static_cast<int>(k), 0.0, t.x[k]});
          continue;
        }
        const double prio = (t.received[k] <= 0 || elapsed <= 0) ? std::numeric_limits<double>::infinity()
                                                                  : t.x[k] / (t.received[k] / elapsed);
        pairs.push_back({static_cast<int>(i), static_cast<int>(k), prio, t.x[k]});
      }
    }
    std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.x != b.x) return a.x > b.x;
      return a.job != b.job ? a.job < b.job : a.type < b.type;  // then arrival order
    });
    pairs.insert(pairs.end(), unshared.begin(), unshared.end());
    return pairs;

  }


  void reset(const Cluster& cluster) {
    cluster_ = &cluster;
    track_.clear();
    lp_jobs_.clear();
    last_ids_.clear();
    tracks_.clear();
    basis_ = GavelBasis();
    // Types newest first (the catalogue's order reversed), whatever the node
    // list's: the LP's ties and the pairs' order follow the type index, and
    // a cluster listing its K80s first took gavel's TTD on max_min_fairness
    // from 17.61 to 18.97 h.
    types_ = cluster.gpu_types();
    const auto age = [](const std::string& t) {
      const auto& cat = gpu_catalogue();
      for (size_t i = 0; i < cat.size(); ++i)
        if (cat[i].name == t) return static_cast<long>(i);
      return -1L;
    };
    std::stable_sort(types_.begin(), types_.end(),
                     [&](const std::string& a, const std::string& b) { return age(a) > age(b); });
    capacity_.assign(types_.size(), 0);
    widest_.assign(types_.size(), 0);
    node_type_.assign(cluster.nodes.size(), 0);
    type_nodes_.assign(types_.size(), {});
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      const int k = static_cast<int>(
          std::find(types_.begin(), types_.end(), cluster.nodes[n].gpu_type) - types_.begin());
      node_type_[n] = k;
      capacity_[k] += cluster.nodes[n].gpus;
      widest_[k] = std::max(widest_[k], cluster.nodes[n].gpus);
      type_nodes_[k].push_back(static_cast<int>(n));
    }
  }

  void solve(const std::vector<JobState*>& jobs) {
    GavelProblem p;
    p.capacity = capacity_;
    for (const JobState* s : jobs) {
      const Track& t = track_.at(s->job->id);
      p.throughput.push_back(t.throughput);
      p.gpus.push_back(s->job->gpus);
      p.weight.push_back(s->job->weight);
      p.remaining.push_back(s->remaining);
      p.ids.push_back(s->job->id);
    }
    const GavelAllocation a = makespan_ ? gavel_min_total_duration(p, &basis_) : gavel_max_min_fairness(p, &basis_);
    // A share the solver leaves at rounding dust (1e-12) is no share: read as
    // one, with nothing received yet its priority was infinite, and a lone
    // job left its best type for a round on a worse one every other round.
    for (size_t i = 0; i < jobs.size(); ++i) {
      std::vector<double> x = a.x[i];
      for (double& v : x)
        if (v < kDustShare) v = 0;
      track_.at(jobs[i]->job->id).x = std::move(x);
    }
  }

  bool makespan_;
  const Cluster* cluster_ = nullptr;
  double last_now_ = -std::numeric_limits<double>::infinity();
  std::vector<std::string> types_;
  std::vector<int> capacity_;
  std::vector<int> widest_;  // GPUs of the largest node of each type
  std::vector<int> node_type_;
  std::vector<std::vector<int>> type_nodes_;  // per type, its nodes in order
  std::unordered_map<int64_t, Track> track_;
  std::vector<int64_t> lp_jobs_;             // the last LP's job ids, sorted
  std::vector<int64_t> ids_, last_ids_;      // this and the last round's, in order
  std::vector<Track*> tracks_;               // last_ids_'s tracks
  std::vector<Allocation> prev_;             // decide()'s scratch: last round's allocations
  std::vector<Pair> pairs_, unshared_;       // rank_pairs()'s
  GavelBasis basis_;  // the last makespan LP's, for the next one's warm start
};

}  // namespace

std::unique_ptr<Policy> make_gavel(bool makespan) { return std::make_unique<Gavel>(makespan); }

}  // namespace cellsched
