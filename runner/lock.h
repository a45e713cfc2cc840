// One runner per state database: an OS lock (flock) on `DB.runner.lock` held
// for the runner's whole life. The kernel drops it when the holder exits or is
// killed, so a stale lock never blocks a new runner; the file names the holder
// (pid, host, start time) for the error and for `cellsched status`.
#pragma once

#include <optional>
#include <string>

namespace cellsched::runner {

struct LockHolder {
  long pid = 0;
  std::string host;
  double started_at = 0;  // Unix seconds
  std::string text() const;  // "pid 123 on host h since 2026-12-01 23:10:00 UTC"
};

class RunnerLock {
 public:
  // Takes the lock of `db_path`'s runner, or returns nullopt and fills
  // `holder` with who has it. Throws InputError when the lock file cannot be
  // opened (e.g. its folder does not exist).
  static std::optional<RunnerLock> acquire(const std::string& db_path, LockHolder* holder);
  RunnerLock(RunnerLock&& other) noexcept;
  RunnerLock& operator=(RunnerLock&&) = delete;
  RunnerLock(const RunnerLock&) = delete;
  ~RunnerLock();

 private:
  explicit RunnerLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Who holds `db_path`'s runner lock right now; nullopt when no live runner does.
std::optional<LockHolder> runner_lock_holder(const std::string& db_path);

}  // namespace cellsched::runner
