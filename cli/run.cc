// The online runner's verbs run and submit (status and cancel: run_status.cc).
// This file is the composition root of the runner: the only place with #if
// for LibTorch.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/parse_util.h"
#include "core/throughput.h"
#include "db/online.h"
#include "runner/checkpoint.h"
#include "runner/executor.h"
#include "runner/lock.h"
#include "runner/process.h"
#include "runner/runner.h"
#include "runner/slurm_nodes.h"
#include "scheduler/oracle.h"
#include "core/schedule.h"
#include "scheduler/policy.h"
#include "scheduler/replay.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cellsched::cli {
namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleeping runner wakes up at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal stops the runner cleanly too
}

std::string stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}


// Finite and in range, with the range in the message (nan fails every comparison).
void check_run_options(const runner::RunnerOptions& o) {
  if (!(o.round_s >= 1 && o.round_s <= 1e6)) throw InputError("--round must be in [1, 1e6] seconds (got " + num(o.round_s) + ")");
  if (!(o.grace_s >= 0 && o.grace_s <= 3600)) throw InputError("--grace must be in [0, 3600] seconds (got " + num(o.grace_s) + ")");
  if (!(o.poll_s >= 0.01 && o.poll_s <= 60)) throw InputError("--poll must be in [0.01, 60] seconds (got " + num(o.poll_s) + ")");
  if (!(o.restart_s >= 0 && o.restart_s <= 1e6))
    throw InputError("--restart must be in [0, 1e6] seconds (got " + num(o.restart_s) + ")");
  if (!(o.prior_per_gpu > 0 && o.prior_per_gpu <= 1e9))
    throw InputError("--prior must be a positive rate up to 1e9 iterations/s (got " + num(o.prior_per_gpu) + ")");
  check_policy_settings(o.policy_settings);
  if (o.max_failures < 0) throw InputError("--max-failures must not be negative");
  if (o.max_rounds == 0 || o.max_rounds < -1)
    throw InputError("--rounds must be at least 1, or -1 to run until stopped (got " + std::to_string(o.max_rounds) + ")");
}

// A known policy, or a schedule to replay (checked before anything runs: a
// bad file or a node the list lacks is bad input).
void choose_policy(runner::RunnerOptions& o, const Cluster& cluster) {
  if (!o.schedule_path.empty()) {
    const Schedule s = load_schedule(o.schedule_path);
    make_replay(s, cluster, o.schedule_offset);
    o.policy = "replay:" + s.policy;
    return;
  }
  for (const std::string& n : policy_names())
    if (n == o.policy) return;
  throw InputError("unknown policy '" + o.policy + "' (" + all_policies() + ")");
}

// A restart with a smaller node list: an open job that no longer fits would
// wait forever. Bad input, before anything changes.
void check_open_jobs_fit(const db::OnlineStore& store, const Cluster& cluster, const std::string& nodes,
                         const std::string& db_path) {
  std::string too_big;
  for (const db::OnlineJob& j : store.jobs(true))
    if (j.gpus > cluster.total_gpus())
      too_big += (too_big.empty() ? "" : ", ") + std::string("job ") + std::to_string(j.id) + " (" +
                 count_of(j.gpus, "GPU") + ")";
  if (!too_big.empty())
    throw InputError(nodes + ": the node list has " + std::to_string(cluster.total_gpus()) +
                     " GPUs, too few for " + too_big + " of " + db_path +
                     "; give a larger node list or `cellsched cancel` the job");
}

