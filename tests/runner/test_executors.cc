// Executors: quoting for the remote shell, the argv each one builds, the
// learned oracle, and the ssh and Slurm executors driving real runs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/cluster.h"
#include "core/error.h"
#include "runner/executor.h"
#include "runner/learned_oracle.h"
#include "runner/process.h"
#include "runner/slurm_nodes.h"
#include "tests/support/subprocess.h"

namespace fs = std::filesystem;
using namespace cellsched;
using namespace cellsched::runner;

namespace {

using cellsched::testing::slurp;

// Runs argv (no shell) and returns its stdout.
std::string capture(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(ShellQuote, RoundTripsThroughARealShell) {
  const std::vector<std::string> args = {"plain", "", "a b", "it's", "$(echo no)", "`echo no`", "a;b|c&d",
                                         "\"q\"", "back\\slash", "new\nline", "*", "~", "$HOME"};
  std::string line = "printf '%s\\0'";
  for (const auto& a : args) line += " " + shell_quote(a);
  const std::string out = capture({"/bin/sh", "-c", line});
  std::vector<std::string> got;
  std::string cur;
  for (char c : out) {
    if (c == '\0') got.push_back(cur), cur.clear();
    else cur += c;
  }
  EXPECT_EQ(got, args);
}

TEST(Executors, BuildTheArgvTheyDocument) {
  const Node node{"node1", "10.0.0.7", "v100", 4};
  ProcessRequest r;
  r.node = &node;
  r.gpus = 2;
  r.gpu_ids = "2,3";
  r.command = {"train", "a b"};
  r.env = {"CELLSCHED_JOB_ID=4"};
  r.workdir = "/w d";
  r.name = "cellsched-L9-0";

  ExecutorOptions lo;
  const auto local = make_executor(lo)->prepare(r);
  EXPECT_EQ(local.argv, r.command);
  EXPECT_NE(std::find(local.env.begin(), local.env.end(), "CUDA_VISIBLE_DEVICES=2,3"), local.env.end());

  ExecutorOptions so;
  so.kind = "ssh";
  const auto ssh = make_executor(so)->prepare(r);
  ASSERT_GE(ssh.argv.size(), 4u);
  EXPECT_EQ(ssh.argv[0], "ssh");
  EXPECT_EQ(ssh.argv[1], "-o");
  EXPECT_EQ(ssh.argv[2], "BatchMode=yes");
  EXPECT_EQ(ssh.argv[ssh.argv.size() - 3], "10.0.0.7");
  EXPECT_EQ(ssh.argv.back(),
            "cd '/w d' && exec env 'CELLSCHED_JOB_ID=4' 'CUDA_VISIBLE_DEVICES=2,3' 'train' 'a b'");

  ExecutorOptions sl;
  sl.kind = "slurm";
  const auto slurm = make_executor(sl)->prepare(r);
  const std::vector<std::string> want = {"srun", "--nodes=1", "--ntasks=1", "--nodelist=node1",
                                         "--gres=gpu:v100:2", "--job-name=cellsched-L9-0", "--export=ALL",
                                         "--kill-on-bad-exit=1", "--chdir=/w d", "--", "train", "a b"};
  EXPECT_EQ(slurm.argv, want);
  // The scavenger's malleable launch goes through the same executor code.
  sl.partition = "scavenge";
  const SlurmLaunch launch{{"node1", "node2"}, 7, "cellsched-scav-a-0", "/s", {"wrap", "train"}};
  const std::vector<std::string> many = {"srun", "--nodes=2", "--ntasks-per-node=1", "--nodelist=node1,node2",
                                         "--time=7", "--exclusive", "--nice=10000", "--job-name=cellsched-scav-a-0",
                                         "--export=ALL", "--kill-on-bad-exit=1", "--partition=scavenge", "--chdir=/s",
                                         "--", "wrap", "train"};
  EXPECT_EQ(slurm_launch_argv(sl, launch), many);
  ExecutorOptions bad;
  bad.kind = "rsh";
  EXPECT_THROW(make_executor(bad), std::exception);
}

// A stop under Slurm asks Slurm to signal the step (srun would answer a
// SIGTERM of its own with SIGKILL: no final save, no grace period); local and
// ssh leave it to the runner's signal to the local process group.
TEST(Executors, SlurmStopsAskSlurmToSignalTheStep) {
  const fs::path dir = fs::temp_directory_path() / ("cellsched-scancel-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path fake = dir / "scancel";
  cellsched::testing::write_executable(fake, "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\n");
  ExecutorOptions sl;
  sl.kind = "slurm";
  sl.scancel = fake.string();
  const auto slurm = make_executor(sl);
  EXPECT_TRUE(slurm->request_stop("cellsched-L9-0"));
  slurm->force_stop("cellsched-L9-0");
  EXPECT_EQ(slurp(dir / "calls"), "--quiet --signal=TERM --name=cellsched-L9-0\n"
                                  "--quiet --signal=KILL --name=cellsched-L9-0\n--quiet --name=cellsched-L9-0\n");
  sl.scancel = (dir / "missing").string();
  EXPECT_FALSE(make_executor(sl)->request_stop("cellsched-L9-0"));  // then the runner signals srun
  EXPECT_FALSE(make_executor(ExecutorOptions{})->request_stop("cellsched-L9-0"));
  fs::remove_all(dir);
}

// Launch numbers start again in every database and --state folder, and
// stops go by Slurm job name: the name carries a token of the path.
TEST(Executors, SlurmNameTokensTellPathsApart) {
  const std::string a = slurm_name_token("/tmp/a/state.db"), b = slurm_name_token("/tmp/b/state.db");
  EXPECT_EQ(a.size(), 6u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, slurm_name_token("/tmp/a/../a/state.db"));
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(SlurmNodes, ReadsSinfoAndMatchesTheNodeListToSlurmsGresNames) {
  const auto slurm = parse_sinfo_gres(
      "node1|gpu:v100:4(S:0-1)|idle\nnode2|gpu:a100:4(S:0,1),gpu:k80:2|drain\nnode1|gpu:v100:4|idle\n"
      "node3|(null)|idle\nnode4|gpu:2|mix\n");
  ASSERT_EQ(slurm.size(), 4u);  // node1 twice (two partitions) counts once
  EXPECT_EQ(slurm[1].gpus.at("a100"), 4);
  EXPECT_EQ(slurm[1].gpus.at("k80"), 2);
  EXPECT_EQ(slurm[1].state, "drain");
  EXPECT_TRUE(slurm[2].gpus.empty());
  EXPECT_EQ(slurm[3].gpus.at(""), 2);

  const fs::path file = fs::temp_directory_path() / ("cellsched-slurm-nodes-" + std::to_string(getpid()) + ".yaml");
  const auto check = [&](const std::string& yaml, std::vector<std::string>* notes = nullptr) {
    std::ofstream(file) << yaml;
    return match_slurm_nodes(load_cluster_yaml(file.string()), slurm, file.string(), notes);
  };
  // The node list's a100 is the catalogue's a100-40; srun asks for Slurm's "a100".
  std::vector<std::string> notes;
  const auto gres = check("nodes:\n  - {name: node1, gpu_type: v100, gpus: 4}\n  - {name: node2, gpu_type: a100, gpus: 4}\n",
                          &notes);
  EXPECT_EQ(gres.at("node1"), "v100");
  EXPECT_EQ(gres.at("node2"), "a100");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'node2' is drain"), std::string::npos) << notes[0];
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"nodes:\n  - {name: node1, gpu_type: v100, gpus: 4}\n  - name: ghost\n    gpu_type: v100\n    gpus: 4\n",
       ":3: node 'ghost' is not a node of this Slurm cluster (sinfo lists node1, node2, node3, node4)"},
      {"nodes:\n  - {name: node1, gpu_type: v100, gpus: 8}\n", ":2: node 'node1' has 8 GPUs in the node list, Slurm's GRES 4"},
      {"nodes:\n  - {name: node2, gpu_type: v100, gpus: 2}\n", ":2: node 'node2': Slurm offers gpu:a100:4, gpu:k80:2, no GPU of type v100"},
      {"nodes:\n  - {name: node3, gpu_type: v100, gpus: 2}\n", ":2: node 'node3': Slurm offers no GPU GRES"},
  };
  for (const auto& [yaml, want] : bad) {
    try {
      check(yaml);
      ADD_FAILURE() << yaml;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(file.string() + want), std::string::npos) << e.what();
    }
  }
  fs::remove(file);
}

TEST(LearnedOracle, ObservationsReplaceTheEstimate) {
  LearnedOracle o(nullptr, 2.0);
  Job j;
  j.id = 3;
  EXPECT_DOUBLE_EQ(o.throughput(j, "v100", 2, true), 4.0);  // the prior
  o.observe(3, "v100", 2, 10.0);                            // 5 per GPU
  EXPECT_DOUBLE_EQ(o.throughput(j, "v100", 4, true), 20.0);
  EXPECT_DOUBLE_EQ(o.throughput(j, "k80", 1, true), 5.0);  // carried over: no base ratio known
  o.observe(3, "v100", 1, 7.0);                             // EMA: (5 + 7) / 2
  EXPECT_DOUBLE_EQ(o.per_gpu(3, "v100"), 6.0);
  EXPECT_EQ(o.samples(3, "v100"), 2);
}

TEST(Process, SupervisorAbortsWithoutTheGoAhead) {
  const fs::path dir = fs::temp_directory_path() / ("cellsched-proc-" + std::to_string(getpid()));
  fs::create_directories(dir);
  SpawnSpec spec{{"/bin/sh", "-c", "echo ran > " + (dir / "ran").string()}, {}, "", (dir / "log").string(),
                 (dir / "exit").string()};
  {
    PendingSpawn p = spawn(spec);
    EXPECT_GT(p.pid(), 0);
  }  // dropped without go()
  for (int i = 0; i < 250 && !fs::exists(dir / "exit"); ++i) usleep(20000);
  EXPECT_EQ(slurp(dir / "exit"), "aborted\n");
  EXPECT_FALSE(fs::exists(dir / "ran"));
  fs::remove(dir / "exit");
  PendingSpawn p = spawn(spec);
  p.go();
  for (int i = 0; i < 250 && !fs::exists(dir / "exit"); ++i) usleep(20000);
  EXPECT_EQ(slurp(dir / "exit"), "exit 0\n");
  EXPECT_TRUE(fs::exists(dir / "ran"));
  // The supervisor renames its exit file into place and then exits: under a sanitizer or a
  // loaded machine the test can look in between, so it waits (bounded) for the exit itself.
  for (int i = 0; i < 200 && alive(p.pid(), p.start_ticks()); ++i) usleep(10000);
  EXPECT_FALSE(alive(p.pid(), p.start_ticks()));
  fs::remove_all(dir);
}

// ---- real runs through the ssh and slurm executors ----

struct CliRun {
  fs::path dir;
  std::string db, nodes;
  explicit CliRun(const std::string& tag) {
    dir = fs::temp_directory_path() / ("cellsched-exec-" + std::to_string(getpid()) + "-" + tag);
    fs::remove_all(dir);
    fs::create_directories(dir);
    db = (dir / "state.db").string();
    nodes = (dir / "nodes.yaml").string();
  }
  int cli(const std::vector<std::string>& args, const std::string& log = "cli.log") const {
    std::string cmd = std::string("'") + CELLSCHED_BINARY + "'";
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " >> " + shell_quote((dir / log).string()) + " 2>&1";
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  nlohmann::json status() const {
    cli({"status", "--db", db, "--json"}, "status.json");
    const std::string s = slurp(dir / "status.json");
    fs::remove(dir / "status.json");
    return nlohmann::json::parse(s);
  }
};

const std::string kTrainer = std::string(CELLSCHED_TEST_SOURCE) + "/runner/trainer.sh";

TEST(SshExecutor, RunsJobsThroughTheClientWithQuotedArguments) {
  CliRun r("ssh");
  // A stand-in for the OpenSSH client: skips its options and the host and
  // gives the remote command line to a shell, as sshd would.
  const fs::path fake = r.dir / "fake-ssh";
  cellsched::testing::write_executable(fake, "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/ssh-calls\"\n"
                                             "while [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec /bin/sh -c \"$1\"\n");
  std::ofstream(r.nodes) << "nodes:\n  - {name: remote1, address: host-a, gpu_type: v100, gpus: 2}\n";
  ASSERT_EQ(r.cli({"submit", "--db", r.db, "--iterations", "5", "--", kTrainer, "$(touch pwned)", "x;y"}), 0);
  setenv("TRAINER_ARGS", (r.dir / "args").c_str(), 1);
  const int st = r.cli({"run", "--nodes", r.nodes, "--db", r.db, "--executor", "ssh", "--ssh", fake.string(),
                        "--round", "2", "--until-idle", "--policy", "fifo", "--grace", "2"},
                       "runner.log");
  unsetenv("TRAINER_ARGS");
  EXPECT_EQ(st, 0) << slurp(r.dir / "runner.log");
  EXPECT_EQ(r.status()["jobs"][0]["state"], "done") << slurp(r.dir / "runner.log");
  EXPECT_EQ(slurp(r.dir / "args"), "$(touch pwned)\nx;y\n");
  EXPECT_FALSE(fs::exists(r.dir / "pwned"));
  const std::string calls = slurp(r.dir / "ssh-calls");
  EXPECT_NE(calls.find("-o BatchMode=yes -tt host-a --"), std::string::npos) << calls;
  fs::remove_all(r.dir);
}

// `run --executor slurm` checks the node list against sinfo before anything
// is stored or launched: a node Slurm lacks is bad input (exit 2, file:line).
TEST(SlurmExecutor, ANodeListSlurmDoesNotHaveIsRefusedBeforeTheRun) {
  CliRun r("slurm-check");
  const fs::path fake = r.dir / "fake-sinfo";
  cellsched::testing::write_executable(fake, "#!/bin/sh\necho 'node1|gpu:v100:4|idle'\n");
  std::ofstream(r.nodes) << "nodes:\n  - {name: node1, gpu_type: v100, gpus: 4}\n  - {name: ghost, gpu_type: v100, gpus: 4}\n";
  EXPECT_EQ(r.cli({"run", "--nodes", r.nodes, "--db", r.db, "--executor", "slurm", "--sinfo", fake.string(),
                   "--srun", "/bin/false", "--rounds", "1"}),
            2);
  const std::string said = slurp(r.dir / "cli.log");
  EXPECT_NE(said.find(r.nodes + ":3: node 'ghost' is not a node of this Slurm cluster"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(r.db));
  fs::remove_all(r.dir);
}

// The Slurm executor against the throw-away local cluster of ../shared/slurm.
TEST(SlurmExecutor, RunsJobsOnTheLocalCluster) {
  if (find_executable("srun").empty() || find_executable("slurmctld").empty())
    GTEST_SKIP() << "Slurm is not installed (../shared/slurm/local-cluster.sh install)";
  const std::string script = std::string(CELLSCHED_SHARED_DATA) + "/../slurm/local-cluster.sh";
  if (!fs::exists(script)) GTEST_SKIP() << script << " not found";
  const bool was_up = std::system((shell_quote(script) + " status >/dev/null 2>&1").c_str()) == 0;
  if (!was_up && std::system((shell_quote(script) + " up >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "the local Slurm cluster cannot start here";
  std::string conf = capture({"/bin/bash", script, "env"});
  const auto eq = conf.find("SLURM_CONF=");
  ASSERT_NE(eq, std::string::npos) << conf;
  conf = conf.substr(eq + 11);
  conf = conf.substr(0, conf.find_first_of("\n "));
  setenv("SLURM_CONF", conf.c_str(), 1);

  CliRun r("slurm");
  std::ofstream(r.nodes) << "nodes:\n  - {name: node1, address: 127.0.0.1, gpu_type: v100, gpus: 4}\n"
                            "  - {name: node2, address: 127.0.0.1, gpu_type: k80, gpus: 4}\n";
  for (const char* g : {"1", "2", "4"})
    ASSERT_EQ(r.cli({"submit", "--db", r.db, "--iterations", "20", "--gpus", g, "--", kTrainer}), 0);
  const int st = r.cli({"run", "--nodes", r.nodes, "--db", r.db, "--executor", "slurm", "--round", "3",
                        "--until-idle", "--policy", "hadar", "--grace", "3"},
                       "runner.log");
  EXPECT_EQ(st, 0) << slurp(r.dir / "runner.log");
  const nlohmann::json final_status = r.status();  // (a temporary's element would dangle in the loop)
  for (const auto& j : final_status["jobs"]) EXPECT_EQ(j["state"], "done") << j.dump(2) << slurp(r.dir / "runner.log");
  // The processes ran under srun with the GRES the runner asked for.
  std::string logs;
  for (const auto& e : fs::recursive_directory_iterator(r.dir))
    if (e.path().extension() == ".log") logs += slurp(e.path());
  // (A step the runner stopped to preempt it logs "srun: error: ... Killed";
  // what must not appear is Slurm refusing the request.)
  for (const char* refused : {"Requested node configuration is not available",
                              "Invalid generic resource", "Unable to allocate resources"})
    EXPECT_EQ(logs.find(refused), std::string::npos) << refused << "\n" << logs;

  // A stop reaches the trainer as SIGTERM (it saves, writes its end line and
  // exits 0), not as the SIGKILL srun turns its own SIGTERM into: a runner
  // stopped mid-job stops its launches with the grace period.
  CliRun g("slurm-grace");
  std::ofstream(g.nodes) << "nodes:\n  - {name: node1, address: 127.0.0.1, gpu_type: v100, gpus: 4}\n";
  ASSERT_EQ(g.cli({"submit", "--db", g.db, "--iterations", "100000", "--", kTrainer}), 0);
  setenv("TRAINER_LOG", (g.dir / "trainer.log").c_str(), 1);
  const std::string run_cmd = "timeout -s TERM 12 '" + std::string(CELLSCHED_BINARY) + "' run --nodes " +
                              shell_quote(g.nodes) + " --db " + shell_quote(g.db) +
                              " --executor slurm --round 60 --policy fifo --grace 10 >> " +
                              shell_quote((g.dir / "runner.log").string()) + " 2>&1";
  std::system(run_cmd.c_str());
  unsetenv("TRAINER_LOG");
  const std::string trained = slurp(g.dir / "trainer.log");
  EXPECT_NE(trained.find("start 1 "), std::string::npos) << trained << slurp(g.dir / "runner.log");
  EXPECT_NE(trained.find("end 1 "), std::string::npos) << "the trainer got no SIGTERM\n" << trained
                                                         << slurp(g.dir / "runner.log");
  const nlohmann::json job = g.status()["jobs"][0];
  EXPECT_GT(job["iterations_done"].get<double>(), 0) << job.dump(2);
  // Nothing of this runner left in Slurm; its launches' names carry its database's token.
  const std::string left = capture({"/usr/bin/env", "squeue", "-h", "-o", "%j"});
  EXPECT_EQ(left.find("cellsched-" + slurm_name_token(g.db) + "-L"), std::string::npos) << left;
  fs::remove_all(g.dir);

  if (!was_up) std::system((shell_quote(script) + " down >/dev/null 2>&1").c_str());
  fs::remove_all(r.dir);
}

}  // namespace
