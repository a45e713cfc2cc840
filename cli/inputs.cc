#include "cli/inputs.h"

#include "core/trace_io.h"
#include "scheduler/bound.h"
#include "scheduler/policy.h"

namespace cellsched::cli {

void add_replay_options(po::options_description& opt, ReplayArgs& a) {
  opt.add_options()
      ("trace", po::value(&a.trace_path)->required(), "trace file (Gavel TSV, legacy TSV, Philly CSV, own CSV)")
      ("format", po::value(&a.format)->default_value("auto"), "trace format: auto|gavel|gavel-legacy|philly|csv")
      ("cluster", po::value(&a.cluster_spec)->required(), "cluster: YAML node list, PAI machine CSV, or shorthand v100:36,p100:36,k80:36")
      ("throughputs", po::value(&a.throughputs)->default_value(default_throughputs()), "measured throughput table (Gavel JSON)")
      ("seed", po::value(&a.seed)->default_value(0), "seed for the Philly import's job types")
      ("reference-gpu", po::value(&a.ref_gpu)->default_value("v100"), "GPU type whose throughput turns Philly durations into iterations")
      ("limit", po::value(&a.limit)->default_value(-1), "read only the first N jobs of the trace")
      ("round", po::value(&a.round_s)->default_value(360), "round length, seconds")
      ("restart", po::value(&a.restart_s)->default_value(30), "restart overhead when an allocation changes, seconds")
      ("fork-efficiency", po::value(&a.fork_efficiency)->default_value(1.0), "hadare: what a forked copy's iteration is worth, (0, 1]")
      ("consolidation", po::value(&a.consolidation_s)->default_value(0), "hadare: seconds a round with copies loses to averaging them")
      ("horizon", po::value(&a.horizon_s)->default_value(-1), "stop after this many simulated seconds (<0: run to the end)");
}

ReplayInputs load_replay_inputs(const ReplayArgs& a) {
  ReplayInputs in;
  in.cluster = load_cluster(a.cluster_spec);
  in.table = load_gavel_throughputs(a.throughputs);
  TraceReadOptions ro;
  ro.format = parse_trace_format(a.format);
  ro.table = &in.table;
  ro.seed = a.seed;
  ro.reference_gpu = a.ref_gpu;
  ro.limit = a.limit;
  in.trace = load_trace(a.trace_path, ro);
  in.oracle = std::make_unique<TableOracle>(in.table);
  in.options.round_s = a.round_s;
  in.options.restart_s = a.restart_s;
  in.options.horizon_s = a.horizon_s;
  in.options.fork_efficiency = a.fork_efficiency;
  in.options.consolidation_s = a.consolidation_s;
  return in;
}

double bound_for(const Policy& policy, const ReplayInputs& in, double (&cache)[2]) {
  // Forking (hadare) and elastic scaling (crius, up to 16 GPUs) may beat the
  // plain bound, so they are held to the relaxed one.
  const bool relaxed = policy.name() == "hadare" || policy.elastic();
  double& b = cache[relaxed];
  if (b < 0) b = makespan_lower_bound(in.trace, in.cluster, *in.oracle, 64, relaxed, relaxed ? 16 : 0);
  return b;
}

}  // namespace cellsched::cli
