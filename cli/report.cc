#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"
#include "core/parse_util.h"

namespace cellsched::cli {

namespace {
std::string ratio(const RunMetrics& m, const char* key, int digits = 3) {
  auto it = m.extra.find(key);
  return it == m.extra.end() ? "-" : fixed(it->second, digits);
}
}  // namespace

nlohmann::json json_count(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::abs(x) <= 9007199254740992.0) return static_cast<int64_t>(x);
  return x;
}

void warn_unfinished(const RunRecord& run, double horizon_s, std::ostream& err) {
  const RunMetrics& m = run.metrics;
  if (m.completed >= m.jobs) return;
  const long left = static_cast<long>(m.jobs - m.completed);
  err << "warning: " << run.policy << " left " << left << " of " << m.jobs << " jobs unfinished";
  if (horizon_s >= 0)
    err << " at --horizon " << fixed(horizon_s, 0) << " s: its JCT, queueing, TTD and fairness (rho) cover only the " << m.completed
        << " jobs it finished, which differ from policy to policy; compare policies on runs that finish every job\n";
  else
    err << ": it placed none of them and no job arrives later (its JCT, queueing, TTD and fairness (rho) cover the " << m.completed
        << " finished jobs)\n";
}

void print_comparison(const std::vector<RunRecord>& runs, std::ostream& out) {
  Table t({"policy", "jobs", "done", "JCT mean h", "median h", "p95 h", "p99 h", "queue mean h",
           "TTD h", "TTD/bound", "CRU", "rho mean", "rho p95", "decide ms", "p99 ms", "rounds", "wall s"});
  for (const RunRecord& r : runs) {
    const RunMetrics& m = r.metrics;
    // No job done (a short --horizon): no JCT or TTD to show, not 0.00, but
    // the CRU of the span run; no CRU where none was measured (host mode
    // measures its span without one).
    const auto jct = [&m](double s) { return m.completed > 0 ? hours(s) : std::string("-"); };
    const bool span = m.ttd_s > 0;
    t.add({r.policy, std::to_string(m.jobs), std::to_string(m.completed), jct(m.jct_mean_s), jct(m.jct_median_s),
           jct(m.jct_p95_s), jct(m.jct_p99_s), hours(m.queue_mean_s), span ? hours(m.ttd_s) : "-",
           ratio(m, "ttd_over_bound"), span || m.cru > 0 ? fixed(m.cru, 3) : "-", ratio(m, "fairness_rho_mean", 2),
           ratio(m, "fairness_rho_p95", 2), fixed(m.decision_mean_ms, 3),
           fixed(m.decision_p99_ms, 3), std::to_string(m.rounds), fixed(m.wall_s, 2)});
  }
  t.print(out);
  // The elastic policies' bound drops the one-gang cap: say so when the column mixes two.
  std::vector<std::string> looser;
  double tight = 0;
  for (const RunRecord& r : runs)
    if (const auto b = r.metrics.extra.find("ttd_bound_s"); b != r.metrics.extra.end()) tight = std::max(tight, b->second);
  for (const RunRecord& r : runs)
    if (const auto b = r.metrics.extra.find("ttd_bound_s"); b != r.metrics.extra.end() && b->second < tight)
      looser.push_back(r.policy);
  if (!looser.empty()) {
    std::string who;
    for (const std::string& p : looser) who += (who.empty() ? "" : ", ") + p;
    out << "TTD/bound: " << who << (looser.size() == 1 ? " is" : " are")
        << " measured against the bound without the one-gang cap (elastic), the others against " << hours(tight)
        << " h\n";
  }
}

