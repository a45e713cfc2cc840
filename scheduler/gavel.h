// Gavel's allocation LPs (DESIGN "Policies": gavel, gavel-makespan), exposed
// for tests and benchmarks; the policies themselves come from make_gavel().
#pragma once

#include <cstdint>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "scheduler/lp.h"

namespace cellsched {

// One LP instance: J jobs x K GPU types.
struct GavelProblem {
  // throughput[j][k]: job j's whole-job iterations/s on W_j GPUs of type k,
  // consolidated; 0 = it cannot run there.
  std::vector<std::vector<double>> throughput;
  std::vector<int> gpus;           // W_j, the gang size
  std::vector<double> weight;      // w_j > 0 (max-min fairness only)
  std::vector<double> remaining;   // iterations left (makespan only)
  std::vector<int> capacity;       // C_k, GPUs of type k
  std::vector<int64_t> ids;        // optional job ids (warm start keys); empty = none
};

// The last makespan LP's optimal basis by job id: the next LP, a few jobs in
// or out, starts from it (new jobs' columns at zero, their rows basic) and
// takes a handful of dual simplex pivots instead of a full solve.
struct GavelBasis {
  struct Job {
    std::vector<LpBasis> vars;  // per GPU type
    LpBasis work = LpBasis::basic, time = LpBasis::basic;
    unsigned stamp = 0;  // the solve that last saw the job or class
  };
  std::unordered_map<int64_t, Job> jobs;
  // Max-min: by class of interchangeable jobs (throughputs, gang size, weight).
  using ClassKey = std::tuple<std::vector<double>, int, double>;
  struct ClassKeyHash {
    size_t operator()(const ClassKey& key) const;
  };
  std::unordered_map<ClassKey, Job, ClassKeyHash> classes;
  LpBasis t = LpBasis::basic;
  std::vector<LpBasis> type_rows;
  unsigned stamp = 0;  // solves so far
};

struct GavelAllocation {
  // x[j][k]: fraction of time job j should run on W_j GPUs of type k;
  // sum_k x[j][k] <= 1 and sum_j W_j x[j][k] <= C_k. A job no type can hold
  // (all throughputs 0, or W_j above every C_k) gets a row of zeros and is
  // left out of the LP.
  std::vector<std::vector<double>> x;
  // Max-min: the optimal minimum of sum_k X[j][k] x[j][k] / (w_j X_eq[j]).
  // Makespan: the optimal T in seconds.
  double objective = 0;
};

// Gavel's max_min_fairness_perf. X_eq[j] is the throughput job j gets from an
// equal 1/n share of every GPU type (n = jobs in the LP), time-shared by its
// gang of W_j: X_eq[j] = sum_k (C_k / n) X[j][k] / W_j. Up to the factor C/n
// common to all jobs this is Gavel's normalisation (its ProportionalPolicy
// throughput sum_k X[j][k] C_k / C, with the objective multiplied by the
// scale factor W_j), so the optimal x is the same; with this scaling an
// objective >= 1 means every job gets at least its equal share.
// With `basis` the solve starts from the previous one's basis (by class) and
// leaves its own there; the optimum is the same as a cold solve's.
GavelAllocation gavel_max_min_fairness(const GavelProblem& problem, GavelBasis* basis = nullptr);

// Gavel's min_total_duration, as one LP (Gavel bisects on T; the change of
// variables y = x T makes it linear): minimize T s.t. sum_k X[j][k] y[j][k] >=
// remaining_j, sum_k y[j][k] <= T, sum_j W_j y[j][k] <= C_k T; x = y / T.
// With `basis` (and problem.ids) the solve starts from the previous one's
// basis and leaves its own there; the optimum is the same as a cold solve's.
GavelAllocation gavel_min_total_duration(const GavelProblem& problem, GavelBasis* basis = nullptr);

}  // namespace cellsched
