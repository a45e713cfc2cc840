// Shared by the two COIN-OR translation units (lp.cc: CLP, milp.cc: CBC);
// included nowhere else.
#pragma once

#include <vector>

#include "CoinFinite.hpp"
#include "scheduler/lp.h"

namespace cellsched::coin {

// Infinite bounds as COIN-OR spells them.
inline double bound(double v) {
  if (v == kLpInf) return COIN_DBL_MAX;
  if (v == -kLpInf) return -COIN_DBL_MAX;
  return v;
}

inline std::vector<double> bounds(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bound(v[i]);
  return out;
}

}  // namespace cellsched::coin
