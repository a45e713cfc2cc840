// Gavel (Narayanan et al., OSDI 2020): the heterogeneity-aware allocation LPs
// (scheduler/gavel.h). The round mechanism that realises their time
// fractions is scheduler/gavel.cc.
#include "scheduler/gavel.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "scheduler/lp.h"

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

// A hash of a class key that agrees with its ==: -0.0 and 0.0 hash alike.
size_t class_hash(const std::vector<double>& throughput, int gpus, double weight) {
  const std::hash<double> hd;
  auto h1 = [&](double v) { return hd(v == 0 ? 0.0 : v); };
  size_t h = std::hash<int>()(gpus) * 31 + h1(weight);
  for (double v : throughput) h = h * 1000003 ^ h1(v);
  return h;
}

// The warm-start hand-over both LPs share. An entity (a class of jobs, or a
// job) has its rows 2e and 2e + 1 and one column per type (`cols`, -1 where
// it has none); then come one row per used type (`type_row`) and column `t`.
void restore_basis(const GavelBasis& basis, int t, const std::vector<int>& type_row, LinearProgram& lp) {
  lp.col_basis.assign(lp.num_vars(), LpBasis::at_lower);
  lp.row_basis.assign(lp.num_rows(), LpBasis::basic);
  lp.col_basis[t] = basis.t;
  for (size_t k = 0; k < type_row.size() && k < basis.type_rows.size(); ++k)
    if (type_row[k] >= 0) lp.row_basis[type_row[k]] = basis.type_rows[k];
}
void restore_entity(const GavelBasis::Job& b, const int* cols, size_t K, size_t e, LinearProgram& lp) {
  for (size_t k = 0; k < K && k < b.vars.size(); ++k)
    if (cols[k] >= 0) lp.col_basis[cols[k]] = b.vars[k];
  lp.row_basis[2 * e] = b.work;
  lp.row_basis[2 * e + 1] = b.time;
}
// Kept in place, not rebuilt each solve: the entities saved after this
// returns carry its stamp, and erase_stale() drops the others.
unsigned save_basis(GavelBasis& basis, int t, const std::vector<int>& type_row, const LpSolution& sol) {
  basis.t = sol.col_basis[t];
  basis.type_rows.assign(type_row.size(), LpBasis::basic);
  for (size_t k = 0; k < type_row.size(); ++k)
    if (type_row[k] >= 0) basis.type_rows[k] = sol.row_basis[type_row[k]];
  return ++basis.stamp;
}
void save_entity(GavelBasis::Job& b, const int* cols, size_t K, size_t e, const LpSolution& sol, unsigned stamp) {
  b.stamp = stamp;
  b.vars.assign(K, LpBasis::at_lower);
  for (size_t k = 0; k < K; ++k)
    if (cols[k] >= 0) b.vars[k] = sol.col_basis[cols[k]];
  b.work = sol.row_basis[2 * e];
  b.time = sol.row_basis[2 * e + 1];
}
template <class Map>
void erase_stale(Map& entities, unsigned stamp) {
  std::erase_if(entities, [stamp](const auto& entry) { return entry.second.stamp != stamp; });
}

// The max-min LP's tie-break weight (see gavel_max_min_fairness).
constexpr double kTieBreak = 1e-3;

// Whether job j can run on type k at all.
bool usable(const GavelProblem& p, size_t j, size_t k) {
  return p.throughput[j][k] > 0 && p.gpus[j] > 0 && p.gpus[j] <= p.capacity[k];
}

// The jobs that can run on some type (the others get no share).
std::vector<size_t> runnable_jobs(const GavelProblem& p) {
  std::vector<size_t> in;
  for (size_t j = 0; j < p.throughput.size(); ++j)
    for (size_t k = 0; k < p.capacity.size(); ++k)
      if (usable(p, j, k)) {
        in.push_back(j);
        break;
      }
  return in;
}

double weight_of(const GavelProblem& p, size_t j) { return p.weight[j] > 0 ? p.weight[j] : 1.0; }

// Jobs with the same throughputs, gang size and weight are interchangeable:
// the max-min LP is symmetric in them and convex, so some optimum gives them
// equal shares. One set of variables per such class, its GPUs counted
// `members` times, solves the same LP (same optimum t) with far fewer
// columns: the Philly trace's thousands of active jobs fall into a few
// hundred classes (job type x gang size). Classes are found by a hash of the
// key (no copy of a job's throughputs per solve).
struct JobClass {
  size_t first;  // a member: its throughputs, gang size, weight
  std::vector<size_t> members;
};

std::vector<JobClass> job_classes(const GavelProblem& p, const std::vector<size_t>& in) {
  std::vector<JobClass> classes;
  auto same_class = [&](size_t a, size_t b) {
    return p.gpus[a] == p.gpus[b] && weight_of(p, a) == weight_of(p, b) && p.throughput[a] == p.throughput[b];
  };
  std::unordered_multimap<size_t, size_t> class_of;  // key hash -> class
  class_of.reserve(in.size());
  for (size_t j : in) {
    const size_t h = class_hash(p.throughput[j], p.gpus[j], weight_of(p, j));
    size_t found = classes.size();
    for (auto [it, end] = class_of.equal_range(h); it != end; ++it)
      if (same_class(classes[it->second].first, j)) {
        found = it->second;
        break;
      }
    if (found == classes.size()) {
      class_of.emplace(h, found);
      classes.push_back({j, {}});
    }
    classes[found].members.push_back(j);
  }
  return classes;
}

}  // namespace

