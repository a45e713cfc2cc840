// The only file that includes COIN-OR CLP. Built into the cellsched-coin.so
// module (scheduler/coin_module.cc), which solver.cc loads on first use.
#include "scheduler/coin_module.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "ClpSimplex.hpp"
#include "scheduler/coin_util.h"

namespace cellsched {

namespace {

void check_lp(const LinearProgram& lp) {
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
}

struct ColumnMajor {
  std::vector<CoinBigIndex> start;
  std::vector<int> index;
  std::vector<double> value;
};

// Column-major form by a counting sort on the column, rows ascending within
// a column and repeated (row, col) pairs summed: the matrix COIN-OR's
// triplet constructor builds, without its sort (a tenth of a round's LP).
ColumnMajor column_major(const LinearProgram& lp) {
  const int n = lp.num_vars();
  std::vector<CoinBigIndex> start(n + 1, 0);
  for (int c : lp.entry_col) ++start[c + 1];
  for (int j = 0; j < n; ++j) start[j + 1] += start[j];
  std::vector<int> index(lp.entry_row.size());
  std::vector<double> value(lp.entry_row.size());
  {
    std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
    for (size_t e = 0; e < lp.entry_row.size(); ++e) {
      const CoinBigIndex at = fill[lp.entry_col[e]]++;
      index[at] = lp.entry_row[e];
      value[at] = lp.entry_value[e];
    }
  }
  CoinBigIndex kept = 0;
  for (int j = 0; j < n; ++j) {
    const CoinBigIndex begin = start[j], end = start[j + 1];
    start[j] = kept;
    bool sorted = true;
    for (CoinBigIndex e = begin + 1; e < end && sorted; ++e) sorted = index[e - 1] < index[e];
    if (!sorted) {  // rare: the builders add each row's entries once, in row order
      std::vector<std::pair<int, double>> col;
      for (CoinBigIndex e = begin; e < end; ++e) col.emplace_back(index[e], value[e]);
      std::stable_sort(col.begin(), col.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      CoinBigIndex at = begin;
      for (size_t i = 0; i < col.size(); ++i) {
        if (i > 0 && col[i].first == col[i - 1].first) {
          value[at - 1] += col[i].second;
          continue;
        }
        index[at] = col[i].first;
        value[at++] = col[i].second;
      }
      for (CoinBigIndex e = begin; e < at; ++e, ++kept) {
        index[kept] = index[e];
        value[kept] = value[e];
      }
      continue;
    }
    for (CoinBigIndex e = begin; e < end; ++e, ++kept) {
      index[kept] = index[e];
      value[kept] = value[e];
    }
  }
  start[n] = kept;
  return {std::move(start), std::move(index), std::move(value)};
}

}  // namespace

LpSolution coin_solve_lp(const LinearProgram& lp) {
  check_lp(lp);
  const int n = lp.num_vars(), m = lp.num_rows();
  const ColumnMajor matrix = column_major(lp);
  const std::vector<double> collb = coin::bounds(lp.col_lower), colub = coin::bounds(lp.col_upper);
  const std::vector<double> rowlb = coin::bounds(lp.row_lower), rowub = coin::bounds(lp.row_upper);

  auto run = [&](ClpSimplex& model, bool warm) {
    model.setLogLevel(0);
    model.loadProblem(n, m, matrix.start.data(), matrix.index.data(), matrix.value.data(), collb.data(), colub.data(),
                      lp.cost.data(), rowlb.data(), rowub.data());
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
  // Its random stream (perturbation, pivot ties) restarts each solve: carried
  // over, a policy's LP took another optimal vertex after another policy's
  // solves, and two identical jobs of gavel-makespan swapped outcomes
  // according to the --policy list (2026-12-07 audit).
  static thread_local const CoinThreadRandom fresh_random = *reused.randomNumberGenerator();
  ClpSimplex& model = reused;
  *model.randomNumberGenerator() = fresh_random;
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