// --executor slurm: the node list against what sinfo says (names, GRES
// types and counts, the partition), before anything is launched; returns the
// GRES type names to ask srun for.
std::map<std::string, std::string> check_against_slurm(const Cluster& cluster, const std::string& nodes,
                                                       const runner::ExecutorOptions& eo, const std::string& sinfo) {
  std::vector<std::string> argv = {sinfo, "-N", "-h", "-o", "%N|%G|%t"};
  if (!eo.partition.empty()) argv.push_back("--partition=" + eo.partition);
  std::string text;
  try {
    text = runner::run_capture(argv);
  } catch (const std::exception& e) {
    throw InputError(std::string("--executor slurm: cannot ask Slurm for its nodes: ") + e.what() +
                     " (give --sinfo PATH, or --sinfo '' to skip the check)");
  }
  const auto slurm = runner::parse_sinfo_gres(text);
  if (slurm.empty())
    throw InputError(eo.partition.empty() ? std::string("--executor slurm: sinfo lists no nodes")
                                          : "--partition " + eo.partition + ": Slurm has no such partition, or it has no nodes");
  std::vector<std::string> notes;
  auto gres = runner::match_slurm_nodes(cluster, slurm, nodes, &notes);
  for (const std::string& n : notes) std::cerr << "cellsched run: note: " << n << "\n";
  return gres;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  std::string nodes, db_path, throughputs, executor_kind, work_dir;
  runner::RunnerOptions o;
  runner::ExecutorOptions eo;
  std::vector<std::string> ssh_options;
  bool quiet = false;
  std::string fork_scaling, sinfo;
  po::options_description opts("options");
  opts.add_options()
      ("nodes", po::value(&nodes)->required(), "node list (YAML; or a shorthand like v100:4)")
      ("policy", po::value(&o.policy)->default_value("hadare"), "scheduling policy")
      ("round", po::value(&o.round_s)->default_value(60), "round length, seconds")
      ("db", po::value(&db_path)->default_value(default_db_path()), "state database (SQLite)")
      ("rounds", po::value(&o.max_rounds)->default_value(-1), "stop after N >= 1 rounds (default -1: run until stopped)")
      ("until-idle", po::bool_switch(&o.until_idle), "stop once no job is queued or running")
      ("executor", po::value(&executor_kind)->default_value("local"), "local | ssh | slurm")
      ("grace", po::value(&o.grace_s)->default_value(10), "seconds between SIGTERM and SIGKILL")
      ("max-failures", po::value(&o.max_failures)->default_value(3), "failed launches a job may retry")
      ("poll", po::value(&o.poll_s)->default_value(0.2, "0.2"), "seconds between progress reads")
      ("work-dir", po::value(&work_dir), "launch logs, exit and progress files (default: <db>.d)")
      ("keep-checkpoints", po::bool_switch(&o.keep_checkpoints), "keep the copies' checkpoints after averaging")
      ("fork-efficiency", fork_efficiency_value(&o.fork_efficiency), kForkEfficiencyHelp)
      ("fork-scaling", po::value(&fork_scaling)->default_value("noise"), kForkScalingHelp)
      ("restart", po::value(&o.restart_s)->default_value(30), "restart overhead the policies assume, seconds")
      ("throughputs", po::value(&throughputs)->default_value(default_throughputs()), "measured throughput table (Gavel JSON); '' for none")
      ("prior", po::value(&o.prior_per_gpu)->default_value(1.0), "iterations/s per GPU assumed for a job nothing knows yet")
      ("ssh", po::value(&eo.ssh_program)->default_value("ssh"), "ssh client (executor ssh)")
      ("ssh-option", po::value(&ssh_options)->composing(), "extra ssh client argument (repeatable)")
      ("srun", po::value(&eo.srun)->default_value("srun"), "srun (executor slurm)")
      ("scancel", po::value(&eo.scancel)->default_value("scancel"), "scancel (executor slurm)")
      ("partition", po::value(&eo.partition), "Slurm partition (executor slurm)")
      ("sinfo", po::value(&sinfo)->default_value("sinfo"),
       "sinfo, to check the node list against Slurm before the first launch (executor slurm; '' skips the check)")
      ("schedule", po::value(&o.schedule_path), "replay this `cellsched schedule` file (schedule.json) instead of deciding with --policy")
      ("schedule-offset", po::value(&o.schedule_offset)->default_value(1), "with --schedule: job J plays the schedule's job J - offset (submitted jobs count from 1, trace jobs from 0)")
      ("quiet,q", po::bool_switch(&quiet), "no log on stderr");
  add_hadar_options(opts, &o.policy_settings);
  po::variables_map vm;
  if (!parse("cellsched run --nodes NODES.yaml [options]", args, opts, {}, vm)) return 0;
  check_run_options(o);
  if (vm.count("work-dir")) check_out_dir("work-dir", work_dir);
  o.fork_scaling = fork_model_arg(o.fork_efficiency, fork_scaling).scaling;
  const Cluster cluster = load_cluster(nodes);
  runner::validate_nodes(cluster, nodes);
  choose_policy(o, cluster);
  eo.kind = executor_kind;
  eo.ssh_options = ssh_options;
  if (eo.kind == "slurm" && !sinfo.empty()) eo.gres_types = check_against_slurm(cluster, nodes, eo, sinfo);
  const auto executor = runner::make_executor(eo);
  std::optional<ThroughputTable> table;
  std::unique_ptr<TableOracle> base;
  if (!throughputs.empty()) {
    table = load_gavel_throughputs(throughputs);
    base = std::make_unique<TableOracle>(*table);
  }
  // Averaging runs in cellsched-torch, so this process loads no LibTorch.
  std::unique_ptr<runner::CheckpointAverager> averager;
  if (const std::string helper = torch_helper_path(); !helper.empty()) averager = runner::make_process_averager(helper);
  // One runner per state database; the lock is held until this process ends.
  runner::LockHolder holder;
  auto lock = runner::RunnerLock::acquire(db_path, &holder);
  if (!lock) throw InputError(db_path + ": another runner uses this state database (" + holder.text() + ")");
  db::OnlineStore store = db::OnlineStore::open(db_path);
  check_open_jobs_fit(store, cluster, nodes, db_path);
  runner::check_live_launches(store, cluster, nodes);
  // The lease in the store, for a runner on another host (past the OS lock's
  // reach on a shared filesystem); stale after a minute plus two grace periods.
  runner::take_lease(store, 60 + 2 * o.grace_s);
  o.work_dir = work_dir;
  o.stop = &g_stop;
  if (!quiet) o.log = [](const std::string& m) { std::cerr << stamp() << " " << m << std::endl; };
  install_handlers();
  if (o.log)
    o.log("cellsched run: " + count_of(static_cast<long>(cluster.nodes.size()), "node") + ", " +
          count_of(cluster.total_gpus(), "GPU") + ", policy " + o.policy + ", round " + num(o.round_s) +
          " s, executor " + executor->name() + ", averaging " + (averager ? averager->name() : "off") +
          ", db " + db_path);
  runner::Runner r(store, cluster, *executor, base.get(), averager.get(), o);
  r.run();
  if (o.log) o.log(g_stop.load() ? "stopped by signal" : "done");
  return 0;
}