size_t GavelBasis::ClassKeyHash::operator()(const ClassKey& key) const {
  return class_hash(std::get<0>(key), std::get<1>(key), std::get<2>(key));
}

GavelAllocation gavel_max_min_fairness(const GavelProblem& p, GavelBasis* basis) {
  check_problem(p, true, false);
  const size_t n = p.throughput.size(), K = p.capacity.size();
  GavelAllocation out;
  out.x.assign(n, std::vector<double>(K, 0.0));
  const std::vector<size_t> in = runnable_jobs(p);
  if (in.empty()) return out;
  const double share = 1.0 / static_cast<double>(in.size());

  const std::vector<JobClass> classes = job_classes(p, in);
  std::vector<GavelBasis::ClassKey> keys;
  if (basis) {
    keys.reserve(classes.size());
    for (const JobClass& c : classes) keys.emplace_back(p.throughput[c.first], p.gpus[c.first], weight_of(p, c.first));
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
    restore_basis(*basis, t, type_row, lp);
    for (size_t c = 0; c < classes.size(); ++c)
      if (const auto it = basis->classes.find(keys[c]); it != basis->classes.end())
        restore_entity(it->second, var[c].data(), K, c, lp);
  }
  const LpSolution sol = solve_lp(lp);
  if (basis) {
    const unsigned stamp = save_basis(*basis, t, type_row, sol);
    for (size_t c = 0; c < classes.size(); ++c)
      save_entity(basis->classes[std::move(keys[c])], var[c].data(), K, c, sol, stamp);
    erase_stale(basis->classes, stamp);
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
  // Rows: per job in `in` order (work 2i, time 2i + 1), then one per used
  // type. Entries go straight into the LP (no per-row vectors): thousands of
  // these LPs are built on the Philly trace.
  const size_t m = in.size();
  LinearProgram lp;
  lp.presolve = false;
  lp.cost.reserve(1 + m * K);
  lp.col_lower.reserve(1 + m * K);
  lp.col_upper.reserve(1 + m * K);
  lp.row_lower.reserve(2 * m + K);
  lp.row_upper.reserve(2 * m + K);
  lp.entry_row.reserve(m * (3 * K + 1) + K);
  lp.entry_col.reserve(m * (3 * K + 1) + K);
  lp.entry_value.reserve(m * (3 * K + 1) + K);
  const int T = lp.add_var(1.0, 0.0, kLpInf);
  std::vector<int> var(m * K, -1);  // var[i * K + k]: job in[i]'s column on type k
  std::vector<char> type_used(K, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t j = in[i];
    const int work_row = static_cast<int>(2 * i), time_row = work_row + 1;
    lp.row_lower.push_back(1.0);  // finishes its remaining work
    lp.row_upper.push_back(kLpInf);
    lp.row_lower.push_back(-kLpInf);  // sum_k y <= T
    lp.row_upper.push_back(0.0);
    lp.add_entry(time_row, T, -1.0);
    for (size_t k = 0; k < K; ++k) {
      if (!usable(p, j, k)) continue;
      const int v = lp.add_var(0.0, 0.0, kLpInf);
      var[i * K + k] = v;
      type_used[k] = 1;
      lp.add_entry(work_row, v, p.throughput[j][k] * scale / p.remaining[j]);
      lp.add_entry(time_row, v, 1.0);
    }
  }
  std::vector<int> type_row(K, -1);
  for (size_t k = 0; k < K; ++k) {
    if (!type_used[k]) continue;
    type_row[k] = lp.num_rows();
    lp.row_lower.push_back(-kLpInf);  // sum_j W_j y <= C_k T
    lp.row_upper.push_back(0.0);
    for (size_t i = 0; i < m; ++i)
      if (var[i * K + k] >= 0) lp.add_entry(type_row[k], var[i * K + k], p.gpus[in[i]]);
    lp.add_entry(type_row[k], T, -static_cast<double>(p.capacity[k]));
  }
  const bool warm = basis && p.ids.size() == n;
  if (warm && !basis->jobs.empty()) {
    restore_basis(*basis, T, type_row, lp);
    for (size_t i = 0; i < m; ++i)
      if (const auto it = basis->jobs.find(p.ids[in[i]]); it != basis->jobs.end())
        restore_entity(it->second, &var[i * K], K, i, lp);
  }
  const LpSolution sol = solve_lp(lp);
  if (warm) {
    const unsigned stamp = save_basis(*basis, T, type_row, sol);
    for (size_t i = 0; i < m; ++i) save_entity(basis->jobs[p.ids[in[i]]], &var[i * K], K, i, sol, stamp);
    erase_stale(basis->jobs, stamp);
  }
  const double t = sol.x[T];
  out.objective = t * scale;
  if (t > 0)
    for (size_t i = 0; i < m; ++i)
      for (size_t k = 0; k < K; ++k)
        if (var[i * K + k] >= 0) out.x[in[i]][k] = std::clamp(sol.x[var[i * K + k]] / t, 0.0, 1.0);
  return out;
}

}  // namespace cellsched
