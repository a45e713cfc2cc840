// The online runner end to end: the `cellsched` binary, real processes (the
// shell test trainer, the PyTorch example), real files, on this machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/online.h"
#include "runner/executor.h"
#include "runner/runner.h"
#include "runner/runner_impl.h"
#include "tests/support/subprocess.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using cellsched::testing::Result;
using cellsched::testing::slurp;

const std::string kTrainer = std::string(CELLSCHED_TEST_SOURCE) + "/runner/trainer.sh";

class Runner : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = cellsched::testing::fresh_test_dir("cellsched-runner");
    db_ = (dir_ / "state.db").string();
  }
  void TearDown() override {
    for (pid_t p : background_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Starts the binary with `args` (argv, no shell) in dir_; returns its pid.
  pid_t start(std::vector<std::string> args, const std::string& tag,
              const std::vector<std::string>& env = {}) {
    args.insert(args.begin(), CELLSCHED_BINARY);
    return cellsched::testing::spawn(args, dir_, dir_ / (tag + ".out"), dir_ / (tag + ".err"), env);
  }
  static int wait_status(pid_t pid) { return cellsched::testing::wait_status(pid); }
  Result run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    const std::string tag = "cmd" + std::to_string(++calls_);
    const int st = wait_status(start(args, tag, env));
    return {st, slurp(dir_ / (tag + ".out")), slurp(dir_ / (tag + ".err"))};
  }
  // The runner in the background, with a log file per start.
  pid_t start_runner(const std::vector<std::string>& extra, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {"run", "--nodes", nodes_, "--db", db_, "--grace", "2", "--poll", "0.1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t p = start(args, "runner" + std::to_string(++runners_), env);
    background_.push_back(p);
    return p;
  }
  int finish(pid_t p) {
    const int st = wait_status(p);
    std::erase(background_, p);
    return st;
  }
  void write_nodes(const std::string& yaml) {
    nodes_ = (dir_ / "nodes.yaml").string();
    std::ofstream(nodes_) << yaml;
  }
  int64_t submit(const std::vector<std::string>& opts, const std::vector<std::string>& command) {
    std::vector<std::string> args = {"submit", "--db", db_};
    args.insert(args.end(), opts.begin(), opts.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    const Result r = run(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return std::atoll(r.out.c_str());
  }
  json status() {
    const Result r = run({"status", "--db", db_, "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    return json::parse(r.out);
  }
  std::string runner_logs() const {
    std::string s;
    for (int i = 1; i <= runners_; ++i) s += slurp(dir_ / ("runner" + std::to_string(i) + ".err"));
    return s;
  }

  fs::path dir_;
  std::string db_, nodes_;
  std::vector<pid_t> background_;
  int calls_ = 0, runners_ = 0;
};

constexpr const char* kTwoNodes = R"(name: this-machine
nodes:
  - {name: fast, address: 127.0.0.1, gpu_type: v100, gpus: 2}
  - {name: slow, address: 127.0.0.1, gpu_type: k80, gpus: 2}
)";

// Checks what every finished job must satisfy with the shell trainer: its
// checkpoint holds exactly the iterations the store counts.
void expect_consistent(const json& st, size_t jobs) {
  ASSERT_EQ(st["jobs"].size(), jobs) << st.dump(2);
  for (const json& j : st["jobs"]) {
    EXPECT_EQ(j["state"], "done") << j.dump(2);
    EXPECT_GE(j["iterations_done"].get<double>(), j["iterations"].get<double>()) << j.dump(2);
    ASSERT_FALSE(j["checkpoint"].get<std::string>().empty()) << j.dump(2);
    EXPECT_EQ(std::stod(slurp(j["checkpoint"].get<std::string>())), j["iterations_done"].get<double>())
        << j.dump(2);
    EXPECT_TRUE(j["copies"].empty()) << j.dump(2);
  }
}

// Start/end lines of the trainer: no job has two gangs of copy 0 at once.
void expect_no_overlap(const std::string& log) {
  std::map<std::string, std::vector<std::pair<double, double>>> runs;  // job -> intervals
  std::map<std::string, std::pair<std::string, double>> open;         // pid -> job, start
  std::istringstream in(log);
  std::string what, job, copy, pid;
  double t;
  while (in >> what >> job >> copy >> pid >> t) {
    if (copy != "0") continue;
    if (what == "start") open[pid] = {job, t};
    else if (open.count(pid)) {
      runs[open[pid].first].push_back({open[pid].second, t});
      open.erase(pid);
    }
  }
  EXPECT_TRUE(open.empty()) << "a trainer never logged its end (killed?)";
  for (auto& [j, iv] : runs) {
    std::sort(iv.begin(), iv.end());
    for (size_t i = 1; i < iv.size(); ++i)
      EXPECT_LE(iv[i - 1].second, iv[i].first + 1e-3) << "job " << j << " ran twice at once";
  }
}

TEST_F(Runner, BadNodeListsAndSubmissionsExit2) {
  write_nodes("nodes:\n  - {name: a, gpu_type: v100, gpus: 2}\n  - {name: b, gpu_type: nosuchgpu, gpus: 2}\n");
  Result r = run({"run", "--nodes", nodes_, "--db", db_, "--rounds", "1"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("nodes.yaml:3"), std::string::npos) << r.err;
  write_nodes("nodes:\n  - {name: a, gpu_type: v100, gpus: 2}\n  - {name: a, gpu_type: k80, gpus: 2}\n");
  r = run({"run", "--nodes", nodes_, "--db", db_, "--rounds", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nodes.yaml:3: duplicate node name"), std::string::npos) << r.err;
  write_nodes(kTwoNodes);
  r = run({"run", "--nodes", nodes_, "--db", db_, "--policy", "nope"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown policy"), std::string::npos) << r.err;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--fork-scaling", "cubic"}, {"--hadar-ratio-cap", "-1"}, {"--hadar-spare-exponent", "nan"}}) {
    r = run({"run", "--nodes", nodes_, "--db", db_, "--rounds", "1", flag, value});
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_NE(r.err.find(flag + " must be"), std::string::npos) << r.err;
  }

  r = run({"submit", "--db", db_, "--iterations", "10"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no command"), std::string::npos) << r.err;
  r = run({"submit", "--db", db_, "--iterations", "0", "--", kTrainer});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--iterations must be a whole number"), std::string::npos) << r.err;
  // Absurd numbers and paths (issue 13): each refused with the limit named, nothing stored.
  const std::vector<std::pair<std::vector<std::string>, std::string>> absurd = {
      {{"--iterations", "1.5"}, "--iterations must be a whole number in [1, 2^53]"},
      {{"--iterations", "1e300"}, "--iterations must be a whole number in [1, 2^53]"},
      {{"--iterations", "99999999999999999999"}, "--iterations must be a whole number in [1, 2^53]"},
      {{"--iterations", "5", "--weight", "inf"}, "--weight must be in [1e-6, 1e6]"},
      {{"--iterations", "5", "--weight", "1e-9"}, "--weight must be in [1e-6, 1e6]"},
      {{"--iterations", "5", "--checkpoint-dir", "/etc/passwd"}, "--checkpoint-dir /etc/passwd: must be a directory"},
      {{"--iterations", "5", "--checkpoint-dir", "/nonexistent/x/y"}, "--checkpoint-dir /nonexistent/x/y: must be"},
      {{"--iterations", "5", "--model", "ResNet-18", "--batch", "64", "--job-type", "ResNet-50 (batch size 32)"},
       "--job-type 'ResNet-50 (batch size 32)' contradicts --model ResNet-18 --batch 64"},
  };
  for (const auto& [opts, want] : absurd) {
    std::vector<std::string> a = {"submit", "--db", db_};
    a.insert(a.end(), opts.begin(), opts.end());
    a.insert(a.end(), {"--", kTrainer});
    r = run(a);
    EXPECT_EQ(r.status, 2) << opts[1];
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists("/nonexistent"));
  r = run({"submit", "--db", db_, "--iterations", "5", "--", dir_.string()});  // a directory as the command
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not an executable file"), std::string::npos) << r.err;
  r = run({"submit", "--db", db_, "--iterations", "5", "--gpus", "-1", "--", kTrainer});
  EXPECT_EQ(r.status, 2);
  r = run({"submit", "--db", db_, "--iterations", "5", "--", "no-such-command-xyz"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not an executable"), std::string::npos) << r.err;
  // Refused before a new database file is made.
  r = run({"submit", "--db", (dir_ / "typo.db").string(), "--iterations", "5", "--", "no-such-command-xyz"});
  EXPECT_EQ(r.status, 2);
  EXPECT_FALSE(fs::exists(dir_ / "typo.db"));
  for (const std::string rounds : {"0", "-2"}) {
    r = run({"run", "--nodes", nodes_, "--db", db_, "--rounds", rounds});
    EXPECT_EQ(r.status, 2) << rounds;
    EXPECT_NE(r.err.find("--rounds must be at least 1, or -1"), std::string::npos) << r.err;
  }
  r = run({"cancel", "--db", db_, "42"});
  EXPECT_EQ(r.status, 2);
  r = run({"status", "--db", (dir_ / "missing.db").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_FALSE(fs::exists(dir_ / "missing.db"));
  // Nothing was stored by the refused submissions and runs, not even a database file.
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(Runner, ShellMetacharactersAreLiteralArguments) {
  write_nodes(kTwoNodes);
  const std::vector<std::string> weird = {"$(touch pwned)", "a b;c", "`touch pwned2`", "|x&", "'\"", ""};
  std::vector<std::string> cmd = {kTrainer};
  cmd.insert(cmd.end(), weird.begin(), weird.end());
  submit({"--iterations", "3"}, cmd);
  const pid_t p = start_runner({"--round", "2", "--until-idle", "--policy", "fifo"},
                               {"TRAINER_ARGS=" + (dir_ / "args.txt").string()});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  std::string expected;
  for (const auto& w : weird) expected += w + "\n";
  EXPECT_EQ(slurp(dir_ / "args.txt"), expected);
  EXPECT_FALSE(fs::exists(dir_ / "pwned"));
  EXPECT_FALSE(fs::exists(dir_ / "pwned2"));
  EXPECT_EQ(status()["jobs"][0]["state"], "done");
}

TEST_F(Runner, LocalEndToEndWithPreemptionForkingAndCancel) {
  write_nodes(kTwoNodes);
  const std::string log = (dir_ / "trainer.log").string();
  // Demand (1 + 2 + 1 + 2 + 4 GPUs) exceeds the 4 GPUs: jobs wait, and the
  // 4-GPU job spans both nodes (two processes, RANK 0 and 1).
  submit({"--iterations", "40", "--gpus", "1", "--job-type", "ResNet-18 (batch size 64)"}, {kTrainer});
  submit({"--iterations", "60", "--gpus", "2", "--name", "two"}, {kTrainer});
  submit({"--iterations", "30", "--gpus", "1"}, {kTrainer});
  const int64_t victim = submit({"--iterations", "100000", "--gpus", "2"}, {kTrainer});
  submit({"--iterations", "30", "--gpus", "4"}, {kTrainer});
  const pid_t p = start_runner({"--round", "2", "--until-idle", "--policy", "hadare"},
                               {"TRAINER_LOG=" + log, "TRAINER_STEP=0.04"});
  std::this_thread::sleep_for(std::chrono::seconds(3));
  // Submitting and cancelling while the runner runs.
  submit({"--iterations", "20", "--gpus", "1", "--name", "late"}, {kTrainer});
  Result c = run({"cancel", "--db", db_, std::to_string(victim)});
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(finish(p), 0) << runner_logs();
  json st = status();
  ASSERT_EQ(st["jobs"].size(), 6u);
  for (const json& j : st["jobs"]) {
    if (j["id"] == victim) {
      EXPECT_EQ(j["state"], "cancelled");
      continue;
    }
    EXPECT_EQ(j["state"], "done") << j.dump(2);
    EXPECT_GE(j["iterations_done"].get<double>(), j["iterations"].get<double>());
    // Text checkpoints: forked copies cannot be averaged, so the copy that
    // trained most is kept and only its iterations count. The checkpoint
    // holds exactly what was counted: the trainer commits with its progress
    // line and the runner finishes an interrupted rename (issue 13; before,
    // a SIGTERM that killed the trainer's `mv` after its rename left the
    // checkpoint one iteration ahead, seen once in five suite runs).
    const double ckpt = std::stod(slurp(j["checkpoint"].get<std::string>()));
    EXPECT_EQ(ckpt, j["iterations_done"].get<double>()) << j.dump(2);
  }
  EXPECT_GE(st["rounds"].get<int>(), 3);
  const std::string logs = runner_logs();
  EXPECT_NE(logs.find("copy 1"), std::string::npos) << "no job was forked:\n" << logs;
  EXPECT_NE(logs.find("on fast:0,1 slow:0,1"), std::string::npos) << "no gang spanned two nodes:\n" << logs;
}

TEST_F(Runner, ReplaysAnOfflineSchedule) {
  write_nodes(kTwoNodes);
  // Offline: three jobs under fifo on the same node list; far too long to
  // finish in the 20 s the schedule covers, so every round places all three.
  const std::string trace = (dir_ / "trace.csv").string();
  std::ofstream(trace) << "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n"
                          "0,0,ResNet-18 (batch size 64),,,1e9,1,1,,,\n"
                          "1,0,ResNet-18 (batch size 64),,,1e9,2,1,,,\n"
                          "2,0,ResNet-18 (batch size 64),,,1e9,1,1,,,\n";
  const std::string out = (dir_ / "sched").string();
  Result r = run({"schedule", "--trace", trace, "--cluster", nodes_, "--policy", "fifo", "--round", "2",
                  "--restart", "0", "--horizon", "20", "--out", out, "--no-plots"});
  ASSERT_EQ(r.status, 0) << r.err;
  // Online: the same three jobs (ids 1..3 play schedule jobs 0..2).
  for (const char* g : {"1", "2", "1"}) submit({"--iterations", "20", "--gpus", g}, {kTrainer});
  const pid_t p = start_runner({"--round", "2", "--until-idle", "--schedule", out + "/schedule.json"},
                               {"TRAINER_STEP=0.02"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  expect_consistent(status(), 3);
  // fifo's first fit: job 0 on fast:0, job 1 on fast:1 + slow:0, job 2 on slow:1.
  const std::string logs = runner_logs();
  EXPECT_NE(logs.find("job 1 copy 0 on fast:0"), std::string::npos) << logs;
  EXPECT_NE(logs.find("job 2 copy 0 on fast:1 slow:0"), std::string::npos) << logs;
  EXPECT_NE(logs.find("job 3 copy 0 on slow:1"), std::string::npos) << logs;
  // A schedule naming a node the list lacks is bad input.
  std::ofstream(dir_ / "other.yaml") << "nodes:\n  - {name: elsewhere, gpu_type: v100, gpus: 4}\n";
  r = run({"run", "--nodes", (dir_ / "other.yaml").string(), "--db", (dir_ / "x.db").string(),
           "--schedule", out + "/schedule.json", "--until-idle"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("fast"), std::string::npos) << r.err;
}

TEST_F(Runner, FailedLaunchesAreRetriedThenTheJobFails) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "5"}, {kTrainer});
  const pid_t p = start_runner({"--round", "1", "--until-idle", "--max-failures", "2", "--policy", "fifo"},
                               {"TRAINER_FAIL=1"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const json j = status()["jobs"][0];
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["failures"], 3);
  EXPECT_NE(j["last_error"].get<std::string>().find("exit 3"), std::string::npos) << j.dump(2);
}

// A gang whose second process dies: the launch failed (it used to end as
// "stopped", like a preemption, and be relaunched every round forever).
TEST_F(Runner, AGangWhoseRankDiesIsAFailedLaunch) {
  write_nodes("nodes:\n  - {name: a, gpu_type: v100, gpus: 1}\n  - {name: b, gpu_type: v100, gpus: 1}\n");
  submit({"--iterations", "100000", "--gpus", "2"}, {kTrainer});
  const pid_t p = start_runner({"--round", "2", "--until-idle", "--max-failures", "1", "--policy", "fifo"},
                               {"TRAINER_FAIL_RANK=1"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const json j = status()["jobs"][0];
  EXPECT_EQ(j["state"], "failed") << j.dump(2);
  EXPECT_EQ(j["failures"], 2) << j.dump(2);
  EXPECT_NE(j["last_error"].get<std::string>().find("rank 1: exit 3"), std::string::npos) << j.dump(2);
  EXPECT_NE(runner_logs().find("rank 1: exit 3; stopping the rest of the gang"), std::string::npos) << runner_logs();
}

// `status` shows a running gang's progress before its launch ends (it showed
// 0 for as long as a gang kept its placement).
TEST_F(Runner, StatusShowsTheProgressOfRunningGangs) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "100000"}, {kTrainer});
  const pid_t p = start_runner({"--round", "60", "--policy", "fifo"});
  double progress = 0;
  for (int i = 0; i < 150 && progress <= 0; ++i) {  // saved every 5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const json st = status();
    if (!st["jobs"].empty()) progress = st["jobs"][0]["progress"].get<double>();
  }
  EXPECT_GT(progress, 0) << runner_logs();
  kill(p, SIGTERM);
  EXPECT_EQ(finish(p), 0) << runner_logs();
}

// A launch's process group ends with it: a child the trainer left behind
// is killed once the launch has ended.
TEST_F(Runner, WhatATrainerLeavesBehindEndsWithItsLaunch) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "3"}, {kTrainer});
  const pid_t p = start_runner({"--round", "1", "--until-idle", "--policy", "fifo"}, {"TRAINER_LEAK=1"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  std::string leak;
  for (const auto& f : fs::recursive_directory_iterator(dir_))
    if (f.path().filename() == "progress.leak") leak = slurp(f.path());
  ASSERT_FALSE(leak.empty()) << runner_logs();
  const fs::path proc = "/proc/" + std::to_string(std::atoi(leak.c_str())) + "/stat";
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {  // killed; then reaped by init
    const std::string st = slurp(proc);
    gone = st.empty() || st.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << slurp(proc);
}

// Progress lines commit checkpoints: a trainer that reports iterations but
// writes none fails its launch instead of being relaunched from scratch forever.
TEST_F(Runner, ProgressWithoutACheckpointIsAFailedLaunch) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "5"}, {kTrainer});
  const pid_t p = start_runner({"--round", "1", "--until-idle", "--max-failures", "0", "--policy", "fifo"},
                               {"TRAINER_NO_CKPT=1"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const json j = status()["jobs"][0];
  EXPECT_EQ(j["state"], "failed") << j.dump(2);
  EXPECT_NE(j["last_error"].get<std::string>().find("iterations but wrote no checkpoint at "), std::string::npos)
      << j.dump(2);
}

// The soak of issue 13: 50 SIGKILLs of the runner at random moments, the
// policy changing from one start to the next (hadare forks copies; text
// checkpoints cannot be averaged, so the copy that trained most is kept),
// jobs submitted in between; then a SIGTERM stop and a run to the end. Every
// job is done once, its checkpoint holds exactly the counted iterations, and
// no job ever ran two main gangs at once.
TEST_F(Runner, SoakFiftySigkillsAcrossPoliciesLoseNothing) {
  write_nodes(kTwoNodes);
  const std::string log = (dir_ / "trainer.log").string();
  const std::vector<std::string> env = {"TRAINER_LOG=" + log, "TRAINER_STEP=0.03"};
  const std::vector<std::string> policies = {"hadar", "tiresias", "hadare", "gavel", "fifo"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> wait_ms(50, 1200);
  int submitted = 0;
  for (int k = 0; k < 4; ++k) {
    submit({"--iterations", std::to_string(60 + 20 * k), "--gpus", std::to_string(1 + k % 2)}, {kTrainer});
    ++submitted;
  }
  for (int run_no = 0; run_no < 50; ++run_no) {
    const std::string& policy = policies[static_cast<size_t>(run_no) % policies.size()];
    const pid_t p = start_runner({"--round", "1", "--policy", policy}, env);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms(rng)));
    if (run_no % 7 == 3) {
      submit({"--iterations", "40", "--gpus", std::to_string(1 + run_no % 2)}, {kTrainer});
      ++submitted;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms(rng) / 4));
    kill(p, SIGKILL);
    finish(p);
  }
  // A clean stop by SIGTERM: the processes stop, the runner exits 0.
  pid_t p = start_runner({"--round", "1", "--policy", "hadare"}, env);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(p, SIGTERM);
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const json after = status();  // (a temporary's element would dangle in the loop)
  for (const json& j : after["jobs"]) EXPECT_TRUE(j["copies"].empty()) << j.dump(2);
  p = start_runner({"--round", "1", "--policy", "hadar", "--until-idle"}, env);
  EXPECT_EQ(finish(p), 0) << runner_logs();
  expect_consistent(status(), static_cast<size_t>(submitted));
  expect_no_overlap(slurp(log));
  // No temporary checkpoint is left behind.
  for (const auto& f : fs::recursive_directory_iterator(dir_))
    EXPECT_FALSE(f.path().extension() == ".tmp") << f.path();
}

// A restart with a node list too small for a queued job is bad input that
// changes nothing (before, the job waited forever with no message).
TEST_F(Runner, JobsLargerThanTheNodeListAreRefusedNotLeftWaiting) {
  write_nodes(kTwoNodes);
  const int64_t big = submit({"--iterations", "10", "--gpus", "4"}, {kTrainer});
  nodes_ = (dir_ / "small.yaml").string();
  std::ofstream(nodes_) << "nodes:\n  - {name: fast, gpu_type: v100, gpus: 2}\n";
  const json before = status();
  const Result r = run({"run", "--nodes", nodes_, "--db", db_, "--until-idle"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("small.yaml: the node list has 2 GPUs, too few for job " + std::to_string(big) + " (4 GPUs)"),
            std::string::npos) << r.err;
  EXPECT_EQ(status()["jobs"], before["jobs"]);
  // Cancelled, the job no longer holds the small list back; a runner on it
  // stores its node list, and a later oversized submission is refused.
  ASSERT_EQ(run({"cancel", "--db", db_, std::to_string(big)}).status, 0);
  const pid_t p = start_runner({"--round", "1", "--policy", "fifo", "--until-idle"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const Result r3 = run({"submit", "--db", db_, "--iterations", "10", "--gpus", "3", "--", kTrainer});
  EXPECT_EQ(r3.status, 2);
  EXPECT_NE(r3.err.find("--gpus 3 is more than the runner's 2 GPUs"), std::string::npos) << r3.err;
}

// The window behind the flaky crash test: a trainer killed after its progress
// line (the commit) and before renaming its checkpoint into place. The runner
// finishes the rename, so the counted iterations and the checkpoint agree;
// without it the checkpoint would hold the previous save (one fewer).
TEST_F(Runner, ATrainerKilledBetweenCommitAndRenameLosesNothing) {
  write_nodes(kTwoNodes);
  const std::string marker = (dir_ / "died").string();
  submit({"--iterations", "20"}, {kTrainer});
  const pid_t p = start_runner({"--round", "1", "--policy", "fifo", "--until-idle"},
                               {"TRAINER_STEP=0.02", "TRAINER_DIE_AT=6", "TRAINER_DIE_ONCE=" + marker});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  ASSERT_TRUE(fs::exists(marker)) << "the trainer never reached its 6th save";
  const json st = status();
  EXPECT_EQ(st["jobs"][0]["failures"].get<int>(), 1) << st.dump(2);
  expect_consistent(st, 1);
}

// Two runners started at the same moment, twenty times over: each time
// exactly one holds the state database and the other exits 2 naming it.
TEST_F(Runner, TwentyRacesOfTwoRunnersHaveOneWinnerEach) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "100000"}, {kTrainer});
  const std::vector<std::string> env = {"TRAINER_STEP=0.05"};
  for (int race = 0; race < 20; ++race) {
    const int first_log = runners_ + 1;
    const pid_t a = start_runner({"--round", "1", "--policy", "fifo"}, env);
    const pid_t b = start_runner({"--round", "1", "--policy", "fifo"}, env);
    // The loser exits 2 at once; the winner runs on until killed.
    pid_t loser = -1, winner = -1;
    for (int i = 0; i < 200 && loser < 0; ++i) {
      int st = 0;
      for (pid_t x : {a, b})
        if (waitpid(x, &st, WNOHANG) == x) {
          EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2) << "race " << race << "\n" << runner_logs();
          std::erase(background_, x);
          loser = x;
          winner = x == a ? b : a;
        }
      if (loser < 0) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ASSERT_GT(loser, 0) << "race " << race << ": no runner gave way\n" << runner_logs();
    const std::string said = slurp(dir_ / ("runner" + std::to_string(loser == a ? first_log : first_log + 1) + ".err"));
    EXPECT_NE(said.find("(pid " + std::to_string(winner) + " "), std::string::npos) << "race " << race << ": " << said;
    const json r = status()["runner"];
    EXPECT_TRUE(r["alive"].get<bool>()) << r.dump();
    EXPECT_EQ(r["pid"].get<long>(), winner) << r.dump();
    kill(winner, SIGKILL);
    finish(winner);
  }
  // Whatever the killed winners left running is adopted and stopped cleanly.
  const pid_t p = start_runner({"--round", "1", "--policy", "fifo"}, env);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  kill(p, SIGTERM);
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const json after = status();
  EXPECT_EQ(after["jobs"][0]["state"], "queued") << after.dump(2);
  EXPECT_TRUE(after["jobs"][0]["copies"].empty()) << after.dump(2);
}

// One runner per state database: a second one exits 2 naming the holder,
// `status` reports the holder truthfully, a killed holder's lock is taken
// over, and of two runners started at once exactly one runs.
TEST_F(Runner, OneRunnerPerStateDatabase) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "150"}, {kTrainer});
  const std::vector<std::string> env = {"TRAINER_STEP=0.02"};
  const pid_t a = start_runner({"--round", "1", "--policy", "fifo"}, env);
  bool alive = false;
  for (int i = 0; i < 100 && !alive; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    alive = status()["runner"]["alive"].get<bool>();
  }
  ASSERT_TRUE(alive) << runner_logs();
  EXPECT_EQ(status()["runner"]["pid"].get<long>(), a);
  const Result second = run({"run", "--nodes", nodes_, "--db", db_, "--until-idle"});
  EXPECT_EQ(second.status, 2);
  EXPECT_NE(second.err.find("another runner uses this state database (pid " + std::to_string(a)),
            std::string::npos) << second.err;
  kill(a, SIGKILL);
  finish(a);
  EXPECT_FALSE(status()["runner"]["alive"].get<bool>());
  // Two at once: one takes the lock and finishes the job, the other exits 2.
  const pid_t b = start_runner({"--round", "1", "--policy", "fifo", "--until-idle"}, env);
  const pid_t c = start_runner({"--round", "1", "--policy", "fifo", "--until-idle"}, env);
  const int sb = finish(b), sc = finish(c);
  EXPECT_TRUE((sb == 0 && sc == 2) || (sb == 2 && sc == 0)) << sb << " " << sc << "\n" << runner_logs();
  const json j = status()["jobs"][0];
  EXPECT_EQ(j["state"], "done") << j.dump(2);
}

// The lease in the store stands for a runner on another host, where the OS
// lock cannot see it: refused while its heartbeat is fresh, taken over once
// it is stale, and given back on a clean stop.
TEST_F(Runner, ALeaseOfAnotherHostHoldsUntilItsHeartbeatIsStale) {
  write_nodes(kTwoNodes);
  auto lease = [&](double age_s) {
    auto store = cellsched::db::OnlineStore::open(db_);
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    store.transaction([&] {
      store.set_meta("runner_pid", "4242");
      store.set_meta("runner_host", "elsewhere");
      store.set_meta("started_at", std::to_string(now - age_s));
      store.set_meta("heartbeat", std::to_string(now - age_s));
      store.set_meta("lease_stale_s", "60");
    });
  };
  lease(1);
  const Result r = run({"run", "--nodes", nodes_, "--db", db_, "--until-idle"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("another runner holds this state database's lease (pid 4242 on host elsewhere"),
            std::string::npos) << r.err;
  json st = status();
  EXPECT_TRUE(st["runner"]["alive"].get<bool>()) << st.dump(2);
  EXPECT_EQ(st["runner"]["host"], "elsewhere") << st.dump(2);
  lease(120);  // that runner died 2 minutes ago
  EXPECT_FALSE(status()["runner"]["alive"].get<bool>());
  const Result ok = run({"run", "--nodes", nodes_, "--db", db_, "--until-idle"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  auto store = cellsched::db::OnlineStore::open(db_);
  EXPECT_EQ(store.meta("runner_pid").value_or("?"), "0");
  EXPECT_NE(store.meta("runner_host").value_or("elsewhere"), "elsewhere");
}

// HadarE forks copies of the PyTorch example; the runner averages their
// state dicts with LibTorch; Python checks the average.
TEST_F(Runner, PytorchCopiesAreAveragedByIterations) {
  if (!fs::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with torch (python3-torch) is not installed";
  write_nodes("nodes:\n  - {name: a, gpu_type: v100, gpus: 1}\n  - {name: b, gpu_type: v100, gpus: 1}\n"
              "  - {name: c, gpu_type: k80, gpus: 1}\n");
  const std::string train = std::string(CELLSCHED_EXAMPLES) + "/trainers/train.py";
  submit({"--iterations", "400", "--gpus", "1"}, {"/usr/bin/python3", train, "--step-sleep", "0.01", "--save-every", "0.3"});
#ifdef CELLSCHED_EXAMPLE_TRAINER
  // The LibTorch twin: its checkpoints go through the same averaging.
  submit({"--iterations", "1500", "--gpus", "1"}, {CELLSCHED_EXAMPLE_TRAINER, "--step-sleep", "0.002", "--save-every", "0.3"});
#endif
  const pid_t p = start_runner({"--round", "5", "--until-idle", "--policy", "hadare", "--keep-checkpoints"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  const json final_status = status();  // (a temporary's element would dangle in the loop)
  for (const json& j : final_status["jobs"]) {
    EXPECT_EQ(j["state"], "done") << j.dump(2) << runner_logs();
    // Copies share the remainder: no "done (30 of 10 iterations)".
    EXPECT_LE(j["iterations_done"].get<double>(), j["iterations"].get<double>()) << runner_logs();
  }
  if (runner_logs().find("averaging off") != std::string::npos ||
      runner_logs().find("this build has no LibTorch") != std::string::npos)
    GTEST_SKIP() << "built without LibTorch";
  // The consolidations the runner recorded, checked by PyTorch itself.
  const std::string script = R"PY(
import json, re, sqlite3, sys, torch
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT inputs, output, iterations, job_id FROM online_consolidations WHERE method = 'average'").fetchall()
assert rows, "no averaged consolidation"
for inputs, output, counted, job in rows:
    # Named by job: two jobs sharing a checkpoint folder never overwrite each other.
    assert re.search(r"/job-%d-ckpt-\d+\.pt$" % job, output), output
    inputs = json.loads(inputs)
    total = sum(w for _, w in inputs)
    # The noise model (core/fork.h): the gangs are worth at least the largest
    # one alone and less than all their iterations.
    assert max(w for _, w in inputs) - 1e-9 <= counted < total, (counted, inputs)
    out = torch.load(output)
    dicts = [(torch.load(p), w) for p, w in inputs]
    for k, v in out.items():
        want = sum(d[k].double() * (w / total) for d, w in dicts)
        assert torch.allclose(v.double(), want, atol=1e-6), k
print(len(rows))
)PY";
  std::ofstream(dir_ / "check.py") << script;
  const std::string cmd = "/usr/bin/python3 " + (dir_ / "check.py").string() + " " + db_ + " > " +
                          (dir_ / "check.out").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir_ / "check.out") << runner_logs();
  EXPECT_GE(std::atoi(slurp(dir_ / "check.out").c_str()), 1);
}

// The runner's internals on one node "n" of V100s, over a fresh state
// database that holds one submitted job.
class RunnerInvariant : public ::testing::Test {
 protected:
  using Impl = cellsched::runner::Runner::Impl;

  // A fresh database (in a directory named after `name`) with one job of
  // `iterations` that runs `command`.
  void open(const std::string& name, double iterations, std::vector<std::string> command = {"/bin/true"}) {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
    dir_ = cellsched::testing::fresh_test_dir(name);
    store_.emplace(cellsched::db::OnlineStore::open((dir_ / "state.db").string()));
    cellsched::db::OnlineJob row;
    row.iterations = iterations;
    row.command = std::move(command);
    job_ = store_->submit(row);
  }
  // The runner's internals over `gpus` V100s, with the open jobs read in.
  std::unique_ptr<Impl> impl(int gpus, cellsched::runner::RunnerOptions o = {}) {
    cellsched::Cluster cluster;
    cluster.nodes.push_back(cellsched::Node{});
    cluster.nodes[0].name = "n";
    cluster.nodes[0].gpu_type = "v100";
    cluster.nodes[0].gpus = gpus;
    o.work_dir = (dir_ / "work").string();
    auto i = std::make_unique<Impl>(*store_, cluster, *executor_, nullptr, nullptr, o);
    i->refresh_jobs();
    return i;
  }
  // Waits (10 s at most) until each launch's supervisor has written its exit file.
  static void wait_for_exits(const Impl& impl) {
    for (const auto& [lid, l] : impl.launches)
      for (int i = 0; i < 200 && !fs::exists(impl.exit_file(l, 0)); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  fs::path dir_;
  std::optional<cellsched::db::OnlineStore> store_;
  std::unique_ptr<cellsched::runner::Executor> executor_ = cellsched::runner::make_executor({});
  int64_t job_ = 0;
};

// The invariant behind the old `map::at` crash, deterministically: start()
// is handed a plan for a job that settle_jobs() has just closed (no longer
// in `jobs`) and for one already at its target; it starts neither.
TEST_F(RunnerInvariant, StartSkipsJobsClosedOrDoneSinceTheDecision) {
  using namespace cellsched;
  open("cellsched-invariant", 10);
  const auto impl = this->impl(2);
  ASSERT_EQ(impl->jobs.count(job_), 1u);
  impl->jobs.at(job_).row.iterations_done = 10;  // consolidated to its target meanwhile
  const std::vector<std::vector<Placement>> gang = {{Placement{0, 1}}};
  EXPECT_NO_THROW(impl->start(1, 0, {{job_, gang}, {job_ + 41, gang}}));
  EXPECT_TRUE(store_->live_launches().empty());
  EXPECT_TRUE(impl->launches.empty());
}

// A restart with an edited node list: the launches a previous runner left
// running must find their nodes by name with the GPUs they hold (the runner
// used to map them by position: two jobs on one GPU, or a crash).
TEST_F(RunnerInvariant, LiveLaunchesMustFindTheirNodesByName) {
  using namespace cellsched;
  open("cellsched-live-nodes", 10);
  auto launch = [&](const std::string& node, const std::string& gpus, const std::string& state) {
    db::OnlineLaunch l;
    l.job_id = job_;
    l.state = state;
    db::OnlineProc p;
    p.node = 0;
    p.node_name = node;
    p.gpu_ids = gpus;
    p.gpus = static_cast<int>(std::count(gpus.begin(), gpus.end(), ',')) + 1;
    l.procs.push_back(p);
    store_->insert_launch(l);
  };
  launch("fast", "0,1", "running");
  launch("fast", "0", "ended");  // ended launches hold nothing
  auto cluster = [](std::vector<std::pair<std::string, int>> nodes) {
    Cluster c;
    for (const auto& [name, gpus] : nodes) {
      c.nodes.push_back(Node{});
      c.nodes.back().name = name;
      c.nodes.back().gpu_type = "v100";
      c.nodes.back().gpus = gpus;
    }
    return c;
  };
  auto error = [&](const Cluster& c) {
    try {
      runner::check_live_launches(*store_, c, "nodes.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(cluster({{"slow", 2}, {"fast", 2}})), "");  // another order is fine
  EXPECT_NE(error(cluster({{"slow", 4}})).find("nodes.yaml: launch 1 (job 1) still runs on node 'fast', which this "
                                               "node list lacks"),
            std::string::npos)
      << error(cluster({{"slow", 4}}));
  EXPECT_NE(error(cluster({{"fast", 1}})).find("holds GPU 1 of node 'fast', which has only 1 GPU in this node list"), std::string::npos)
      << error(cluster({{"fast", 1}}));
  launch("fast", "1", "stopping");
  EXPECT_NE(error(cluster({{"fast", 2}})).find("launch 3 (job 1) and launch 1 both hold GPU 1 of node 'fast'"),
            std::string::npos)
      << error(cluster({{"fast", 2}}));
}

// The GPU indices a launch's process holds, as the runner reads them back:
// a hand-edited token is skipped, not thrown on.
TEST(GpuIndices, ReadsTheIndicesAndSkipsWhatIsNoIndex) {
  cellsched::db::OnlineProc p;
  p.gpu_ids = "0,1,7";
  EXPECT_EQ(cellsched::db::gpu_indices(p), (std::vector<int>{0, 1, 7}));
  p.gpu_ids = "";
  EXPECT_TRUE(cellsched::db::gpu_indices(p).empty());
  p.gpu_ids = "2,,x,-1,3 ,99999999999,4";
  EXPECT_EQ(cellsched::db::gpu_indices(p), (std::vector<int>{2, 4}));
}

// The job tracker's targets reach the trainers: two equal gangs of a job
// with 1,000 iterations left, under the noise model at e = 0.5, are each
// launched for 667 (worth 1,000.5 together), and for 500 with copies that
// count in full.
TEST_F(RunnerInvariant, ForkedGangsAreLaunchedForWhatMakesThemWorthTheRemainder) {
  using namespace cellsched;
  for (const auto& [model, want] : {std::pair{ForkModel{0.5, ForkScaling::noise}, "667"},
                                    std::pair{ForkModel{1.0, ForkScaling::linear}, "500"}}) {
    open("cellsched-targets", 1000, {"/bin/sh", "-c", "echo $CELLSCHED_ITERATIONS > \"$CELLSCHED_PROGRESS.target\""});
    runner::RunnerOptions o;
    o.fork_efficiency = model.efficiency;
    o.fork_scaling = model.scaling;
    const auto impl = this->impl(2, o);
    ASSERT_EQ(impl->jobs.count(job_), 1u);
    const std::vector<Placement> one = {Placement{0, 1}};
    impl->start(1, 0, {{job_, {one, one}}});
    ASSERT_EQ(impl->launches.size(), 2u);
    std::vector<std::string> paths;
    for (const auto& [lid, l] : impl->launches) paths.push_back(l.progress + ".target");
    for (const std::string& f : paths) {
      for (int i = 0; i < 200 && slurp(f).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::string got = slurp(f);
      while (!got.empty() && got.back() == '\n') got.pop_back();
      EXPECT_EQ(got, want) << f;
    }
    wait_for_exits(*impl);  // the supervisors are done once they have written their exit files
  }
}

// What status and the runner count a job's gangs as: two of 667 under the
// noise model at e = 0.5 are worth 1,000.5 (the targets above), in full 1,334.
TEST(LaunchesWorth, CountsTheMainGangAndItsCopiesAtTheForkModel) {
  using namespace cellsched;
  std::vector<db::OnlineLaunch> gangs(2);
  gangs[0].iterations = 667;
  gangs[1].copy = 1;
  gangs[1].iterations = 667;
  const std::vector<const db::OnlineLaunch*> both = {&gangs[0], &gangs[1]};
  EXPECT_NEAR(runner::launches_worth({0.5, ForkScaling::noise}, both), 1000.5, 1e-9);
  EXPECT_NEAR(runner::launches_worth({1.0, ForkScaling::linear}, both), 1334, 1e-9);
  EXPECT_NEAR(runner::launches_worth({0.5, ForkScaling::noise}, {&gangs[0]}), 667, 1e-9);
  EXPECT_EQ(runner::launches_worth({0.5, ForkScaling::noise}, {}), 0);
}

// No more gangs than iterations left: a job with 2 to go, given 3 gangs,
// launches 2 (each trained at least one; a job with 1 left ran on three GPUs).
TEST_F(RunnerInvariant, NoMoreGangsThanIterationsLeft) {
  using namespace cellsched;
  open("cellsched-few-left", 2);
  const auto impl = this->impl(3);
  const std::vector<Placement> one = {Placement{0, 1}};
  impl->start(1, 0, {{job_, {one, one, one}}});
  EXPECT_EQ(impl->launches.size(), 2u);
  wait_for_exits(*impl);
}

// The runner's half of the checkpoint commit, on hand-made files.
TEST(CommitCheckpoint, RenamesTheCommittedTemporaryAndRemovesTheRest) {
  using cellsched::runner::commit_checkpoint;
  const fs::path d = cellsched::testing::fresh_test_dir("cellsched-commit");
  auto put = [&](const std::string& name, const std::string& text) { std::ofstream(d / name) << text; };
  put("launch-1.pt", "5");
  put("launch-1.pt.6.tmp", "6");    // committed (progress says 6), not renamed
  put("launch-1.pt.7.tmp", "7");    // written, never committed
  put("launch-10.pt.6.tmp", "x");   // another launch's
  put("launch-1.pt.tmp", "old");    // the old protocol's temporary: not ours to judge
  put("launch-1.pt.a.tmp", "a");    // not a count
  commit_checkpoint((d / "launch-1.pt").string(), 6);
  EXPECT_EQ(slurp(d / "launch-1.pt"), "6");
  EXPECT_FALSE(fs::exists(d / "launch-1.pt.6.tmp"));
  EXPECT_FALSE(fs::exists(d / "launch-1.pt.7.tmp"));
  EXPECT_TRUE(fs::exists(d / "launch-10.pt.6.tmp"));
  EXPECT_TRUE(fs::exists(d / "launch-1.pt.tmp"));
  EXPECT_TRUE(fs::exists(d / "launch-1.pt.a.tmp"));
  // Again (a runner killed in the middle and restarted): nothing changes.
  commit_checkpoint((d / "launch-1.pt").string(), 6);
  EXPECT_EQ(slurp(d / "launch-1.pt"), "6");
  // The rename already done by the trainer: only stale temporaries go.
  put("launch-1.pt.9.tmp", "9");
  commit_checkpoint((d / "launch-1.pt").string(), 6);
  EXPECT_EQ(slurp(d / "launch-1.pt"), "6");
  EXPECT_FALSE(fs::exists(d / "launch-1.pt.9.tmp"));
  fs::remove_all(d);
}

// The job tracker: forked copies share the job's remaining iterations.
TEST(SplitIterations, CopiesTargetsSumToTheRemainder) {
  using cellsched::runner::split_iterations;
  const std::vector<std::vector<double>> cases = {
      {10}, {10, 10}, {10, 10, 10}, {30, 10, 0}, {1, 2, 3, 4}, {0, 0}, {5, 5, 5, 5, 5, 5, 5}};
  for (const auto& rates : cases)
    for (long long remaining : {0LL, 1LL, 2LL, 7LL, 10LL, 1001LL, 123456789LL}) {
      const auto t = split_iterations(remaining, rates);
      ASSERT_EQ(t.size(), rates.size());
      long long sum = 0;
      for (long long x : t) {
        EXPECT_GE(x, 0);
        if (remaining >= static_cast<long long>(rates.size())) {
          EXPECT_GE(x, 1);
        }
        sum += x;
      }
      EXPECT_EQ(sum, remaining) << rates.size() << " gangs";
    }
  // In proportion to the gangs' rates: 30 : 10 : (smallest positive) 10.
  EXPECT_EQ(split_iterations(500, {30, 10, 0}), (std::vector<long long>{300, 100, 100}));
  EXPECT_EQ(split_iterations(10, {1, 1}), (std::vector<long long>{5, 5}));
  EXPECT_EQ(split_iterations(1, {1, 1}), (std::vector<long long>{1, 0}));
  EXPECT_THROW(split_iterations(-1, {1}), std::invalid_argument);
  EXPECT_THROW(split_iterations(5, {}), std::invalid_argument);
}

// Under the noise model (or a linear one below 1) copies are worth less than
// their iterations: the targets are set so that the gangs, all at their
// targets, are worth the job's remainder, and so the job is done then.
TEST(SplitIterations, TargetsAreWorthTheRemainderWhenCopiesCountLess) {
  using cellsched::ForkModel;
  using cellsched::ForkScaling;
  using cellsched::runner::split_iterations;
  auto worth = [](const ForkModel& m, const std::vector<long long>& t) {
    return cellsched::fork_worth(m, std::vector<double>(t.begin(), t.end()));
  };
  // By hand: two equal gangs at e = 0.5 are worth 1.5 gangs, so 1,000
  // iterations take 666.7 each; 667 + 667 are worth 1,000.5.
  const ForkModel noise{0.5, ForkScaling::noise};
  EXPECT_EQ(split_iterations(1000, {10, 10}, noise), (std::vector<long long>{667, 667}));
  // Linear at 0.3: 30 t + 0.3 x 10 t = 500, t = 15.15: 455 and 152.
  EXPECT_EQ(split_iterations(500, {30, 10}, {0.3, ForkScaling::linear}), (std::vector<long long>{455, 152}));
  const std::vector<std::vector<double>> cases = {
      {10}, {10, 10}, {10, 10, 10}, {30, 10, 0}, {1, 2, 3, 4}, {0, 0}, {5, 5, 5, 5, 5, 5, 5}, {1, 40}};
  for (const ForkModel& m : {noise, ForkModel{0.05, ForkScaling::noise}, ForkModel{0.3, ForkScaling::linear},
                             ForkModel{1.0, ForkScaling::noise}})
    for (const auto& rates : cases)
      for (long long remaining : {0LL, 1LL, 2LL, 7LL, 10LL, 1001LL, 123456789LL}) {
        const auto t = split_iterations(remaining, rates, m);
        ASSERT_EQ(t.size(), rates.size());
        const double w = worth(m, t);
        EXPECT_GE(w, static_cast<double>(remaining) * (1 - 1e-12)) << rates.size() << " gangs, " << remaining;
        // Not more than rounding up: one iteration a gang, at what the
        // largest gang's iteration is worth (under 1 + phi).
        const double phi = m.efficiency < 1 ? 2 * m.efficiency / (1 - m.efficiency) : 0;
        EXPECT_LE(w, static_cast<double>(remaining) + static_cast<double>(rates.size()) * (2 + phi))
            << rates.size() << " gangs, " << remaining;
        if (remaining >= static_cast<long long>(rates.size())) {
          for (long long x : t) EXPECT_GE(x, 1);
        }
      }
}

}  // namespace
