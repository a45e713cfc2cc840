#include "scheduler/advisor.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace cellsched {

ScalingCurve amdahl_curve(double t1, double sigma, int max_nodes) {
  ScalingCurve c;
  for (int n = 1; n <= max_nodes; ++n) c.thr.push_back(t1 * n / (1 + sigma * (n - 1)));
  return c;
}

void ScalingAdvisor::add_sample(int nodes, double throughput) {
  if (nodes < 1 || !(throughput > 0) || !std::isfinite(throughput)) return;
  samples_.emplace_back(nodes, throughput);
  refit();
}

void ScalingAdvisor::replace_last(int nodes, double throughput) {
  if (samples_.empty()) return add_sample(nodes, throughput);
  if (nodes < 1 || !(throughput > 0) || !std::isfinite(throughput)) return;
  samples_.back() = {nodes, throughput};
  refit();
}

int ScalingAdvisor::distinct_sizes() const {
  std::set<int> s;
  for (const auto& [n, t] : samples_) s.insert(n);
  return static_cast<int>(s.size());
}

bool ScalingAdvisor::sampled(int nodes) const {
  return std::any_of(samples_.begin(), samples_.end(), [&](const auto& s) { return s.first == nodes; });
}

void ScalingAdvisor::refit() {
  if (distinct_sizes() < 2) {
    // One size seen: anchor the prior's shape on the mean of its samples.
    double sum = 0;
    for (const auto& [n, t] : samples_) sum += t * (1 + prior_sigma_ * (n - 1)) / n;
    t1_ = sum / static_cast<double>(samples_.size());
    sigma_ = prior_sigma_;
    return;
  }
  // y = n / thr = a + b n with a = (1 - sigma) / t1, b = sigma / t1.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double k = static_cast<double>(samples_.size());
  for (const auto& [n, t] : samples_) {
    const double x = n, y = n / t;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double den = k * sxx - sx * sx;
  double b = den != 0 ? (k * sxy - sx * sy) / den : 0;
  double a = (sy - b * sx) / k;
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

double curve_error(const ScalingCurve& a, const ScalingCurve& b) {
  double worst = 0;
  for (int n = 1; n <= b.max_nodes(); ++n)
    if (b.at(n) > 0) worst = std::max(worst, std::abs(a.at(n) - b.at(n)) / b.at(n));
  return worst;
}

}  // namespace cellsched
