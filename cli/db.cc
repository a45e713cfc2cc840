// `cellsched db runs|show`.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/parse_util.h"
#include "db/store.h"

namespace cellsched::cli {
namespace {

db::Store open_existing(const std::string& path) {
  if (path != ":memory:" && !std::filesystem::exists(path))
    throw InputError(path + ": no such database (run `cellsched simulate` first, or pass --db)");
  return db::Store::open(path);
}

int db_runs(const std::vector<std::string>& args) {
  po::options_description opt("db runs options");
  std::string path;
  opt.add_options()
      ("db", po::value(&path)->default_value(default_db_path()), "SQLite file")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched db runs [--db PATH] [--json]", args, opt, {}, vm)) return 0;
  const db::Store store = open_existing(path);
  const auto runs = store.list_runs();
  if (vm.count("json")) {
    nlohmann::json a = nlohmann::json::array();
    // No job done: no JCT nor TTD, null as in every run's JSON (not 0.0).
    const auto done = [](const auto& r, double v) { return r.completed > 0 ? nlohmann::json(v) : nlohmann::json(); };
    for (const auto& r : runs)
      a.push_back({{"id", r.id}, {"created_at", r.created_at}, {"policy", r.policy},
                   {"trace", r.trace_name}, {"cluster", r.cluster_name}, {"jobs", r.jobs},
                   {"completed", r.completed}, {"jct_mean_s", done(r, r.jct_mean_s)}, {"ttd_s", done(r, r.ttd_s)},
                   {"cru", r.cru}, {"decision_mean_ms", r.decision_mean_ms}});
    std::cout << a.dump(2) << "\n";
    return 0;
  }
  Table t({"run", "created (UTC)", "policy", "trace", "cluster", "jobs", "done", "JCT mean h",
           "TTD h", "CRU", "decide ms"});
  for (const auto& r : runs)
    t.add({std::to_string(r.id), r.created_at, r.policy, r.trace_name, r.cluster_name,
           std::to_string(r.jobs), std::to_string(r.completed), r.completed > 0 ? hours(r.jct_mean_s) : "-",
           r.completed > 0 ? hours(r.ttd_s) : "-", fixed(r.cru, 3), fixed(r.decision_mean_ms, 3)});
  t.print(std::cout);
  return 0;
}

int db_show(const std::vector<std::string>& args) {
  po::options_description opt("db show options");
  std::string path, jobs_csv;
  std::vector<std::string> id_args;
  opt.add_options()
      ("run", po::value(&id_args)->multitoken()->required(), "run id(s); several are compared side by side")
      ("db", po::value(&path)->default_value(default_db_path()), "SQLite file")
      ("jobs-csv", po::value(&jobs_csv), "also write the per-job results of the (first) run to this CSV")
      ("json", "print JSON (with per-job results)");
  po::positional_options_description pos;
  pos.add("run", -1);
  po::variables_map vm;
  if (!parse("cellsched db show RUN [RUN ...] [--db PATH] [--json]", args, opt, pos, vm)) return 0;
  std::vector<int64_t> ids;
  for (const std::string& a : id_args) {
    const auto id = detail::to_int(a);
    if (!id || *id < 1)
      throw InputError("a run id is a whole number from 1 (cellsched db runs lists them), got '" + a + "'");
    ids.push_back(*id);
  }
  if (vm.count("jobs-csv")) check_out_file("jobs-csv", jobs_csv);
  const db::Store store = open_existing(path);
  std::vector<RunRecord> runs;
  for (int64_t id : ids) {
    auto r = store.load_run(id);
    if (!r) throw InputError(path + ": no run " + std::to_string(id) + " (see cellsched db runs)");
    runs.push_back(std::move(*r));
  }
  if (vm.count("jobs-csv")) {
    std::ofstream f(jobs_csv);
    if (!f) throw InputError(jobs_csv + ": cannot write");
    write_jobs_csv(runs[0], f);
  }
  if (vm.count("json")) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : runs) a.push_back(run_to_json(r, true));
    std::cout << a.dump(2) << "\n";  // always an array, one element per run asked for
    return 0;
  }
  for (const auto& r : runs) {
    std::cout << "run " << r.id << " (" << r.created_at << "): policy " << r.policy << ", trace "
              << r.trace_name << ", cluster " << r.cluster_name << " (" << r.cluster_gpus
              << " GPUs), throughputs " << r.throughputs << "\n  params:";
    for (const auto& [k, v] : r.params) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  std::cout << "\n";
  print_comparison(runs, std::cout);
  return 0;
}

}  // namespace

int cmd_db(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (sub == "runs") return db_runs(rest);
  if (sub == "show") return db_show(rest);
  if (sub == "--help" || sub == "-h") {
    std::cout << "usage: cellsched db runs|show [options] (each takes --help)\n"
                 "  runs   list the stored runs, newest first\n"
                 "  show   one run's metrics and jobs, or several runs side by side\n";
    return 0;
  }
  if (sub.empty()) throw InputError("usage: cellsched db runs|show [options]");
  throw InputError("unknown subcommand '" + sub + "' (usage: cellsched db runs|show [options])");
}

}  // namespace cellsched::cli
