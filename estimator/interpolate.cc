#include "estimator/interpolate.h"

#include <algorithm>
#include <map>

namespace cellsched::estimator {

Curve::Curve(std::vector<std::pair<double, double>> points) {
  std::map<double, std::pair<double, int>> merged;
  for (const auto& [x, y] : points) {
    auto& m = merged[x];
    m.first += y;
    m.second += 1;
  }
  for (const auto& [x, sum_n] : merged) {
    xs_.push_back(x);
    ys_.push_back(sum_n.first / sum_n.second);
  }
  const size_t n = xs_.size();
  if (n >= 2) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; ++i) {
      sx += xs_[i];
      sy += ys_[i];
      sxx += xs_[i] * xs_[i];
      sxy += xs_[i] * ys_[i];
    }
    const double den = n * sxx - sx * sx;
    if (den > 0) {
      beta_ = (n * sxy - sx * sy) / den;
      alpha_ = (sy - beta_ * sx) / n;
      fit_ok_ = beta_ > 0;
    }
  }
}

double Curve::operator()(double x) const {
  if (xs_.empty()) return 0;
  if (in_range(x)) {
    const auto it = std::lower_bound(xs_.begin(), xs_.end(), x);
    const size_t i = static_cast<size_t>(it - xs_.begin());
    if (xs_[i] == x) return ys_[i];
    const double t = (x - xs_[i - 1]) / (xs_[i] - xs_[i - 1]);
    return ys_[i - 1] + t * (ys_[i] - ys_[i - 1]);
  }
  if (fit_ok_) return std::max(0.0, alpha_ + beta_ * x);
  const size_t i = x < xs_.front() ? 0 : xs_.size() - 1;
  return ys_[i] * x / xs_[i];
}

}  // namespace cellsched::estimator
