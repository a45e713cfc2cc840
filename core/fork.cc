#include "core/fork.h"

#include <algorithm>
#include <stdexcept>

#include "core/error.h"

namespace cellsched {

double fork_worth(const ForkModel& model, double main, double copies, double largest) {
  main = std::max(0.0, main);
  copies = std::max(0.0, copies);
  const double e = model.efficiency;
  if (model.scaling == ForkScaling::linear) return main + e * copies;
  const double total = main + copies;
  const double lead = std::max(main, std::min(copies, std::max(0.0, largest)));
  if (e >= 1 || lead <= 0 || total <= lead) return total;
  const double phi = 2 * e / (1 - e);
  const double k = total / lead;
  return total * (phi + 1) / (phi + k);
}

double fork_worth(const ForkModel& model, const std::vector<double>& gangs) {
  if (gangs.empty()) return 0;
  double copies = 0, largest = 0;
  for (size_t g = 1; g < gangs.size(); ++g) {
    copies += gangs[g];
    largest = std::max(largest, gangs[g]);
  }
  return fork_worth(model, gangs[0], copies, largest);
}

double fork_efficiency_from(int k, double eff_k) {
  if (k < 2 || !(eff_k > 0)) throw std::invalid_argument("fork_efficiency_from: need k >= 2 and eff_k > 0");
  if (eff_k >= 1) return 1;
  if (eff_k * k <= 1) return 0;
  // k eff_k = k (phi + 1) / (phi + k)  =>  phi = (k eff_k - 1) / (1 - eff_k).
  const double phi = (k * eff_k - 1) / (1 - eff_k);
  return phi / (2 + phi);
}

const char* fork_scaling_name(ForkScaling s) { return s == ForkScaling::linear ? "linear" : "noise"; }

ForkScaling parse_fork_scaling(const std::string& s) {
  if (s == "noise") return ForkScaling::noise;
  if (s == "linear") return ForkScaling::linear;
  throw InputError("fork scaling must be 'noise' or 'linear', got '" + s + "'");
}

}  // namespace cellsched
