// `cellsched simulate`: replay a trace under several policies and compare.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/malle.h"
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

namespace {

// Every policy over the trace, each run with its TTD bound and parameters.
std::vector<RunRecord> run_policies(const std::vector<std::unique_ptr<Policy>>& policies, const ReplayInputs& in,
                                    const ReplayArgs& ra, SimOptions so, bool with_bound) {
  std::optional<Bounds> bounds;
  if (with_bound) bounds.emplace(policies, in);
  std::vector<RunRecord> runs;
  for (size_t pi = 0; pi < policies.size(); ++pi) {
    const auto& policy = policies[pi];
    so.progress = sim_progress("[" + std::to_string(pi + 1) + "/" + std::to_string(policies.size()) + "] " +
                               policy->name());
    RunRecord run = simulate(in.trace, in.cluster, *in.oracle, *policy, so);
    clear_progress();
    warn_unfinished(run, so.horizon_s, std::cerr);
    const double bound = bounds ? bounds->get(*policy) : -1;
    if (bound > 0) {
      run.metrics.extra["ttd_bound_s"] = bound;
      if (run.metrics.completed == run.metrics.jobs)
        run.metrics.extra["ttd_over_bound"] = run.metrics.ttd_s / bound;
    }
    run.params["seed"] = std::to_string(ra.seed);
    run.params["trace_format"] = in.trace.format;
    record_replay_args(ra, run.params);
    if (policy->name() == "hadar" || policy->name() == "hadare") {
      run.params["hadar_spare_exponent"] = num(ra.policy.hadar_spare_exponent);
      run.params["hadar_ratio_exponent"] = num(ra.policy.hadar_ratio_exponent);
      run.params["hadar_ratio_cap_s"] = num(ra.policy.hadar_ratio_cap_s);
    }
    if (ra.drop_unrunnable) run.params["dropped_unrunnable"] = std::to_string(in.dropped);
    runs.push_back(std::move(run));
  }
  return runs;
}

void print_simulation(const std::vector<RunRecord>& runs, const ReplayInputs& in, const ReplayArgs& ra,
                      const std::string& stored_in) {
  const SimOptions& so = in.options;
  std::cout << "trace " << in.trace.name << " (" << count_of(static_cast<long>(in.trace.jobs.size()), "job") << ", " << in.trace.format
            << (ra.drop_unrunnable ? ", " + std::to_string(in.dropped) + " unrunnable dropped" : "") << "), cluster "
            << in.cluster.name << " (" << in.cluster.total_gpus() << " GPUs on "
            << count_of(static_cast<long>(in.cluster.nodes.size()), "node") << "), round " << so.round_s << " s, restart " << so.restart_s << " s\n\n";
  print_comparison(runs, std::cout);
  if (so.replay_failures) {
    std::cout << "\nfailures replayed:\n";
    for (const RunRecord& run : runs)
      std::cout << "  " << run.policy << ": " << fixed(run.metrics.extra.at("failed_attempts"), 0)
                << " failed attempts, " << fixed(run.metrics.extra.at("lost_gpu_s") / 3600, 1)
                << " GPU-hours lost\n";
  }
  if (!stored_in.empty()) std::cout << "\nstored in " << stored_in << " (cellsched db runs)\n";
}

}  // namespace

int cmd_simulate(const std::vector<std::string>& args) {
  po::options_description opt("simulate options");
  ReplayArgs ra;
  HostModeArgs ha;
  std::string policies, db_path, out_dir;
  add_replay_options(opt, ra);
  add_host_mode_options(opt, ha);
  opt.add_options()
      ("policy", po::value(&policies)->default_value(all_policies()),
       (std::string("comma-separated policies (with --malleable: ") + kHostModePolicies + ")").c_str())
      ("db", po::value(&db_path)->default_value(default_db_path()), "SQLite file the runs are stored in")
      ("no-db", "do not store the runs (wins over --db)")
      ("out", po::value(&out_dir), "write summary.csv, summary.json, jobs-<policy>.csv, utilization-<policy>.csv and the plots here")
      ("no-bound", "skip the LP lower bound on TTD")
      ("no-plots", "with --out: skip the PNG plots (jct_cdf.png, utilization.png)")
      ("json", "print JSON instead of the table");
  po::variables_map vm;
  if (!parse("cellsched simulate --trace F --cluster SPEC [options]", args, opt, {}, vm)) return 0;

  // Everything is read and checked before anything runs or is stored.
  check_host_mode_args(ha, vm);
  if (vm.count("malleable"))
    return run_host_mode(ra, ha, split_list(vm["policy"].defaulted() ? kHostModePolicies : policies), vm, db_path,
                         out_dir);
  const std::vector<std::string> names = split_list(policies);
  if (names.empty()) throw InputError("--policy: no policy named");
  std::vector<std::unique_ptr<Policy>> policy_objs;
  check_policy_settings(ra.policy);
  for (const std::string& n : names) {
    policy_objs.push_back(make_policy(n, ra.policy));
    for (size_t k = 0; k + 1 < policy_objs.size(); ++k)
      if (policy_objs[k]->name() == policy_objs.back()->name())
        throw InputError("--policy: " + policy_objs.back()->name() + " is named twice");
  }
  const ReplayInputs in = load_replay_inputs(ra);
  note_wide_jobs(in, std::cerr);
  if (vm.count("out")) check_out_dir("out", out_dir);  // a place the outputs cannot go is found before anything runs
  if (!vm.count("no-db")) db::check_db_file(db_path);  // named now, not after the runs
  std::vector<RunRecord> runs = run_policies(policy_objs, in, ra, in.options, !vm.count("no-bound"));

  // The outputs first: a run is stored only once its files are written.
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
  if (!vm.count("no-db")) {
    db::Store store = db::Store::open(db_path);
    const int64_t cluster_id = store.save_cluster(in.cluster);
    const int64_t trace_id = store.save_trace(in.trace);
    for (RunRecord& run : runs) store.save_run(run, trace_id, cluster_id);
  }
  if (vm.count("json")) std::cout << runs_to_json(runs).dump(2) << "\n";
  else print_simulation(runs, in, ra, vm.count("no-db") ? "" : db_path);
  return 0;
}

}  // namespace cellsched::cli
