#include "runner/lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

#include "core/error.h"
#include "db/online.h"

namespace cellsched::runner {

namespace {

std::string lock_path(const std::string& db_path) { return db_path + ".runner.lock"; }

LockHolder read_holder(int fd) {
  char buf[512] = {0};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  LockHolder h;
  if (n > 0) {
    std::istringstream in(std::string(buf, static_cast<size_t>(n)));
    in >> h.pid >> h.host >> h.started_at;
  }
  return h;
}

// The holder writes its line right after it takes the lock, so a reader that
// finds the lock taken may see the line of an earlier, dead holder (or none)
// for a moment: wait up to a second for a live one.
LockHolder read_live_holder(int fd) {
  LockHolder h = read_holder(fd);
  for (int i = 0; i < 100 && (h.pid <= 0 || (kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH)); ++i) {
    usleep(10000);
    h = read_holder(fd);
  }
  return h;
}

}  // namespace

std::string LockHolder::text() const {
  std::ostringstream o;
  o << "pid " << pid << " on host " << (host.empty() ? "?" : host);
  if (started_at > 0) {
    const std::time_t t = static_cast<std::time_t>(started_at);
    char when[32];
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    o << " since " << when;
  }
  return o.str();
}

std::optional<RunnerLock> RunnerLock::acquire(const std::string& db_path, LockHolder* holder) {
  const std::string path = lock_path(db_path);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path + ": cannot open the runner lock: " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (holder) *holder = read_live_holder(fd);
    close(fd);
    if (err == EWOULDBLOCK) return std::nullopt;
    throw InputError(path + ": cannot lock: " + std::strerror(err));
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::ostringstream o;
  o << getpid() << " " << (host[0] ? host : "?") << " " << std::time(nullptr) << "\n";
  const std::string s = o.str();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, s.data(), s.size(), 0) != static_cast<ssize_t>(s.size())) {
    close(fd);
    throw InputError(path + ": cannot write the runner lock: " + std::strerror(errno));
  }
  return RunnerLock(fd);
}

RunnerLock::RunnerLock(RunnerLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

RunnerLock::~RunnerLock() {
  if (fd_ >= 0) close(fd_);  // closing drops the lock
}

std::optional<LockHolder> runner_lock_holder(const std::string& db_path) {
  const int fd = open(lock_path(db_path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // no runner ever ran here
  std::optional<LockHolder> out;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) out = read_live_holder(fd);
  close(fd);
  return out;
}

namespace {

std::string this_host() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host[0] ? host : "?";
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double meta_number(const db::OnlineStore& store, const std::string& key) {
  const auto v = store.meta(key);
  return v ? std::strtod(v->c_str(), nullptr) : 0;
}

}  // namespace

std::optional<LockHolder> foreign_lease(const db::OnlineStore& store) {
  LockHolder h;
  h.pid = static_cast<long>(meta_number(store, "runner_pid"));
  h.host = store.meta("runner_host").value_or("");
  h.started_at = meta_number(store, "started_at");
  const double age = now_s() - meta_number(store, "heartbeat");
  if (h.pid <= 0 || h.host.empty() || h.host == this_host() || !(age < meta_number(store, "lease_stale_s")))
    return std::nullopt;
  return h;
}

void take_lease(db::OnlineStore& store, double stale_after_s) {
  store.transaction([&] {
    if (const auto other = foreign_lease(store))
      throw InputError(store.path() + ": another runner holds this state database's lease (" + other->text() +
                       ", heartbeat " + std::to_string(static_cast<long>(now_s() - meta_number(store, "heartbeat"))) +
                       " s ago; it is taken over once its heartbeat is " +
                       std::to_string(static_cast<long>(meta_number(store, "lease_stale_s"))) + " s old)");
    const std::string now = std::to_string(now_s());
    store.set_meta("runner_pid", std::to_string(getpid()));
    store.set_meta("runner_host", this_host());
    store.set_meta("started_at", now);
    store.set_meta("heartbeat", now);
    store.set_meta("lease_stale_s", std::to_string(stale_after_s));
  });
}

void renew_lease(db::OnlineStore& store) {
  store.transaction([&] { store.set_meta("heartbeat", std::to_string(now_s())); });
}

void release_lease(db::OnlineStore& store) {
  store.transaction([&] { store.set_meta("runner_pid", "0"); });
}

}  // namespace cellsched::runner
