// The COIN-OR solvers as a module of their own, cellsched-coin.so (lp.cc:
// CLP, milp.cc: CBC, coin_module.cc: its entry point). scheduler/solver.cc
// loads it the first time an LP or MILP is solved, so the verbs that solve
// none (status, submit, --help, ...) do not map COIN-OR, OpenBLAS and
// gfortran, whose eager symbol binding was most of their start-up.
#pragma once

#include "scheduler/lp.h"
#include "scheduler/milp.h"

namespace cellsched {

inline constexpr int kCoinSolversVersion = 1;

// What the module hands the loader.
struct CoinSolvers {
  int version = kCoinSolversVersion;
  LpSolution (*solve_lp)(const LinearProgram&) = nullptr;
  MilpSolution (*solve_milp)(const MixedIntegerProgram&) = nullptr;
};

// Inside the module: the solvers behind solve_lp() and solve_milp().
LpSolution coin_solve_lp(const LinearProgram& lp);
MilpSolution coin_solve_milp(const MixedIntegerProgram& mip);

}  // namespace cellsched

// The module's one exported symbol.
extern "C" const cellsched::CoinSolvers* cellsched_coin_solvers();
