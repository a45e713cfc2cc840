#include "cli/inputs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <ostream>

#include "core/gpu.h"

#include "cli/estimate_common.h"
#include "core/error.h"
#include "core/trace_io.h"
#include "tuner/cells.h"
#include "scheduler/bound.h"
#include "scheduler/measured_cells.h"
#include "scheduler/policy.h"

namespace cellsched::cli {

void add_replay_options(po::options_description& opt, ReplayArgs& a) {
  opt.add_options()
      ("trace", po::value(&a.trace_path)->required(), "trace file (Gavel TSV, Philly CSV or raw JSON log, Tiresias, Crius/Arena, Pollux, Helios, Alibaba PAI 2020 tasks or 2023 pods, own CSV; see --format)")
      ("format", po::value(&a.format)->default_value("auto"), kTraceFormatHelp)
      ("cluster", po::value(&a.cluster_spec)->required(), "cluster: YAML node list, PAI 2020 machine CSV, Alibaba 2023 node CSV, or shorthand v100:36,p100:36,k80:36")
      ("model-map", po::value(&a.model_map), kModelMapHelp)
      ("gpu-map", po::value(&a.gpu_map), kGpuMapHelp)
      ("throughputs", po::value(&a.throughputs)->default_value(default_throughputs()), "measured throughput table (Gavel JSON)")
      ("seed", seed_value(&a.seed), "seed for the Philly import's job types")
      ("reference-gpu", po::value(&a.ref_gpu)->default_value("v100"), "GPU type whose throughput turns Philly durations into iterations")
      ("limit", po::value(&a.limit)->default_value(-1), "read only the first N jobs of the trace, by arrival (-1: all)")
      ("drop-unrunnable", po::bool_switch(&a.drop_unrunnable), kDropUnrunnableHelp)
      ("round", po::value(&a.round_s)->default_value(360), "round length, seconds")
      ("restart", po::value(&a.restart_s)->default_value(30), "restart overhead when an allocation changes, seconds")
      ("fork-efficiency", fork_efficiency_value(&a.fork_efficiency), kForkEfficiencyHelp)
      ("fork-scaling", po::value(&a.fork_scaling)->default_value("noise"), kForkScalingHelp)
      ("consolidation", po::value(&a.consolidation_s)->default_value(0), "hadare: seconds a round with copies loses to averaging them")
      ("horizon", po::value(&a.horizon_s)->default_value(-1), "stop before the first round that starts this many simulated seconds after the first arrival (<0: run to the end)")
      ("oracle", po::value(&a.oracle)->default_value("table"), "throughputs from Gavel's measured table (table), tuned cells of zoo models (cells), or your measured cells (measured, with --cells-table)")
      ("cells-table", po::value(&a.cells_table), "measured: CSV model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s")
      ("locality-penalty", po::value(&a.locality_penalty)->default_value(0.8), "measured: throughput factor for a multi-host cell taken from a one-host one, (0, 1]")
      ("replay-failures", po::bool_switch(&a.replay_failures), "replay the trace's failed attempts (Philly's raw job log): a job fails where its attempt failed and is retried")
      ("cells-precision", po::value(&a.cells_precision), "measured: use the cells of this precision (default: each model's first in the file)")
      ("cells-db", po::value(&a.cells_db), "cells: SQLite file with the profiles (default: cellsched.db); cells are tuned on demand and stored there")
      ("model-mix", po::value(&a.model_mix), "cells: Philly jobs onto zoo models, e.g. gpt-125m@32:0.5,moe-tiny@16:0.5 (model@global batch:weight)")
      ("precision", po::value(&a.precision), "cells: train at fp32, tf32, fp16 or bf16 (default: the model's, else bf16/fp16 where the type has it); cells at an explicit precision are tuned in memory, not stored");
  add_hadar_options(opt, &a.policy);
}

namespace {

// Why no GPU type of the cluster runs `j` at its size with `oracle`.
std::string unrunnable_reason(const Job& j, const std::map<std::string, int>& gpus,
                              const ThroughputOracle& oracle) {
  int most = 0;
  std::string types;
  for (const auto& [type, total] : gpus) {
    most = std::max(most, total);
    types += (types.empty() ? "" : ", ") + type;
  }
  if (j.gpus > most)
    return "it needs " + std::to_string(j.gpus) + " GPUs of one type and the cluster has at most " +
           std::to_string(most) + " of a type";
  std::string only;
  for (const std::string& g : j.gpu_types) only += (only.empty() ? "" : "|") + g;
  return "no GPU type of the cluster (" + types + ") has a throughput for it at " + std::to_string(j.gpus) +
         " GPUs with " + oracle.source() + (only.empty() ? "" : " (the trace allows it only " + only + ")");
}

}  // namespace

long drop_unrunnable(Trace& trace, const Cluster& cluster, const ThroughputOracle& oracle, bool drop) {
  std::map<std::string, int> gpus, largest_node;
  for (const Node& n : cluster.nodes) {
    gpus[n.gpu_type] += n.gpus;
    largest_node[n.gpu_type] = std::max(largest_node[n.gpu_type], n.gpus);
  }
  auto runs = [&](const Job& j) {
    for (const auto& [type, total] : gpus)
      if (j.gpus <= total && oracle.throughput(j, type, j.gpus, j.gpus <= largest_node[type]) > 0) return true;
    return false;
  };
  std::vector<char> bad(trace.jobs.size());
  long n = 0;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    bad[i] = !runs(trace.jobs[i]);
    n += bad[i];
  }
  if (n == 0) return 0;
  const std::string file = trace.source == "generated" ? trace.name : trace.source;
  const auto first = std::find(bad.begin(), bad.end(), 1) - bad.begin();
  const Job& j = trace.jobs[first];
  const std::string job = "job " + std::to_string(j.id) + " (" + (j.name.empty() ? "" : j.name + ": ") +
                          (j.model.empty() ? j.job_type : j.model) + ", " + count_of(j.gpus, "GPU") + ")";
  const std::string total = std::to_string(trace.jobs.size());
  if (!drop)
    fail_input(file, j.line,
               job + " cannot run on cluster " + cluster.name + ": " + unrunnable_reason(j, gpus, oracle) + "; " +
                   std::to_string(n) + " of " + total + " jobs cannot run (--drop-unrunnable leaves them out)");
  if (n == static_cast<long>(trace.jobs.size()))
    fail_input(file, 0, "none of the " + total + " jobs can run on cluster " + cluster.name + " (" + job +
                            ": " + unrunnable_reason(j, gpus, oracle) + ")");
  size_t kept = 0;
  for (size_t i = 0; i < trace.jobs.size(); ++i)
    if (!bad[i] && kept++ != i) trace.jobs[kept - 1] = std::move(trace.jobs[i]);
  trace.jobs.resize(kept);
  return n;
}

