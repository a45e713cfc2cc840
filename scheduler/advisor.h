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

// The advisor's model of one job: Amdahl fitted by least squares on
// n / thr = (1 - sigma) / t1 + (sigma / t1) * n, which is linear in n.
class ScalingAdvisor {
 public:
  // `prior_sigma` is used until two distinct sizes have been sampled.
  explicit ScalingAdvisor(int max_nodes, double prior_sigma = 0.1)
      : max_nodes_(max_nodes), prior_sigma_(prior_sigma) {}

  void add_sample(int nodes, double throughput);
  // Replaces the newest sample (a longer measurement of the same window).
  void replace_last(int nodes, double throughput);
  int samples() const { return static_cast<int>(samples_.size()); }
  int distinct_sizes() const;
  bool sampled(int nodes) const;
  // The fitted (or prior) parameters; t1 = 0 before any sample.
  double t1() const { return t1_; }
  double sigma() const { return sigma_; }
  ScalingCurve curve() const;

 private:
  void refit();
  int max_nodes_;
  double prior_sigma_;
  double t1_ = 0, sigma_ = 0;
  std::vector<std::pair<int, double>> samples_;
};

// Largest relative error |a(n) - b(n)| / b(n) over n = 1..b.max_nodes().
double curve_error(const ScalingCurve& a, const ScalingCurve& b);

}  // namespace cellsched
