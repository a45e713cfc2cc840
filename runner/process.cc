#include "runner/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace cellsched::runner {
namespace {

// Async-signal-safe helpers for the forked side (no allocation, no locks).
void put_str(char*& p, const char* s) {
  while (*s) *p++ = *s++;
}
void put_int(char*& p, int v) {
  char tmp[16];
  int n = 0;
  if (v < 0) {
    *p++ = '-';
    v = -v;
  }
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
}

[[noreturn]] void supervise(int go_fd, const char* path, char* const* argv, char* const* envp,
                            const char* workdir, const char* log, const char* exit_file,
                            const char* exit_tmp) {
  setsid();  // own session and process group: signals reach the command and its children
  // Hold nothing of the runner's: not its terminal or pipes, not the database,
  // not the go-ahead pipes of other launches (or they would never see EOF).
  const int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 2) close(devnull);
  }
  for (int fd = 3; fd < 4096; ++fd)
    if (fd != go_fd) close(fd);
  // The supervisor itself ignores SIGTERM/SIGINT/SIGHUP; it only ends with its command.
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  char buf = 0;
  ssize_t n;
  do n = read(go_fd, &buf, 1);
  while (n < 0 && errno == EINTR);
  close(go_fd);
  char msg[64];
  char* p = msg;
  int status = 0;
  if (n != 1 || buf != 'g') {
    put_str(p, "aborted\n");
  } else {
    const pid_t child = fork();
    if (child == 0) {
      signal(SIGTERM, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      const int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      if (*workdir && chdir(workdir) != 0) _exit(126);
      execve(path, argv, envp);
      _exit(127);
    }
    if (child < 0) {
      put_str(p, "aborted\n");
    } else {
      pid_t r;
      do r = waitpid(child, &status, 0);
      while (r < 0 && errno == EINTR);
      if (WIFSIGNALED(status)) {
        put_str(p, "signal ");
        put_int(p, WTERMSIG(status));
      } else {
        put_str(p, "exit ");
        put_int(p, WEXITSTATUS(status));
      }
      put_str(p, "\n");
    }
  }
  const int fd = open(exit_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    [[maybe_unused]] ssize_t w = write(fd, msg, static_cast<size_t>(p - msg));
    fsync(fd);
    close(fd);
    rename(exit_tmp, exit_file);
  }
  _exit(0);
}

std::vector<char*> c_array(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string full = dir + "/" + name;
    struct stat st {};
    if (stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(full.c_str(), X_OK) == 0)
      return full;
  }
  return "";
}

PendingSpawn::PendingSpawn(PendingSpawn&& o) noexcept
    : pid_(o.pid_), start_ticks_(o.start_ticks_), fd_(o.fd_) {
  o.fd_ = -1;
}
PendingSpawn& PendingSpawn::operator=(PendingSpawn&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    pid_ = o.pid_;
    start_ticks_ = o.start_ticks_;
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}
PendingSpawn::~PendingSpawn() {
  if (fd_ >= 0) close(fd_);  // EOF: the supervisor aborts
}

void PendingSpawn::go() {
  if (fd_ < 0) return;
  const char g = 'g';
  ssize_t n;
  do n = write(fd_, &g, 1);
  while (n < 0 && errno == EINTR);
  close(fd_);
  fd_ = -1;
}

PendingSpawn spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw std::runtime_error("empty command");
  const std::string path = find_executable(spec.argv[0]);
  if (path.empty()) throw std::runtime_error("command not found: " + spec.argv[0]);
  // Everything the forked side needs is built here, before fork.
  std::vector<std::string> argv = spec.argv;
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv;
  }
  for (const std::string& kv : spec.env) env[kv.substr(0, kv.find('='))] = kv;
  std::vector<std::string> envs;
  for (auto& [k, kv] : env) envs.push_back(kv);
  std::vector<char*> argv_c = c_array(argv);
  std::vector<char*> env_c = c_array(envs);
  const std::string exit_tmp = spec.exit_file + ".tmp";

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[1]);
    supervise(fds[0], path.c_str(), argv_c.data(), env_c.data(), spec.workdir.c_str(),
              spec.log.c_str(), spec.exit_file.c_str(), exit_tmp.c_str());
  }
  close(fds[0]);
  PendingSpawn p;
  p.pid_ = pid;
  p.fd_ = fds[1];
  p.start_ticks_ = process_start_ticks(pid);
  return p;
}

int64_t process_start_ticks(int64_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream in(s.substr(rp + 2));
  std::string field;
  // Fields after the name start at 3 (state); starttime is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return 0;
    if (i == 3 && field == "Z") return 0;
  }
  return std::strtoll(field.c_str(), nullptr, 10);
}

bool alive(int64_t pid, int64_t start_ticks) {
  if (pid <= 0) return false;
  int st = 0;
  waitpid(static_cast<pid_t>(pid), &st, WNOHANG);  // reaps it if it is our zombie child
  const int64_t t = process_start_ticks(pid);
  return t != 0 && (start_ticks == 0 || t == start_ticks);
}

void signal_group(int64_t pid, int64_t start_ticks, int sig) {
  if (!alive(pid, start_ticks)) {
    // The supervisor is gone; members of its group may not be (a command
    // that left children behind): the group id is still the old pid.
    if (sig == SIGKILL && pid > 0) kill(-static_cast<pid_t>(pid), SIGKILL);
    return;
  }
  kill(-static_cast<pid_t>(pid), sig);
}

std::string run_capture(const std::vector<std::string>& argv, double timeout_s) {
  const std::string path = find_executable(argv.at(0));
  if (path.empty()) throw std::runtime_error(argv[0] + ": not found (is Slurm installed?)");
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(path.c_str(), args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  while (true) {
    pollfd p{fds[0], POLLIN, 0};
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(fds[0]);
      throw std::runtime_error(argv[0] + ": no answer within " + std::to_string(timeout_s) + " s");
    }
    if (poll(&p, 1, left) <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    throw std::runtime_error(argv[0] + " failed (exit " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) + ")");
  return out;
}

}  // namespace cellsched::runner
