// `simulate --malleable`: inputs of the host-scheduler mode and the run.
#include "cli/malle.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/parse_util.h"
#include "scheduler/oracle.h"

namespace cellsched::cli {

using detail::trim;

void add_host_mode_options(po::options_description& opt, HostModeArgs& a) {
  opt.add_options()
      ("malleable", po::value(&a.malleable),
       "host-scheduler mode: the trace is the primary workload (FCFS + EASY backfilling on whole nodes) and "
       "these malleable jobs fill the idle nodes: a mix CSV (name,arrival_s,iterations,max_nodes,rescale_s,"
       "curve,declared) or generate:N[:HOURS] (N jobs of HOURS/10 to HOURS on one node, default 500); policies malletrain, freetrain, malletrain-advisor")
      ("grace", po::value(&a.grace_s)->default_value(60, "60"), "host mode: seconds a malleable job has to leave a claimed node")
      ("window-horizon", po::value(&a.horizon_s)->default_value(3600, "3600"),
       "host mode: longest idle window counted on (s), for nodes no waiting job has reserved")
      ("walltime-factor", po::value(&a.walltime_factor)->default_value(1, "1"),
       "host mode: primary jobs' requested time limit over their runtime (EASY plans with it; >= 1)")
      ("reclaim", po::value(&a.reclaim)->default_value("preempt"),
       "host mode, a node claimed without notice: preempt (the malleable job loses work since its last "
       "checkpoint) | wait (the primary job waits the grace period)")
      ("milp-time-limit", po::value(&a.milp_limit_s)->default_value(1, "1"), "host mode: seconds per MILP, best incumbent past it")
      ("checkpoint-interval", po::value(&a.checkpoint_s)->default_value(600, "600"),
       "host mode: seconds between a malleable job's periodic checkpoints");
}

void check_host_mode_args(const HostModeArgs& a, const po::variables_map& vm) {
  if (!vm.count("malleable")) {
    for (const char* flag : {"grace", "window-horizon", "walltime-factor", "reclaim", "milp-time-limit",
                             "checkpoint-interval"})
      if (vm.count(flag) && !vm[flag].defaulted())
        throw InputError(std::string("--") + flag + " applies only to the host-scheduler mode (--malleable)");
    return;
  }
  // The rigid engine's flags: host mode has no rounds, restarts or copies.
  for (const char* flag : {"round", "restart", "fork-efficiency", "fork-scaling", "consolidation",
                           "hadar-spare-exponent", "hadar-ratio-exponent", "hadar-ratio-cap", "no-bound",
                           "replay-failures"})
    if (vm.count(flag) && !vm[flag].defaulted())
      throw InputError(std::string("--") + flag + " does not apply to the host-scheduler mode (--malleable)");
  check_flag_range("grace", a.grace_s, 0, 86400);
  check_flag_range("window-horizon", a.horizon_s, 1, 1e8);
  check_flag_range("walltime-factor", a.walltime_factor, 1, 1000);
  check_flag_range("milp-time-limit", a.milp_limit_s, 0.001, 3600);
  check_flag_range("checkpoint-interval", a.checkpoint_s, 1, 1e8);
  if (a.reclaim != "preempt" && a.reclaim != "wait")
    throw InputError("--reclaim must be preempt or wait, got '" + a.reclaim + "'");
}

std::vector<HostJob> host_jobs_from_trace(const Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle,
                                          double walltime_factor) {
  const int nodes = static_cast<int>(cluster.nodes.size());
  const Node& node = cluster.nodes.front();
  std::vector<HostJob> out;
  for (const Job& j : trace.jobs) {
    HostJob h;
    h.id = j.id;
    h.arrival_s = j.arrival_s;
    h.nodes = (j.gpus + node.gpus - 1) / node.gpus;
    const std::string who = "job " + std::to_string(j.id) + (j.name.empty() ? "" : " (" + j.name + ")");
    if (h.nodes > nodes)
      throw InputError(trace.source + ": " + who + " needs " + std::to_string(h.nodes) + " nodes of " +
                       std::to_string(node.gpus) + " GPUs; the cluster has " + std::to_string(nodes) +
                       " (use --limit or a larger --cluster)");
    h.runtime_s = j.duration_hint_s;
    if (!(h.runtime_s > 0)) {
      const double rate = oracle.throughput(j, node.gpu_type, j.gpus, h.nodes == 1);
      if (!(rate > 0))
        throw InputError(trace.source + ": " + who + " (" + j.job_type + ") has no throughput on " + node.gpu_type +
                         " at " + std::to_string(j.gpus) + " GPUs and no duration");
      h.runtime_s = j.total_iterations / rate;
    }
    h.walltime_s = h.runtime_s * walltime_factor;
    out.push_back(h);
  }
  return out;
}

}  // namespace cellsched::cli
