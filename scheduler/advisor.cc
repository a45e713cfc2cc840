#include "scheduler/advisor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace cellsched {

ScalingCurve amdahl_curve(double t1, double sigma, int max_nodes) {
  ScalingCurve c;
  for (int n = 1; n <= max_nodes; ++n) c.thr.push_back(t1 * n / (1 + sigma * (n - 1)));
  return c;
}

namespace {

bool valid(int nodes, double throughput) { return nodes >= 1 && throughput > 0 && std::isfinite(throughput); }

}  // namespace

void ScalingAdvisor::Sums::add(double x, double y, double weight) {
  const double w = weight / (y * y);
  s0 += w;
  s1 += w * x;
  s2 += w * x * x;
  sy += w * y;
  sxy += w * x * y;
}

void ScalingAdvisor::add_sample(int nodes, double throughput, double weight) {
  if (!valid(nodes, throughput)) return;
  samples_.push_back({nodes, throughput, std::max(1.0, weight)});
  refit();
}

void ScalingAdvisor::replace_last(int nodes, double throughput, double weight) {
  if (samples_.empty()) return add_sample(nodes, throughput, weight);
  if (!valid(nodes, throughput)) return;
  samples_.back() = {nodes, throughput, std::max(1.0, weight)};
  refit();
}

int ScalingAdvisor::distinct_sizes() const {
  std::set<int> s;
  for (const Sample& x : samples_) s.insert(x.nodes);
  return static_cast<int>(s.size());
}

bool ScalingAdvisor::sampled(int nodes) const {
  return std::any_of(samples_.begin(), samples_.end(), [&](const Sample& s) { return s.nodes == nodes; });
}

void ScalingAdvisor::refit() {
  sums_ = {};
  for (const Sample& s : samples_) sums_.add(s.nodes, s.nodes / s.thr, s.weight);
  if (distinct_sizes() < 2) {
    // One size seen: anchor the prior's shape on the weighted mean of its samples.
    double sum = 0, weights = 0;
    for (const Sample& s : samples_) {
      sum += s.weight * s.thr * (1 + prior_sigma_ * (s.nodes - 1)) / s.nodes;
      weights += s.weight;
    }
    t1_ = sum / weights;
    sigma_ = prior_sigma_;
    return;
  }
  // y = n / thr = a + b n with a = (1 - sigma) / t1, b = sigma / t1.
  const Sums& m = sums_;
  const double den = m.det();
  double b = den > 0 ? (m.s0 * m.sxy - m.s1 * m.sy) / den : 0;
  double a = (m.sy - b * m.s1) / m.s0;
  // a + b = 1 / t1 (the one-node point); keep sigma = b / (a + b) in [0, 1].
  b = std::max(b, 0.0);
  if (a < 0) a = 0;
  const double inv_t1 = a + b;
  if (!(inv_t1 > 0)) return;
  t1_ = 1 / inv_t1;
  sigma_ = std::clamp(b / inv_t1, 0.0, 1.0);
}

ScalingCurve ScalingAdvisor::curve() const {
  return amdahl_curve(t1_ > 0 ? t1_ : 1, sigma_ > 0 || distinct_sizes() >= 2 ? sigma_ : prior_sigma_, max_nodes_);
}

double ScalingAdvisor::uncertainty(int extra_nodes, double extra_weight) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (samples_.empty() || max_nodes_ < 1 || !(t1_ > 0)) return kInf;
  Sums m = sums_;
  if (extra_nodes >= 1) {
    const int n = std::min(extra_nodes, max_nodes_);
    m.add(n, fitted_y(n), std::max(1.0, extra_weight));
  }
  // Var(a + b n) = (s2 - 2 n s1 + n^2 s0) / det, in units of one probe's.
  const double den = m.det();
  if (!(den > 1e-12 * m.s0 * m.s2)) return kInf;
  double worst = 0;
  for (const int n : {1, max_nodes_}) {
    const double var = (m.s2 - 2.0 * n * m.s1 + double(n) * n * m.s0) / den;
    worst = std::max(worst, std::sqrt(std::max(0.0, var)) / fitted_y(n));
  }
  return worst;
}

int ScalingAdvisor::most_informative(int cap, double weight) const {
  int best = 0;
  double least = std::numeric_limits<double>::infinity();
  for (int n = 1; n <= std::min(cap, max_nodes_); ++n) {
    const double u = uncertainty(n, weight);
    if (best == 0 || u < least) {
      best = n;
      least = u;
    }
  }
  return samples_.empty() ? 0 : best;
}

int ScalingAdvisor::explore_size(int cap, double weight, double until) const {
  const int n = most_informative(cap, weight);
  if (n < 1) return 0;
  // Infinite: one size seen, and a window that offers only that size.
  const double after = uncertainty(n, weight);
  const double best = uncertainty(most_informative(max_nodes_, weight), weight);
  return std::isfinite(after) && after <= std::max(until, kExploreSlack * best) ? n : 0;
}

double curve_error(const ScalingCurve& a, const ScalingCurve& b) {
  double worst = 0;
  for (int n = 1; n <= b.max_nodes(); ++n)
    if (b.at(n) > 0) worst = std::max(worst, std::abs(a.at(n) - b.at(n)) / b.at(n));
  return worst;
}

}  // namespace cellsched
