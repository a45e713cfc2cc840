// Entry point of cellsched-coin.so (scheduler/coin_module.h).
#include "scheduler/coin_module.h"

extern "C" __attribute__((visibility("default"))) const cellsched::CoinSolvers* cellsched_coin_solvers() {
  static const cellsched::CoinSolvers solvers{cellsched::kCoinSolversVersion, cellsched::coin_solve_lp,
                                              cellsched::coin_solve_milp};
  return &solvers;
}
