// cellsched-torch: the verbs that need LibTorch or the CUDA libraries
// (profile, validate, and the checkpoint averaging the online runner asks
// for). `cellsched profile|validate` replace themselves with this program, so
// users keep one command; the runner starts `cellsched-torch average`.
#include <iostream>
#include <string>
#include <vector>

#include "cli/common.h"

namespace cellsched::cli {
int cmd_average(const std::vector<std::string>& args);  // cli/average.cc
namespace {

int dispatch(const std::vector<std::string>& args) {
  static const std::vector<Verb> verbs = {
      {"profile", "profile a model's compute per layer and communication per collective", cmd_profile},
      {"validate", "compare estimates with real CPU training runs", cmd_validate},
      {"average", "average PyTorch checkpoints, weighted (the online runner's copies)", cmd_average},
  };
  if (!args.empty() && args[0] == "--version") {
    std::cout << "cellsched-torch " << CELLSCHED_VERSION << "\n";
    return 0;
  }
  for (const auto& v : verbs)
    if (!args.empty() && args[0] == v.name) return run_verb(v, std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << "usage: cellsched-torch profile|validate|average [options] (started by cellsched; see cellsched --help)\n";
  return 2;
}

}  // namespace
}  // namespace cellsched::cli

int main(int argc, char** argv) { return cellsched::cli::run_main(argc, argv, cellsched::cli::dispatch); }
