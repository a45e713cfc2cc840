#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "scheduler/policy.h"

namespace cellsched::cli {

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> v = {
      {"simulate", "replay a trace on a cluster under one or more policies", cmd_simulate},
      {"schedule", "write the offline schedule of one policy (JSON, CSV, Gantt chart)", cmd_schedule},
      {"sweep", "average JCT against input load over generated traces, with plots", cmd_sweep},
      {"trace", "generate, inspect or convert job traces", cmd_trace},
      {"cluster", "show a cluster (YAML node list, PAI machine list or shorthand)", cmd_cluster},
      {"gpus", "list the built-in GPU catalogue", cmd_gpus},
      {"db", "list and show stored runs", cmd_db},
      {"profile", "profile a model's compute per layer and communication per collective", cmd_profile},
      {"estimate", "estimate a cell's iteration time, throughput and memory under a parallel plan", cmd_estimate},
      {"tune", "find the best parallel plan of a cell (or of every cell) and store it", cmd_tune},
      {"validate", "compare estimates with real CPU training runs (DP, pipeline, single process)", cmd_validate},
      {"run", "run the scheduler online against a node list (long-lived)", cmd_run},
      {"submit", "submit a training job to the online runner", cmd_submit},
      {"status", "jobs, copies, nodes and rounds of the online runner", cmd_status},
      {"cancel", "cancel a job of the online runner", cmd_cancel},
  };
  return v;
}

bool parse(const std::string& usage, const std::vector<std::string>& args,
           const po::options_description& options, const po::positional_options_description& pos,
           po::variables_map& vm) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help");
  po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: " << usage << "\n\n" << all << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

std::string default_db_path() { return "cellsched.db"; }

std::string data_dir() {
  if (const char* env = std::getenv("CELLSCHED_DATA")) return env;
  return CELLSCHED_DATA_DIR;
}

std::string default_throughputs() { return data_dir() + "/gavel/simulation_throughputs.json"; }

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

std::string all_policies() {
  std::string s;
  for (const std::string& n : policy_names()) s += (s.empty() ? "" : ",") + n;
  return s;
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      // First column left-aligned, the rest (numbers) right-aligned.
      const std::string pad(width[i] - row[i].size(), ' ');
      out << (i ? "  " : "") << (i == 0 ? row[i] + pad : pad + row[i]);
    }
    out << "\n";
  };
  line(header_);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
  for (const auto& r : rows_) line(r);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string hours(double seconds) { return seconds < 0 ? "-" : fixed(seconds / 3600.0, 2); }

}  // namespace cellsched::cli
