// HadarE's copies (scheduler/hadare_copies.h).
#include "scheduler/hadare_copies.h"

#include <algorithm>
#include <utility>

#include "core/fork.h"
#include "scheduler/oracle.h"

namespace cellsched::hadar_detail {

namespace {

// Under the noise model a copy is placed only if it adds at least this share
// of what the first copy adds (the fork efficiency times its iterations).
constexpr double kMinCopyShare = 0.1;

}  // namespace

struct CopyPlacer::Impl {
  const std::vector<JobState*>& jobs() const { return *ctx_->jobs; }

  // Job i's rate on c GPUs of one node of type k (asked of the oracle once).
  double copy_rate(size_t i, size_t k, int c) {
    double& r = (*(*rates_)[i].copy)[k][static_cast<size_t>(c)];
    if (r < 0) r = ctx_->oracle->throughput(*jobs()[i]->job, (*types_)[k], c, true);
    return r;
  }

  void place(const RoundContext& ctx, const std::vector<std::string>& types, const std::vector<size_t>& type_of_node,
             const std::vector<double>& main_rate, const std::vector<CopyRates>& rates,
             std::vector<int>& free, std::vector<Allocation>& out) {
    ctx_ = &ctx;
    types_ = &types;
    rates_ = &rates;
    const auto& js = jobs();
    const Cluster& cluster = *ctx.cluster;
    // Per job this round: the main gang's rate plus its copies' (raw), and
    // for the noise model the main gang's, the copies' and the largest copy's.
    main_ = main_rate;
    rate_ = main_rate;
    copies_.assign(js.size(), 0);
    largest_.assign(js.size(), 0);
    worth_ = main_;
    spent_.assign(js.size(), 0);
    live_ = js.size();
    // Last round's copies per node: (job index, GPUs); kept across rounds so
    // that the per-node lists keep their memory.
    std::vector<std::vector<std::pair<size_t, int>>>& previous = previous_;
    previous.resize(cluster.nodes.size());
    for (auto& p : previous) p.clear();
    for (size_t i = 0; i < js.size(); ++i)
      for (const auto& copy : js[i]->current.copies)
        if (copy.size() == 1) previous[copy[0].node].push_back({i, copy[0].gpus});
    // Where no copy ran last round, a node's best job depends only on its type
    // and the GPUs its copy would take, and picking a job only raises that
    // job's rate, which only lowers its own gain. So each (type, copy GPUs c)
    // keeps max-heaps of gains, re-valued lazily: a stale gain is an upper
    // bound, and a top whose gain still holds is the scan's choice. One heap
    // holds the jobs of W = c (whole copies), another those of W > c (copies
    // cut to c); a node with g idle GPUs takes the best top of the whole-copy
    // heaps of c <= g and the cut heap of c = g, the same job a scan of every
    // job would pick. (A scan per idle node was most of hadare's time on the
    // Philly trace; one heap per (type, idle GPUs) holding every job made each
    // job's re-valuation repeat in every heap.)
    widths_.clear();
    for (const JobState* s : js) widths_.push_back(s->job->gpus);
    std::sort(widths_.begin(), widths_.end());
    widths_.erase(std::unique(widths_.begin(), widths_.end()), widths_.end());
    // Heaps by (type, c, cut), built when first needed this round; members,
    // so that their memory stays from round to round.
    int max_node = 0;
    for (const Node& node : cluster.nodes) max_node = std::max(max_node, node.gpus);
    const size_t per_type = 2 * (static_cast<size_t>(max_node) + 1);
    if (heaps_.size() < types.size() * per_type) heaps_.resize(types.size() * per_type);
    for (CopyHeap& h : heaps_) h.built = false;
    picks_.assign(js.size(), 0);
    auto top_of = [&](size_t k, int c, bool cut) {
      CopyHeap& h = heaps_[k * per_type + 2 * static_cast<size_t>(c) + (cut ? 1 : 0)];
      if (!h.built) {
        copy_heap(h.gains, k, c, cut);
        h.top = CopyGain{};
        h.picks = -1;
        h.built = true;
      }
      if (h.top.job >= 0 && h.picks == picks_[static_cast<size_t>(h.top.job)] &&
          !spent_[static_cast<size_t>(h.top.job)])
        return h.top;
      h.top = top_copy(h.gains, k, c);
      if (h.top.job >= 0) h.picks = picks_[static_cast<size_t>(h.top.job)];
      return h.top;
    };
    for (size_t n = 0; n < cluster.nodes.size() && live_ > 0; ++n) {
      const size_t k = type_of_node[n];
      while (free[n] > 0) {
        CopyGain top;
        for (const int w : widths_) {
          if (w > free[n]) {
            if (const CopyGain g = top_of(k, free[n], true); g.job >= 0 && (top.job < 0 || top < g)) top = g;
            break;
          }
          if (const CopyGain g = top_of(k, w, false); g.job >= 0 && (top.job < 0 || top < g)) top = g;
        }
        CopyChoice best{top.job, top.c};
        if (!previous[n].empty()) {
          // Only last round's copies here are valued differently (no restart,
          // and preferred on ties): the best is one of them or the plain best.
          std::vector<size_t>& only = only_;
          only.clear();
          for (const auto& [i, c] : previous[n]) only.push_back(i);
          if (best.job >= 0) only.push_back(static_cast<size_t>(best.job));
          std::sort(only.begin(), only.end());
          only.erase(std::unique(only.begin(), only.end()), only.end());
          best = best_copy(k, free[n], previous[n], only);
        }
        if (best.job < 0) break;  // no active job can use this node
        const auto j = static_cast<size_t>(best.job);
        out[j].copies.push_back({{static_cast<int>(n), best.c}});
        ++picks_[j];
        const double r = copy_rate(j, k, best.c);
        rate_[j] += r;
        copies_[j] += r;
        largest_[j] = std::max(largest_[j], r);
        worth_[j] = fork_worth(ctx.fork, main_[j], copies_[j], largest_[j]);
        free[n] -= best.c;
      }
    }
  }

