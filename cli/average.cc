// `cellsched-torch average`: the LibTorch checkpoint averaging that the
// online runner (which loads no LibTorch) asks for when it consolidates a
// job's forked copies.
#include <cmath>
#include <iostream>

#include "cli/common.h"
#include "core/error.h"
#include "runner/checkpoint.h"

namespace cellsched::cli {

int cmd_average(const std::vector<std::string>& args) {
  po::options_description opt("average options");
  std::string out, weight_list;
  std::vector<std::string> inputs;
  opt.add_options()
      ("out", po::value(&out)->required(), "averaged checkpoint to write (atomically)")
      ("weights", po::value(&weight_list)->required(), "one non-negative weight per input, comma-separated")
      ("input", po::value(&inputs)->multitoken(), "checkpoints (state dicts saved by torch.save)");
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  if (!parse("cellsched-torch average --out FILE --weights W1,W2,... IN1 IN2 ...", args, opt, pos, vm)) return 0;
  std::vector<double> weights;
  for (const std::string& w : split_list(weight_list)) {
    char* end = nullptr;
    const double v = std::strtod(w.c_str(), &end);
    if (end == w.c_str() || *end || !std::isfinite(v) || v < 0)
      throw InputError("--weights: '" + w + "' is not a finite non-negative number");
    weights.push_back(v);
  }
  if (inputs.empty() || inputs.size() != weights.size())
    throw InputError("give one weight per input checkpoint (" + std::to_string(weights.size()) + " weights, " +
                     std::to_string(inputs.size()) + " inputs)");
#if defined(CELLSCHED_HAVE_TORCH)
  runner::make_torch_averager()->average(inputs, weights, out);
  return 0;
#else
  std::cerr << "cellsched-torch average: this build has no LibTorch (install libtorch-dev and rebuild)\n";
  return 1;
#endif
}

}  // namespace cellsched::cli
