#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cellsched {

double percentile_of_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, p);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double median(std::vector<double> values) { return percentile(std::move(values), 50); }

double iqr(std::vector<double> values) {
  if (values.size() < 2) return 0;
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, 75) - percentile_of_sorted(values, 25);
}

bool median_far_above_fastest(const std::vector<double>& samples, double share) {
  if (samples.size() < 2) return false;
  const double mid = median(samples);
  return mid > 0 && mid - *std::min_element(samples.begin(), samples.end()) > share * mid;
}

}  // namespace cellsched
