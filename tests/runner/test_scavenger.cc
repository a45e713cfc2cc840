// The online scavenger: Slurm's outputs parsed, and `cellsched scavenge
// --slurm` end to end on a throw-away local Slurm cluster of its own (4
// nodes): a real primary workload of sbatch'ed sleep jobs, the example
// trainer as the malleable job, a claim answered by checkpoint and exit.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "runner/executor.h"
#include "runner/process.h"
#include "runner/scavenger.h"
#include "tests/support/subprocess.h"

namespace fs = std::filesystem;
using namespace cellsched::runner;

namespace {

TEST(ScavengerParse, SinfoSqueueAndTimes) {
  const auto nodes = parse_sinfo("node1|idle\nnode2|allocated\nnode1|idle\nnode3|planned\n\nbad line\n");
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[2].name, "node3");
  EXPECT_EQ(nodes[2].state, "planned");
  const auto jobs = parse_squeue("12|wrap|PENDING|4|2026-12-02T01:06:48|Resources\n"
                                 "11|wrap|RUNNING|3|2026-12-02T01:03:48|None\n"
                                 "13|cellsched-scav-hpo-0|PENDING|1|N/A|Priority\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].nodes, 4);
  EXPECT_EQ(jobs[0].state, "PENDING");
  EXPECT_DOUBLE_EQ(jobs[0].start_s - jobs[1].start_s, 180);
  EXPECT_EQ(jobs[2].start_s, -1);
  EXPECT_EQ(parse_slurm_time("Unknown"), -1);
  EXPECT_EQ(parse_slurm_time("2026-12-02T01:06:48x"), -1);
}

using cellsched::testing::slurp;

// Runs argv (argv[0] looked up in PATH, no shell) in `dir`; returns stdout
// and sets *st. Output goes through files, so daemons it starts hold no pipe.
std::string run(const fs::path& dir, std::vector<std::string> args, int* st = nullptr) {
  args[0] = find_executable(args[0]);
  const cellsched::testing::Result r = cellsched::testing::run_in(args, dir, "cmd");
  if (st) *st = r.status;
  return r.out;
}

// Found with fuzz/fuzz_scavenge_jobs' reader: every job holds a curve point per
// node up to its max_nodes, so 2,800 lines of max_nodes 100000 (63 KB) took
// over 2 GB. The sum over the file is bounded, and the line past it is named.
TEST(ScavengeJobs, MaxNodesOverTheFileAreBoundedAndTheLineNamed) {
  const fs::path dir = cellsched::testing::fresh_test_dir("cellsched-scav-jobs");
  std::string jobs = "name,iterations,max_nodes,rescale_s,curve,command\n";
  for (int i = 0; i < 2800; ++i) jobs += "j" + std::to_string(i) + ",1,100000,0,,/bin/sh\n";
  std::ofstream(dir / "jobs.csv") << jobs;
  const cellsched::testing::Result r = cellsched::testing::run_in(
      {CELLSCHED_BINARY, "scavenge", "--slurm", "--jobs", (dir / "jobs.csv").string(), "--state", (dir / "state").string()},
      dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find((dir / "jobs.csv").string() + ":102: the jobs' max_nodes add up to more than 10000000"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "state"));
  fs::remove_all(dir);
}

// Slurm's backfill plans in bf_resolution steps (60 s by default) from when
// its cycle runs: a launch whose limit ends a few seconds before the waiting
// job's reservation was never started (CI, 2026-12-04). With fake clients (a
// job waiting for 2 nodes, planned `lead` seconds ahead; one node idle), the
// scavenger launches only where the window less grace and plan margin holds
// a whole minute.
std::string srun_calls_with_reservation_ahead(int lead_s) {
  const fs::path dir = cellsched::testing::fresh_test_dir("cellsched-scav-margin");
  const auto script = [&](const std::string& name, const std::string& body) {
    cellsched::testing::write_executable(dir / name, "#!/bin/sh\n" + body + "\n");
    return (dir / name).string();
  };
  ScavengeOptions o;
  o.state_dir = (dir / "state").string();
  o.interval_s = 0.2;
  o.duration_s = 2;  // a few looks, so one slow under load still launches
  o.grace_s = 10;
  o.plan_margin_s = 60;
  o.sinfo = script("sinfo", "printf 'node1|idle\\nnode2|allocated\\n'");
  o.squeue = script("squeue", "printf '7|wrap|PENDING|2|%s|Resources\\n' \"$(date -d @$(( $(date +%s) + " +
                                  std::to_string(lead_s) + " )) +%Y-%m-%dT%H:%M:%S)\"");
  o.srun = script("srun", "echo \"$@\" >> " + (dir / "srun.log").string());
  o.scancel = script("scancel", "true");
  ScavengeJob j;
  j.name = "hpo";
  j.iterations = 100;
  j.max_nodes = 1;
  j.curve = cellsched::amdahl_curve(1, 0.1, 1);
  j.command = {"/bin/true"};
  scavenge({j}, o);
  const std::string calls = fs::exists(dir / "srun.log") ? slurp(dir / "srun.log") : "";
  fs::remove_all(dir);
  return calls;
}

TEST(Scavenger, LeavesThePlanMarginBeforeAReservation) {
  // 100 s ahead: 100 - 10 - 60 = 30 s, under a minute: nothing launched
  // (without the margin: 90 s, a 1-minute launch ending 40 s before the reservation).
  EXPECT_EQ(srun_calls_with_reservation_ahead(100), "");
  // 140 s ahead: 70 s, one whole minute.
  const std::string calls = srun_calls_with_reservation_ahead(140);
  EXPECT_NE(calls.find("--time=1 "), std::string::npos) << calls;
  EXPECT_NE(calls.find("--nodelist=node1"), std::string::npos) << calls;
}

// Fake Slurm clients in a fresh folder: one idle node, the given squeue
// output, an srun that runs `srun_body`; one job "hpo" of 100 iterations.
struct FakeSlurm {
  fs::path dir = cellsched::testing::fresh_test_dir("cellsched-scav-fake");
  ScavengeOptions o;
  ScavengeJob job;
  std::string script(const std::string& name, const std::string& body) {
    cellsched::testing::write_executable(dir / name, "#!/bin/sh\n" + body + "\n");
    return (dir / name).string();
  }
  FakeSlurm(const std::string& squeue_body, const std::string& srun_body) {
    o.state_dir = (dir / "state").string();
    o.interval_s = 0.1;
    o.duration_s = 3;
    o.sinfo = script("sinfo", "printf 'node1|idle\\n'");
    o.squeue = script("squeue", squeue_body);
    o.srun = script("srun", "echo \"$@\" >> " + (dir / "srun.log").string() + "\n" + srun_body);
    o.scancel = script("scancel", "true");
    job.name = "hpo";
    job.iterations = 100;
    job.max_nodes = 1;
    job.curve = cellsched::amdahl_curve(1, 0.1, 1);
    job.command = {"/bin/true"};
  }
  ~FakeSlurm() { fs::remove_all(dir); }
  std::string srun_calls() const { return fs::exists(dir / "srun.log") ? slurp(dir / "srun.log") : ""; }
};

// The command line end to end on fake clients: a relative command ran in the
// job's state folder, where it is not ("cannot run ./trainer.sh", every
// poll, exit 0). It is resolved where the jobs file is read; a job given up
// on makes the run exit 1 and says why.
TEST(ScavengeCli, ARelativeCommandIsResolvedAndAJobGivenUpOnIsAFailure) {
  FakeSlurm f("true", "exit 0");  // srun only logs: nothing trains
  cellsched::testing::write_executable(f.dir / "trainer.sh", "#!/bin/sh\nexit 0\n");
  fs::create_directory(f.dir / "bin");  // the fake clients, found on PATH as the CLI finds them
  for (const char* tool : {"sinfo", "squeue", "srun", "scancel"}) fs::rename(f.dir / tool, f.dir / "bin" / tool);
  std::ofstream(f.dir / "jobs.csv") << "name,iterations,max_nodes,rescale_s,curve,command\nhpo,50,1,0,,./trainer.sh\n";
  const cellsched::testing::Result r = cellsched::testing::run_in(
      {CELLSCHED_BINARY, "scavenge", "--slurm", "--jobs", "jobs.csv", "--state", "st", "--interval", "0.1",
       "--duration", "20"},
      f.dir, "scav", {"PATH=" + (f.dir / "bin").string() + ":/usr/bin:/bin"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("hpo failed: 3 launches in a row trained nothing"), std::string::npos) << r.err;
  EXPECT_NE(f.srun_calls().find(" " + (f.dir / "trainer.sh").string()), std::string::npos) << f.srun_calls();
}

// A held job, or one waiting on another, at the head of the queue wants no
// node: it stopped all scavenging, silently (0 launches with the node idle).
TEST(Scavenger, AHeldOrDependentHeadDoesNotBlockTheIdleNodes) {
  for (const std::string reason : {"JobHeldUser", "Dependency"}) {
    FakeSlurm f("printf '100|wait|PENDING|1|N/A|" + reason + "\\n'", "exit 0");
    std::vector<std::string> logged;
    f.o.duration_s = 1;
    f.o.log = [&](const std::string& s) { logged.push_back(s); };
    scavenge({f.job}, f.o);
    EXPECT_NE(f.srun_calls().find("--nodelist=node1"), std::string::npos) << reason;
    EXPECT_NE(logged.at(0).find("job 100 pends for " + reason + ", not for nodes"), std::string::npos) << logged.at(0);
  }
  EXPECT_TRUE(pends_for_nodes("Resources"));
  EXPECT_TRUE(pends_for_nodes("Priority"));
  EXPECT_FALSE(pends_for_nodes("BeginTime"));
}

// A command that trains nothing was relaunched every poll, forever, exit 0:
// after kMaxEmptyLaunches launches it is given up on, with the log's reason.
TEST(Scavenger, ACommandThatTrainsNothingIsGivenUpOn) {
  FakeSlurm f("true", "echo 'cannot run ./trainer.sh: No such file or directory' >&2; exit 127");
  f.o.duration_s = 20;  // ends sooner: the only job is given up on
  const ScavengeReport r = scavenge({f.job}, f.o);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_TRUE(r.jobs[0].failed);
  EXPECT_FALSE(r.jobs[0].done);
  EXPECT_EQ(r.launches, kMaxEmptyLaunches);
  EXPECT_NE(r.jobs[0].error.find("No such file or directory"), std::string::npos) << r.jobs[0].error;
}

// One failed squeue ended the scavenger (exit 1) and left its launch
// training; now a failed poll is skipped, and only a run of them stops it
// (what runs checkpointed first), with the error.
TEST(Scavenger, AFailedPollIsSkippedAndOnlyARunOfThemStops) {
  {
    FakeSlurm f("", "exit 0");
    const std::string once = (f.dir / "failed-once").string();
    f.o.squeue = f.script("squeue", "[ -e " + once + " ] && exit 0; touch " + once + "; exit 1");
    f.o.duration_s = 1;
    const ScavengeReport r = scavenge({f.job}, f.o);
    EXPECT_EQ(r.failed_polls, 1);
    EXPECT_NE(f.srun_calls().find("--nodelist=node1"), std::string::npos);
  }
  FakeSlurm f("exit 1", "exit 0");
  f.o.duration_s = 30;
  try {
    scavenge({f.job}, f.o);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("squeue failed (exit 1)"), std::string::npos) << e.what();
  }
}

// A scavenger killed (kill -9) leaves its launch training under Slurm. A
// rerun on the same --state ignored it: counted its progress while it ran,
// and no claim could stop it, so a primary job waited for its time limit.
// Now the rerun stops it first (SIGTERM through Slurm) and counts its last save.
TEST(Scavenger, ARerunStopsTheLaunchAnEarlierOneLeftRunning) {
  FakeSlurm f("", "exit 0");
  const fs::path job_dir = fs::path(f.o.state_dir) / "hpo";
  fs::create_directories(job_dir);
  std::ofstream(job_dir / "launch-0.progress") << "iterations=40\n";
  std::ofstream(job_dir / "launch-0.log") << "";
  const std::string gone = (f.dir / "cancelled").string();
  const std::string ours = "cellsched-scav-" + slurm_name_token(f.o.state_dir) + "-hpo-0";
  // Ours; another --state's launch of a job of the same name (another token);
  // a name like ours whose work dir is elsewhere.
  f.o.squeue = f.script("squeue", "case \"$*\" in *%Z*) [ -e " + gone + " ] || printf '5|" + ours + "|RUNNING|" +
                                      job_dir.string() + "\\n6|cellsched-scav-000000-hpo-0|RUNNING|/else/hpo\\n7|" +
                                      ours.substr(0, ours.size() - 1) + "1|RUNNING|/elsewhere/hpo\\n';; esac");
  // The trainer's last save lands when it gets SIGTERM.
  f.o.scancel = f.script("scancel", "echo \"$@\" >> " + (f.dir / "scancel.log").string() +
                                        "\ncase \"$*\" in *--signal=TERM*) echo iterations=70 >> " +
                                        (job_dir / "launch-0.progress").string() + "; touch " + gone + ";; esac");
  f.o.duration_s = 0.5;
  std::vector<std::string> logged;
  f.o.log = [&](const std::string& s) { logged.push_back(s); };
  const ScavengeReport r = scavenge({f.job}, f.o);
  ASSERT_FALSE(logged.empty());
  EXPECT_NE(logged[0].find("stopping 1 launch an earlier scavenger left running: " + ours), std::string::npos)
      << logged[0];
  const std::string calls = slurp(f.dir / "scancel.log");
  EXPECT_EQ(calls.find("--quiet --signal=TERM --name=" + ours + "\n"), 0u) << calls;
  EXPECT_EQ(calls.find("000000"), std::string::npos) << calls;
  EXPECT_EQ(calls.find(ours.substr(0, ours.size() - 1) + "1"), std::string::npos) << calls;
  EXPECT_DOUBLE_EQ(r.jobs.at(0).iterations_done, 70);  // its last save, not the 40 it had when the rerun began
}

std::string field(const std::string& text, const std::string& key) {
  const auto p = text.find(key + "=");
  if (p == std::string::npos) return "";
  const auto e = text.find_first_of(" \n", p);
  return text.substr(p + key.size() + 1, e - p - key.size() - 1);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

TEST(Scavenger, FillsAHoleAndLeavesWhenTheNodeIsClaimed) {
  if (find_executable("srun").empty() || find_executable("slurmctld").empty() || geteuid() != 0)
    GTEST_SKIP() << "Slurm is not installed or this is not root (../shared/slurm/local-cluster.sh install)";
  const std::string script = std::string(CELLSCHED_SHARED_DATA) + "/../slurm/local-cluster.sh";
  if (!fs::exists(script)) GTEST_SKIP() << script << " not found";
#ifdef CELLSCHED_EXAMPLE_TRAINER
  const std::vector<std::string> trainer = {CELLSCHED_EXAMPLE_TRAINER, "--step-sleep", "0.02"};
#else
  const std::vector<std::string> trainer = {std::string(CELLSCHED_TEST_SOURCE) + "/runner/trainer.sh"};
  setenv("TRAINER_STEP", "0.02", 1);
#endif
  const fs::path dir = fs::temp_directory_path() / ("cellsched-scav-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A cluster of its own (dir, ports, 4 nodes, no GRES), beside the one the
  // executor test uses; backfill every second so holes are seen at once.
  std::string tmpl = slurp(std::string(CELLSCHED_SHARED_DATA) + "/../slurm/slurm.conf.in");
  const std::string sched = "SchedulerType=sched/backfill\n";
  tmpl.replace(tmpl.find(sched), sched.size(), sched + "SchedulerParameters=bf_interval=1\n");
  std::ofstream(dir / "slurm.conf.in") << tmpl;
  const fs::path state_dir = dir / "slurm";
  setenv("SLURM_LOCAL_DIR", state_dir.c_str(), 1);
  setenv("SLURM_LOCAL_NODES", "4", 1);
  setenv("SLURM_LOCAL_GRES", "", 1);
  setenv("SLURM_LOCAL_CTLD_PORT", "16917", 1);
  setenv("SLURM_LOCAL_SLURMD_PORT", "16918", 1);
  setenv("SLURM_LOCAL_TEMPLATE", (dir / "slurm.conf.in").c_str(), 1);
  int st = 0;
  run(dir, {"/bin/bash", script, "up"}, &st);
  if (st != 0) {
    run(dir, {"/bin/bash", script, "down"});
    fs::remove_all(dir);
    GTEST_SKIP() << "the local Slurm cluster cannot start here";
  }
  setenv("SLURM_CONF", (state_dir / "etc/slurm.conf").c_str(), 1);

  // The primary workload: A holds 3 nodes for 60 s (it asked for 4 min); B
  // needs all 4 and is reserved at A's time limit, so node4 is a hole. The
  // scavenger launches only once the backfill scheduler has planned B's start,
  // which on a loaded machine took most of a 15 s A (CI, 2026-12-03: the hole
  // was never used), hence 30 s; and in CI's sanitizer build on 2026-12-03 even
  // most of a 30 s A (one launch, after B, no claim), hence 60 s, and a job
  // (4,800 iterations, about 96 s on one node) that outlasts A in the hole.
  // A's 4 min leave the launch at least a minute past the scavenger's plan
  // margin (60 s) however late the plan comes while A runs.
  const std::string a = trim(run(dir, {"sbatch", "--parsable", "--exclusive", "-N3", "-t", "4", "-o", "/dev/null", "--wrap", "sleep 60"}));
  for (int i = 0; i < 100 && trim(run(dir, {"squeue", "-h", "-j", a, "-o", "%T"})) != "RUNNING"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string b = trim(run(dir, {"sbatch", "--parsable", "--exclusive", "-N4", "-t", "1", "-o", "/dev/null", "--wrap", "sleep 3"}));
  std::string jobs = "name,iterations,max_nodes,rescale_s,curve,command\nhpo,4800,4,5,amdahl:0.1";
  for (const auto& t : trainer) jobs += "," + t;
  std::ofstream(dir / "jobs.csv") << jobs << "\n";
  const std::string out = run(dir, {CELLSCHED_BINARY, "scavenge", "--slurm", "--jobs", (dir / "jobs.csv").string(), "--state",
                               (dir / "state").string(), "--interval", "1", "--grace", "5", "--duration", "240", "--json"},
                              &st);
  const std::string ja = run(dir, {"scontrol", "show", "job", "-o", a}), jb = run(dir, {"scontrol", "show", "job", "-o", b});
  run(dir, {"/bin/bash", script, "down"});
  ASSERT_EQ(st, 0) << out;
  const nlohmann::json r = nlohmann::json::parse(out);
  EXPECT_TRUE(r["jobs"][0]["done"].get<bool>()) << r.dump(2);
  EXPECT_EQ(r["jobs"][0]["iterations_done"].get<double>(), 4800) << r.dump(2);
  EXPECT_GE(r["launches"].get<long>(), 2) << r.dump(2);  // in the hole, then again after B
  EXPECT_EQ(r["claims"].get<long>(), 1) << r.dump(2);
  EXPECT_LE(r["release_max_s"].get<double>(), 6.0) << r.dump(2);  // left within the grace period
  // B started within a few seconds of A's end (1 s resolution; the poll is 1 s).
  const double a_end = parse_slurm_time(field(ja, "EndTime")), b_start = parse_slurm_time(field(jb, "StartTime"));
  ASSERT_GT(a_end, 0) << ja;
  ASSERT_GT(b_start, 0) << jb;
  EXPECT_LE(b_start - a_end, 4) << ja << "\n" << jb;
  std::cout << "primary job B started " << b_start - a_end << " s after A ended\n";
  // The first launch sat in the hole with a time limit that ends before B's reservation.
  const std::string log0 = slurp(dir / "state/hpo/launch-0.log");
  EXPECT_EQ(log0.find("Requested node configuration is not available"), std::string::npos) << log0;
  EXPECT_TRUE(fs::exists(dir / "state/hpo/launch-0.pt"));
  fs::remove_all(dir);
}

}  // namespace
