// Scaling curves of malleable jobs, and the Job Profiling Advisor that learns
// one online from throughputs sampled at a few sizes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cellsched {

// Iterations/s at 1..max_nodes() nodes.
struct ScalingCurve {
  std::vector<double> thr;  // thr[n-1] at n nodes; all > 0
  int max_nodes() const { return static_cast<int>(thr.size()); }
  double at(int n) const { return n <= 0 || thr.empty() ? 0 : thr[std::min<size_t>(n, thr.size()) - 1]; }
  // Speed-up over one node, at(n) / at(1).
  double speedup(int n) const { return n <= 0 || thr.empty() ? 0 : at(n) / thr[0]; }
};

// Amdahl's law: thr(n) = t1 * n / (1 + sigma * (n - 1)), sigma in [0, 1].
ScalingCurve amdahl_curve(double t1, double sigma, int max_nodes);

// The advisor's model of one job: Amdahl fitted by weighted least squares on
// n / thr = (1 - sigma) / t1 + (sigma / t1) * n, which is linear in n. A
// sample's relative noise is taken to fall with the square root of its
// weight (how many probe lengths it was measured over), so a sample counts
// weight / (n / thr)^2.
class ScalingAdvisor {
 public:
  // `prior_sigma` is used until two distinct sizes have been sampled.
  explicit ScalingAdvisor(int max_nodes, double prior_sigma = 0.1)
      : max_nodes_(max_nodes), prior_sigma_(prior_sigma) {}

  // `weight`: the measurement's length in probe lengths (values below 1 count as 1).
  void add_sample(int nodes, double throughput, double weight = 1);
  // Replaces the newest sample (a longer measurement of the same window).
  void replace_last(int nodes, double throughput, double weight = 1);
  int samples() const { return static_cast<int>(samples_.size()); }
  int distinct_sizes() const;
  bool sampled(int nodes) const;
  int max_nodes() const { return max_nodes_; }
  // The fitted (or prior) parameters; t1 = 0 before any sample.
  double t1() const { return t1_; }
  double sigma() const { return sigma_; }
  ScalingCurve curve() const;

  // The fit's largest standard error over 1..max_nodes, relative to the
  // fitted throughput and in units of one probe's relative noise (1: every
  // size known as well as one probe measures it); infinite before two
  // distinct sizes. With `extra_nodes` > 0 it is the error expected after one
  // more sample there, of `extra_weight`, its throughput taken from the fit.
  // O(1): the largest is at 1 or max_nodes (a hyperbola over a line).
  double uncertainty(int extra_nodes = 0, double extra_weight = 1) const;
  // The size in 1..cap whose sample of `weight` would leave the least
  // uncertainty (ties: the smaller size); 0 before any sample or if cap < 1.
  // For a line fit that is mostly an end of 1..max_nodes: the one farther
  // from the sizes seen.
  int most_informative(int cap, double weight) const;
  // Exploring: sampled, more than one size to choose from, and the
  // uncertainty still above `until`.
  bool exploring(double until) const { return max_nodes_ >= 2 && !samples_.empty() && uncertainty() > until; }
  // While exploring, the size to sample in a window of `cap` nodes and
  // `weight` probe lengths: the most informative one, if it would leave the
  // uncertainty at `until` or at most kExploreSlack times what the best size
  // of all (cap = max_nodes) would leave; else 0 (the window is not worth
  // it: wait for a larger one).
  int explore_size(int cap, double weight, double until) const;
  static constexpr double kExploreSlack = 2;

 private:
  struct Sample {
    int nodes;
    double thr, weight;
  };
  // Weighted sums of x = n and y = n / thr, each sample counting
  // weight / y^2 (a relative noise on thr is one on y).
  struct Sums {
    double s0 = 0, s1 = 0, s2 = 0, sy = 0, sxy = 0;
    void add(double x, double y, double weight);
    double det() const { return s0 * s2 - s1 * s1; }
  };
  void refit();
  double fitted_y(int n) const { return (1 + sigma_ * (n - 1)) / t1_; }  // n / thr on the fit
  int max_nodes_;
  double prior_sigma_;
  double t1_ = 0, sigma_ = 0;
  std::vector<Sample> samples_;
  Sums sums_;  // of samples_, kept by refit()
};

// Largest relative error |a(n) - b(n)| / b(n) over n = 1..b.max_nodes().
double curve_error(const ScalingCurve& a, const ScalingCurve& b);

}  // namespace cellsched
