// `cellsched simulate`: replay a trace under several policies and compare.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/plot.h"
#include "cli/report.h"
#include "core/cluster.h"
#include "core/error.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "db/store.h"
#include "scheduler/bound.h"
#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"

namespace cellsched::cli {

int cmd_simulate(const std::vector<std::string>& args) {
  po::options_description opt("simulate options");
  std::string trace_path, format, cluster_spec, throughputs, policies, db_path, out_dir, ref_gpu;
  double round_s, restart_s, horizon_s, fork_efficiency, consolidation_s;
  uint64_t seed;
  long limit;
  opt.add_options()
      ("trace", po::value(&trace_path)->required(), "trace file (Gavel TSV, legacy TSV, Philly CSV, own CSV)")
      ("format", po::value(&format)->default_value("auto"), "trace format: auto|gavel|gavel-legacy|philly|csv")
      ("cluster", po::value(&cluster_spec)->required(), "cluster: YAML node list, PAI machine CSV, or shorthand v100:36,p100:36,k80:36")
      ("throughputs", po::value(&throughputs)->default_value(default_throughputs()), "measured throughput table (Gavel JSON)")
      ("policy", po::value(&policies)->default_value(all_policies()), "comma-separated policies")
      ("round", po::value(&round_s)->default_value(360), "round length, seconds")
      ("restart", po::value(&restart_s)->default_value(30), "restart overhead when an allocation changes, seconds")
      ("fork-efficiency", po::value(&fork_efficiency)->default_value(1.0), "hadare: what a forked copy's iteration is worth, (0, 1]")
      ("consolidation", po::value(&consolidation_s)->default_value(0), "hadare: seconds a round with copies loses to averaging them")
      ("horizon", po::value(&horizon_s)->default_value(-1), "stop after this many simulated seconds (<0: run to the end)")
      ("seed", po::value(&seed)->default_value(0), "seed for the Philly import's job types")
      ("reference-gpu", po::value(&ref_gpu)->default_value("v100"), "GPU type whose throughput turns Philly durations into iterations")
      ("limit", po::value(&limit)->default_value(-1), "read only the first N jobs of the trace")
      ("db", po::value(&db_path)->default_value(default_db_path()), "SQLite file the runs are stored in")
      ("no-db", "do not store the runs")
      ("out", po::value(&out_dir), "write summary.csv, summary.json, jobs-<policy>.csv, utilization-<policy>.csv and the plots here")
      ("no-bound", "skip the LP lower bound on TTD")
      ("no-plots", "with --out: skip the PNG plots (jct_cdf.png, utilization.png)")
      ("json", "print JSON instead of the table");
  po::variables_map vm;
  if (!parse("cellsched simulate --trace F --cluster SPEC [options]", args, opt, {}, vm)) return 0;

  // Everything is read and checked before anything runs or is stored.
  const std::vector<std::string> names = split_list(policies);
  if (names.empty()) throw InputError("--policy: no policy named");
  std::vector<std::unique_ptr<Policy>> policy_objs;
  for (const std::string& n : names) policy_objs.push_back(make_policy(n));
  const Cluster cluster = load_cluster(cluster_spec);
  const ThroughputTable table = load_gavel_throughputs(throughputs);
  TraceReadOptions ro;
  ro.format = parse_trace_format(format);
  ro.table = &table;
  ro.seed = seed;
  ro.reference_gpu = ref_gpu;
  ro.limit = limit;
  const Trace trace = load_trace(trace_path, ro);
  const TableOracle oracle(table);

  SimOptions so;
  so.round_s = round_s;
  so.restart_s = restart_s;
  so.horizon_s = horizon_s;
  so.fork_efficiency = fork_efficiency;
  so.consolidation_s = consolidation_s;
  // DESIGN "Metrics": every run reports the LP lower bound on TTD. Forking
  // (hadare) may beat the plain bound, so it is held to the forking one.
  double bounds[2] = {-1, -1};
  auto bound_for = [&](bool forking) {
    double& b = bounds[forking];
    if (b < 0 && !vm.count("no-bound")) b = makespan_lower_bound(trace, cluster, oracle, 64, forking);
    return b;
  };
  std::vector<RunRecord> runs;
  for (auto& policy : policy_objs) {
    if (stderr_is_tty()) {
      const std::string label = policy->name();
      so.progress = [label](double t, long done, long total) {
        std::cerr << "\r" << label << ": t=" << fixed(t / 3600, 1) << " h, " << done << "/"
                  << total << " jobs done   " << std::flush;
      };
    }
    RunRecord run = simulate(trace, cluster, oracle, *policy, so);
    if (stderr_is_tty()) std::cerr << "\r" << std::string(60, ' ') << "\r";
    const double bound = bound_for(policy->name() == "hadare");
    if (bound > 0) {
      run.metrics.extra["ttd_bound_s"] = bound;
      if (run.metrics.completed == run.metrics.jobs)
        run.metrics.extra["ttd_over_bound"] = run.metrics.ttd_s / bound;
    }
    run.params["seed"] = std::to_string(seed);
    run.params["trace_format"] = trace.format;
    runs.push_back(std::move(run));
  }

  if (!vm.count("no-db")) {
    db::Store store = db::Store::open(db_path);
    const int64_t cluster_id = store.save_cluster(cluster);
    const int64_t trace_id = store.save_trace(trace);
    for (RunRecord& run : runs) store.save_run(run, trace_id, cluster_id);
  }
  if (vm.count("out")) {
    write_run_files(runs, out_dir);
    if (!vm.count("no-plots")) {
      try {
        write_plots(runs, out_dir);
      } catch (const std::runtime_error& e) {
        std::cerr << "cellsched simulate: plots skipped: " << e.what() << "\n";
      }
    }
  }
  if (vm.count("json")) {
    std::cout << runs_to_json(runs).dump(2) << "\n";
  } else {
    std::cout << "trace " << trace.name << " (" << trace.jobs.size() << " jobs, " << trace.format
              << "), cluster " << cluster.name << " (" << cluster.total_gpus() << " GPUs on "
              << cluster.nodes.size() << " nodes), round " << round_s << " s, restart "
              << restart_s << " s\n\n";
    print_comparison(runs, std::cout);
    if (!vm.count("no-db")) std::cout << "\nstored in " << db_path << " (cellsched db runs)\n";
  }
  return 0;
}

}  // namespace cellsched::cli
