// hadar and hadare (DESIGN "Policies"; docs/hadar.md reads the paper and
// says what was chosen where it is ambiguous).
//
// Hadar, an online primal-dual allocator, one round at a time:
// - Utility. A job's utility is a non-increasing function of its completion
//   time measured from its arrival (JCT), f_j(x) = -w_j (x + x^2 / (2 tau)).
//   Running a round on allocation a brings the job's completion forward by
//   round_s * rate(a) / rate* seconds (rate* = its whole gang on its fastest
//   type, one node), so a is worth |f_j'(x_j)| * rate(a) / rate* (in units
//   of a round), x_j = age + remaining / rate* the JCT it heads for. A job's
//   claim grows with its age: a long old job is not starved by a stream of
//   short ones. A round that restarts the job trains (round - restart) /
//   round of it. A job with a deadline it can still meet only by running now
//   is worth kDeadlineBoost times as much (the deadline-shaped variant).
// - Prices. Each GPU type k has a price growing exponentially with the GPUs
//   committed to it this round, p_k(y) = (U_min/2)(2 U_max/U_min)^(y/C_k),
//   with U_max / U_min the largest / smallest per-GPU round utility of any
//   job seen so far in the run (bounds over the input, not over this
//   round's jobs).
// - Each round's DP: every job's best response (bottleneck type, GPUs per
//   type) under current prices is found exactly (convex prices: the cheapest
//   next GPU, W times), and jobs are committed in order of payoff = utility -
//   price, re-evaluated lazily (prices and free GPUs only move one way within
//   a round, so a stale payoff is an upper bound). Paying jobs (payoff > 0)
//   come first by construction; the rest follow in the same price-ordered
//   payoff while they fit: the policy is work-conserving.
// - Rounds with spare capacity. When every active job's gang fits at once
//   (no job waits), the round only decides who runs on the fast types; the
//   JCT utility alone gives them to the narrowest and shortest jobs, which
//   leaves the widest and longest on slow types to set the total time. In
//   such a round each job's value is multiplied by (GPU-rounds it has left
//   at its best rate)^spare_exponent, so the jobs with most work left take
//   the fast types first (a makespan term; docs/hadar.md measures it).
// - Rounds where jobs wait. Each job's value is multiplied by its response
//   ratio (age + p) / p, p its time left at its best rate capped at
//   ratio_cap_s, to the power ratio_exponent: a short job that waits climbs
//   fast (mean JCT), a long one climbs too (no starvation), and the cap keeps
//   the longest jobs, which set the total time, level with merely long ones.
// - Mixing. A job uses only its bottleneck type b when b has W free GPUs;
//   it mixes (all of b's free GPUs plus the cheapest of types at least as
//   fast) only when b lacks capacity.
// - Valuation. A candidate is valued with the throughput the engine will
//   charge: consolidated only when the workers fit on one node (the placement
//   then uses one node), unconsolidated otherwise, bottleneck across types.
//
// HadarE: after Hadar's allocation, every node left with idle GPUs runs a copy
// of the active job that gains most there (a copy uses up to W_j GPUs of that
// one node), until no GPU idles while some job could use it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "scheduler/hadar_common.h"
#include "scheduler/hadare_copies.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();
constexpr double kDeadlineBoost = 4;

// One way to place a job this round.
struct Candidate {
  std::vector<int> counts;  // GPUs per type
  double rate = 0;          // iterations/s, as the engine will charge it
  bool keep = false;        // exactly last round's placement
  bool spread = false;      // all on one type, over two or more nodes (the type runs the
                            // gang only unconsolidated: Gavel's table has such rows)
};

