// Checkpoint averaging by a helper process (cellsched-torch average).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "runner/checkpoint.h"

extern char** environ;

namespace cellsched::runner {
namespace {

class ProcessAverager final : public CheckpointAverager {
 public:
  explicit ProcessAverager(std::string helper) : helper_(std::move(helper)) {}
  std::string name() const override { return "libtorch (cellsched-torch)"; }

  void average(const std::vector<std::string>& inputs, const std::vector<double>& weights,
               const std::string& output) const override {
    std::string w;
    for (double x : weights) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", x);
      w += (w.empty() ? "" : ",") + std::string(buf);
    }
    std::vector<std::string> argv{helper_, "average", "--out", output, "--weights", w, "--"};
    argv.insert(argv.end(), inputs.begin(), inputs.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    // Its messages go to a file beside the output, read back on failure.
    const std::string err_path = output + ".average-err";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, helper_.c_str(), &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + helper_ + " to average checkpoints");
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::stringstream msg;
    msg << std::ifstream(err_path).rdbuf();
    std::remove(err_path.c_str());
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      std::string m = msg.str();
      while (!m.empty() && m.back() == '\n') m.pop_back();
      throw std::runtime_error(m.empty() ? helper_ + " average failed" : m);
    }
  }

 private:
  std::string helper_;
};

}  // namespace

std::unique_ptr<CheckpointAverager> make_process_averager(const std::string& helper) {
  return std::make_unique<ProcessAverager>(helper);
}

}  // namespace cellsched::runner
