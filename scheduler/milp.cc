// The only file that includes COIN-OR CBC. Built into the cellsched-coin.so
// module (scheduler/coin_module.cc), which solver.cc loads on first use.
#include "scheduler/coin_module.h"

#include <chrono>
#include <cmath>

#include "CbcModel.hpp"
#include "CoinPackedMatrix.hpp"
#include "scheduler/coin_util.h"
#include "OsiClpSolverInterface.hpp"

namespace cellsched {


MilpSolution coin_solve_milp(const MixedIntegerProgram& mip) {
  const LinearProgram& lp = mip.lp;
  const int n = lp.num_vars(), m = lp.num_rows();
  if (lp.col_lower.size() != static_cast<size_t>(n) || lp.col_upper.size() != static_cast<size_t>(n) ||
      lp.row_upper.size() != static_cast<size_t>(m) || lp.entry_col.size() != lp.entry_row.size() ||
      lp.entry_value.size() != lp.entry_row.size() || mip.integer.size() > static_cast<size_t>(n) ||
      (!mip.start.empty() && mip.start.size() != static_cast<size_t>(n)))
    throw LpError("failed", "MILP: inconsistent sizes");
  for (size_t e = 0; e < lp.entry_row.size(); ++e)
    if (lp.entry_row[e] < 0 || lp.entry_row[e] >= m || lp.entry_col[e] < 0 || lp.entry_col[e] >= n ||
        !std::isfinite(lp.entry_value[e]))
      throw LpError("failed", "MILP: bad matrix entry " + std::to_string(e));
  for (int j = 0; j < n; ++j)
    if (!std::isfinite(lp.cost[j])) throw LpError("failed", "MILP: cost of variable " + std::to_string(j) + " is not finite");
  const auto t0 = std::chrono::steady_clock::now();
  MilpSolution sol;
  if (n == 0) {
    sol.optimal = true;
    return sol;
  }

  CoinPackedMatrix matrix(true, lp.entry_row.data(), lp.entry_col.data(), lp.entry_value.data(),
                          static_cast<CoinBigIndex>(lp.entry_row.size()));
  matrix.setDimensions(m, n);
  const std::vector<double> collb = coin::bounds(lp.col_lower), colub = coin::bounds(lp.col_upper);
  const std::vector<double> rowlb = coin::bounds(lp.row_lower), rowub = coin::bounds(lp.row_upper);
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, collb.data(), colub.data(), lp.cost.data(), rowlb.data(), rowub.data());
  solver.setObjSense(lp.maximize ? -1.0 : 1.0);
  for (size_t j = 0; j < mip.integer.size(); ++j)
    if (mip.integer[j]) solver.setInteger(static_cast<int>(j));

  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setUseElapsedTime(true);
  if (mip.time_limit_s > 0) model.setMaximumSeconds(mip.time_limit_s);
  model.setAllowableFractionGap(mip.relative_gap);
  if (!mip.start.empty()) {
    double obj = 0;
    for (int j = 0; j < n; ++j) obj += lp.cost[j] * mip.start[j];
    // CBC minimizes internally: its objective is sense x c'x.
    model.setBestSolution(mip.start.data(), n, lp.maximize ? -obj : obj, true);
  }
  model.branchAndBound();

  const double* best = model.bestSolution();
  if (best == nullptr) {
    if (model.isProvenInfeasible()) throw LpError("infeasible", "MILP infeasible");
    throw LpError("failed", "MILP: no integer solution within " + std::to_string(mip.time_limit_s) + " s");
  }
  sol.x.assign(best, best + n);
  for (size_t j = 0; j < mip.integer.size(); ++j)
    if (mip.integer[j]) sol.x[j] = std::round(sol.x[j]);
  sol.objective = 0;
  for (int j = 0; j < n; ++j) sol.objective += lp.cost[j] * sol.x[j];
  sol.optimal = model.isProvenOptimal() && !model.isSecondsLimitReached();
  sol.nodes = model.getNodeCount();
  sol.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return sol;
}

}  // namespace cellsched
