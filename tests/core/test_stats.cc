#include <gtest/gtest.h>

#include "core/stats.h"

namespace cellsched {
namespace {

TEST(Percentile, MatchesNumpyLinear) {
  // numpy.percentile([1, 2, 3, 4], p)
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 95), 3.85);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 25), 1.75);
  // numpy.percentile([10, 0, 80], 95) == 73.0
  EXPECT_DOUBLE_EQ(percentile({10, 0, 80}, 95), 73);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Stats, MedianAndInterquartileRange) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
  EXPECT_DOUBLE_EQ(iqr({1, 2, 3, 4, 5}), 2);  // 4 - 2
  EXPECT_DOUBLE_EQ(iqr({4, 1, 3, 2}), 1.5);   // 3.25 - 1.75, numpy's quartiles
  EXPECT_DOUBLE_EQ(iqr({7}), 0);
}

TEST(Stats, MedianFarAboveTheFastest) {
  // Two slow trials of three: the median 345 is 45 ms, 13 %, above 300.
  EXPECT_TRUE(median_far_above_fastest({345, 300, 350}, 0.10));
  EXPECT_FALSE(median_far_above_fastest({345, 300, 350}, 0.15));
  // One slow trial of three leaves the median with the fast ones: 310 is
  // 3.2 % above 300, however slow the third.
  EXPECT_FALSE(median_far_above_fastest({300, 500, 310}, 0.10));
  // 300, 329, 331: 9.7 % above.
  EXPECT_FALSE(median_far_above_fastest({300, 329, 331}, 0.10));
  // Two more fast trials bring a median of five back.
  EXPECT_FALSE(median_far_above_fastest({345, 300, 350, 302, 305}, 0.10));
  // The profiler's passes: 2 of 3 slow moves the median 12 to 17 % above 10;
  // 1 of 3 leaves it at 10.
  EXPECT_TRUE(median_far_above_fastest({10, 12, 12}, 0.1));
  EXPECT_FALSE(median_far_above_fastest({10, 12, 10}, 0.1));
  EXPECT_FALSE(median_far_above_fastest({10, 10.9, 11}, 0.1));
  // A median that is not positive never counts.
  EXPECT_FALSE(median_far_above_fastest({-5, 0, 0}, 0.1));
  // Fewer than two trials: nothing to compare.
  EXPECT_FALSE(median_far_above_fastest({300}, 0.10));
  EXPECT_FALSE(median_far_above_fastest({}, 0.10));
}

}  // namespace
}  // namespace cellsched
