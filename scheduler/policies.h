// Constructors of the built-in policies (private to scheduler/; use make_policy).
#pragma once

#include <memory>

#include "scheduler/policy.h"

namespace cellsched {

std::unique_ptr<Policy> make_fifo();
std::unique_ptr<Policy> make_yarn_cs();
// Gavel: max-min fairness, or min total duration when `makespan` (scheduler/gavel.h).
std::unique_ptr<Policy> make_gavel(bool makespan);

// Tiresias (discretized 2D-LAS, scheduler/tiresias.cc describes the rules).
struct TiresiasOptions {
  // Queue boundaries in attained GPU-seconds, increasing: k thresholds give
  // k + 1 queues. Defaults: Q0 < 3250 <= Q1 < 7200 <= Q2.
  std::vector<double> thresholds_gpu_s = {3250, 7200};
  // A waiting job outside Q0 returns to Q0 once it has waited (since it last
  // ran) this many times its executed wall time; <= 0 disables promotion.
  double starvation_factor = 2.0;
};
struct CriusOptions {
  int max_gpus = 16;       // largest cell (a power of two)
  double min_gain = 0.05;  // smallest relative gain per GPU a scaling or move must bring
};
std::unique_ptr<Policy> make_crius(CriusOptions options = {});

std::unique_ptr<Policy> make_tiresias();
// Throws InputError for thresholds that are not positive and increasing.
std::unique_ptr<Policy> make_tiresias(TiresiasOptions options);
// Hadar (scheduler/hadar.cc; docs/hadar.md).
struct HadarOptions {
  // tau of the JCT utility f(x) = -w (x + x^2 / (2 tau)), seconds: how much
  // a job's claim grows with its age and length (docs/hadar.md, chosen by
  // the measurements there). Must be positive.
  double aging_s = 7 * 24 * 3600.0;
  // In a round where every active job's gang fits at once, a job's round
  // value is multiplied by (GPU-rounds it has left at its best rate)^this:
  // the jobs with most work left take the fast types first. 0: the JCT
  // utility alone (before 2026-12-03). Must be finite and >= 0.
  double spare_exponent = PolicySettings{}.hadar_spare_exponent;
  // In a round where some job waits, a job's value is multiplied by its
  // response ratio (age + p) / p to this power, p its time left at its best
  // rate capped at ratio_cap_s (docs/hadar.md). 0: off. Finite, >= 0; the
  // cap finite and > 0.
  double ratio_exponent = PolicySettings{}.hadar_ratio_exponent;
  double ratio_cap_s = PolicySettings{}.hadar_ratio_cap_s;
  bool fork = false;  // HadarE: copies on the GPUs Hadar leaves idle
};
std::unique_ptr<Policy> make_hadar();
std::unique_ptr<Policy> make_hadare();
// Throws InputError for a non-positive aging_s, or a spare_exponent,
// ratio_exponent or ratio_cap_s out of range.
std::unique_ptr<Policy> make_hadar(HadarOptions options);
// Hadar as DESIGN first read (per-round U bounds, payoff <= 0 waits):
// scheduler/hadar_design.cc, policy "hadar-design".
std::unique_ptr<Policy> make_hadar_design();
// Hadar's price of the next GPU of a type with `capacity` GPUs of which
// `given` are already given out this round: (u_min/2) (2 u_max/u_min)^(given/capacity).
double hadar_price(double u_min, double u_max, int capacity, int given);

}  // namespace cellsched
