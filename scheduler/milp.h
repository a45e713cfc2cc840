// Mixed-integer programs: the LinearProgram of lp.h plus integrality and a
// time limit. The solver (COIN-OR CBC) stays behind this header; only
// milp.cc includes it.
#pragma once

#include <vector>

#include "scheduler/lp.h"

namespace cellsched {

struct MixedIntegerProgram {
  LinearProgram lp;
  std::vector<bool> integer;  // one entry per variable of `lp` (missing = continuous)
  // Wall-clock limit of the branch and bound; past it the best incumbent is
  // returned with `optimal` false. <= 0: no limit.
  double time_limit_s = 1;
  // Stop once the incumbent is proven within this fraction of the optimum.
  double relative_gap = 1e-3;
  // Optional feasible start (one value per variable), e.g. a greedy's: the
  // solver begins from it, so the limit can never leave it without one.
  std::vector<double> start;
};

struct MilpSolution {
  std::vector<double> x;  // one value per variable (integers rounded)
  double objective = 0;
  bool optimal = false;   // proven within relative_gap of the optimum (false: the limit stopped it)
  long nodes = 0;         // branch-and-bound nodes explored
  double solve_ms = 0;
};

// Solves `mip`; throws LpError("infeasible"/"failed") when no integer
// solution was found (within the limit, too).
MilpSolution solve_milp(const MixedIntegerProgram& mip);

// Loads the COIN-OR module now (solve_lp/solve_milp load it on first use):
// a caller that times its solves calls this first, so that the first timed
// solve is not the library's load (it read p99 30 ms against 0.13 ms).
void load_solvers();

}  // namespace cellsched
