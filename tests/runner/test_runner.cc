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
      // Read as a double it rounded to 2^53 and was stored so.
      {{"--iterations", "9007199254740993"}, "--iterations must be a whole number in [1, 2^53] (got 9007199254740993)"},
      {{"--iterations", "ten"}, "--iterations: 'ten' is not a number"},
      {{"--iterations", "5", "--batch", "64"}, "--batch needs --model"},
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

// Under hadare too: a failing job was forked onto every idle GPU and each
// copy's failure counted, 7 failures against --max-failures 3.
TEST_F(Runner, FailedLaunchesAreRetriedThenTheJobFails) {
  for (const std::string policy : {"fifo", "hadare"}) {
    write_nodes(kTwoNodes);
    db_ = (dir_ / (policy + ".db")).string();
    submit({"--iterations", "5"}, {kTrainer});
    const pid_t p = start_runner({"--round", "1", "--until-idle", "--max-failures", "2", "--policy", policy},
                                 {"TRAINER_FAIL=1"});
    EXPECT_EQ(finish(p), 0) << runner_logs();
    const json j = status()["jobs"][0];
    EXPECT_EQ(j["state"], "failed") << policy;
    EXPECT_EQ(j["failures"], 3) << policy;
    EXPECT_NE(j["last_error"].get<std::string>().find("exit 3"), std::string::npos) << j.dump(2);
  }
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
// With rounds shorter than the 5 s save period too (the period restarted
// each round, so 4 s rounds never saved and `status` read 0 throughout).
TEST_F(Runner, StatusShowsTheProgressOfRunningGangs) {
  for (const std::string round : {"60", "4"}) {
    write_nodes(kTwoNodes);
    db_ = (dir_ / ("round" + round + ".db")).string();
    submit({"--iterations", "100000"}, {kTrainer});
    const pid_t p = start_runner({"--round", round, "--policy", "fifo"});
    double progress = 0;
    for (int i = 0; i < 150 && progress <= 0; ++i) {  // saved every 5 s
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const json st = status();
      if (!st["jobs"].empty()) progress = st["jobs"][0]["progress"].get<double>();
    }
    EXPECT_GT(progress, 0) << "--round " << round << "\n" << runner_logs();
    kill(p, SIGTERM);
    EXPECT_EQ(finish(p), 0) << runner_logs();
  }
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

// A trainer that has trained its share and takes a moment to exit ends as
// itself: it was SIGTERMed at once and recorded "stopped (signal 15)" (a
// PyTorch trainer shutting down), though nothing had stopped it.
TEST_F(Runner, AFinishedLaunchEndsAsItselfNotAsStopped) {
  write_nodes(kTwoNodes);
  submit({"--iterations", "5"}, {kTrainer});
  const pid_t p = start_runner({"--round", "30", "--until-idle", "--policy", "fifo"}, {"TRAINER_EXIT_DELAY=0.5"});
  EXPECT_EQ(finish(p), 0) << runner_logs();
  EXPECT_EQ(status()["jobs"][0]["state"], "done");
  const auto launches = cellsched::db::OnlineStore::open(db_).launches_of(1);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].outcome, "exit 0") << runner_logs();
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

}  // namespace
