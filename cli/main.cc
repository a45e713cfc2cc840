// cellsched: heterogeneity-aware scheduling of deep-learning training. This
// executable loads no device library: profile and validate run in
// cellsched-torch (cli/torch_main.cc), which it starts in its place.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/common.h"

namespace cellsched::cli {
namespace {

int cmd_profile_via_helper(const std::vector<std::string>& args) { return exec_torch_helper("profile", args); }
int cmd_validate_via_helper(const std::vector<std::string>& args) { return exec_torch_helper("validate", args); }

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> v = {
      {"simulate", "replay a trace on a cluster under one or more policies", cmd_simulate},
      {"schedule", "write the offline schedule of one policy (JSON, CSV, Gantt chart)", cmd_schedule},
      {"sweep", "average JCT against input load over generated traces, with plots", cmd_sweep},
      {"trace", "generate, inspect or convert job traces", cmd_trace},
      {"cluster", "show a cluster (YAML node list, PAI machine list, Alibaba 2023 node CSV or shorthand)", cmd_cluster},
      {"gpus", "list the built-in GPU catalogue", cmd_gpus},
      {"db", "list and show stored runs", cmd_db},
      {"profile", "profile a model's compute per layer and communication per collective", cmd_profile_via_helper},
      {"estimate", "estimate a cell's iteration time, throughput and memory under a parallel plan", cmd_estimate},
      {"tune", "find the best parallel plan of a cell (or of every cell) and store it", cmd_tune},
      {"validate", "compare estimates with real CPU training runs (DP, pipeline, single process); "
                   "`validate fork` measures HadarE's copy efficiency",
       cmd_validate_via_helper},
      {"run", "run the scheduler online against a node list (long-lived)", cmd_run},
      {"submit", "submit a training job to the online runner", cmd_submit},
      {"status", "jobs, copies, nodes and rounds of the online runner", cmd_status},
      {"cancel", "cancel a job of the online runner", cmd_cancel},
      {"scavenge", "run malleable training on the nodes a Slurm cluster leaves idle (MalleTrain)", cmd_scavenge},
  };
  return v;
}

void usage(std::ostream& out) {
  out << "usage: cellsched <verb> [options]   (cellsched <verb> --help for details)\n\nverbs:\n";
  for (const auto& v : verbs()) out << "  " << v.name << std::string(12 - std::strlen(v.name), ' ') << v.summary << "\n";
  out << "\n  --version   print the version\n  --help      this list\n";
  out << "\nexit status: 0 ok, 1 failure, 2 bad usage or bad input\n";
}

int dispatch(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    usage(std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "cellsched " << CELLSCHED_VERSION << "\n";
    return 0;
  }
  for (const auto& v : verbs())
    if (args[0] == v.name) return run_verb(v, std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << "cellsched: unknown verb '" << args[0] << "'\n";
  usage(std::cerr);
  return 2;
}

}  // namespace
}  // namespace cellsched::cli

int main(int argc, char** argv) { return cellsched::cli::run_main(argc, argv, cellsched::cli::dispatch); }
