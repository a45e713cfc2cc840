#include "scheduler/bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "scheduler/lp.h"
#include "scheduler/oracle.h"

namespace cellsched {
namespace {

// Boundaries (relative release times) of at most `m` intervals: the first
// release, then half by job count (quantiles), half evenly in time, each
// snapped down to a release time so that those jobs keep their exact release.
std::vector<double> interval_starts(std::vector<double> releases, int m) {
  std::sort(releases.begin(), releases.end());
  std::vector<double> distinct = releases;
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (static_cast<int>(distinct.size()) <= m) return distinct;
  std::vector<double> b = {distinct.front()};
  const int by_count = std::max(1, (m - 1) / 2), by_time = m - 1 - by_count;
  const size_t n = releases.size();
  for (int q = 1; q <= by_count; ++q)
    b.push_back(releases[std::min(n - 1, static_cast<size_t>(static_cast<double>(q) * n / (by_count + 1)))]);
  const double lo = distinct.front(), hi = distinct.back();
  for (int q = 1; q <= by_time; ++q) {
    const double t = lo + (hi - lo) * q / (by_time + 1);
    b.push_back(*(std::upper_bound(distinct.begin(), distinct.end(), t) - 1));
  }
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

// Best per-GPU rate of a job on each GPU type, cached by what a throughput
// table keys on (the vectors stay put: classes point at them).
class RateCache {
 public:
  RateCache(const ThroughputOracle& oracle, const std::vector<std::string>& types, bool forking, int max_scale)
      : oracle_(oracle), types_(types), forking_(forking), max_scale_(max_scale) {}
  const std::vector<double>& of(const Job& job) {
    auto key = std::make_tuple(job.job_type, job.model, job.gpus);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::vector<double> r(types_.size(), 0.0);
    for (size_t k = 0; k < types_.size(); ++k) {
      const int hi = forking_ ? std::max(job.gpus, max_scale_) : job.gpus;
      for (int c = forking_ ? 1 : job.gpus; c <= hi; ++c) {
        const double v = std::max(oracle_.throughput(job, types_[k], c, true),
                                  oracle_.throughput(job, types_[k], c, false));
        if (v > 0 && std::isfinite(v)) r[k] = std::max(r[k], v / c);
      }
    }
    return cache_.emplace(key, std::move(r)).first->second;
  }

 private:
  const ThroughputOracle& oracle_;
  const std::vector<std::string>& types_;
  bool forking_;
  int max_scale_;
  std::map<std::tuple<std::string, std::string, int>, std::vector<double>> cache_;
};

// A job the bound counts: its per-GPU rates, release (from the first
// arrival), work and gang size.
struct Item {
  const std::vector<double>* rate;
  double release;
  double work;
  int gpus;
};

// Jobs with the same per-GPU rates and (without forking) the same gang
// size, by release interval.
struct Class {
  std::vector<double> work;  // released per interval
  std::vector<double> jobs;  // jobs released per interval
  const std::vector<double>* rate = nullptr;
  int gpus = 0;
};

std::vector<Class> group_classes(const std::vector<Item>& items, const std::vector<double>& b, bool forking) {
  const size_t m = b.size();
  std::map<std::pair<const std::vector<double>*, int>, size_t> class_of;
  std::vector<Class> classes;
  for (const Item& it : items) {
    const auto key = std::make_pair(it.rate, forking ? 0 : it.gpus);
    auto [pos, fresh] = class_of.emplace(key, classes.size());
    if (fresh) {
      Class c;
      c.work.assign(m, 0.0);
      c.jobs.assign(m, 0.0);
      c.rate = it.rate;
      c.gpus = it.gpus;
      classes.push_back(std::move(c));
    }
    Class& c = classes[pos->second];
    const auto i = static_cast<size_t>(std::upper_bound(b.begin(), b.end(), it.release) - b.begin()) - 1;
    c.work[i] += it.work;
    c.jobs[i] += 1;
  }
  return classes;
}

// The LP in time unit U (GPU-U per GPU column, T' = T / U): `b` the interval
// starts, `cap` the GPUs of each type, T the makespan column.
struct LpFrame {
  LinearProgram& lp;
  const std::vector<double>& b;
  const std::vector<double>& cap;
  double U;
  int T;
  double len(int i) const { return (b[static_cast<size_t>(i) + 1] - b[static_cast<size_t>(i)]) / U; }
};

// One class's columns and rows: per interval from its first release, the
// share of its work done by the interval's end (done_i = done_{i-1} + work
// in i) and, without forking, at most W GPUs per job released so far. Its
// GPU columns go to `cap_cols` [k * m + i] for the capacity rows.
void add_class(LpFrame& f, const Class& c, bool forking, std::vector<std::vector<int>>& cap_cols) {
  const int m = static_cast<int>(f.b.size());
  const size_t K = f.cap.size();
  double total = 0;
  for (double w : c.work) total += w;
  int start = 0;
  while (c.work[static_cast<size_t>(start)] <= 0) ++start;
  double cum = 0, jobs = 0;
  int prev_done = -1;
  for (int i = start; i < m; ++i) {
    cum += c.work[static_cast<size_t>(i)];
    jobs += c.jobs[static_cast<size_t>(i)];
    const bool last = i == m - 1;
    const int done = f.lp.add_var(0.0, last ? 1.0 : 0.0, std::min(1.0, cum / total));
    std::vector<int> cols = {done};
    std::vector<double> vals = {1.0};
    if (prev_done >= 0) {
      cols.push_back(prev_done);
      vals.push_back(-1.0);
    }
    std::vector<int> par_cols;
    for (size_t k = 0; k < K; ++k) {
      if ((*c.rate)[k] <= 0) continue;
      const int g = f.lp.add_var(0.0);
      cols.push_back(g);
      vals.push_back(-(*c.rate)[k] * f.U / total);
      par_cols.push_back(g);
      cap_cols[k * static_cast<size_t>(m) + static_cast<size_t>(i)].push_back(g);
    }
    f.lp.add_row(0.0, 0.0, cols, vals);
    prev_done = done;
    if (forking) continue;
    const double par = c.gpus * jobs;
    std::vector<double> ones(par_cols.size(), 1.0);
    if (!last) {
      f.lp.add_row(-kLpInf, par * f.len(i), par_cols, ones);
    } else {
      par_cols.push_back(f.T);
      ones.push_back(-par);
      f.lp.add_row(-kLpInf, -par * f.b.back() / f.U, par_cols, ones);
    }
  }
}

// Each type's GPUs per interval; the last interval runs until T.
void add_capacity(LpFrame& f, std::vector<std::vector<int>>& cap_cols) {
  const int m = static_cast<int>(f.b.size());
  for (size_t k = 0; k < f.cap.size(); ++k) {
    for (int i = 0; i < m; ++i) {
      std::vector<int>& cols = cap_cols[k * static_cast<size_t>(m) + static_cast<size_t>(i)];
      if (cols.empty()) continue;
      std::vector<double> ones(cols.size(), 1.0);
      if (i < m - 1) {
        f.lp.add_row(-kLpInf, f.cap[k] * f.len(i), cols, ones);
      } else {
        cols.push_back(f.T);
        ones.push_back(-f.cap[k]);
        f.lp.add_row(-kLpInf, -f.cap[k] * f.b.back() / f.U, cols, ones);
      }
    }
  }
}

}  // namespace

double makespan_lower_bound(const Trace& trace, const Cluster& cluster,
                            const ThroughputOracle& oracle, int max_intervals, bool forking,
                            int max_scale) {
  return solve_lower_bound(build_lower_bound(trace, cluster, oracle, max_intervals, forking, max_scale));
}

double solve_lower_bound(const LowerBoundLp& b) {
  if (b.t_col < 0) return b.t_min;
  const LpSolution sol = solve_lp(b.lp);
  // A hair below the LP optimum, so that solver tolerances never lift it above.
  return std::max(sol.x[static_cast<size_t>(b.t_col)] * b.unit * (1 - 1e-9), b.t_min);
}

LowerBoundLp build_lower_bound(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                               int max_intervals, bool forking, int max_scale) {
  if (max_intervals < 1) throw std::invalid_argument("makespan_lower_bound: max_intervals < 1");
  LowerBoundLp out;
  if (trace.jobs.empty()) return out;
  const std::vector<std::string> types = cluster.gpu_types();
  const size_t K = types.size();
  std::vector<double> cap(K);
  for (size_t k = 0; k < K; ++k) cap[k] = cluster.gpus_of_type(types[k]);
  double first = std::numeric_limits<double>::infinity();
  for (const Job& j : trace.jobs) first = std::min(first, j.arrival_s);

  RateCache rates(oracle, types, forking, max_scale);
  std::vector<Item> items;
  std::vector<double> releases;
  double t_min = 0;  // T >= release + best isolated time
  for (const Job& j : trace.jobs) {
    if (j.total_iterations <= 0 || j.gpus <= 0) continue;
    const std::vector<double>& r = rates.of(j);
    double best = 0;  // iterations/s the job can reach at most
    for (size_t k = 0; k < K; ++k) best = forking ? best + cap[k] * r[k] : std::max(best, j.gpus * r[k]);
    if (best <= 0) continue;
    const double rel = j.arrival_s - first;
    t_min = std::max(t_min, rel + j.total_iterations / best);
    items.push_back({&r, rel, j.total_iterations, j.gpus});
    releases.push_back(rel);
  }
  if (items.empty()) return out;

  const std::vector<double> b = interval_starts(releases, max_intervals);
  const std::vector<Class> classes = group_classes(items, b, forking);
  // Time unit U keeps the LP well scaled.
  const double U = std::max(1.0, std::max(b.back(), t_min) / 1000.0);
  out.unit = U;
  out.t_min = t_min;
  out.t_col = out.lp.add_var(1.0, std::max(b.back(), t_min) / U, kLpInf);
  LpFrame frame{out.lp, b, cap, U, out.t_col};
  std::vector<std::vector<int>> cap_cols(K * b.size());  // per (k, i)
  for (const Class& c : classes) add_class(frame, c, forking, cap_cols);
  add_capacity(frame, cap_cols);
  return out;
}

}  // namespace cellsched
