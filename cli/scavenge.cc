// `cellsched scavenge --slurm`: malleable training on the nodes a real Slurm
// cluster leaves idle (runner/scavenger.h).
#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/scavenge_jobs.h"
#include "core/error.h"
#include "core/parse_util.h"
#include "core/self_exe.h"
#include "runner/process.h"
#include "runner/scavenger.h"

namespace cellsched::cli {

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

std::string stamp() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::localtime(&t));
  return buf;
}

// `cellsched scavenge --task -- CMD...`: what srun starts on each node of a
// launch. Gives the command the torchrun-style ranks of the runner contract
// from Slurm's task ids, then becomes it.
int run_task(const std::vector<std::string>& args) {
  size_t i = 1;
  if (i < args.size() && args[i] == "--") ++i;
  if (i >= args.size()) throw InputError("--task: no command");
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v && *v ? v : fallback);
  };
  setenv("RANK", env("SLURM_PROCID", "0").c_str(), 1);
  setenv("WORLD_SIZE", env("SLURM_NTASKS", "1").c_str(), 1);
  setenv("LOCAL_RANK", env("SLURM_LOCALID", "0").c_str(), 1);
  std::vector<char*> argv;
  for (size_t k = i; k < args.size(); ++k) argv.push_back(const_cast<char*>(args[k].c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::cerr << "cellsched scavenge --task: cannot run " << args[i] << ": " << std::strerror(errno) << "\n";
  return 127;
}

}  // namespace

int cmd_scavenge(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--task") return run_task(args);
  po::options_description opt("scavenge options");
  std::string jobs_path, state;
  runner::ScavengeOptions o;
  opt.add_options()
      ("slurm", "watch the Slurm cluster that sinfo/squeue reach (SLURM_CONF): the only host scheduler supported")
      ("jobs", po::value(&jobs_path), "malleable jobs: CSV name,iterations,max_nodes,rescale_s,curve,command... "
                                      "(curve empty or amdahl:SIGMA; the command is the rest of the line, one argument per field)")
      ("state", po::value(&state)->default_value("scavenge"), "folder for checkpoints, progress and logs (a rerun resumes)")
      ("interval", po::value(&o.interval_s)->default_value(2, "2"), "seconds between looks at the cluster")
      ("grace", po::value(&o.grace_s)->default_value(10, "10"), "seconds a job has to checkpoint and leave; also the margin before a reservation")
      ("horizon", po::value(&o.horizon_s)->default_value(3600, "3600"), "time limit (s) where no waiting job has reserved the idle nodes")
      ("plan-margin", po::value(&o.plan_margin_s)->default_value(60, "60"),
       "seconds kept free before a reservation beyond --grace: Slurm's backfill plans in bf_resolution steps (60 s by default)")
      ("launch-timeout", po::value(&o.launch_timeout_s)->default_value(60, "60"), "cancel a launch Slurm has not started after this many seconds")
      ("duration", po::value(&o.duration_s)->default_value(-1, "-1"), "stop after this many seconds (-1: when every job is done)")
      ("partition", po::value(&o.partition), "only this partition")
      ("json", "print the report as JSON");
  po::variables_map vm;
  if (!parse("cellsched scavenge --slurm --jobs FILE [options]", args, opt, {}, vm)) return 0;
  if (!vm.count("slurm")) throw InputError("--slurm is required (the host scheduler scavenge watches)");
  if (jobs_path.empty()) throw InputError("--jobs is required");
  check_flag_range("interval", o.interval_s, 0.1, 3600);
  check_flag_range("grace", o.grace_s, 0, 3600);
  check_flag_range("horizon", o.horizon_s, 60, 1e7);
  check_flag_range("plan-margin", o.plan_margin_s, 0, 3600);
  check_flag_range("launch-timeout", o.launch_timeout_s, 1, 86400);
  if (o.duration_s != -1) check_flag_range("duration", o.duration_s, 0, 1e9);
  const std::vector<runner::ScavengeJob> jobs = load_scavenge_jobs(jobs_path);
  for (const char* tool : {"sinfo", "squeue", "srun", "scancel"})
    if (runner::find_executable(tool).empty())
      throw InputError(std::string(tool) + " not found: scavenge --slurm needs the Slurm clients (Debian slurm-client)");
  std::error_code ec;
  std::filesystem::create_directories(state, ec);
  if (ec || !std::filesystem::is_directory(state))
    throw InputError(state + ": --state must be a folder that can be created" + (ec ? ": " + ec.message() : ""));
  o.state_dir = std::filesystem::absolute(state).string();
  const std::string self = self_executable();
  if (self.empty()) throw std::runtime_error("cannot find this executable (/proc/self/exe)");
  o.task_wrapper = {self, "scavenge", "--task", "--"};
  const bool json = vm.count("json") > 0;
  o.log = [json](const std::string& s) { (json ? std::cerr : std::cout) << stamp() << " " << s << std::endl; };
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const runner::ScavengeReport r = runner::scavenge(jobs, o, &g_stop);
  // A job given up on is a failure of the run: exit 1, and it says why.
  const bool any_failed = std::any_of(r.jobs.begin(), r.jobs.end(), [](const auto& jr) { return jr.failed; });
  if (json) {
    nlohmann::json j = {{"polls", r.polls}, {"failed_polls", r.failed_polls}, {"launches", r.launches},
                        {"claims", r.claims}, {"cancelled_launches", r.cancelled_launches},
                        {"release_max_s", r.release_max_s}, {"node_hours", r.node_s / 3600},
                        {"jobs", nlohmann::json::array()}};
    for (const auto& jr : r.jobs)
      j["jobs"].push_back({{"name", jr.name}, {"iterations_done", jr.iterations_done}, {"launches", jr.launches},
                           {"done", jr.done}, {"failed", jr.failed}, {"error", jr.error}});
    std::cout << j.dump(2) << "\n";
    return any_failed ? 1 : 0;
  }
  Table t({"job", "iterations done", "launches", "done"});
  for (const auto& jr : r.jobs)
    t.add({jr.name, fixed(jr.iterations_done, 0), std::to_string(jr.launches), jr.done ? "yes" : jr.failed ? "failed" : "no"});
  std::cout << "\n";
  t.print(std::cout);
  std::cout << "\n" << r.launches << " launches, " << r.claims << " claims (longest release " << fixed(r.release_max_s, 1)
            << " s), " << fixed(r.node_s / 3600, 2) << " node-hours used";
  if (r.failed_polls > 0) std::cout << "; " << r.failed_polls << " polls failed and were skipped";
  std::cout << "\n";
  for (const auto& jr : r.jobs)
    if (jr.failed) std::cerr << "cellsched scavenge: " << jr.name << " failed: " << jr.error << "\n";
  return any_failed ? 1 : 0;
}

}  // namespace cellsched::cli
