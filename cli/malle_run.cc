// `simulate --malleable`: runs the host-scheduler mode, writes its files and
// plot, stores the runs and the advisor's curves, prints the table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/malle.h"
#include "cli/plot.h"
#include "core/error.h"
#include "core/run.h"
#include "core/stats.h"
#include "db/store.h"
#include "scheduler/milp.h"

namespace cellsched::cli {

namespace {

// Time-weighted occupancy in `bins` equal intervals of [0, span].
std::vector<OccupancyPoint> binned(const MalleResult& r, int bins) {
  std::vector<OccupancyPoint> out;
  if (r.span_s <= 0 || r.occupancy.empty()) return out;
  const double w = r.span_s / bins;
  size_t k = 0;
  for (int b = 0; b < bins; ++b) {
    const double a = b * w, e = a + w;
    double pri = 0, mal = 0;
    while (k + 1 < r.occupancy.size() && r.occupancy[k + 1].t_s <= a) ++k;
    for (size_t i = k; i < r.occupancy.size() && r.occupancy[i].t_s < e; ++i) {
      const double s = std::max(a, r.occupancy[i].t_s);
      const double f = i + 1 < r.occupancy.size() ? std::min(e, r.occupancy[i + 1].t_s) : e;
      if (f <= s) continue;
      pri += r.occupancy[i].primary * (f - s);
      mal += r.occupancy[i].malleable * (f - s);
    }
    OccupancyPoint p;
    p.t_s = a;
    p.primary = static_cast<int>(std::lround(pri / w));
    p.malleable = static_cast<int>(std::lround(mal / w));
    p.idle = r.nodes - p.primary - p.malleable;
    out.push_back(p);
  }
  return out;
}

nlohmann::json entry(const MalleResult& r) {
  nlohmann::json j;
  j["policy"] = r.policy;
  j["malleable_throughput"] = r.malleable_throughput();
  j["idle_node_time_used"] = r.idle_node_time_used();
  j["primary_delay_s"] = r.primary_delay_max_s;
  j["primary_delay_mean_s"] = r.primary_delay_mean_s;
  j["milp_solve_ms_p99"] = percentile(r.decision_ms, 99);
  j["milp_solve_ms_mean"] = mean(r.decision_ms);  // 0 when none was solved
  j["decisions"] = r.decisions;
  j["milp_not_optimal"] = r.milp_not_optimal;
  j["rescales"] = r.rescales;
  j["unannounced_claims"] = r.unannounced_claims;
  j["iterations"] = r.iterations;
  j["lost_iterations"] = r.lost_iterations;
  j["malleable_jobs"] = r.malleable_jobs;
  j["malleable_completed"] = r.malleable_completed;
  j["primary_jobs"] = r.primary_jobs;
  j["nodes"] = r.nodes;
  // The malleable jobs' completion and queueing times, by the one definition
  // (null when none finished, or none started).
  const RunMetrics m = compute_metrics(r.jobs, 0, {}, 0, 0);
  const bool started = std::any_of(r.jobs.begin(), r.jobs.end(), [](const JobResult& x) { return x.first_start_s >= 0; });
  j["jct_mean_h"] = m.completed > 0 ? nlohmann::json(m.jct_mean_s / 3600) : nlohmann::json();
  j["jct_median_h"] = m.completed > 0 ? nlohmann::json(m.jct_median_s / 3600) : nlohmann::json();
  j["queue_mean_h"] = started ? nlohmann::json(m.queue_mean_s / 3600) : nlohmann::json();
  j["span_h"] = r.span_s / 3600;
  j["idle_node_hours"] = r.idle_node_s / 3600;
  j["malleable_node_hours"] = r.malleable_node_s / 3600;
  if (!r.curves.empty()) {
    std::vector<double> e3, ef;
    long within = 0;
    for (const LearnedCurve& c : r.curves) {
      if (c.error_after_3 >= 0) {
        e3.push_back(c.error_after_3);
        within += c.error_after_3 <= 0.10;
      }
      ef.push_back(c.error);
    }
    j["advisor"] = {{"jobs_sampled", r.curves.size()},
                    {"jobs_with_3_windows", e3.size()},
                    {"error_after_3_median", percentile(e3, 50)},
                    {"error_after_3_max", e3.empty() ? 0.0 : *std::max_element(e3.begin(), e3.end())},
                    {"within_10pct_after_3", within},
                    {"final_error_median", percentile(ef, 50)}};
  }
  return j;
}

void write_files(const std::vector<MalleResult>& results, const nlohmann::json& summary, const std::string& dir,
                 bool plots) {
  std::ofstream(dir + "/summary.json") << summary.dump(2) << "\n";
  std::ofstream dat(dir + "/occupancy.dat");
  for (const MalleResult& r : results) {
    std::ofstream csv(dir + "/occupancy-" + r.policy + ".csv");
    csv << "t_s,primary_nodes,malleable_nodes,idle_nodes\n";
    for (const OccupancyPoint& p : r.occupancy) csv << p.t_s << "," << p.primary << "," << p.malleable << "," << p.idle << "\n";
    dat << "# " << r.policy << "\n";
    for (const OccupancyPoint& p : binned(r, 1000))
      dat << p.t_s / 3600 << " " << p.primary << " " << p.primary + p.malleable << " " << r.nodes << "\n";
    dat << "\n\n";
    if (!r.curves.empty()) {
      std::ofstream c(dir + "/curves-" + r.policy + ".csv");
      c << "job,name,t1,sigma,samples,error_after_3,error\n";
      for (const LearnedCurve& l : r.curves)
        c << l.job << "," << l.name << "," << l.t1 << "," << l.sigma << "," << l.samples << "," << l.error_after_3 << ","
          << l.error << "\n";
    }
  }
  dat.close();
  if (!plots) return;
  const std::string gp = dir + "/occupancy.gp";
  std::ofstream s(gp);
  s << "set terminal pngcairo size 1100," << 260 * results.size() + 60 << " font ',10'\n"
    << "set output '" << dir << "/occupancy.png'\n"
    << "set multiplot layout " << results.size() << ",1 title 'Node occupancy: primary (FCFS + EASY) vs malleable vs idle'\n"
    << "set ylabel 'nodes'\nset key outside right\nset style fill solid 0.8 noborder\n";
  for (size_t i = 0; i < results.size(); ++i) {
    s << "set title '" << results[i].policy << "'\n";
    if (i + 1 == results.size()) s << "set xlabel 'time (h)'\n";
    s << "plot '" << dir << "/occupancy.dat' index " << i << " using 1:(0):2 with filledcurves lc rgb '#4477aa' title 'primary', "
      << "'' index " << i << " using 1:2:3 with filledcurves lc rgb '#228833' title 'malleable', "
      << "'' index " << i << " using 1:3:4 with filledcurves lc rgb '#dddddd' title 'idle'\n";
  }
  s << "unset multiplot\n";
  s.close();
  run_gnuplot(gp);
}

RunRecord to_record(const MalleResult& r, const ReplayInputs& in, const HostModeArgs& ha, double wall_s) {
  RunRecord run;
  run.policy = r.policy;
  run.trace_name = in.trace.name;
  run.cluster_name = in.cluster.name;
  run.cluster_gpus = in.cluster.total_gpus();
  run.throughputs = in.table.source;
  run.params = {{"mode", "host"}, {"malleable", ha.malleable}, {"grace_s", num(ha.grace_s)},
                {"window_horizon_s", num(ha.horizon_s)}, {"walltime_factor", num(ha.walltime_factor)},
                {"reclaim", ha.reclaim}, {"milp_time_limit_s", num(ha.milp_limit_s)},
                {"checkpoint_s", num(ha.checkpoint_s)}};
  // JCT and queueing of the malleable jobs, by the one definition; the span
  // and CRU below are host mode's own (the primary workload sets the span).
  const int gpn = in.cluster.nodes.front().gpus;
  for (JobResult j : r.jobs) {
    j.gpus *= gpn;
    j.gpu_seconds *= gpn;
    run.jobs.push_back(std::move(j));
  }
  // The allocator's solve times are the decision times (mean, p99 and max).
  run.metrics = compute_metrics(run.jobs, run.cluster_gpus, r.decision_ms, r.decisions, wall_s);
  run.metrics.jobs = r.malleable_jobs;
  run.metrics.completed = r.malleable_completed;
  run.metrics.ttd_s = r.span_s;
  run.metrics.cru = r.nodes > 0 && r.span_s > 0 ? 1 - (r.idle_node_s - r.malleable_node_s) / (r.nodes * r.span_s) : 0;
  const nlohmann::json e = entry(r);
  for (const auto& [k, v] : e.items())  // the hours are in jct_*_s and queue_*_s already
    if (v.is_number() && k != "jct_mean_h" && k != "jct_median_h" && k != "queue_mean_h")
      run.metrics.extra[k] = v.get<double>();
  for (const OccupancyPoint& p : binned(r, 1000)) run.utilization.push_back({p.t_s, (p.primary + p.malleable) * gpn});
  return run;
}

}  // namespace

int run_host_mode(const ReplayArgs& ra, const HostModeArgs& ha, const std::vector<std::string>& names,
                  const po::variables_map& vm, const std::string& db_path, const std::string& out_dir) {
  // As the rigid mode: none named ran nothing, exit 0, and stored a trace;
  // a policy named twice ran and was stored twice.
  if (names.empty()) throw InputError("--policy: no policy named");
  std::vector<MallePolicy> policies;
  for (const std::string& n : names) {
    try {
      policies.push_back(parse_malle_policy(n));
    } catch (const std::invalid_argument& e) {
      throw InputError(std::string("--policy: ") + e.what());
    }
    for (size_t k = 0; k + 1 < policies.size(); ++k)
      if (policies[k] == policies.back())
        throw InputError(std::string("--policy: ") + malle_policy_name(policies.back()) + " is named twice");
  }
  const ReplayInputs in = load_replay_inputs(ra, false);
  // Nodes are interchangeable in host mode: a k80 node beside v100s ran as a v100.
  const Node& first = in.cluster.nodes.front();
  for (const Node& n : in.cluster.nodes) {
    if (n.gpus != first.gpus)
      throw InputError("--cluster " + in.cluster.name + ": host mode needs nodes of one size (node " + n.name + " has " +
                       std::to_string(n.gpus) + " GPUs, " + first.name + " " + std::to_string(first.gpus) + ")");
    if (n.gpu_type != first.gpu_type)
      throw InputError("--cluster " + in.cluster.name + ": host mode needs nodes of one GPU type (node " + n.name +
                       " has " + n.gpu_type + ", " + first.name + " " + first.gpu_type + ")");
  }
  const std::vector<HostJob> primary = host_jobs_from_trace(in.trace, in.cluster, *in.oracle, ha.walltime_factor);
  const std::vector<MalleableJob> mix = load_malleable_mix(ha.malleable, in.table, *in.oracle, in.cluster, ra.seed);
  if (vm.count("out")) check_out_dir("out", out_dir);
  if (!vm.count("no-db")) db::check_db_file(db_path);  // named now, not after the runs
  MalleOptions o;
  o.grace_s = ha.grace_s;
  o.horizon_s = ha.horizon_s;
  o.checkpoint_s = ha.checkpoint_s;
  o.milp_time_limit_s = ha.milp_limit_s;
  o.seed = ra.seed;
  o.reclaim = ha.reclaim == "wait" ? Reclaim::wait : Reclaim::preempt;
  if (ra.horizon_s > 0) o.end_s = ra.horizon_s;
  // The MILP's decision times are its solves, not the solver library's load.
  if (std::any_of(policies.begin(), policies.end(), [](MallePolicy p) { return p != MallePolicy::freetrain; }))
    load_solvers();
  std::vector<MalleResult> results;
  std::vector<double> walls;
  for (size_t i = 0; i < policies.size(); ++i) {
    o.progress = sim_progress("[" + std::to_string(i + 1) + "/" + std::to_string(policies.size()) + "] " +
                              malle_policy_name(policies[i]));
    const auto t0 = std::chrono::steady_clock::now();
    results.push_back(simulate_malleable(primary, static_cast<int>(in.cluster.nodes.size()), mix, policies[i], o));
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    clear_progress();
  }
  nlohmann::json summary = nlohmann::json::array();
  for (const MalleResult& r : results) summary.push_back(entry(r));
  if (vm.count("out")) {
    try {
      write_files(results, summary, out_dir, !vm.count("no-plots"));
    } catch (const std::runtime_error& e) {
      std::cerr << "cellsched simulate: plot skipped: " << e.what() << "\n";
    }
  }
  if (!vm.count("no-db")) {
    db::Store store = db::Store::open(db_path);
    const int64_t cluster_id = store.save_cluster(in.cluster);
    const int64_t trace_id = store.save_trace(in.trace);
    for (size_t i = 0; i < results.size(); ++i) {
      RunRecord run = to_record(results[i], in, ha, walls[i]);
      store.save_run(run, trace_id, cluster_id);
      std::vector<db::LearnedCurveRow> rows;
      for (const LearnedCurve& c : results[i].curves)
        rows.push_back({c.job, c.name, c.t1, c.sigma, c.samples, c.error_after_3, c.error});
      if (!rows.empty()) store.save_learned_curves(run.id, rows);
    }
  }
  if (vm.count("json")) {
    std::cout << summary.dump(2) << "\n";
    return 0;
  }
  std::cout << "host mode: primary " << in.trace.name << " (" << count_of(static_cast<long>(primary.size()), "job") << ", FCFS + EASY, walltime x"
            << num(ha.walltime_factor) << ") on " << count_of(static_cast<long>(in.cluster.nodes.size()), "node") << " of "
            << count_of(in.cluster.nodes.front().gpus, "GPU") << "; " << count_of(static_cast<long>(mix.size()), "malleable job") << "; grace " << num(ha.grace_s)
            << " s, reclaim " << ha.reclaim << "\n\n";
  Table t({"policy", "malleable thr (node-eq)", "idle used %", "done", "JCT mean h", "rescales", "claims", "lost %",
           "primary delay max s", "decide p99 ms"});
  for (size_t i = 0; i < results.size(); ++i) {
    const MalleResult& r = results[i];
    const double trained = r.iterations + r.lost_iterations;
    const nlohmann::json& jct = summary[i]["jct_mean_h"];
    t.add({r.policy, fixed(r.malleable_throughput(), 2), fixed(100 * r.idle_node_time_used(), 1),
           std::to_string(r.malleable_completed) + "/" + std::to_string(r.malleable_jobs),
           jct.is_null() ? "-" : fixed(jct.get<double>(), 2), std::to_string(r.rescales),
           std::to_string(r.unannounced_claims), fixed(trained > 0 ? 100 * r.lost_iterations / trained : 0, 2),
           fixed(r.primary_delay_max_s, 1), fixed(percentile(r.decision_ms, 99), 2)});
  }
  t.print(std::cout);
  std::cout << "\nidle node-hours left by the primary workload: " << fixed(results.empty() ? 0 : results[0].idle_node_s / 3600, 1)
            << " of " << fixed(results.empty() ? 0 : results[0].nodes * results[0].span_s / 3600, 1) << "\n";
  for (const MalleResult& r : results) {
    if (r.curves.empty()) continue;
    const nlohmann::json a = entry(r)["advisor"];
    std::cout << r.policy << ": curves learned for " << a["jobs_sampled"].get<long>() << " jobs; after 3 windows ("
              << a["jobs_with_3_windows"].get<long>() << " jobs) median error " << fixed(100 * a["error_after_3_median"].get<double>(), 1)
              << " %, worst " << fixed(100 * a["error_after_3_max"].get<double>(), 1) << " %, within 10 %: "
              << a["within_10pct_after_3"].get<long>() << "\n";
  }
  if (!vm.count("no-db")) std::cout << "\nstored in " << db_path << " (cellsched db runs)\n";
  return 0;
}

}  // namespace cellsched::cli
