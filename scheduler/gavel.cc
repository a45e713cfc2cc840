// Gavel (Narayanan et al., OSDI 2020): heterogeneity-aware allocation LPs and
// the round mechanism that realises their time fractions.
#include "scheduler/gavel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <stdexcept>
#include <unordered_map>

#include "scheduler/lp.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"

namespace cellsched {
namespace {

void check_problem(const GavelProblem& p, bool need_weight, bool need_remaining) {
  const size_t n = p.throughput.size();
  if (p.gpus.size() != n || (need_weight && p.weight.size() != n) ||
      (need_remaining && p.remaining.size() != n))
    throw std::invalid_argument("GavelProblem: per-job vectors differ in size");
  for (const auto& row : p.throughput)
    if (row.size() != p.capacity.size())
      throw std::invalid_argument("GavelProblem: throughput row size != number of GPU types");
}

// The max-min LP's tie-break weight (see gavel_max_min_fairness).
constexpr double kTieBreak = 1e-3;

// Whether job j can run on type k at all.
bool usable(const GavelProblem& p, size_t j, size_t k) {
  return p.throughput[j][k] > 0 && p.gpus[j] > 0 && p.gpus[j] <= p.capacity[k];
}

}  // namespace

GavelAllocation gavel_max_min_fairness(const GavelProblem& p, GavelBasis* basis) {
  check_problem(p, true, false);
  const size_t n = p.throughput.size(), K = p.capacity.size();
  GavelAllocation out;
  out.x.assign(n, std::vector<double>(K, 0.0));
  std::vector<size_t> in;  // jobs in the LP
  for (size_t j = 0; j < n; ++j) {
    bool any = false;
    for (size_t k = 0; k < K; ++k) any = any || usable(p, j, k);
    if (any) in.push_back(j);
  }
  if (in.empty()) return out;
  const double share = 1.0 / static_cast<double>(in.size());

  // Jobs with the same throughputs, gang size and weight are interchangeable:
  // the LP is symmetric in them and convex, so some optimum gives them equal
  // shares. One set of variables per such class, its GPUs counted
  // `members` times, solves the same LP (same optimum t) with far fewer
  // columns: the Philly trace's thousands of active jobs fall into a few
  // hundred classes (job type x gang size).
  struct Class {
    size_t first;                 // a member: its throughputs, gang size, weight
    std::vector<size_t> members;
  };
  std::vector<Class> classes;
  using Key = std::tuple<std::vector<double>, int, double>;
  std::map<Key, size_t> class_of;
  std::vector<const Key*> keys;
  for (size_t j : in) {
    const auto key = std::make_tuple(p.throughput[j], p.gpus[j], p.weight[j] > 0 ? p.weight[j] : 1.0);
    const auto [it, fresh] = class_of.emplace(key, classes.size());
    if (fresh) {
      classes.push_back({j, {}});
      keys.push_back(&it->first);
    }
    classes[it->second].members.push_back(j);
  }

  // The optimal t is unique, the shares are not: many allocations reach it,
  // and which vertex the simplex ends on depended on where it started (a
  // warm start from the last basis gave another mean JCT than a cold solve,
  // 23.2 against 22.4 h on the 600-job continuous trace). A small cost on
  // GPU time picks, among the allocations that reach t, one that spends the
  // fewest GPU-seconds (each job on the types where it is relatively
  // fastest, the rest left to the round's work conservation), whatever the
  // start. The cost per unit of t it could buy, kTieBreak times the GPUs in
  // the LP, stays far below t's own, so t keeps its optimum.
  double gpus_in_lp = 0;
  for (size_t k = 0; k < K; ++k) gpus_in_lp += p.capacity[k];
  const double tie = kTieBreak / std::max(1.0, gpus_in_lp);

  LinearProgram lp;
  lp.maximize = true;
  lp.presolve = false;
  const int t = lp.add_var(1.0, 0.0, kLpInf);
  std::vector<std::vector<int>> var(classes.size(), std::vector<int>(K, -1));
  std::vector<std::vector<int>> type_cols(K);
  std::vector<std::vector<double>> type_vals(K);
  for (size_t c = 0; c < classes.size(); ++c) {
    const size_t j = classes[c].first;
    const double members = static_cast<double>(classes[c].members.size());
    double x_eq = 0;
    for (size_t k = 0; k < K; ++k)
      if (usable(p, j, k)) x_eq += share * p.capacity[k] * p.throughput[j][k] / p.gpus[j];
    const double w = p.weight[j] > 0 ? p.weight[j] : 1.0;
    std::vector<int> cols = {t};
    std::vector<double> vals = {-1.0};
    std::vector<int> row_cols;
    for (size_t k = 0; k < K; ++k) {
      if (!usable(p, j, k)) continue;
      var[c][k] = lp.add_var(-tie * members * p.gpus[j], 0.0, 1.0);
      cols.push_back(var[c][k]);
      vals.push_back(p.throughput[j][k] / (w * x_eq));
      row_cols.push_back(var[c][k]);
      type_cols[k].push_back(var[c][k]);
      type_vals[k].push_back(members * p.gpus[j]);
    }
    lp.add_row(0.0, kLpInf, cols, vals);                                            // normalized >= t
    lp.add_row(-kLpInf, 1.0, row_cols, std::vector<double>(row_cols.size(), 1.0));  // time
  }
  for (size_t k = 0; k < K; ++k)
    if (!type_cols[k].empty()) lp.add_row(-kLpInf, p.capacity[k], type_cols[k], type_vals[k]);

  // Rows: per class (normalized, time), then one per used type.
  std::vector<int> type_row(K, -1);
  {
    int row = 2 * static_cast<int>(classes.size());
    for (size_t k = 0; k < K; ++k)
      if (!type_cols[k].empty()) type_row[k] = row++;
  }
  if (basis && !basis->classes.empty()) {
    lp.col_basis.assign(lp.num_vars(), LpBasis::at_lower);
    lp.row_basis.assign(lp.num_rows(), LpBasis::basic);
    lp.col_basis[t] = basis->t;
    for (size_t c = 0; c < classes.size(); ++c) {
      const auto it = basis->classes.find(*keys[c]);
      if (it == basis->classes.end()) continue;
      for (size_t k = 0; k < K && k < it->second.vars.size(); ++k)
        if (var[c][k] >= 0) lp.col_basis[var[c][k]] = it->second.vars[k];
      lp.row_basis[2 * c] = it->second.work;
      lp.row_basis[2 * c + 1] = it->second.time;
    }
    for (size_t k = 0; k < K && k < basis->type_rows.size(); ++k)
      if (type_row[k] >= 0) lp.row_basis[type_row[k]] = basis->type_rows[k];
  }
  const LpSolution sol = solve_lp(lp);
  if (basis) {
    basis->classes.clear();
    basis->t = sol.col_basis[t];
    basis->type_rows.assign(K, LpBasis::basic);
    for (size_t k = 0; k < K; ++k)
      if (type_row[k] >= 0) basis->type_rows[k] = sol.row_basis[type_row[k]];
    for (size_t c = 0; c < classes.size(); ++c) {
      GavelBasis::Job& b = basis->classes[*keys[c]];
      b.vars.assign(K, LpBasis::at_lower);
      for (size_t k = 0; k < K; ++k)
        if (var[c][k] >= 0) b.vars[k] = sol.col_basis[var[c][k]];
      b.work = sol.row_basis[2 * c];
      b.time = sol.row_basis[2 * c + 1];
    }
  }
  out.objective = sol.x[t];
  for (size_t c = 0; c < classes.size(); ++c)
    for (size_t k = 0; k < K; ++k)
      if (var[c][k] >= 0)
        for (size_t j : classes[c].members) out.x[j][k] = std::clamp(sol.x[var[c][k]], 0.0, 1.0);
  return out;
}

GavelAllocation gavel_min_total_duration(const GavelProblem& p, GavelBasis* basis) {
  check_problem(p, false, true);
  const size_t n = p.throughput.size(), K = p.capacity.size();
  GavelAllocation out;
  out.x.assign(n, std::vector<double>(K, 0.0));
  std::vector<size_t> in;
  double scale = 0;  // seconds: the longest isolated time, to keep the LP well scaled
  for (size_t j = 0; j < n; ++j) {
    double best = 0;
    for (size_t k = 0; k < K; ++k)
      if (usable(p, j, k)) best = std::max(best, p.throughput[j][k]);
    if (best > 0 && p.remaining[j] > 0) {
      in.push_back(j);
      scale = std::max(scale, p.remaining[j] / best);
    }
  }
  if (in.empty()) return out;

  // Variables in units of `scale` seconds: y' = y / scale, T' = T / scale.
  LinearProgram lp;
  lp.presolve = false;
  const int T = lp.add_var(1.0, 0.0, kLpInf);
  std::vector<std::vector<int>> var(n, std::vector<int>(K, -1));
  std::vector<std::vector<int>> type_cols(K);
  std::vector<std::vector<double>> type_vals(K);
  for (size_t j : in) {
    std::vector<int> work_cols, time_cols = {T};
    std::vector<double> work_vals, time_vals = {-1.0};
    for (size_t k = 0; k < K; ++k) {
      if (!usable(p, j, k)) continue;
      var[j][k] = lp.add_var(0.0, 0.0, kLpInf);
      work_cols.push_back(var[j][k]);
      work_vals.push_back(p.throughput[j][k] * scale / p.remaining[j]);
      time_cols.push_back(var[j][k]);
      time_vals.push_back(1.0);
      type_cols[k].push_back(var[j][k]);
      type_vals[k].push_back(p.gpus[j]);
    }
    lp.add_row(1.0, kLpInf, work_cols, work_vals);  // finishes its remaining work
    lp.add_row(-kLpInf, 0.0, time_cols, time_vals);  // sum_k y <= T
  }
  for (size_t k = 0; k < K; ++k) {
    if (type_cols[k].empty()) continue;
    type_cols[k].push_back(T);
    type_vals[k].push_back(-static_cast<double>(p.capacity[k]));
    lp.add_row(-kLpInf, 0.0, type_cols[k], type_vals[k]);  // sum_j W_j y <= C_k T
  }
  const bool warm = basis && p.ids.size() == n;
  std::vector<int> work_row(n, -1), time_row(n, -1), type_row(K, -1);
  if (warm) {
    // Rows were added per job (work, time) in `in` order, then one per type.
    int row = 0;
    for (size_t j : in) {
      work_row[j] = row++;
      time_row[j] = row++;
    }
    for (size_t k = 0; k < K; ++k)
      if (!type_cols[k].empty()) type_row[k] = row++;
    if (!basis->jobs.empty()) {
      lp.col_basis.assign(lp.num_vars(), LpBasis::at_lower);
      lp.row_basis.assign(lp.num_rows(), LpBasis::basic);
      lp.col_basis[T] = basis->t;
      for (size_t j : in) {
        const auto it = basis->jobs.find(p.ids[j]);
        if (it == basis->jobs.end()) continue;
        for (size_t k = 0; k < K && k < it->second.vars.size(); ++k)
          if (var[j][k] >= 0) lp.col_basis[var[j][k]] = it->second.vars[k];
        lp.row_basis[work_row[j]] = it->second.work;
        lp.row_basis[time_row[j]] = it->second.time;
      }
      for (size_t k = 0; k < K && k < basis->type_rows.size(); ++k)
        if (type_row[k] >= 0) lp.row_basis[type_row[k]] = basis->type_rows[k];
    }
  }
  const LpSolution sol = solve_lp(lp);
  if (warm) {
    basis->jobs.clear();
    basis->t = sol.col_basis[T];
    basis->type_rows.assign(K, LpBasis::basic);
    for (size_t k = 0; k < K; ++k)
      if (type_row[k] >= 0) basis->type_rows[k] = sol.row_basis[type_row[k]];
    for (size_t j : in) {
      GavelBasis::Job& b = basis->jobs[p.ids[j]];
      b.vars.assign(K, LpBasis::at_lower);
      for (size_t k = 0; k < K; ++k)
        if (var[j][k] >= 0) b.vars[k] = sol.col_basis[var[j][k]];
      b.work = sol.row_basis[work_row[j]];
      b.time = sol.row_basis[time_row[j]];
    }
  }
  const double t = sol.x[T];
  out.objective = t * scale;
  if (t > 0)
    for (size_t j : in)
      for (size_t k = 0; k < K; ++k)
        if (var[j][k] >= 0) out.x[j][k] = std::clamp(sol.x[var[j][k]] / t, 0.0, 1.0);
  return out;
}

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

