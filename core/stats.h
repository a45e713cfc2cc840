// Order statistics shared by the metrics, the profiler and `validate`.
#pragma once

#include <vector>

namespace cellsched {

// Percentile by linear interpolation between closest ranks (numpy's default);
// `values` need not be sorted. 0 for an empty vector.
double percentile(std::vector<double> values, double p);
// The same of values already sorted ascending (no copy, no sort).
double percentile_of_sorted(const std::vector<double>& sorted, double p);

// The arithmetic mean; 0 for an empty vector.
double mean(const std::vector<double>& values);

// percentile(values, 50): the middle value, or the mean of the two middle ones.
double median(std::vector<double> values);

// Interquartile range, percentile 75 - percentile 25; 0 for fewer than two values.
double iqr(std::vector<double> values);

// Whether a sample's median lies more than `share` of itself above its
// fastest (smallest) value. A slow phase of the host only slows samples: one
// slow sample of three leaves the median with the fast ones (false), two of
// three move it (true, and more samples can bring it back). The profiler asks
// this of a measurement's passes, `validate` of a configuration's trials.
// Fewer than two samples, or a median that is not positive, give false.
bool median_far_above_fastest(const std::vector<double>& samples, double share);

}  // namespace cellsched