  struct CopyChoice {  // a copy of `job` on `c` GPUs; job -1: none
    int job = -1, c = 0;
  };
  // A job's copy on a node of type k with `idle` GPUs, valued as best_copy()
  // values one that was not there last round; heap order is best_copy's.
  struct CopyGain {
    double gain = 0, raw = 0;
    int job = -1, c = 0;
    bool operator<(const CopyGain& o) const {  // worse than o
      if (gain != o.gain) return gain < o.gain;
      if (raw != o.raw) return raw < o.raw;
      return job > o.job;
    }
  };
  CopyGain copy_gain(size_t i, size_t k, int idle, bool kept) {
    const JobState& s = *jobs()[i];
    CopyGain g;
    if (spent_[i] || (*(*rates_)[i].packed)[k] <= 0) return g;
    g.c = std::min(s.job->gpus, idle);
    const double r = copy_rate(i, k, g.c);
    if (r <= 0) return g;
    const double full = ctx_->round_s;
    const double fresh = std::max(0.0, ctx_->round_s - ctx_->restart_s);
    double useful;
    if (ctx_->fork.scaling == ForkScaling::linear) {
      useful = std::min(r * (kept ? full : fresh), std::max(0.0, s.remaining - rate_[i] * full));
    } else {
      // What the copy adds to the job's worth (core/fork.h), which falls
      // with each copy it already has.
      // A copy that adds less than a tenth of what the first one does
      // (kMinCopyShare) is not placed: under the noise model every copy adds
      // something, and filling every idle GPU with copies worth a few percent
      // of their iterations is work for nothing (docs/hadar.md).
      const ForkModel& f = ctx_->fork;
      const double now = worth_[i];
      const double added = fork_worth(f, main_[i], copies_[i] + r, std::max(largest_[i], r)) - now;
      if (added < kMinCopyShare * f.efficiency * r) {
        // Spent for this round: it gets no further copy on any node (one
        // smaller elsewhere might still pass; weighing it is not worth the
        // time), and once every job is spent the rest of the nodes idle.
        if (!spent_[i]) {
          spent_[i] = 1;
          --live_;
        }
        return g;
      }
      useful = std::min(added * (kept ? full : fresh), std::max(0.0, s.remaining - now * full));
    }
    g.gain = s.job->weight * useful / s.remaining;
    g.raw = s.job->weight * r / s.remaining;
    g.job = static_cast<int>(i);
    return g;
  }
  // The jobs whose copy takes c GPUs of a node of type k: those of W = c
  // (cut: false), or those of W > c cut to c (cut: true).
  void copy_heap(std::vector<CopyGain>& heap, size_t k, int c, bool cut) {
    heap.clear();
    for (size_t i = 0; i < jobs().size(); ++i) {
      const int w = jobs()[i]->job->gpus;
      if (cut ? w <= c : w != c) continue;
      if (const CopyGain g = copy_gain(i, k, c, false); g.job >= 0) heap.push_back(g);
    }
    std::make_heap(heap.begin(), heap.end());
  }
  // A heap's top, once re-valued, holds until its job is picked or spent
  // (nothing else changes a job's gain within the round).
  struct CopyHeap {
    std::vector<CopyGain> gains;
    CopyGain top;
    long picks = -1;  // the top job's picks_ when it was re-valued
    bool built = false;
  };
  // The heap's best job, re-valued; job -1 when none can take a copy.
  CopyGain top_copy(std::vector<CopyGain>& heap, size_t k, int c) {
    while (!heap.empty()) {
      const CopyGain now = copy_gain(static_cast<size_t>(heap.front().job), k, c, false);
      if (now.job >= 0 && now.gain == heap.front().gain) return now;
      std::pop_heap(heap.begin(), heap.end());
      if (now.job < 0) {  // no longer worth a copy this round (it only gets worse)
        heap.pop_back();
        continue;
      }
      heap.back() = now;
      std::push_heap(heap.begin(), heap.end());
    }
    return CopyGain{};
  }

