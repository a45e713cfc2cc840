// What the rest of cellsched links of lp.h and milp.h: LinearProgram's
// builders, and solve_lp() and solve_milp(), which load the COIN-OR module,
// cellsched-coin.so (scheduler/coin_module.h), on first use.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/self_exe.h"
#include "scheduler/coin_module.h"

namespace cellsched {
namespace {

// $CELLSCHED_COIN, else beside the running executable, else the build tree's
// (the tests, benchmarks and fuzzers run from directories of their own).
std::string module_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("CELLSCHED_COIN"); env && *env) return env;
  if (const std::string self = self_executable(); !self.empty()) {
    const fs::path beside = fs::path(self).parent_path() / "cellsched-coin.so";
    if (::access(beside.c_str(), R_OK) == 0) return beside.string();
  }
  return CELLSCHED_COIN_MODULE;
}

const CoinSolvers* load() {
  const std::string path = module_path();
  // CLP's LAPACK is OpenBLAS, which starts a pool thread per CPU when it is
  // loaded; an idle one spins (sched_yield) against this process's own
  // threads, and these LPs are far too small to gain from it. OpenBLAS reads
  // the variable once, while loading; it is unset again so that the training
  // processes the runner starts do not inherit it.
  const bool set_blas = std::getenv("OPENBLAS_NUM_THREADS") == nullptr;
  if (set_blas) ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (set_blas) ::unsetenv("OPENBLAS_NUM_THREADS");
  if (!handle) {
    const char* why = ::dlerror();
    throw std::runtime_error("cannot load the COIN-OR solvers, " + path + ": " + (why ? why : "unknown error") +
                             " (build cellsched-coin.so with scripts/setup, or point CELLSCHED_COIN at it)");
  }
  using Entry = const CoinSolvers* (*)();
  const auto entry = reinterpret_cast<Entry>(::dlsym(handle, "cellsched_coin_solvers"));
  const CoinSolvers* solvers = entry ? entry() : nullptr;
  if (!solvers || solvers->version != kCoinSolversVersion || !solvers->solve_lp || !solvers->solve_milp)
    throw std::runtime_error(path + " is not this cellsched's COIN-OR module (rebuild it with scripts/setup)");
  return solvers;
}

const CoinSolvers& solvers() {
  static const CoinSolvers* loaded = load();  // once, thread-safe; a failed load is retried
  return *loaded;
}

}  // namespace

void load_solvers() { solvers(); }

int LinearProgram::add_var(double cost_coef, double lower, double upper) {
  cost.push_back(cost_coef);
  col_lower.push_back(lower);
  col_upper.push_back(upper);
  return num_vars() - 1;
}

int LinearProgram::add_row(double lower, double upper, const std::vector<int>& cols,
                           const std::vector<double>& values) {
  if (cols.size() != values.size()) throw LpError("failed", "LP row: cols and values differ in size");
  const int row = num_rows();
  row_lower.push_back(lower);
  row_upper.push_back(upper);
  for (size_t i = 0; i < cols.size(); ++i) add_entry(row, cols[i], values[i]);
  return row;
}

void LinearProgram::add_entry(int row, int col, double value) {
  entry_row.push_back(row);
  entry_col.push_back(col);
  entry_value.push_back(value);
}


LpSolution solve_lp(const LinearProgram& lp) { return solvers().solve_lp(lp); }

MilpSolution solve_milp(const MixedIntegerProgram& mip) { return solvers().solve_milp(mip); }

}  // namespace cellsched