class Hadar : public Policy {
 public:
  explicit Hadar(HadarOptions o) : opt_(o) {}
  std::string name() const override { return opt_.fork ? "hadare" : "hadar"; }

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    ctx_ = &ctx;
    if (idx_.index(*ctx.cluster)) cache_.clear();
    cache_.prune(*ctx.jobs);
    start_round();
    term_ = Term::none;
    update_bounds();  // the bounds are over the JCT utility alone
    term_ = spare_round() ? Term::spare : Term::busy;
    reset_prices();
    for (Allocation& a : out) a = Allocation{};
    commit_all(out);
    upgrade(out);
    if (opt_.fork) add_copies(out);
  }

 private:
  struct JobCache {
    std::vector<double> packed;  // per-worker throughput on one node, per type
    std::vector<double> spread;  // per-worker throughput over several nodes
    std::vector<std::vector<double>> copy;  // [type][c]: copy throughput (lazy, <0 unknown)
    const ThroughputOracle* oracle = nullptr;
  };

  const std::vector<JobState*>& jobs() const { return *ctx_->jobs; }
  size_t types() const { return idx_.types.size(); }

  JobCache& cache_of(const Job& job) {
    JobCache& c = cache_[job.id];
    if (c.oracle != ctx_->oracle || c.packed.size() != types()) {
      c.oracle = ctx_->oracle;
      c.packed.assign(types(), 0);
      c.spread.assign(types(), 0);
      for (size_t k = 0; k < types(); ++k) {
        const std::string& t = idx_.types[k];
        c.packed[k] = ctx_->oracle->throughput(job, t, job.gpus, true) / job.gpus;
        c.spread[k] = job.gpus > 1 ? ctx_->oracle->throughput(job, t, job.gpus, false) / job.gpus
                                   : c.packed[k];
      }
      c.copy.assign(types(), std::vector<double>(job.gpus + 1, -1));
    }
    return c;
  }

  void start_round() {
    const Cluster& cluster = *ctx_->cluster;
    const size_t N = cluster.nodes.size(), K = types();
    free_.assign(N, 0);
    hold_.assign(N, 0);
    capacity_.assign(K, 0);
    for (size_t n = 0; n < N; ++n) {
      free_[n] = cluster.nodes[n].gpus;
      capacity_[idx_.type_of_node[n]] += cluster.nodes[n].gpus;
    }
    free_k_ = capacity_;
    total_free_ = 0;
    for (int f : free_k_) total_free_ += f;
    given_.assign(K, 0);
    max_free_.assign(K, 0);
    nodes_at_.resize(K);
    for (size_t k = 0; k < K; ++k) {
      for (int n : idx_.nodes_of_type[k]) max_free_[k] = std::max(max_free_[k], free_[n]);
      nodes_at_[k].assign(static_cast<size_t>(max_free_[k]) + 1, 0);
      for (int n : idx_.nodes_of_type[k]) ++nodes_at_[k][static_cast<size_t>(free_[n])];
    }
    const size_t J = jobs().size();
    caches_.resize(J);
    current_.assign(J, {});
    current_rate_.assign(J, 0);
    for (size_t i = 0; i < J; ++i) {
      const JobState& s = *jobs()[i];
      caches_[i] = &cache_of(*s.job);
      if (s.current.workers.empty()) continue;
      current_[i] = idx_.counts(s.current.workers);
      current_rate_[i] = allocation_throughput(*ctx_->oracle, *s.job, cluster, s.current.workers);
      for (const Placement& p : s.current.workers) hold_[p.node] += p.gpus;
    }
  }

  // Takes g free GPUs of node n, keeping its type's most free on one node:
  // free counts only fall within a round, so the count of nodes at each level
  // tells when the most falls (a scan of the type's nodes per placement was a
  // tenth of hadar's time on the Philly trace).
  void take_free(int n, int g) {
    const size_t k = idx_.type_of_node[static_cast<size_t>(n)];
    --nodes_at_[k][static_cast<size_t>(free_[n])];
    free_[n] -= g;
    if (free_[n] < 0) throw std::logic_error("hadar: node " + std::to_string(n) + " over-committed");
    ++nodes_at_[k][static_cast<size_t>(free_[n])];
    while (max_free_[k] > 0 && nodes_at_[k][static_cast<size_t>(max_free_[k])] == 0) --max_free_[k];
  }

  // Round utility of job i running at `rate` iterations/s (file comment):
  // |f'(x)| times the seconds by which a round at `rate` brings its
  // completion forward, in rounds (1 at its best single-type rate).
  double utility(size_t i, double rate, bool keep) const {
    const JobState& s = *jobs()[i];
    if (!(rate > 0) || !(s.remaining > 0)) return 0;
    const double best = best_rate(i) > 0 ? best_rate(i) : rate;
    const double p = s.remaining / best;  // seconds to finish at the best rate
    const double x = ctx_->now - s.job->arrival_s + p;
    double urgency = s.job->weight * (1 + x / opt_.aging_s);
    const double d = s.job->deadline_s;
    if (d >= 0 && ctx_->now + p <= d && ctx_->now + ctx_->round_s + p > d) urgency *= kDeadlineBoost;
    const double trains = keep ? 1.0 : std::max(0.0, ctx_->round_s - ctx_->restart_s) / ctx_->round_s;
    double value = urgency * (rate / best) * trains;
    if (term_ == Term::spare && opt_.spare_exponent > 0) {
      value *= std::pow(s.job->gpus * p / ctx_->round_s, opt_.spare_exponent);
    } else if (term_ == Term::busy && opt_.ratio_exponent > 0) {
      const double pe = std::min(p, opt_.ratio_cap_s);
      value *= std::pow((ctx_->now - s.job->arrival_s + pe) / pe, opt_.ratio_exponent);
    }
    return value;
  }
  // Whether every active job's gang fits in the cluster at once: no job has
  // to wait this round, and the round only decides which types they run on.
  bool spare_round() const {
    long demand = 0, capacity = 0;
    for (const JobState* s : jobs()) demand += s->job->gpus;
    for (int c : capacity_) capacity += c;
    return demand <= capacity;
  }
  // Whole-gang rate on its fastest type, on one node.
  double best_rate(size_t i) const {
    const std::vector<double>& v = caches_[i]->packed;
    return jobs()[i]->job->gpus * *std::max_element(v.begin(), v.end());
  }

  // U_max / U_min: per-GPU round utility of every job on each type it can
  // use, folded into bounds that only widen over the run.
  void update_bounds() {
    for (size_t i = 0; i < jobs().size(); ++i) {
      const int w = jobs()[i]->job->gpus;
      for (size_t k = 0; k < types(); ++k) {
        const double u = utility(i, w * caches_[i]->packed[k], true) / w;
        if (!(u > 0)) continue;
        u_max_ = std::max(u_max_, u);
        u_min_ = std::min(u_min_, u);
      }
    }
  }

  // Prices are fixed by U_min, U_max and C_k for the whole round: each p_k(y)
  // and q_k^m is taken once per round (the same values as a pow() per call).
  void reset_prices() {
    price_memo_.reset(capacity_);
    power_memo_.reset(capacity_);
    ratio_.resize(types());
    for (size_t k = 0; k < types(); ++k) ratio_[k] = std::pow(2 * u_max_ / u_min_, 1.0 / capacity_[k]);
  }
  double price(size_t k, int y) {
    return price_memo_.get(k, y, [&](int n) { return hadar_price(u_min_, u_max_, capacity_[k], n); });
  }
  // Sum of the prices of `m` more GPUs of type k (a geometric series).
  double price_of(size_t k, int m) {
    if (m <= 0) return 0;
    const double first = price(k, given_[k]);
    if (!(first > 0)) return 0;
    const double q = ratio_[k];
    const double qm = power_memo_.get(k, m, [&](int n) { return std::pow(q, n); });
    return first * (qm - 1) / (q - 1);
  }

  // Whether job i's placement of last round is still free.
  bool can_keep(size_t i) const {
    for (const Placement& p : jobs()[i]->current.workers)
      if (free_[p.node] < p.gpus) return false;
    return !jobs()[i]->current.workers.empty();
  }

  // Best payoff of job i under current prices (kNever when it does not fit);
  // its candidate in `best`.
  double evaluate(size_t i, Candidate* best) {
    const int w = jobs()[i]->job->gpus;
    if (total_free_ < w) return kNever;  // no candidate below could fit
    const JobCache& c = *caches_[i];
    const size_t K = types();
    double top = kNever;
    for (size_t b = 0; b < K; ++b) {
      if ((c.packed[b] <= 0 && c.spread[b] <= 0) || free_k_[b] <= 0) continue;
      counts_.assign(K, 0);
      double cost, rate;
      bool spread = false;
      if (free_k_[b] >= w) {
        counts_[b] = w;
        cost = price_of(b, w);
        if (c.packed[b] > 0) {
          rate = w * (max_free_[b] >= w ? c.packed[b] : c.spread[b]);
        } else {  // only unconsolidated: the gang must span nodes
          spread = true;
          rate = spread_room(b, w) >= w ? w * c.spread[b] : 0;
        }
      } else {  // b lacks capacity: all of it, the rest on types at least as fast
        counts_[b] = free_k_[b];
        cost = price_of(b, free_k_[b]);
        double per_worker = c.spread[b];
        for (int left = w - free_k_[b]; left > 0; --left) {
          int pick = -1;
          double pick_price = 0;
          for (size_t k = 0; k < K; ++k) {
            if (k == b || c.spread[k] < c.spread[b] || counts_[k] >= free_k_[k]) continue;
            const double p = price(k, given_[k] + counts_[k]);
            if (pick < 0 || p < pick_price) pick = static_cast<int>(k), pick_price = p;
          }
          if (pick < 0) {
            per_worker = 0;
            break;
          }
          ++counts_[pick];
          cost += pick_price;
          per_worker = std::min(per_worker, c.spread[pick]);
        }
        rate = w * per_worker;
      }
      if (!(rate > 0)) continue;
      const bool keep = counts_ == current_[i] && can_keep(i);
      if (keep) rate = current_rate_[i];
      const double payoff = utility(i, rate, keep) - cost;
      if (payoff > top) {
        top = payoff;
        if (best) *best = {counts_, rate, keep, spread && !keep};
      }
    }
    return top;
  }

  // Commits jobs in order of payoff while any fits (lazy re-evaluation).
  void commit_all(std::vector<Allocation>& out) {
    using Entry = std::pair<double, size_t>;  // (payoff, job); ties: earlier job first
    auto cmp = [](const Entry& a, const Entry& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    };
    // Built in one pass (entries are distinct, so the pops come in the same
    // order as from pushes one by one).
    std::vector<Entry> entries;
    entries.reserve(jobs().size());
    for (size_t i = 0; i < jobs().size(); ++i) {
      const double p = evaluate(i, nullptr);
      if (p > kNever) entries.push_back({p, i});
    }
    std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)> heap(cmp, std::move(entries));
    Candidate best;
    while (!heap.empty() && total_free_ > 0) {  // with no GPU free, nothing else fits
      const size_t i = heap.top().second;
      heap.pop();
      const double p = evaluate(i, &best);
      if (p == kNever) continue;  // no longer fits, and never will this round
      if (!heap.empty() && p < heap.top().first) {
        heap.push({p, i});
        continue;
      }
      place(i, best, out[i]);
    }
  }

  // After the DP: a gang left slower than it could run on a node the DP left
  // with room for it (a faster type, or its own type on one node) moves
  // there, the jobs with most GPU-time left first, where the move trains
  // more this round even after a restart. Those GPUs would idle this round,
  // or go to copies; the prices had sent the gang to the slower GPUs to keep
  // the fast ones for jobs that did not need them after all (on small_test,
  // 2-GPU jobs on K80s beside an idle P100 node: TTD 2.1x fifo's).
  void upgrade(std::vector<Allocation>& out) {
    const size_t K = types();
    // Per type, the most free GPUs on one node: max_free_ as the DP left it,
    // re-measured for the types a move changes (free counts then also rise,
    // which max_free_'s bookkeeping does not follow).
    room_ = max_free_;
    const auto measure = [&](size_t k) {
      room_[k] = 0;
      for (int n : idx_.nodes_of_type[k]) room_[k] = std::max(room_[k], free_[n]);
    };
    const int most = *std::max_element(room_.begin(), room_.end());
    // A gang mixed over types had its bottleneck type full: GPUs of that
    // type are not freed, so mixing still happens only when it is full.
    pinned_.assign(K, 0);
    for (size_t i = 0; i < out.size(); ++i) {
      const std::vector<double>& per_worker = caches_[i]->spread;
      size_t slowest = K;
      bool mixed = false;
      for (const Placement& p : out[i].workers) {
        const size_t k = idx_.type_of_node[static_cast<size_t>(p.node)];
        if (slowest < K && k != slowest) mixed = true;
        if (slowest == K || per_worker[k] < per_worker[slowest]) slowest = k;
      }
      if (mixed) pinned_[slowest] = 1;
    }
    // Only gangs that some type with room could speed up: on two or more
    // nodes, or on a type slower per worker than one with room.
    const auto could_gain = [&](size_t i) {
      const std::vector<Placement>& ws = out[i].workers;
      const int w = jobs()[i]->job->gpus;
      if (ws.empty() || w > most) return false;
      for (const Placement& p : ws)
        if (pinned_[idx_.type_of_node[static_cast<size_t>(p.node)]]) return false;
      const std::vector<double>& packed = caches_[i]->packed;
      const double own = ws.size() > 1 ? 0 : packed[idx_.type_of_node[static_cast<size_t>(ws[0].node)]];
      for (size_t k = 0; k < K; ++k)
        if (room_[k] >= w && packed[k] > own) return true;
      return false;
    };
    by_left_.clear();
    for (size_t i = 0; i < jobs().size(); ++i)
      if (could_gain(i)) by_left_.push_back({jobs()[i]->remaining / best_rate(i) * jobs()[i]->job->gpus, i});
    std::stable_sort(by_left_.begin(), by_left_.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    const double round = ctx_->round_s, trains = std::max(0.0, round - ctx_->restart_s);
    for (const auto& [unused, i] : by_left_) {
      const Job& job = *jobs()[i]->job;
      const int w = job.gpus;
      const std::vector<double>& packed = caches_[i]->packed;
      double now = -1, best = 0;
      int to = -1;
      for (size_t k = 0; k < K; ++k) {
        const double r = w * packed[k] * trains;
        if (room_[k] < w || !(r > 0)) continue;
        if (now < 0) {  // what the DP's placement trains this round
          const bool kept = out[i].workers == jobs()[i]->current.workers;
          now = best = allocation_throughput(*ctx_->oracle, job, *ctx_->cluster, out[i].workers) * (kept ? round : trains);
        }
        if (!(r > best * (1 + 1e-9))) continue;
        best = r;
        to = -1;
        for (int n : idx_.nodes_of_type[k])  // the node with least room that fits (best fit)
          if (free_[n] >= w && (to < 0 || free_[n] < free_[static_cast<size_t>(to)])) to = n;
      }
      if (to < 0) continue;
      for (const Placement& p : out[i].workers) free_[p.node] += p.gpus;
      for (const Placement& p : out[i].workers) measure(idx_.type_of_node[static_cast<size_t>(p.node)]);
      out[i].workers = {Placement{to, w}};
      free_[static_cast<size_t>(to)] -= w;
      measure(idx_.type_of_node[static_cast<size_t>(to)]);
    }
  }

  // Puts job i's workers on nodes: last round's placement when kept, else per
  // type on the fewest nodes, preferring GPUs no other job held last round.
  void place(size_t i, const Candidate& c, Allocation& a) {
    const JobState& s = *jobs()[i];
    for (const Placement& p : s.current.workers) hold_[p.node] -= p.gpus;
    if (c.keep) {
      a.workers = s.current.workers;
    } else {
      const int w = s.job->gpus;
      for (size_t k = 0; k < types(); ++k) {
        if (c.counts[k] == 0) continue;
        const bool one_node = c.counts[k] == w && max_free_[k] >= w && !c.spread;
        auto ps = place_type(k, c.counts[k], one_node, c.spread ? w - 1 : w);
        a.workers.insert(a.workers.end(), ps.begin(), ps.end());
      }
    }
    for (const Placement& p : a.workers) take_free(p.node, p.gpus);
    for (size_t k = 0; k < types(); ++k) {
      if (c.counts[k] == 0) continue;
      given_[k] += c.counts[k];
      free_k_[k] -= c.counts[k];
      total_free_ -= c.counts[k];
    }
  }

  // `m` GPUs of type k on the fewest nodes (one node when `one_node`); GPUs
  // held by other jobs last round only when the rest do not do.
  // At most `per_node` on any one node (w - 1 makes a gang span nodes).
  std::vector<Placement> place_type(size_t k, int m, bool one_node, int per_node) {
    const std::vector<int>& nodes = idx_.nodes_of_type[k];
    std::vector<int>& avail = avail_;  // only type k's entries are read
    avail.resize(free_.size());
    for (int n : nodes) avail[n] = std::min(per_node, std::max(0, free_[n] - std::max(0, hold_[n])));
    auto ps = place_fewest_nodes(avail, m, nodes);
    if (!ps.empty() && (!one_node || ps.size() == 1)) return ps;
    for (int n : nodes) avail[n] = std::min(per_node, free_[n]);
    return place_fewest_nodes(avail, m, nodes);
  }
  // GPUs of type k a gang of w can take with at most w - 1 on any one node.
  int spread_room(size_t k, int w) const {
    int room = 0;
    for (int n : idx_.nodes_of_type[k]) room += std::min(free_[n], w - 1);
    return room;
  }

  // HadarE: the GPUs still idle go to copies (scheduler/hadare_copies.h).
  void add_copies(std::vector<Allocation>& out) {
    const auto& js = jobs();
    main_rate_.assign(js.size(), 0);
    for (size_t i = 0; i < js.size(); ++i)
      if (!out[i].workers.empty())
        main_rate_[i] = allocation_throughput(*ctx_->oracle, *js[i]->job, *ctx_->cluster, out[i].workers);
    copy_rates_.resize(js.size());
    for (size_t i = 0; i < js.size(); ++i) copy_rates_[i] = {&caches_[i]->packed, &caches_[i]->copy};
    copies_.place(*ctx_, idx_.types, idx_.type_of_node, main_rate_, copy_rates_, free_, out);
  }

  HadarOptions opt_;
  const RoundContext* ctx_ = nullptr;
  hadar_detail::TypeIndex idx_;
  hadar_detail::JobCacheMap<JobCache> cache_;
  double u_max_ = 0, u_min_ = std::numeric_limits<double>::infinity();
  // This round: per node, free GPUs and GPUs held last round by jobs not yet
  // placed; per type, capacity, free GPUs, GPUs given out and the most free
  // on one node; per job, its cache, last round's type counts and rate.
  std::vector<int> free_, hold_, capacity_, free_k_, given_, max_free_;
  std::vector<std::vector<int>> nodes_at_;  // [type][f]: its nodes with f free GPUs
  std::vector<JobCache*> caches_;
  std::vector<std::vector<int>> current_;
  std::vector<double> current_rate_;
  int total_free_ = 0;       // sum of free_k_
  // This round's extra term of the value: none while the bounds are taken,
  // then the spare-round term or the response ratio (file comment).
  enum class Term { none, spare, busy } term_ = Term::none;
  std::vector<int> counts_;  // scratch for evaluate()
  std::vector<int> avail_;   // scratch for place_type()
  std::vector<int> room_, pinned_;                 // scratch for upgrade()
  std::vector<std::pair<double, size_t>> by_left_;  // scratch for upgrade()
  std::vector<double> main_rate_;                   // scratch for add_copies()
  std::vector<hadar_detail::CopyRates> copy_rates_;  // scratch for add_copies()
  hadar_detail::CopyPlacer copies_;   // HadarE's copies
  hadar_detail::RoundMemo price_memo_, power_memo_;  // this round's p_k(y), q_k^m
  std::vector<double> ratio_;                        // this round's q_k
};

}  // namespace

double hadar_price(double u_min, double u_max, int capacity, int given) {
  if (!(u_max > 0) || !(u_min > 0)) return 0;
  return u_min / 2 * std::pow(2 * u_max / u_min, static_cast<double>(given) / capacity);
}

std::unique_ptr<Policy> make_hadar(HadarOptions options) {
  if (!(options.aging_s > 0)) throw InputError("hadar: aging time scale must be positive");
  if (!(options.spare_exponent >= 0) || !std::isfinite(options.spare_exponent))
    throw InputError("hadar: spare-round exponent must be finite and >= 0");
  if (!(options.ratio_exponent >= 0) || !std::isfinite(options.ratio_exponent))
    throw InputError("hadar: response-ratio exponent must be finite and >= 0");
  if (!(options.ratio_cap_s > 0) || !std::isfinite(options.ratio_cap_s))
    throw InputError("hadar: response-ratio cap must be a finite positive number of seconds");
  return std::make_unique<Hadar>(options);
}
std::unique_ptr<Policy> make_hadar() { return make_hadar(HadarOptions{}); }
std::unique_ptr<Policy> make_hadare() {
  HadarOptions o;
  o.fork = true;
  return make_hadar(o);
}

}  // namespace cellsched