namespace {

// --iterations: digits are read as an integer, so that 2^53 + 1 is refused
// rather than rounded to 2^53; other forms ("1e6") as a number.
double parse_iterations(const std::string& text) {
  if (const auto i = detail::to_int(text)) {
    if (*i < 1 || *i > (1LL << 53))
      throw InputError("--iterations must be a whole number in [1, 2^53] (got " + std::string(detail::trim(text)) + ")");
    return static_cast<double>(*i);
  }
  if (const auto d = detail::to_double(text)) return *d;  // check_job checks it
  throw InputError("--iterations: '" + text + "' is not a number");
}

// The job's own fields: counts in range, names printable, model and job type
// filled in from each other.
void check_job(db::OnlineJob& j) {
  // Iterations count things: whole numbers up to 2^53 (where doubles stop counting by ones).
  if (!(j.iterations >= 1 && j.iterations <= 9007199254740992.0) || j.iterations != std::floor(j.iterations))
    throw InputError("--iterations must be a whole number in [1, 2^53] (got " + num(j.iterations) + ")");
  if (j.gpus <= 0) throw InputError("--gpus must be positive (got " + std::to_string(j.gpus) + ")");
  if (!(j.weight >= kMinWeight && j.weight <= kMaxWeight))
    throw InputError("--weight must be in [1e-6, 1e6] (got " + num(j.weight) + ")");
  if (j.batch_size < 0) throw InputError("--batch must not be negative");
  for (const std::string* text : {&j.name, &j.job_type, &j.model})
    for (unsigned char ch : *text)
      if (ch < 0x20 || ch == 0x7f)
        throw InputError("--name, --job-type and --model must be one line of printable text (got a control "
                         "character in '" + printable(*text) + "')");
  if (j.batch_size > 0 && j.model.empty() && j.job_type.empty())  // it was stored and used by nothing
    throw InputError("--batch needs --model (or give --job-type 'MODEL (batch size N)')");
  if (j.job_type.empty() && !j.model.empty())
    j.job_type = j.batch_size > 0 ? j.model + " (batch size " + std::to_string(j.batch_size) + ")" : j.model;
  if (j.model.empty() && !j.job_type.empty()) {
    const auto [model, batch] = split_job_type(j.job_type);
    j.model = model;
    if (j.batch_size == 0) j.batch_size = batch;
  } else if (!j.model.empty() && !j.job_type.empty()) {
    // Both given: they must say the same (the oracle reads the job type).
    const auto [model, batch] = split_job_type(j.job_type);
    if (model != j.model || (j.batch_size > 0 && batch > 0 && batch != j.batch_size))
      throw InputError("--job-type '" + j.job_type + "' contradicts --model " + j.model +
                       (j.batch_size > 0 ? " --batch " + std::to_string(j.batch_size) : std::string()) +
                       ": give one, or both alike");
  }
}

// Checks against what the runner announced: its executor (a local command
// must be an executable file here) and its node list (the gang must fit).
// `store`: the state database when it exists (null: none yet, so no runner
// has said what executor or nodes it uses).
void check_against_runner(const db::OnlineStore* store, const db::OnlineJob& j, const std::vector<std::string>& command) {
  const std::string executor = store ? store->meta("executor").value_or("local") : "local";
  if (executor == "local") {
    const std::string exe = command[0].find('/') == std::string::npos
                                ? runner::find_executable(command[0])
                                : (fs::path(j.workdir) / command[0]).string();
    if (exe.empty() || access(exe.c_str(), X_OK) != 0 || fs::is_directory(exe))
      throw InputError("command '" + command[0] + "' is not an executable file here (not found in PATH, a directory, or not executable)");
  }
  if (const auto nodes = store ? store->meta("nodes") : std::nullopt) {
    // The runner's node list is stored as YAML; count its GPUs.
    int total = 0;
    std::istringstream in(*nodes);
    std::string line;
    while (std::getline(in, line)) {
      const auto p = line.find("gpus:");
      if (p != std::string::npos) total += std::atoi(line.c_str() + p + 5);
    }
    if (total > 0 && j.gpus > total)
      throw InputError("--gpus " + std::to_string(j.gpus) + " is more than the runner's " +
                       std::to_string(total) + " GPUs");
  }
}

// Empty: the runner uses <work dir>/job-<id>. Given: a directory, or one that
// can be made under an existing parent (nothing is created here).
std::string checkpoint_dir(const std::string& given) {
  if (given.empty()) return given;
  const fs::path d = fs::absolute(given).lexically_normal();
  std::error_code ec;
  const bool ok = fs::exists(d, ec) ? fs::is_directory(d, ec) : fs::is_directory(d.parent_path(), ec);
  if (!ok)
    throw InputError("--checkpoint-dir " + d.string() + ": must be a directory, or a new one under an existing directory");
  return d.string();
}

}  // namespace

