// `validate`'s trials without training: the interleaved order, the median and
// spread of trials, and the busy-host check (on hand numbers and on a real
// synthetic load).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "validate/trials.h"

namespace cellsched::validate {
namespace {

TEST(Trials, RunRoundRobinAcrossConfigurations) {
  const auto order = interleaved_order(3, 2);
  const std::vector<std::pair<int, int>> want = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
  EXPECT_EQ(order, want);
  EXPECT_TRUE(interleaved_order(0, 5).empty());
  // Never two trials of one configuration back to back when there are two or more.
  const auto many = interleaved_order(9, 5);
  ASSERT_EQ(many.size(), 45u);
  for (size_t i = 1; i < many.size(); ++i) EXPECT_NE(many[i].second, many[i - 1].second);
}

// The co-location probe's pairs spread over the round: after every third of
// the nine configurations, the last after the last trial.
TEST(Trials, ProbePairsSpreadOverTheRound) {
  EXPECT_EQ(probe_positions(9, 3), (std::vector<int>{2, 5, 8}));
  EXPECT_EQ(probe_positions(6, 3), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(probe_positions(9, 1), (std::vector<int>{8}));
  EXPECT_EQ(probe_positions(2, 3), (std::vector<int>{0, 1, 1}));  // more pairs than trials
  EXPECT_TRUE(probe_positions(0, 3).empty());
  EXPECT_TRUE(probe_positions(9, 0).empty());
  for (int c = 1; c <= 12; ++c)
    for (int p = 1; p <= 5; ++p) {
      const std::vector<int> at = probe_positions(c, p);
      ASSERT_EQ(at.size(), static_cast<size_t>(p));
      EXPECT_EQ(at.back(), c - 1) << c << " " << p;
      for (size_t i = 1; i < at.size(); ++i) EXPECT_LE(at[i - 1], at[i]);
      EXPECT_GE(at.front(), 0);
    }
}

// Profiling passes and trial rounds interleave: round t after pass
// t * passes / trials, every round after some pass, in order.
TEST(Trials, RoundsSitBetweenTheProfilingPasses) {
  using cellsched::validate::round_after_pass;
  // 3 passes, 3 rounds: P0 T0 P1 T1 P2 T2.
  EXPECT_EQ(round_after_pass(0, 3, 3), 0);
  EXPECT_EQ(round_after_pass(1, 3, 3), 1);
  EXPECT_EQ(round_after_pass(2, 3, 3), 2);
  // One pass: every round after the profile (the old order).
  for (int t = 0; t < 4; ++t) EXPECT_EQ(round_after_pass(t, 1, 4), 0);
  // 3 passes, 5 rounds: two after the first pass, two after the second, one last.
  const std::vector<int> want = {0, 0, 1, 1, 2};
  for (int t = 0; t < 5; ++t) EXPECT_EQ(round_after_pass(t, 3, 5), want[static_cast<size_t>(t)]) << t;
  // More passes than rounds: rounds spread over them, never after a pass past the last.
  for (int t = 0; t < 2; ++t) EXPECT_LT(round_after_pass(t, 5, 2), 5);
  EXPECT_EQ(round_after_pass(1, 5, 2), 2);
  for (int passes : {1, 2, 3, 7})
    for (int trials : {1, 2, 3, 9})
      for (int t = 1; t < trials; ++t)
        EXPECT_LE(round_after_pass(t - 1, passes, trials), round_after_pass(t, passes, trials));
}

TEST(Trials, MedianAndSpreadOnHandData) {
  const Spread s = summarize({313, 442, 320});
  EXPECT_DOUBLE_EQ(s.median, 320);
  EXPECT_DOUBLE_EQ(s.min, 313);
  EXPECT_DOUBLE_EQ(s.max, 442);
  EXPECT_DOUBLE_EQ(s.q1, 316.5);  // between 313 and 320
  EXPECT_DOUBLE_EQ(s.q3, 381);    // between 320 and 442
  EXPECT_EQ(s.n, 3);
  const Spread even = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_DOUBLE_EQ(even.q1, 1.75);
  EXPECT_DOUBLE_EQ(even.q3, 3.25);
  EXPECT_EQ(summarize({}).n, 0);
}

TEST(Trials, ColocationFactorIsTheMedianOfTheRoundsRatios) {
  // Alone 300, 310, 330 ms; together, the slower of the two processes per
  // iteration, 320, 341, 400, round by round: ratios 1.067, 1.1, 1.212.
  EXPECT_NEAR(colocation_factor({300, 310, 330}, {320, 341, 400}), 1.1, 1e-12);
  // A slow phase that starts between round 2's two runs and lasts through
  // round 3: the ratio of the medians (420 / 305) takes it for co-location,
  // the rounds' own ratios (1.06, 1.377, 1.06) do not.
  EXPECT_NEAR(colocation_factor({300, 305, 400}, {318, 420, 424}), 1.06, 1e-12);
  // A round with a time that is not sensible is left out.
  EXPECT_NEAR(colocation_factor({300, 0, 310}, {330, 320, 341}), 1.1, 1e-12);
  // Unpaired samples: the ratio of the medians (310 and 341).
  EXPECT_NEAR(colocation_factor({330, 300, 310}, {400, 341}), (341 + 400) / 2.0 / 310, 1e-12);
  // No probe, or nothing sensible measured: no correction.
  EXPECT_EQ(colocation_factor({}, {320}), 1);
  EXPECT_EQ(colocation_factor({300}, {}), 1);
  EXPECT_EQ(colocation_factor({0}, {320}), 1);
  EXPECT_EQ(colocation_factor({300}, {-1}), 1);
  EXPECT_EQ(colocation_factor({300, 310}, {-1}), 1);
}

HostObservation observed(double busy_s, double own_s, double total_s, std::vector<double> calib) {
  HostObservation h;
  h.cpus = 2;
  h.end.machine_busy_s = busy_s;
  h.end.machine_total_s = total_s;
  h.end.own_s = own_s;
  h.calibration_s = std::move(calib);
  return h;
}

TEST(Host, JudgedOnOthersCpuShareAndCalibration) {
  // 200 CPU-seconds in all, 150 busy of which 148 were ours: idle.
  HostVerdict v = judge_host(observed(150, 148, 200, {0.05, 0.051, 0.052}));
  EXPECT_FALSE(v.busy);
  EXPECT_NEAR(v.others_cpu_share, 0.01, 1e-12);
  EXPECT_TRUE(v.reasons.empty());
  // Others took 40 of 200: busy, and said why.
  v = judge_host(observed(190, 150, 200, {0.05, 0.05}));
  EXPECT_TRUE(v.busy);
  EXPECT_NEAR(v.others_cpu_share, 0.2, 1e-12);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("20 %"), std::string::npos);
  // A round whose calibration ran 30 % slower: busy even when the shares look fine.
  v = judge_host(observed(150, 150, 200, {0.05, 0.065, 0.05}));
  EXPECT_TRUE(v.busy);
  EXPECT_NEAR(v.calibration_ratio, 1.3, 1e-9);
  // The arithmetic loop steady, the memory pass 25 % slower in one round
  // (memory bandwidth taken by a neighbour): busy, and said why.
  HostObservation m = observed(150, 148, 200, {0.05, 0.05, 0.05});
  m.memory_calibration_s = {0.2, 0.25, 0.2};
  v = judge_host(m);
  EXPECT_TRUE(v.busy);
  EXPECT_NEAR(v.memory_calibration_ratio, 1.25, 1e-9);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("memory pass ran 25 %"), std::string::npos) << v.reasons[0];
}

// A real synthetic load: a child process spinning on every CPU while the
// clock runs is other work (it is not reaped, so it does not count as ours).
TEST(Host, ASpinningProcessMakesTheHostBusy) {
  const int cpus = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  HostObservation h;
  h.cpus = cpus;
  h.start = read_cpu_clock();
  std::vector<pid_t> kids;
  for (int i = 0; i < cpus; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      volatile unsigned long x = 0;
      for (;;) x = x + 1;
    }
    kids.push_back(pid);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  h.end = read_cpu_clock();
  for (pid_t p : kids) kill(p, SIGKILL);
  for (pid_t p : kids) waitpid(p, nullptr, 0);
  const HostVerdict v = judge_host(h);
  EXPECT_TRUE(v.busy) << "others' share " << v.others_cpu_share;
  EXPECT_GT(v.others_cpu_share, 0.3);
}

TEST(Host, CalibrationTakesTimeOnEveryCpu) {
  const double s = calibration_s(2);
  EXPECT_GT(s, 0);
  EXPECT_LT(s, 10);
  const double m = memory_calibration_s(2);
  EXPECT_GT(m, 0);
  EXPECT_LT(m, 10);
}

}  // namespace
}  // namespace cellsched::validate
