// Piecewise-linear interpolation over measured points, with an alpha-beta
// (least-squares line) fit of the same points beyond the measured range.
#pragma once

#include <utility>
#include <vector>

namespace cellsched::estimator {

class Curve {
 public:
  Curve() = default;
  // Points (x, y) in any order; equal x are averaged. x must be > 0.
  explicit Curve(std::vector<std::pair<double, double>> points);

  bool empty() const { return xs_.empty(); }
  double min_x() const { return xs_.front(); }
  double max_x() const { return xs_.back(); }

  // y at x: linear between the two measured neighbours; outside [min_x, max_x]
  // the fit alpha + beta x (never below 0). With a single point, or when the
  // fit has a negative slope, y scales in proportion to x from the nearest point.
  double operator()(double x) const;

  // The least-squares fit y = alpha + beta x over all points.
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  bool in_range(double x) const { return !xs_.empty() && x >= xs_.front() && x <= xs_.back(); }

 private:
  std::vector<double> xs_, ys_;
  double alpha_ = 0, beta_ = 0;
  bool fit_ok_ = false;
};

}  // namespace cellsched::estimator