namespace {

// The engine's numbers, checked where they enter (before any file is read):
// finite and in range, with the limits in the message.
void need(bool ok, const std::string& what) {
  if (!ok) throw InputError(what);
}

void check_engine_numbers(const ReplayArgs& a) {
  check_round_numbers(a.round_s, a.restart_s, a.consolidation_s);
  fork_model_arg(a.fork_efficiency, a.fork_scaling);
  need(!std::isnan(a.horizon_s) && a.horizon_s <= 1e12,
       "--horizon must be a number of seconds up to 1e12 (negative: none), got " + num(a.horizon_s));
  need(a.horizon_s != 0, "--horizon 0 stops before the first round, so nothing would run: give a positive "
                         "number of seconds, or a negative one (the default) for none");
  check_limit(a.limit);
  need(a.locality_penalty > 0 && a.locality_penalty <= 1,
       "--locality-penalty must be in (0, 1], got " + num(a.locality_penalty));
}

// --oracle cells or measured (table: none yet, made once the table is read),
// and the flags that only they take checked against it.
void make_oracle(const ReplayArgs& a, ReplayInputs& in) {
  if (a.oracle == "cells") {
    // The store's cells are keyed without a precision or a network: an
    // explicit precision, or a cluster that names its NIC, is tuned in memory.
    estimator::Options eo;
    if (!a.precision.empty()) eo.precision = parse_precision(a.precision);
    eo.network_gbps = in.cluster.network_gbps;
    // A database that does not exist is not created: with no profiles, GPU
    // types are modeled and their cells tuned in memory.
    const std::string path = a.cells_db.empty() ? default_db_path() : a.cells_db;
    const bool missing = path != ":memory:" && !std::filesystem::exists(path);
    const bool stored = a.precision.empty() && in.cluster.network_gbps <= 0 && !missing;
    in.cells = std::make_unique<db::CellStore>(db::CellStore::open(stored ? path : ":memory:"));
    // Profiles: the model's newest compute profile (on the type, else
    // anywhere, extrapolated), the newest comm profile on the type if any.
    auto factory = [path, eo](const std::string& model, const std::string& gpu_type)
        -> std::shared_ptr<const estimator::CostModel> {
      const ModelSpec spec = load_model(model);
      // A GPU type with no GPU profile of the model is modeled (no profile needed).
      const ProfileSelection sel = select_profiles(path, spec, gpu_type, 0, 0, false);
      return std::make_shared<estimator::CostModel>(spec, gpu_type, sel.has_compute ? &sel.compute : nullptr,
                                                    sel.comm ? &*sel.comm : nullptr, eo);
    };
    in.oracle = std::make_unique<CellOracle>(*in.cells, factory, in.cluster, tuner::TuneOptions{},
                                             "cells:" + path);
  } else if (a.oracle == "measured") {
    if (a.cells_table.empty()) throw InputError("--oracle measured needs --cells-table FILE");
    in.oracle = std::make_unique<MeasuredCellOracle>(load_measured_cells(a.cells_table),
                                                     "measured:" + a.cells_table,
                                                     a.locality_penalty, a.cells_precision);
  } else if (a.oracle != "table") {
    throw InputError("--oracle must be table, cells or measured, not '" + a.oracle + "'");
  }
  if (a.oracle != "measured" && !a.cells_table.empty())
    throw InputError("--cells-table needs --oracle measured");
  if (a.oracle != "measured" && !a.cells_precision.empty())
    throw InputError("--cells-precision needs --oracle measured");
  if (a.oracle != "cells" && !a.precision.empty()) throw InputError("--precision needs --oracle cells");
  if (a.oracle != "cells" && !a.cells_db.empty()) throw InputError("--cells-db needs --oracle cells");
  if (a.oracle != "cells" && !a.model_mix.empty()) {
    throw InputError("--model-mix needs --oracle cells");
  }
}

}  // namespace

