// `cellsched sweep`: average JCT against input load, as in Gavel's evaluation.
//
// For each arrival rate r (jobs/hour) a Gavel-style continuous trace is
// generated (generate_trace: Poisson arrivals with mean gap 3600 / r s, the
// same --seed at every rate, so the job mix is the same and only the load
// changes) and replayed under each policy. Like Gavel, the average JCT is
// taken over a steady-state window of jobs, which leaves out the ramp-up
// (an empty cluster) and the drain (no more arrivals): with N jobs sorted by
// id (= arrival order), job i is in the window when
// window_start x N <= i < window_end x N.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/plot.h"
#include "core/cluster.h"
#include "core/error.h"
#include "core/parse_util.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policy.h"

namespace cellsched::cli {
namespace {

std::vector<double> parse_rates(const std::string& s) {
  std::vector<double> rates;
  // An empty item ("2,,4") was dropped silently.
  if (const auto b = s.find_first_not_of(" \t"); b != std::string::npos &&
      (s[b] == ',' || s.find(",,") != std::string::npos || s[s.find_last_not_of(" \t")] == ','))
    throw InputError("--rates: '" + s + "' has an empty item");
  for (const std::string& item : split_list(s)) {
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    // 3600 / rate is the generator's mean gap, which stops at 1e7 s.
    if (used != item.size() || !(v >= 3.6e-4 && v <= 1e6))
      throw InputError("--rates: '" + item + "' is not a number of jobs per hour in [0.00036, 1e6]");
    if (std::find(rates.begin(), rates.end(), v) != rates.end())
      throw InputError("--rates: " + item + " appears twice");
    rates.push_back(v);
  }
  if (rates.empty()) throw InputError("--rates: no rate given (e.g. --rates 2,4,6,8)");
  return rates;
}

// "2", "2.5": the shortest text that reads back to the rate, for labels and
// directory names (6 digits made 2.0000001 and 2.0000002 both "2": one
// rate-2/ overwrote the other's plots).
std::string rate_label(double r) { return detail::format_double(r); }

struct Cell {
  std::string policy;
  double rate = 0;            // jobs/hour
  long window_jobs = 0, window_finished = 0;
  double avg_jct_s = -1;      // over the finished jobs of the window; < 0: none
  long dropped = -1;          // unrunnable jobs left out (--drop-unrunnable; < 0: not asked)
  RunRecord run;
};

// The average JCT over the window [first, last) of job ids (dense from 0 in
// arrival order; --drop-unrunnable leaves gaps, which the window skips).
void window_average(Cell& c, long first, long last) {
  double sum = 0;
  for (const JobResult& r : c.run.jobs) {
    if (r.job_id < first || r.job_id >= last) continue;
    ++c.window_jobs;
    if (!r.finished()) continue;
    ++c.window_finished;
    sum += r.jct_s();
  }
  if (c.window_finished > 0) c.avg_jct_s = sum / static_cast<double>(c.window_finished);
}

// One generated trace per rate, each checked before anything runs: a job no
// GPU type of the cluster can run is bad input, or left out with `drop`
// (counted in `dropped`).
std::vector<Trace> generate_traces(const std::vector<double>& rates, const GenerateOptions& base,
                                   const ThroughputTable& table, const Cluster& cluster,
                                   const ThroughputOracle& oracle, bool drop, std::vector<long>& dropped) {
  std::vector<Trace> traces;
  for (double rate : rates) {
    GenerateOptions g = base;
    g.mean_interarrival_s = 3600.0 / rate;
    Trace trace = generate_trace(table, g);
    trace.name = "generated-" + rate_label(rate) + "jph-" + std::to_string(g.jobs) + "-seed" +
                 std::to_string(g.seed);
    dropped.push_back(drop_unrunnable(trace, cluster, oracle, drop));
    traces.push_back(std::move(trace));
  }
  return traces;
}

nlohmann::json cell_json(const Cell& c) {
  const RunMetrics& m = c.run.metrics;
  const bool done = m.completed > 0;  // else no JCT nor TTD: null, not 0
  nlohmann::json j = {{"policy", c.policy},
                      {"rate_per_hour", c.rate},
                      {"mean_interarrival_s", 3600.0 / c.rate},
                      {"window_jobs", c.window_jobs},
                      {"window_finished", c.window_finished},
                      {"jobs", m.jobs},
                      {"completed", m.completed},
                      {"jct_mean_s", done ? nlohmann::json(m.jct_mean_s) : nlohmann::json(nullptr)},
                      {"jct_p99_s", done ? nlohmann::json(m.jct_p99_s) : nlohmann::json(nullptr)},
                      {"ttd_s", done ? nlohmann::json(m.ttd_s) : nlohmann::json(nullptr)},
                      {"cru", m.cru},
                      {"decision_mean_ms", m.decision_mean_ms},
                      {"rounds", m.rounds},
                      {"wall_s", m.wall_s}};
  j["avg_jct_s"] = c.avg_jct_s >= 0 ? nlohmann::json(c.avg_jct_s) : nlohmann::json(nullptr);
  for (const char* k : {"fairness_rho_mean", "fairness_rho_p95"}) {  // over every finished job
    const auto it = m.extra.find(k);
    j[k] = it != m.extra.end() ? nlohmann::json(it->second) : nlohmann::json(nullptr);
  }
  if (c.dropped >= 0) j["dropped_unrunnable"] = c.dropped;
  return j;
}

// --out: sweep.csv, sweep.json, jct_vs_load.png and each rate's plots.
void write_sweep_files(const std::vector<Cell>& cells, const std::vector<double>& rates,
                       const nlohmann::json& doc, const std::string& out_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw InputError(out_dir + ": cannot create directory: " + ec.message());
  const fs::path d(out_dir);
  {
    std::ofstream f(d / "sweep.csv");
    if (!f) throw InputError((d / "sweep.csv").string() + ": cannot write");
    // Every digit, as sweep.json and the other CSVs keep (it cut to 10).
    const auto full = [](double v) { return detail::format_double(v); };
    f << "policy,rate_per_hour,mean_interarrival_s,window_jobs,window_finished,avg_jct_s,"
         "jobs,completed,jct_mean_s,jct_p99_s,ttd_s,cru,fairness_rho_mean,fairness_rho_p95\n";
    for (const Cell& c : cells) {
      const RunMetrics& m = c.run.metrics;
      f << detail::csv_field(c.policy) << "," << full(c.rate) << "," << full(3600.0 / c.rate) << "," << c.window_jobs << ","
        << c.window_finished << ",";
      if (c.avg_jct_s >= 0) f << full(c.avg_jct_s);
      f << "," << m.jobs << "," << m.completed << ",";
      if (m.completed > 0) f << full(m.jct_mean_s) << "," << full(m.jct_p99_s) << "," << full(m.ttd_s);
      else f << ",,";  // none done: no JCT nor TTD
      f << "," << full(m.cru);
      for (const char* k : {"fairness_rho_mean", "fairness_rho_p95"}) {
        f << ",";
        if (const auto it = m.extra.find(k); it != m.extra.end()) f << full(it->second);
      }
      f << "\n";
    }
    if (!f) throw InputError((d / "sweep.csv").string() + ": write failed");
  }
  {
    std::ofstream f(d / "sweep.json");
    if (!(f << doc.dump(2) << "\n")) throw InputError((d / "sweep.json").string() + ": cannot write");
  }
  std::vector<LoadPoint> points;
  for (const Cell& c : cells) points.push_back({c.policy, c.rate, c.avg_jct_s});
  plot_jct_vs_load(points, out_dir);
  for (double r : rates) {
    std::vector<RunRecord> runs;
    for (const Cell& c : cells)
      if (c.rate == r) runs.push_back(c.run);
    write_plots(runs, (d / ("rate-" + rate_label(r))).string());
  }
}

// The average JCT of each policy (rows) at each rate (columns).
void print_sweep_table(const std::vector<Cell>& cells, const std::vector<std::string>& names,
                       const std::vector<double>& rates) {
  std::vector<std::string> header = {"policy"};
  for (double r : rates) header.push_back(rate_label(r) + " jobs/h");
  Table t(header);
  for (const std::string& name : names) {
    std::vector<std::string> row = {name};
    for (double r : rates) {
      for (const Cell& c : cells) {
        if (c.policy != name || c.rate != r) continue;
        std::string v = hours(c.avg_jct_s);
        if (c.window_finished < c.window_jobs)
          v += " (" + std::to_string(c.window_jobs - c.window_finished) + " unfinished)";
        row.push_back(v);
      }
    }
    t.add(row);
  }
  t.print(std::cout);
}

struct SweepArgs {
  std::string rates, cluster, throughputs, policies, out_dir, reference_gpu, fork_scaling;
  long jobs = 500;
  uint64_t seed = 0;
  double round_s = 360, restart_s = 30, window_start = 0.1, window_end = 0.9, fork_efficiency = 0.5,
         consolidation_s = 0;
  PolicySettings settings;
};

void add_sweep_options(po::options_description& opt, SweepArgs& a) {
  opt.add_options()
      ("rates", po::value(&a.rates)->default_value("2,4,6,8"), "comma-separated arrival rates, jobs/hour (mean inter-arrival 3600/rate s)")
      ("jobs", po::value(&a.jobs)->default_value(500), "jobs per generated trace")
      ("seed", seed_value(&a.seed), "trace generator seed (the same at every rate)")
      ("policy", po::value(&a.policies)->default_value(all_policies()), "comma-separated policies")
      ("cluster", po::value(&a.cluster)->default_value("v100:36,p100:36,k80:36"), "cluster: YAML node list, PAI machine CSV, Alibaba 2023 node CSV, or shorthand")
      ("throughputs", po::value(&a.throughputs)->default_value(default_throughputs()), "measured throughput table (Gavel JSON)")
      ("reference-gpu", po::value(&a.reference_gpu)->default_value("v100"), "GPU type whose throughput turns durations into iterations")
      ("round", po::value(&a.round_s)->default_value(360), "round length, seconds")
      ("restart", po::value(&a.restart_s)->default_value(30), "restart overhead when an allocation changes, seconds")
      ("fork-efficiency", fork_efficiency_value(&a.fork_efficiency), kForkEfficiencyHelp)
      ("fork-scaling", po::value(&a.fork_scaling)->default_value("noise"), kForkScalingHelp)
      ("consolidation", po::value(&a.consolidation_s)->default_value(0), "hadare: seconds a round with copies loses to averaging them")
      ("window-start", po::value(&a.window_start)->default_value(0.1, "0.1"), "steady-state window: first job, as a fraction of the job ids")
      ("window-end", po::value(&a.window_end)->default_value(0.9, "0.9"), "steady-state window: end (exclusive), as a fraction of the job ids")
      ("drop-unrunnable", kDropUnrunnableHelp)
      ("out", po::value(&a.out_dir), "write sweep.csv, sweep.json, jct_vs_load.png and, per rate, rate-<r>/{jct_cdf,utilization}.png here")
      ("json", "print JSON instead of the table");
  add_hadar_options(opt, &a.settings);
}

// The policies named, each known and named once.
std::vector<std::string> policy_names(const SweepArgs& a) {
  const std::vector<std::string> names = split_list(a.policies);
  if (names.empty()) throw InputError("--policy: no policy named");
  for (size_t i = 0; i < names.size(); ++i) {
    make_policy(names[i], a.settings);  // unknown names fail here
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i)
      throw InputError("--policy: " + names[i] + " appears twice");
  }
  return names;
}

void print_sweep_header(const SweepArgs& a, const Cluster& cluster, long first, long last, bool drop,
                        const std::vector<double>& rates, const std::vector<long>& dropped) {
  std::cout << "sweep: " << a.jobs << " generated jobs per rate (seed " << a.seed << "), cluster "
            << cluster.name << " (" << cluster.total_gpus() << " GPUs), round " << a.round_s
            << " s, restart " << a.restart_s << " s\n"
            << "average JCT in hours over jobs " << first << ".." << last - 1
            << " (window " << a.window_start << "-" << a.window_end << " of job ids)\n";
  if (drop) {
    std::cout << "unrunnable jobs dropped:";
    for (size_t ri = 0; ri < rates.size(); ++ri) std::cout << " " << dropped[ri] << " at " << rate_label(rates[ri]) << "/h";
    std::cout << "\n";
  }
  std::cout << "\n";
}

// The --jobs and the steady-state window's job ids [first, last), checked.
std::pair<long, long> job_window(const SweepArgs& a) {
  check_flag_range("jobs", static_cast<double>(a.jobs), 1, kMaxGeneratedJobs);
  if (!(a.window_start >= 0 && a.window_start < a.window_end && a.window_end <= 1))
    throw InputError("--window-start/--window-end: need 0 <= start < end <= 1");
  const long first = static_cast<long>(std::ceil(a.window_start * a.jobs - 1e-9));
  const long last = static_cast<long>(std::ceil(a.window_end * a.jobs - 1e-9));  // exclusive
  if (last <= first)
    throw InputError("the window [" + fixed(a.window_start, 3) + ", " + fixed(a.window_end, 3) +
                     ") of " + std::to_string(a.jobs) + " jobs holds no job");
  return {first, last};
}

// sweep.json and --json, less the results: what was swept, and how.
nlohmann::json sweep_doc(const SweepArgs& a, const Cluster& cluster, const TableOracle& oracle, ForkScaling scaling,
                         const std::vector<double>& rates, const std::vector<std::string>& names, long first,
                         long last) {
  return {{"jobs", a.jobs},
          {"seed", a.seed},
          {"cluster", cluster.name},
          {"cluster_gpus", cluster.total_gpus()},
          {"throughputs", oracle.source()},
          {"round_s", a.round_s},
          {"restart_s", a.restart_s},
          {"fork_efficiency", a.fork_efficiency},
          {"fork_scaling", fork_scaling_name(scaling)},
          {"consolidation_s", a.consolidation_s},
          // What changes the results is recorded (two runs differed with identical headers).
          {"reference_gpu", reference_gpu_flag(a.reference_gpu)},
          {"hadar_spare_exponent", a.settings.hadar_spare_exponent},
          {"hadar_ratio_exponent", a.settings.hadar_ratio_exponent},
          {"hadar_ratio_cap_s", a.settings.hadar_ratio_cap_s},
          {"rates_per_hour", rates},
          {"policies", names},
          {"window",
           {{"start", a.window_start},
            {"end", a.window_end},
            {"first_job", first},
            {"last_job", last - 1}}}};
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& args) {
  po::options_description opt("sweep options");
  SweepArgs a;
  add_sweep_options(opt, a);
  po::variables_map vm;
  if (!parse("cellsched sweep [--rates 2,4,6,8] [--jobs N] [--policy P,...] [options]", args, opt,
             {}, vm))
    return 0;

  // Everything is checked before anything runs.
  const std::vector<double> rates = parse_rates(a.rates);
  check_round_numbers(a.round_s, a.restart_s, a.consolidation_s);
  const auto [first, last] = job_window(a);
  check_policy_settings(a.settings);
  const ForkScaling scaling = fork_model_arg(a.fork_efficiency, a.fork_scaling).scaling;
  const std::vector<std::string> names = policy_names(a);
  const Cluster cluster = load_cluster(a.cluster);
  const ThroughputTable table = load_gavel_throughputs(a.throughputs);
  const TableOracle oracle(table);
  GenerateOptions gen;
  gen.jobs = a.jobs;
  gen.seed = a.seed;
  gen.reference_gpu = reference_gpu_flag(a.reference_gpu);
  const bool drop = vm.count("drop-unrunnable") > 0;
  std::vector<long> dropped;
  const std::vector<Trace> traces = generate_traces(rates, gen, table, cluster, oracle, drop, dropped);
  if (vm.count("out")) {  // fail before the long part
    check_out_dir("out", a.out_dir);
    find_gnuplot();
  }

  SimOptions so;
  so.round_s = a.round_s;
  so.restart_s = a.restart_s;
  so.fork_efficiency = a.fork_efficiency;
  so.fork_scaling = scaling;
  so.consolidation_s = a.consolidation_s;
  std::vector<Cell> cells;
  for (size_t ri = 0; ri < rates.size(); ++ri) {
    for (const std::string& name : names) {
      auto policy = make_policy(name, a.settings);  // fresh state for every run
      so.progress = sim_progress("rate " + rate_label(rates[ri]) + "/h (" + std::to_string(ri + 1) + "/" +
                                 std::to_string(rates.size()) + "), " + name);
      Cell c;
      c.policy = name;
      c.rate = rates[ri];
      c.run = simulate(traces[ri], cluster, oracle, *policy, so);
      c.run.params["seed"] = std::to_string(a.seed);
      c.run.params["rate_per_hour"] = rate_label(rates[ri]);
      if (drop) c.dropped = dropped[ri];
      window_average(c, first, last);
      cells.push_back(std::move(c));
    }
  }
  clear_progress();

  nlohmann::json doc = sweep_doc(a, cluster, oracle, scaling, rates, names, first, last);
  nlohmann::json results = nlohmann::json::array();
  for (const Cell& c : cells) results.push_back(cell_json(c));
  doc["results"] = results;

  if (vm.count("out")) write_sweep_files(cells, rates, doc, a.out_dir);
  if (vm.count("json")) {
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  print_sweep_header(a, cluster, first, last, drop, rates, dropped);
  print_sweep_table(cells, names, rates);
  if (vm.count("out")) std::cout << "\nwrote " << a.out_dir << "/{sweep.csv,sweep.json,jct_vs_load.png}\n";
  return 0;
}

}  // namespace cellsched::cli
