// What forked copies are worth (core/fork.h): hand values of both models.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/error.h"
#include "core/fork.h"

namespace cellsched {
namespace {

constexpr ForkModel kHalf{0.5, ForkScaling::noise};  // phi = 2 e / (1 - e) = 2

TEST(Fork, NoiseModelCountsTheFirstCopyAtItsEfficiencyAndFurtherOnesLess) {
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 10, 0, 0), 10);         // one gang
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 10, 10, 10), 15);       // k = 2: 1 + e
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 10, 30, 10), 20);       // k = 4: 40 x 3 / 6
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 10, 90, 10), 100.0 * 3 / 12);  // k = 10
  // Bounded by (1 + phi) gangs however many copies.
  EXPECT_LT(fork_worth(kHalf, 10, 1e9, 10), 30);
  EXPECT_GT(fork_worth(kHalf, 10, 1e9, 10), 29.99);
  // Each further copy adds less.
  double last = 10, step = 1e300;
  for (int k = 1; k <= 8; ++k) {
    const double w = fork_worth(kHalf, 10, 10.0 * k, 10);
    EXPECT_GT(w, last);
    EXPECT_LT(w - last, step);
    step = w - last;
    last = w;
  }
}

TEST(Fork, NoiseModelMeasuresKFromTheLargestGang) {
  // Copies only: the largest copy leads, a lone copy counts in full.
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 0, 10, 10), 10);
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 0, 20, 10), 15);
  // A copy faster than the job's own gang leads: total 25, k = 1.25.
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 5, 20, 20), 25 * 3 / 3.25);
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, 0, 0, 0), 0);
  // Gangs one by one, the main gang first: the same figures.
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, std::vector<double>{0, 10, 10}), 15);
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, std::vector<double>{5, 20}), 25 * 3 / 3.25);
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, std::vector<double>{10}), 10);
  EXPECT_DOUBLE_EQ(fork_worth(kHalf, std::vector<double>{}), 0);
}

TEST(Fork, PerfectCopiesAndTheLinearModelCountEveryIteration) {
  EXPECT_DOUBLE_EQ(fork_worth({1.0, ForkScaling::noise}, 10, 90, 10), 100);
  EXPECT_DOUBLE_EQ(fork_worth({0.3, ForkScaling::linear}, 10, 90, 10), 10 + 0.3 * 90);
  EXPECT_DOUBLE_EQ(fork_worth({0.3, ForkScaling::linear}, 0, 20, 10), 6);
}

TEST(Fork, EfficiencyFittedFromAMeasurementRoundTrips) {
  // k = 2 at efficiency 0.75 is e = 0.5; so is k = 4 at 20 / 40 = 0.5.
  EXPECT_DOUBLE_EQ(fork_efficiency_from(2, 0.75), 0.5);
  EXPECT_DOUBLE_EQ(fork_efficiency_from(4, 0.5), 0.5);
  for (const double e : {0.1, 0.3, 0.51, 0.9})
    for (const int k : {2, 3, 4, 8}) {
      const double eff = fork_worth({e, ForkScaling::noise}, 1, k - 1, 1) / k;
      EXPECT_NEAR(fork_efficiency_from(k, eff), e, 1e-12) << "e " << e << " k " << k;
    }
  EXPECT_EQ(fork_efficiency_from(4, 1.2), 1);   // better than linear
  EXPECT_EQ(fork_efficiency_from(4, 0.25), 0);  // no better than one gang
  EXPECT_THROW(fork_efficiency_from(1, 0.5), std::invalid_argument);
  EXPECT_THROW(fork_efficiency_from(2, 0), std::invalid_argument);
}

TEST(Fork, ScalingNamesParseAndBadOnesAreInputErrors) {
  EXPECT_EQ(parse_fork_scaling("noise"), ForkScaling::noise);
  EXPECT_EQ(parse_fork_scaling("linear"), ForkScaling::linear);
  EXPECT_STREQ(fork_scaling_name(ForkScaling::linear), "linear");
  EXPECT_THROW(parse_fork_scaling("Noise"), InputError);
  EXPECT_THROW(parse_fork_scaling(""), InputError);
}

}  // namespace
}  // namespace cellsched
