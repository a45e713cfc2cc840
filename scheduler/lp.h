// A small linear-programming interface: a sparse LP in, a solution vector out.
// The solver (COIN-OR CLP) stays behind this header; only lp.cc includes it.
#pragma once

#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace cellsched {

inline constexpr double kLpInf = std::numeric_limits<double>::infinity();

// Where a column or row stands in a simplex basis (the solver's own order).
enum class LpBasis : signed char { free = 0, basic = 1, at_upper = 2, at_lower = 3, superbasic = 4, fixed = 5 };

// minimize (or maximize) c'x  s.t.  row_lower <= A x <= row_upper,
// col_lower <= x <= col_upper. Infinite bounds are +-kLpInf.
struct LinearProgram {
  bool maximize = false;
  // Presolve first: pays off on large sparse LPs (the TTD bound); the small
  // per-round LPs of gavel solve about twice as fast without it.
  bool presolve = true;
  // Optional starting basis (warm start), e.g. the previous solve's adapted
  // to this LP: one entry per column and per row, or both empty. A basis
  // that does not fit is repaired by the solver; a warm solve that fails is
  // retried cold, so a hint can cost time but never change the optimum.
  std::vector<LpBasis> col_basis, row_basis;
  std::vector<double> cost, col_lower, col_upper;  // one entry per variable
  std::vector<double> row_lower, row_upper;        // one entry per row
  // A in triplet form; a repeated (row, col) pair is summed.
  std::vector<int> entry_row, entry_col;
  std::vector<double> entry_value;

  int num_vars() const { return static_cast<int>(cost.size()); }
  int num_rows() const { return static_cast<int>(row_lower.size()); }
  // Adds a variable and returns its index.
  int add_var(double cost_coef, double lower = 0, double upper = kLpInf);
  // Adds a row over (cols[i], values[i]) and returns its index.
  int add_row(double lower, double upper, const std::vector<int>& cols,
              const std::vector<double>& values);
  // Adds one coefficient to an existing row.
  void add_entry(int row, int col, double value);
};

struct LpSolution {
  std::vector<double> x;  // one value per variable
  double objective = 0;
  int iterations = 0;
  std::vector<LpBasis> col_basis, row_basis;  // the optimal basis (for the next warm start)
};

// Thrown when the LP has no optimum: `status` is "infeasible", "unbounded" or
// "failed" (iteration limit, numerical trouble, malformed input).
class LpError : public std::runtime_error {
 public:
  LpError(const std::string& status, const std::string& what)
      : std::runtime_error(what), status_(status) {}
  const std::string& status() const { return status_; }

 private:
  std::string status_;
};

// Solves `lp` to optimality with the dual simplex; throws LpError otherwise.
LpSolution solve_lp(const LinearProgram& lp);

}  // namespace cellsched
