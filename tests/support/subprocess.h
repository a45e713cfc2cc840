// Running the `cellsched` binary (or any program) from a test: argv only, no
// shell, in a scratch directory, stdout and stderr captured in files. Shared
// by the CLI, profile and runner tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cellsched::testing {

namespace fs = std::filesystem;

struct Result {
  int status = -1;  // exit status, or 128 + the signal that ended it
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Writes `script` (a whole file, "#!/bin/sh" line included) to `p` and makes
// it executable by its owner: a stand-in for a client (ssh, srun, squeue).
inline void write_executable(const fs::path& p, const std::string& script) {
  std::ofstream(p) << script;
  fs::permissions(p, fs::perms::owner_all);
}

// A fresh directory for the running test: <tmp>/<prefix>-<pid>-<test name>.
inline fs::path fresh_test_dir(const std::string& prefix) {
  const fs::path d = fs::temp_directory_path() /
                     (prefix + "-" + std::to_string(getpid()) + "-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Starts `argv` (argv[0] a path) in `dir` with stdout and stderr written to
// `out` and `err` (truncated) and the "KEY=VALUE" entries of `env` added to
// the environment. Returns the child's pid.
inline pid_t spawn(std::vector<std::string> argv, const fs::path& dir, const fs::path& out, const fs::path& err,
                   const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(127);
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid`: its exit status, or 128 + the signal that ended it.
inline int wait_status(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Runs `argv` to completion in `dir`; its output goes through `dir`/<tag>.out and .err.
inline Result run_in(const std::vector<std::string>& argv, const fs::path& dir, const std::string& tag = "cmd",
                     const std::vector<std::string>& env = {}) {
  const fs::path out = dir / (tag + ".out"), err = dir / (tag + ".err");
  const int st = wait_status(spawn(argv, dir, out, err, env));
  return {st, slurp(out), slurp(err)};
}

#ifdef CELLSCHED_BINARY
// A test of the `cellsched` binary in a fresh folder of its own (dir_):
// run() runs it there, write() puts an input file there.
class CliTest : public ::testing::Test {
 protected:
  explicit CliTest(std::string prefix = "cellsched-cli") : prefix_(std::move(prefix)) {}
  void SetUp() override { dir_ = fresh_test_dir(prefix_); }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the binary with `args` (argv, no shell), in dir_.
  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), CELLSCHED_BINARY);
    return run_in(args, dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  std::string prefix_;
  fs::path dir_;
};
#endif

}  // namespace cellsched::testing
