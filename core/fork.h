// What HadarE's forked copies are worth: gangs of one job that train side by
// side from the same weights and are averaged at the end of the round.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"

namespace cellsched {

// How the worth of copies scales with their number.
// - noise: averaging k gangs acts like a k-times larger batch, whose steps are
//   worth less than k small ones by the gradient-noise model of McCandlish et
//   al. 2018 ("An Empirical Model of Large-Batch Training"): k gangs' worth is
//   k (phi + 1) / (phi + k) gangs, phi = 2e / (1 - e) with e what the first
//   copy adds (so 1 + e at k = 2, at most 1 + phi however many copies).
// - linear: every copy adds e of its iterations, whatever their number (the
//   simulator's model before 2026-12-03).
enum class ForkScaling { noise, linear };

struct ForkModel {
  double efficiency = kDefaultForkEfficiency;  // (0, 1]; 1: copies count in full
  ForkScaling scaling = ForkScaling::noise;
};

// The worth, in iterations of one gang, of gangs that trained together and
// were averaged: `main` the job's own gang's iterations (0 when only copies
// ran), `copies` all copies' iterations together, `largest` the most any one
// copy trained. The noise model measures k from the largest gang (the job's
// own, or the largest copy); the linear one counts main + e x copies.
double fork_worth(const ForkModel& model, double main, double copies, double largest);

// The same for gangs given one by one: `gangs[0]` the main gang's
// iterations, the rest each copy's (empty: 0).
double fork_worth(const ForkModel& model, const std::vector<double>& gangs);

// The noise model's first-copy efficiency e that gives k gangs the measured
// efficiency eff_k (iterations to target of one gang / of the k gangs
// together, as `cellsched validate fork` reports it): clamped to [0, 1], 1
// when the k gangs did at least as well as linear, 0 when they did no better
// than one gang. Throws std::invalid_argument for k < 2 or eff_k <= 0.
double fork_efficiency_from(int k, double eff_k);

const char* fork_scaling_name(ForkScaling s);
// "noise" or "linear"; throws InputError naming the value otherwise.
ForkScaling parse_fork_scaling(const std::string& s);

}  // namespace cellsched
