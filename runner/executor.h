// Executors: how one process of a launch reaches its node. Every executor
// turns a command into a local argv that the runner supervises (see
// process.h): `local` runs the command itself, `ssh` runs the OpenSSH client,
// `slurm` runs srun. Stopping signals that local process group (SIGTERM,
// the grace period, SIGKILL); slurm asks Slurm to signal the step instead,
// and cancels the Slurm job at the end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster.h"

namespace cellsched::runner {

// One process to start on one node.
struct ProcessRequest {
  const Node* node = nullptr;
  int gpus = 0;
  std::string gpu_ids;                // "0,1": indices on the node
  std::vector<std::string> command;   // the job's argv
  std::vector<std::string> env;       // the contract's "KEY=VALUE" entries
  std::string workdir;                // the job's working directory
  std::string name;                   // unique per launch process: "cellsched-3fa9c2-L12-0"
};

// What the supervisor runs locally.
struct LocalCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // added to the runner's environment
  std::string workdir;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  virtual LocalCommand prepare(const ProcessRequest& request) const = 0;
  // Asks the process named `name` to stop (SIGTERM where it runs). false:
  // the runner signals the local process group instead, and the local
  // command passes it on (the process itself; ssh's remote side). slurm:
  // `scancel --signal=TERM --name=NAME`, because srun answers a SIGTERM of
  // its own by killing the step (SIGKILL: no final save, no grace period).
  virtual bool request_stop(const std::string& /*name*/) const { return false; }
  // Extra clean-up after the local process group got SIGKILL (slurm: the
  // step's tasks get SIGKILL, then the job is cancelled).
  virtual void force_stop(const std::string& /*name*/) const {}
};

struct ExecutorOptions {
  std::string kind = "local";  // local | ssh | slurm
  // ssh: the client and its options (BatchMode is always added).
  std::string ssh_program = "ssh";
  std::vector<std::string> ssh_options;
  // slurm: the client programs and an optional partition.
  std::string srun = "srun";
  std::string scancel = "scancel";
  std::string partition;
  // Node name -> the GRES type srun asks for (Slurm's own name, see
  // match_slurm_nodes); a node not in it asks for its catalogue type.
  std::map<std::string, std::string> gres_types;
};

// Throws InputError for an unknown kind.
std::unique_ptr<Executor> make_executor(const ExecutorOptions& options);

// The Slurm executor's malleable launch (`cellsched scavenge`): one srun over
// whole nodes, one task per node, within a time limit, exclusive and at the
// lowest priority, so the trainer leaves before the next reservation.
struct SlurmLaunch {
  std::vector<std::string> nodes;
  long minutes = 0;                  // --time
  std::string name;                  // --job-name, what scancel finds
  std::string workdir;               // --chdir
  std::vector<std::string> command;  // wrapper and trainer argv
};
std::vector<std::string> slurm_launch_argv(const ExecutorOptions& options, const SlurmLaunch& launch);
// scancel --quiet [--signal=SIG] --name=NAME through `options.scancel`
// (with a signal: the job's steps get it, the job stays); false when
// scancel is missing or fails.
bool slurm_cancel(const ExecutorOptions& options, const std::string& name, const std::string& signal = "");
// A forced stop: SIGKILL to the named job's tasks, then the job cancelled
// (a plain scancel alone sends SIGTERM and waits Slurm's KillWait, 30 s by
// default, while the caller counts the launch as ended at once).
void slurm_kill(const ExecutorOptions& options, const std::string& name);

// Six hex digits from `path` made absolute (FNV-1a): the part of a Slurm job
// name that tells one state database's (or --state folder's) launches from
// another's, since launch numbers start again in each. Stops and cancels go
// by name.
std::string slurm_name_token(const std::string& path);

// Quotes one argument for a POSIX shell: 'it'\''s' (empty -> '').
std::string shell_quote(const std::string& arg);

}  // namespace cellsched::runner
