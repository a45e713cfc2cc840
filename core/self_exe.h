// The running executable, for starting helpers and workers beside it.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace cellsched {

// The path /proc/self/exe points at; "" where it cannot be read.
inline std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

// Starts argv[0] with argv as a worker of this process: the kernel kills it
// (SIGKILL) when this process ends, by SIGTERM or SIGKILL included; a
// `profile comm` or `validate` stopped by `kill` or `timeout` left its workers
// training to the end of their sweep. The death signal is set in the child
// before exec (exec keeps it), so a parent that dies first is seen too.
// The signal follows the calling *thread*: call it from the main thread (or
// one that lives as long as the workers should). Returns the pid, -1 when
// fork fails; the child exits 127 when exec does.
inline pid_t spawn_worker(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls from here on
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace cellsched