  // The job whose copy gains most on a node of type k with `idle` GPUs: the
  // most weighted iterations it can still use this round, relative to its
  // remaining work; ties go to keeping last round's copy there (no restart),
  // then to the higher rate, then to the earlier job. job -1: none can run.
  // Only the jobs in `candidates` (ascending indices) are weighed.
  CopyChoice best_copy(size_t k, int idle, const std::vector<std::pair<size_t, int>>& previous,
                       const std::vector<size_t>& candidates) {
    CopyChoice best;
    CopyGain top;
    bool best_kept = false;
    for (const size_t i : candidates) {
      const int c = std::min(jobs()[i]->job->gpus, idle);
      const bool kept = std::find(previous.begin(), previous.end(), std::pair<size_t, int>{i, c}) != previous.end();
      const CopyGain g = copy_gain(i, k, idle, kept);
      if (g.job < 0) continue;
      const bool better = best.job < 0 || g.gain > top.gain ||
                          (g.gain == top.gain && ((kept && !best_kept) || (kept == best_kept && g.raw > top.raw)));
      if (better) {
        best = {g.job, g.c};
        top = g;
        best_kept = kept;
      }
    }
    return best;
  }

  const RoundContext* ctx_ = nullptr;
  const std::vector<std::string>* types_ = nullptr;
  const std::vector<CopyRates>* rates_ = nullptr;
  std::vector<std::vector<std::pair<size_t, int>>> previous_;   // last round's copies per node
  std::vector<size_t> only_;                                    // candidates on a node with them
  // Per job, this round: rate_ is main_ + copies_ summed in placement order
  // (the linear model's figure, kept as it was summed so its results stay
  // bit for bit); the noise model reads main_, copies_, largest_ and worth_.
  std::vector<double> rate_, main_, copies_, largest_, worth_;
  std::vector<CopyHeap> heaps_;                                 // by (type, c, cut)
  std::vector<long> picks_;                                     // copies each job got this round
  std::vector<int> widths_;                                     // the jobs' gang sizes
  std::vector<char> spent_;                                     // the jobs past kMinCopyShare
  size_t live_ = 0;                                             // jobs not spent
};

CopyPlacer::CopyPlacer() : impl_(std::make_unique<Impl>()) {}
CopyPlacer::~CopyPlacer() = default;

void CopyPlacer::place(const RoundContext& ctx, const std::vector<std::string>& types,
                       const std::vector<size_t>& type_of_node, const std::vector<double>& main_rate,
                       const std::vector<CopyRates>& rates, std::vector<int>& free, std::vector<Allocation>& out) {
  impl_->place(ctx, types, type_of_node, main_rate, rates, free, out);
}

}  // namespace cellsched::hadar_detail
