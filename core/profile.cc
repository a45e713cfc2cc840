#include "core/profile.h"

namespace cellsched {

double busbw_factor(const std::string& collective, int ranks) {
  if (ranks <= 1) return collective == "send_recv" ? 1.0 : 0.0;
  const double n = ranks;
  if (collective == "all_reduce") return 2 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter" || collective == "all_to_all")
    return (n - 1) / n;
  return 1.0;  // broadcast, reduce, send_recv
}

}  // namespace cellsched