int cmd_submit(const std::vector<std::string>& all_args) {
  // Everything after `--` is the command, untouched.
  std::vector<std::string> args, command;
  bool in_command = false;
  for (const std::string& a : all_args) {
    if (!in_command && a == "--") in_command = true;
    else if (in_command) command.push_back(a);
    else args.push_back(a);
  }
  db::OnlineJob j;
  std::string iterations;
  std::string db_path;
  bool as_json = false;
  po::options_description opts("options");
  opts.add_options()
      ("name", po::value(&j.name), "job name (default job-<id>)")
      ("job-type", po::value(&j.job_type), "throughput-table job type, e.g. 'ResNet-18 (batch size 64)'")
      ("model", po::value(&j.model), "model name")
      ("batch", po::value(&j.batch_size)->default_value(0), "batch size")
      ("iterations", po::value(&iterations)->required(), "iterations to train, a whole number in [1, 2^53]")
      ("gpus", po::value(&j.gpus)->default_value(1), "GPUs as one gang (> 0)")
      ("weight", po::value(&j.weight)->default_value(1.0), "priority weight, [1e-6, 1e6]")
      ("checkpoint-dir", po::value(&j.checkpoint_dir), "where checkpoints go (default: <the runner's --work-dir>/job-<id>, <db>.d/job-<id> unless it names one)")
      ("workdir", po::value(&j.workdir), "working directory of the processes (default: here)")
      ("db", po::value(&db_path)->default_value(default_db_path()), "state database (SQLite)")
      ("json", po::bool_switch(&as_json), "print the job's id, name and state as JSON (status --json gives the rest)");
  po::variables_map vm;
  if (!parse("cellsched submit --iterations N [options] -- COMMAND [ARGS...]", args, opts, {}, vm)) return 0;
  j.iterations = parse_iterations(iterations);
  if (command.empty()) throw InputError("no command: put it after `--`, e.g. `-- python3 train.py`");
  if (command[0].empty()) throw InputError("the command name is empty");
  check_job(j);
  j.workdir = fs::absolute(j.workdir.empty() ? fs::current_path() : fs::path(j.workdir)).lexically_normal().string();
  if (!fs::is_directory(j.workdir)) throw InputError("--workdir " + j.workdir + ": no such directory");
  j.checkpoint_dir = checkpoint_dir(j.checkpoint_dir);
  // Bad input stores nothing, not even a new database file.
  const bool fresh = !fs::exists(db_path);
  if (fresh) {
    check_against_runner(nullptr, j, command);
  } else {
    const db::OnlineStore existing = db::OnlineStore::open(db_path);
    check_against_runner(&existing, j, command);
  }
  db::OnlineStore store = db::OnlineStore::open(db_path);
  j.command = command;
  j.submitted_at = unix_now();
  store.submit(j);
  if (fresh || !store.meta("nodes"))
    std::cerr << "note: no runner has used " << db_path << " yet: the job waits for `cellsched run --db " << db_path
              << "`\n";
  if (as_json) {
    std::cout << json{{"id", j.id}, {"name", j.name}, {"state", j.state}}.dump() << "\n";
  } else {
    std::cout << j.id << "\n";
  }
  return 0;
}

}  // namespace cellsched::cli