nlohmann::json run_to_json(const RunRecord& r, bool with_jobs) {
  nlohmann::json j;
  if (r.id) j["id"] = r.id;
  if (!r.created_at.empty()) j["created_at"] = r.created_at;
  j["policy"] = r.policy;
  j["trace"] = r.trace_name;
  j["cluster"] = r.cluster_name;
  j["cluster_gpus"] = r.cluster_gpus;
  j["throughputs"] = r.throughputs;
  // Parameters are stored as text; numbers go out as numbers (as `sweep
  // --json` and `schedule --json` give them), names as strings.
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : r.params) {
    if (const auto x = detail::to_double(v))
      params[k] = json_count(*x);
    else
      params[k] = v;
  }
  j["params"] = params;
  nlohmann::json m = nlohmann::json::object();
  // Counts print as integers (600, not 600.0); everything else as measured.
  // With no job done there is no JCT: null, not 0 (a --horizon that ends
  // first, or host mode's malleable jobs still training at the end).
  static const std::set<std::string> counts = {"jobs", "completed", "rounds", "failed_attempts", "decisions",
                                               "milp_not_optimal", "rescales", "unannounced_claims", "malleable_jobs",
                                               "malleable_completed", "primary_jobs", "nodes"};
  static const std::set<std::string> jct = {"jct_mean_s", "jct_median_s", "jct_p95_s", "jct_p99_s"};
  for (const auto& [k, v] : metric_pairs(r.metrics)) {
    if ((jct.count(k) && r.metrics.completed == 0) || (k == "ttd_s" && !(v > 0)))
      m[k] = nullptr;
    else if (counts.count(k))
      m[k] = json_count(v);
    else
      m[k] = v;
  }
  j["metrics"] = m;
  if (with_jobs) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const JobResult& x : r.jobs) {
      jobs.push_back({{"job_id", x.job_id}, {"job_type", x.job_type}, {"gpus", x.gpus},
                      {"arrival_s", x.arrival_s}, {"first_start_s", x.first_start_s},
                      {"completion_s", x.completion_s}, {"jct_s", x.jct_s()},
                      {"queueing_s", x.queueing_s()}, {"gpu_seconds", x.gpu_seconds},
                      {"iterations_done", x.iterations_done}, {"restarts", x.restarts}});
    }
    j["jobs"] = jobs;
  }
  return j;
}

nlohmann::json runs_to_json(const std::vector<RunRecord>& runs) {
  nlohmann::json a = nlohmann::json::array();
  for (const RunRecord& r : runs) a.push_back(run_to_json(r, false));
  return {{"runs", a}};
}

void write_jobs_csv(const RunRecord& run, std::ostream& out) {
  out << "job_id,job_type,gpus,arrival_s,first_start_s,completion_s,jct_s,queueing_s,gpu_seconds,"
         "iterations_done,restarts\n";
  const auto d = [](double v) { return detail::format_double(v); };  // every digit
  for (const JobResult& x : run.jobs) {
    out << x.job_id << "," << detail::csv_field(x.job_type) << "," << x.gpus << "," << d(x.arrival_s) << ","
        << d(x.first_start_s) << "," << d(x.completion_s) << "," << d(x.jct_s()) << "," << d(x.queueing_s()) << ","
        << d(x.gpu_seconds) << "," << d(x.iterations_done) << "," << x.restarts << "\n";
  }
}

namespace {
std::ofstream open_out(const std::filesystem::path& p) {
  std::ofstream f(p);
  if (!f) throw InputError(p.string() + ": cannot write");
  return f;
}
}  // namespace

void write_run_files(const std::vector<RunRecord>& runs, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create directory: " + ec.message());
  const std::filesystem::path d(dir);
  {
    // One header for every run (the union of their metrics, in first-seen
    // order): a cell is empty where a run has no such metric, or where it is
    // not defined (no JCT with no job done), as the JSON's null.
    // The bound's two columns are always there (empty with --no-bound or when
    // jobs are left unfinished), so files of different runs line up.
    std::vector<std::string> columns;
    for (const RunRecord& r : runs)
      for (const auto& kv : metric_pairs(r.metrics))
        if (std::find(columns.begin(), columns.end(), kv.first) == columns.end()) columns.push_back(kv.first);
    for (const char* always : {"ttd_bound_s", "ttd_over_bound"})
      if (std::find(columns.begin(), columns.end(), always) == columns.end()) columns.push_back(always);
    auto f = open_out(d / "summary.csv");
    f << "policy";
    for (const std::string& c : columns) f << "," << c;
    f << "\n";
    for (const RunRecord& r : runs) {
      const nlohmann::json m = run_to_json(r, false)["metrics"];
      f << r.policy;
      for (const std::string& c : columns) {
        f << ",";
        if (m.contains(c) && !m[c].is_null()) f << m[c].dump();
      }
      f << "\n";
    }
  }
  open_out(d / "summary.json") << runs_to_json(runs).dump(2) << "\n";
  for (const RunRecord& r : runs) {
    auto jobs = open_out(d / ("jobs-" + r.policy + ".csv"));
    write_jobs_csv(r, jobs);
    auto util = open_out(d / ("utilization-" + r.policy + ".csv"));
    util << "t_s,busy_gpus,total_gpus\n";
    for (const UtilizationPoint& p : r.utilization)
      util << fixed(p.t_s, 3) << "," << p.busy_gpus << "," << r.cluster_gpus << "\n";  // every digit of the time
  }
}

}  // namespace cellsched::cli