  void decide(const RoundContext& ctx, std::vector<Allocation>& out) override {
    const Cluster& cluster = *ctx.cluster;
    const auto& jobs = *ctx.jobs;
    if (ctx.now < last_now_ || cluster_ != &cluster) reset(cluster);
    last_now_ = ctx.now;
    const size_t K = types_.size();

    // Track new jobs, forget departed ones; re-solve when the set changed.
    std::vector<int64_t> ids;
    ids.reserve(jobs.size());
    for (const JobState* s : jobs) ids.push_back(s->job->id);
    std::vector<int64_t> sorted_ids = ids;
    std::sort(sorted_ids.begin(), sorted_ids.end());
    if (sorted_ids != lp_jobs_) {
      std::unordered_map<int64_t, Track> kept;
      for (const JobState* s : jobs) {
        auto it = track_.find(s->job->id);
        if (it != track_.end()) {
          kept.emplace(s->job->id, std::move(it->second));
        } else {
          Track t;
          t.first_seen = ctx.now;
          t.received.assign(K, 0.0);
          t.throughput.assign(K, 0.0);
          for (size_t k = 0; k < K; ++k)
            if (s->job->gpus <= capacity_[k])
              t.throughput[k] = ctx.oracle->throughput(*s->job, types_[k], s->job->gpus, true);
          kept.emplace(s->job->id, std::move(t));
        }
      }
      track_ = std::move(kept);
      solve(jobs);
      lp_jobs_ = std::move(sorted_ids);
    }

    // Candidate (job, type) pairs by descending priority.
    struct Pair {
      int job;
      int type;
      double priority;
      double x;
    };
    std::vector<Pair> pairs;
    std::vector<Track*> tracks(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      Track& t = track_.at(jobs[i]->job->id);
      tracks[i] = &t;
      const double elapsed = ctx.now - t.first_seen;
      for (size_t k = 0; k < K; ++k) {
        if (t.throughput[k] <= 0) continue;
        double prio = 0;
        if (t.x[k] > 0) {
          prio = (t.received[k] <= 0 || elapsed <= 0)
                     ? std::numeric_limits<double>::infinity()
                     : t.x[k] / (t.received[k] / elapsed);
        }
        pairs.push_back({static_cast<int>(i), static_cast<int>(k), prio, t.x[k]});
      }
    }
    std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      return a.x > b.x;  // then arrival order (stable)
    });

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
    std::vector<Allocation> prev(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      prev[i] = std::move(out[i]);
      out[i] = Allocation{};
    }
    std::vector<char> placed(jobs.size(), 0);
    type_free = capacity_;
    auto keep = [&](size_t i, int k) {
      const Allocation& a = prev[i];
      if (a.workers.empty() || !a.copies.empty()) return false;
      for (const Placement& p : a.workers)
        if (node_type_[p.node] != k || free[p.node] < p.gpus) return false;
      for (const Placement& p : a.workers) free[p.node] -= p.gpus;
      out[i].workers = a.workers;
      return true;
    };
    auto take = [&](size_t i, int k) {
      const int w = jobs[i]->job->gpus;
      if (placed[i] || type_free[k] < w) return;
      if (!keep(i, k)) {
        std::vector<Placement> ps = place_fewest_nodes(free, w, &type_mask_[k]);
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

  void reset(const Cluster& cluster) {
    cluster_ = &cluster;
    track_.clear();
    lp_jobs_.clear();
    basis_ = GavelBasis();
    types_ = cluster.gpu_types();
    capacity_.assign(types_.size(), 0);
    node_type_.assign(cluster.nodes.size(), 0);
    type_mask_.assign(types_.size(), std::vector<char>(cluster.nodes.size(), 0));
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      const int k = static_cast<int>(
          std::find(types_.begin(), types_.end(), cluster.nodes[n].gpu_type) - types_.begin());
      node_type_[n] = k;
      capacity_[k] += cluster.nodes[n].gpus;
      type_mask_[k][n] = 1;
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
    for (size_t i = 0; i < jobs.size(); ++i) track_.at(jobs[i]->job->id).x = a.x[i];
  }

  bool makespan_;
  const Cluster* cluster_ = nullptr;
  double last_now_ = -std::numeric_limits<double>::infinity();
  std::vector<std::string> types_;
  std::vector<int> capacity_;
  std::vector<int> node_type_;
  std::vector<std::vector<char>> type_mask_;
  std::unordered_map<int64_t, Track> track_;
  std::vector<int64_t> lp_jobs_;
  GavelBasis basis_;  // the last makespan LP's, for the next one's warm start
};

}  // namespace

std::unique_ptr<Policy> make_gavel(bool makespan) { return std::make_unique<Gavel>(makespan); }

}  // namespace cellsched
