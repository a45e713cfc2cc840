#include "runner/executor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>

#include "core/error.h"
#include "runner/process.h"

namespace cellsched::runner {

std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

namespace {

class LocalExecutor final : public Executor {
 public:
  std::string name() const override { return "local"; }
  LocalCommand prepare(const ProcessRequest& r) const override {
    LocalCommand c{r.command, r.env, r.workdir};
    c.env.push_back("CUDA_VISIBLE_DEVICES=" + r.gpu_ids);
    return c;
  }
};

// ssh -o BatchMode=yes -tt HOST -- 'cd DIR && exec env K=V ... CMD ARGS'. The
// remote side is a shell command line (that is how ssh works), so every piece
// is single-quoted. -tt gives the remote command a terminal, so it gets
// SIGHUP when the client is stopped.
class SshExecutor final : public Executor {
 public:
  explicit SshExecutor(ExecutorOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "ssh"; }
  LocalCommand prepare(const ProcessRequest& r) const override {
    std::string remote;
    if (!r.workdir.empty()) remote += "cd " + shell_quote(r.workdir) + " && ";
    remote += "exec env";
    for (const std::string& kv : r.env) remote += " " + shell_quote(kv);
    remote += " " + shell_quote("CUDA_VISIBLE_DEVICES=" + r.gpu_ids);
    for (const std::string& a : r.command) remote += " " + shell_quote(a);
    LocalCommand c;
    c.argv = {o_.ssh_program, "-o", "BatchMode=yes", "-tt"};
    c.argv.insert(c.argv.end(), o_.ssh_options.begin(), o_.ssh_options.end());
    c.argv.push_back(r.node->address.empty() ? r.node->name : r.node->address);
    c.argv.push_back("--");
    c.argv.push_back(remote);
    return c;
  }

 private:
  ExecutorOptions o_;
};

// What every srun of ours carries after its placement: the name scancel
// finds, the whole environment (the contract travels in it), the end of the
// step when a task fails, the partition and the working directory; then the
// command.
std::vector<std::string> srun_tail(const ExecutorOptions& o, const std::string& name, const std::string& workdir,
                                   const std::vector<std::string>& command) {
  std::vector<std::string> a = {"--job-name=" + name, "--export=ALL", "--kill-on-bad-exit=1"};
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (!workdir.empty()) a.push_back("--chdir=" + workdir);
  a.push_back("--");
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

// srun -N1 -n1 --nodelist=NODE --gres=gpu:TYPE:N --job-name=NAME -- CMD ARGS.
// Slurm sets CUDA_VISIBLE_DEVICES itself; the rest of the contract travels in
// the environment (--export=ALL).
class SlurmExecutor final : public Executor {
 public:
  explicit SlurmExecutor(ExecutorOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "slurm"; }
  LocalCommand prepare(const ProcessRequest& r) const override {
    LocalCommand c;
    const auto gres = o_.gres_types.find(r.node->name);
    const std::string& type = gres != o_.gres_types.end() ? gres->second : r.node->gpu_type;
    c.argv = {o_.srun, "--nodes=1", "--ntasks=1", "--nodelist=" + r.node->name,
              "--gres=gpu:" + (type.empty() ? "" : type + ":") + std::to_string(r.gpus)};
    const auto tail = srun_tail(o_, r.name, r.workdir, r.command);
    c.argv.insert(c.argv.end(), tail.begin(), tail.end());
    c.env = r.env;
    c.workdir = r.workdir;
    return c;
  }
  bool request_stop(const std::string& name) const override { return slurm_cancel(o_, name, "TERM"); }
  void force_stop(const std::string& name) const override { slurm_kill(o_, name); }

 private:
  ExecutorOptions o_;
};

}  // namespace

std::unique_ptr<Executor> make_executor(const ExecutorOptions& o) {
  if (o.kind == "local") return std::make_unique<LocalExecutor>();
  if (o.kind == "ssh") return std::make_unique<SshExecutor>(o);
  if (o.kind == "slurm") return std::make_unique<SlurmExecutor>(o);
  throw InputError("unknown executor '" + o.kind + "' (local, ssh, slurm)");
}

std::vector<std::string> slurm_launch_argv(const ExecutorOptions& o, const SlurmLaunch& l) {
  std::string list;
  for (const std::string& n : l.nodes) list += (list.empty() ? "" : ",") + n;
  std::vector<std::string> a = {o.srun, "--nodes=" + std::to_string(l.nodes.size()), "--ntasks-per-node=1",
                                "--nodelist=" + list, "--time=" + std::to_string(l.minutes), "--exclusive",
                                "--nice=10000"};
  const auto tail = srun_tail(o, l.name, l.workdir, l.command);
  a.insert(a.end(), tail.begin(), tail.end());
  return a;
}

bool slurm_cancel(const ExecutorOptions& o, const std::string& name, const std::string& signal) {
  const std::string path = find_executable(o.scancel);
  if (path.empty()) return false;
  const std::string by_name = "--name=" + name, sig = "--signal=" + signal;
  const pid_t pid = fork();
  if (pid == 0) {
    if (signal.empty())
      execl(path.c_str(), path.c_str(), "--quiet", by_name.c_str(), static_cast<char*>(nullptr));
    else
      execl(path.c_str(), path.c_str(), "--quiet", sig.c_str(), by_name.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid < 0) return false;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void slurm_kill(const ExecutorOptions& o, const std::string& name) {
  slurm_cancel(o, name, "KILL");
  slurm_cancel(o, name);
}

std::string slurm_name_token(const std::string& path) {
  std::error_code ec;
  std::string abs = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec).string();
  if (abs.empty()) abs = path;
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : abs) {
    h ^= c;
    h *= 1099511628211ull;
  }
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 6; ++i) t += hex[(h >> (4 * i)) & 15];
  return t;
}

}  // namespace cellsched::runner
