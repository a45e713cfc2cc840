// `simulate --malleable`: the host-scheduler mode (MalleTrain). The primary
// trace runs under FCFS + EASY backfilling on whole nodes; malleable jobs fill
// the nodes it leaves idle under malletrain, freetrain or the advisor variant.
#pragma once

#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/malle_mix.h"
#include "core/throughput.h"
#include "scheduler/oracle.h"
#include "scheduler/malle.h"

namespace cellsched::cli {

struct HostModeArgs {
  std::string malleable;  // a mix CSV, or generate:N
  double grace_s = 60, horizon_s = 3600, walltime_factor = 1, milp_limit_s = 1, checkpoint_s = 600;
  std::string reclaim = "preempt";
};

// --malleable --grace --window-horizon --walltime-factor --reclaim
// --milp-time-limit --checkpoint-interval
void add_host_mode_options(po::options_description& opt, HostModeArgs& a);

// Each host-mode number in range, and without --malleable none of those flags
// given (they would be ignored); InputError naming the flag otherwise.
void check_host_mode_args(const HostModeArgs& a, const po::variables_map& vm);

// The policies of this mode, comma-separated (its --policy default).
inline constexpr const char* kHostModePolicies = "malletrain,freetrain,malletrain-advisor";

// load_malleable_mix: cli/malle_mix.h.

// Rigid node jobs from a trace: ceil(GPUs / GPUs per node) nodes, the
// trace's duration (else iterations at the table's throughput), walltime =
// runtime x `walltime_factor`. Throws InputError naming a job that cannot run.
std::vector<HostJob> host_jobs_from_trace(const Trace& trace, const Cluster& cluster,
                                          const ThroughputOracle& oracle, double walltime_factor);

// The whole mode: runs, writes --out files, stores, prints. Returns the exit
// status. `ha` has passed check_host_mode_args (cmd_simulate checks it).
int run_host_mode(const ReplayArgs& ra, const HostModeArgs& ha, const std::vector<std::string>& policies,
                  const po::variables_map& vm, const std::string& db_path, const std::string& out_dir);

}  // namespace cellsched::cli
