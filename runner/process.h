// Supervised processes on this machine. Each launch runs under a small
// supervisor (a forked copy of the runner that never execs): it leads its own
// session and process group, waits for the runner's go-ahead (sent only after
// the runner has committed the supervisor's pid), runs the command (argv,
// never a shell string), and writes the command's exit status to a file. So
// a process outlives a killed runner, a restarted runner can find it (pid +
// start time) and learn how it ended, and a runner killed between fork and
// commit leaves nothing running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cellsched::runner {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // "KEY=VALUE" entries added to (or replacing) the runner's
  std::string workdir;            // "" = the runner's
  std::string log;                // stdout and stderr go here (appended)
  std::string exit_file;          // the supervisor writes "exit N" / "signal N" / "aborted" here
};

// A process that was forked but is not running the command until go().
class PendingSpawn {
 public:
  PendingSpawn() = default;
  PendingSpawn(PendingSpawn&&) noexcept;
  PendingSpawn& operator=(PendingSpawn&&) noexcept;
  ~PendingSpawn();  // without go(): the supervisor exits without running anything

  int64_t pid() const { return pid_; }
  int64_t start_ticks() const { return start_ticks_; }
  // Lets the supervisor run the command.
  void go();

 private:
  friend PendingSpawn spawn(const SpawnSpec& spec);
  int64_t pid_ = 0;
  int64_t start_ticks_ = 0;
  int fd_ = -1;
};

// Forks the supervisor. Throws std::runtime_error when the command cannot be
// found or the fork fails.
PendingSpawn spawn(const SpawnSpec& spec);

// Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22);
// 0 when there is no such process.
int64_t process_start_ticks(int64_t pid);

// True when `pid` with that start time still runs (a zombie counts as gone;
// our own zombie children are reaped here).
bool alive(int64_t pid, int64_t start_ticks);

// Sends `sig` to the process group led by the supervisor `pid` when it still
// is that process (start time checked).
void signal_group(int64_t pid, int64_t start_ticks, int sig);

// Looks `name` up in PATH ("" when not found); a name with '/' is returned as is.
std::string find_executable(const std::string& name);

// Runs argv (no shell; argv[0] looked up in PATH) and returns its stdout;
// stderr is dropped. Throws std::runtime_error when it cannot run, fails, or
// takes longer than `timeout_s` (then it is killed).
std::string run_capture(const std::vector<std::string>& argv, double timeout_s = 20);

}  // namespace cellsched::runner
