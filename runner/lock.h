// One runner per state database: an OS lock (flock) on `DB.runner.lock` held
// for the runner's whole life. The kernel drops it when the holder exits or is
// killed, so a stale lock never blocks a new runner; the file names the holder
// (pid, host, start time) for the error and for `cellsched status`.
#pragma once

#include <optional>
#include <string>

namespace cellsched::db {
class OnlineStore;
}

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

// The lease in the store (online_meta: runner_pid, runner_host, started_at,
// heartbeat, lease_stale_s), beside the OS lock: flock does not reach across
// hosts on every shared filesystem (NFS), the store does. Taken in one
// immediate transaction after the OS lock. On this host the OS lock decides
// (a lease left by a dead runner here is simply taken over); a lease of another
// host is refused while its heartbeat is younger than its `lease_stale_s`.
// Throws InputError naming the holder.
void take_lease(db::OnlineStore& store, double stale_after_s);
// The holder's heartbeat (each round, and every few seconds between).
void renew_lease(db::OnlineStore& store);
// A clean stop: the lease is given back (runner_pid 0).
void release_lease(db::OnlineStore& store);
// Another host's live lease (heartbeat younger than its lease_stale_s), if any.
std::optional<LockHolder> foreign_lease(const db::OnlineStore& store);

}  // namespace cellsched::runner