void record_replay_args(const ReplayArgs& a, std::map<std::string, std::string>& params) {
  params["reference_gpu"] = canonical_gpu_name(a.ref_gpu);
  params["oracle"] = a.oracle;
  if (a.limit >= 0) params["limit"] = std::to_string(a.limit);
  const std::pair<const char*, const std::string*> given[] = {
      {"model_mix", &a.model_mix}, {"model_map", &a.model_map}, {"gpu_map", &a.gpu_map},
      {"precision", &a.precision}, {"cells_precision", &a.cells_precision}};
  for (const auto& [key, value] : given)
    if (!value->empty()) params[key] = *value;
  if (a.oracle == "measured") params["locality_penalty"] = num(a.locality_penalty);
}

void note_wide_jobs(const ReplayInputs& in, std::ostream& err) {
  for (const std::string& n : in.cluster.notes) err << "note: " << in.cluster.name << ": " << n << "\n";
  int widest = 0;
  for (const Node& n : in.cluster.nodes) widest = std::max(widest, n.gpus);
  long wide = 0;
  for (const Job& j : in.trace.jobs) wide += j.gpus > widest ? 1 : 0;
  if (wide == 0) return;
  err << "note: " << count_of(wide, "job") << " of " << in.trace.jobs.size() << (wide == 1 ? " asks" : " ask")
      << " for more GPUs than a node has ("
      << widest << "): they run only spread over nodes, at the throughput source's unconsolidated rate\n";
}

void check_round_numbers(double round_s, double restart_s, double consolidation_s) {
  need(std::isfinite(round_s) && round_s >= 1 && round_s <= 1e7,
       "--round must be a number of seconds in [1, 1e7], got " + num(round_s));
  need(std::isfinite(restart_s) && restart_s >= 0 && restart_s < round_s,
       "--restart must be a number of seconds in [0, --round), got " + num(restart_s));
  need(std::isfinite(consolidation_s) && consolidation_s >= 0 && consolidation_s < round_s,
       "--consolidation must be a number of seconds in [0, --round), got " + num(consolidation_s));
}

