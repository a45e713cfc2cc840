// The only file that includes COIN-OR CLP. Built into the cellsched-coin.so
// module (scheduler/coin_module.cc), which solver.cc loads on first use.
#include "scheduler/coin_module.h"

#include <cmath>

#include "ClpSimplex.hpp"
#include "CoinPackedMatrix.hpp"
#include "scheduler/coin_util.h"

namespace cellsched {

LpSolution coin_solve_lp(const LinearProgram& lp) {
  const int n = lp.num_vars(), m = lp.num_rows();
  if (lp.col_lower.size() != static_cast<size_t>(n) || lp.col_upper.size() != static_cast<size_t>(n) ||
      lp.row_upper.size() != static_cast<size_t>(m) || lp.entry_col.size() != lp.entry_row.size() ||
      lp.entry_value.size() != lp.entry_row.size())
    throw LpError("failed", "LP: inconsistent sizes");
  for (size_t e = 0; e < lp.entry_row.size(); ++e) {
    if (lp.entry_row[e] < 0 || lp.entry_row[e] >= m || lp.entry_col[e] < 0 ||
        lp.entry_col[e] >= n || !std::isfinite(lp.entry_value[e]))
      throw LpError("failed", "LP: bad matrix entry " + std::to_string(e));
  }
  for (int j = 0; j < n; ++j)
    if (lp.col_lower[j] > lp.col_upper[j])
      throw LpError("infeasible", "LP infeasible: variable " + std::to_string(j) + " has lower > upper");
  for (int i = 0; i < m; ++i)
    if (lp.row_lower[i] > lp.row_upper[i])
      throw LpError("infeasible", "LP infeasible: row " + std::to_string(i) + " has lower > upper");

  CoinPackedMatrix matrix(true, lp.entry_row.data(), lp.entry_col.data(), lp.entry_value.data(),
                          static_cast<CoinBigIndex>(lp.entry_row.size()));
  matrix.setDimensions(m, n);
  const std::vector<double> collb = coin::bounds(lp.col_lower), colub = coin::bounds(lp.col_upper);
  const std::vector<double> rowlb = coin::bounds(lp.row_lower), rowub = coin::bounds(lp.row_upper);

  auto run = [&](ClpSimplex& model, bool warm) {
    model.setLogLevel(0);
    model.loadProblem(matrix, collb.data(), colub.data(), lp.cost.data(), rowlb.data(), rowub.data());
    model.setOptimizationDirection(lp.maximize ? -1.0 : 1.0);
    if (warm) {
      model.createStatus();
      for (int j = 0; j < n; ++j)
        model.setColumnStatus(j, static_cast<ClpSimplex::Status>(static_cast<int>(lp.col_basis[j])));
      for (int i = 0; i < m; ++i)
        model.setRowStatus(i, static_cast<ClpSimplex::Status>(static_cast<int>(lp.row_basis[i])));
      model.dual();
    } else if (lp.presolve) {
      model.initialSolve();  // presolve + dual simplex
    } else {
      model.createStatus();  // the slack basis, whatever the last problem left
      model.dual();          // dual simplex straight from it
    }
  };
  const bool warm = lp.col_basis.size() == static_cast<size_t>(n) && lp.row_basis.size() == static_cast<size_t>(m) && n > 0;
  // One model per thread, loaded afresh each time: constructing a ClpSimplex
  // (its message tables) cost more than solving a round's small LP. A cold
  // solve starts from the slack basis, as a new model would.
  static thread_local ClpSimplex reused;
  ClpSimplex& model = reused;
  run(model, warm);
  if (warm && model.status() != 0) run(model, false);

  switch (model.status()) {
    case 0:
      break;
    case 1:
      throw LpError("infeasible", "LP infeasible");
    case 2:
      throw LpError("unbounded", "LP unbounded");
    default:
      throw LpError("failed", "LP solver stopped with status " + std::to_string(model.status()) +
                                  "/" + std::to_string(model.secondaryStatus()));
  }
  LpSolution sol;
  const double* x = model.primalColumnSolution();
  sol.x.assign(x, x + n);
  sol.objective = model.objectiveValue();
  sol.iterations = model.numberIterations();
  sol.col_basis.resize(n);
  sol.row_basis.resize(m);
  for (int j = 0; j < n; ++j) sol.col_basis[j] = static_cast<LpBasis>(static_cast<int>(model.getColumnStatus(j)));
  for (int i = 0; i < m; ++i) sol.row_basis[i] = static_cast<LpBasis>(static_cast<int>(model.getRowStatus(i)));
  return sol;
}

}  // namespace cellsched