ReplayInputs load_replay_inputs(const ReplayArgs& a, bool rigid) {
  check_engine_numbers(a);
  ReplayInputs in;
  const auto gpu_map = a.gpu_map.empty() ? std::map<std::string, std::string>{}
                                         : parse_name_map(a.gpu_map, "--gpu-map");
  in.cluster = load_cluster(a.cluster_spec, gpu_map);
  make_oracle(a, in);
  in.table = load_gavel_throughputs(a.throughputs);
  TraceReadOptions ro;
  ro.format = parse_trace_format(a.format);
  ro.table = &in.table;
  ro.seed = a.seed;
  ro.reference_gpu = reference_gpu_flag(a.ref_gpu);
  ro.limit = a.limit;
  ro.gpu_map = gpu_map;
  if (!a.model_map.empty()) ro.model_map = parse_name_map(a.model_map, "--model-map");
  if (a.oracle == "cells") {
    // Zoo models' steps/s on the reference type: the Philly model mix, and
    // model@batch entries of --model-map (Tiresias, Pollux).
    if (!a.model_mix.empty()) ro.model_mix = parse_model_mix(a.model_mix);
    const ThroughputOracle* oracle = in.oracle.get();
    const std::string ref = canonical_gpu_name(a.ref_gpu);
    if (!a.model_mix.empty()) ro.reference_gpu = ref;
    ro.model_rate = [oracle, ref](const std::string& model, int batch, int gpus) {
      Job j;
      j.model = model;
      j.batch_size = batch;
      j.gpus = gpus;
      return oracle->throughput(j, ref, gpus, true);
    };
  }
  in.trace = load_trace(a.trace_path, ro);
  if (!in.oracle) in.oracle = std::make_unique<TableOracle>(in.table);
  // Jobs limited to some GPU types (Alibaba's gpu_spec) see 0 elsewhere.
  if (std::any_of(in.trace.jobs.begin(), in.trace.jobs.end(),
                  [](const Job& j) { return !j.gpu_types.empty(); }))
    in.oracle = std::make_unique<TypeRestrictedOracle>(std::move(in.oracle));
  if (rigid) in.dropped = drop_unrunnable(in.trace, in.cluster, *in.oracle, a.drop_unrunnable);
  else if (a.drop_unrunnable) throw InputError("--drop-unrunnable does not apply to --malleable");
  in.options.round_s = a.round_s;
  in.options.restart_s = a.restart_s;
  in.options.horizon_s = a.horizon_s;
  const ForkModel fork = fork_model_arg(a.fork_efficiency, a.fork_scaling);
  in.options.fork_efficiency = fork.efficiency;
  in.options.fork_scaling = fork.scaling;
  in.options.consolidation_s = a.consolidation_s;
  in.options.replay_failures = a.replay_failures;
  return in;
}

namespace {

// Forking (hadare) and elastic scaling (crius, up to 16 GPUs) may beat the
// plain bound, so they are held to the relaxed one.
bool relaxed_bound(const Policy& policy) { return policy.name() == "hadare" || policy.elastic(); }

}  // namespace

Bounds::Bounds(const std::vector<std::unique_ptr<Policy>>& policies, const ReplayInputs& in) {
  for (const auto& p : policies) {
    const bool relaxed = relaxed_bound(*p);
    if (pending_[relaxed].valid()) continue;
    LowerBoundLp lp = build_lower_bound(in.trace, in.cluster, *in.oracle, 64, relaxed, relaxed ? 16 : 0);
    pending_[relaxed] = std::async(std::launch::async, [lp = std::move(lp)] { return solve_lower_bound(lp); });
  }
}

double Bounds::get(const Policy& policy) {
  const bool relaxed = relaxed_bound(policy);
  if (value_[relaxed] < 0 && pending_[relaxed].valid()) value_[relaxed] = pending_[relaxed].get();
  return value_[relaxed];
}

}  // namespace cellsched::cli
