// `cellsched validate`: real CPU training runs (single process, data-parallel
// over 2 processes with a Gloo all-reduce, a 2-stage pipeline over 2
// processes) against the estimator's figures from stored profiles.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/estimate_common.h"
#include "core/error.h"
#include "db/profile_store.h"
#include "profiler/comm.h"
#include "profiler/compute.h"
#include "validate/train.h"

extern char** environ;

namespace cellsched::cli {
namespace {

namespace fs = std::filesystem;

std::string self_exe() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct RankTimes {
  std::vector<double> iteration, compute, sync, step;  // ms per timed iteration
  double param_checksum = 0;                           // sum of |weights| after training
};

// Runs the workers of one configuration; returns each rank's times.
std::vector<RankTimes> run_config(const validate::WorkerArgs& base, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<pid_t> pids;
  for (int r = 0; r < base.world; ++r) {
    validate::WorkerArgs a = base;
    a.rank = r;
    a.store_dir = dir.string();
    a.out_path = (dir / ("rank" + std::to_string(r) + ".json")).string();
    std::vector<std::string> argv{self_exe(), "validate", "worker"};
    for (auto& s : validate::to_argv(a)) argv.push_back(s);
    std::vector<char*> cargv;
    for (auto& s : argv) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0)
      throw std::runtime_error("cannot start a validate worker");
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) throw std::runtime_error("a validate worker failed (" + base.mode + ")");
  std::vector<RankTimes> out;
  for (int r = 0; r < base.world; ++r) {
    std::ifstream f(dir / ("rank" + std::to_string(r) + ".json"));
    const auto j = nlohmann::json::parse(f);
    out.push_back({j.at("iteration_ms").get<std::vector<double>>(), j.at("compute_ms").get<std::vector<double>>(),
                   j.at("sync_ms").get<std::vector<double>>(), j.at("step_ms").get<std::vector<double>>(),
                   j.at("param_checksum").is_number() ? j.at("param_checksum").get<double>() : NAN});
    if (!std::isfinite(out.back().param_checksum))
      throw std::runtime_error("rank " + std::to_string(r) + " of the " + base.mode + " run diverged (weights not finite)");
  }
  fs::remove_all(dir);
  return out;
}

struct Config {
  std::string mode;
  int world, micro_batches, micro_batch_size;
};

}  // namespace

int cmd_validate(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "worker")
    return validate::run_worker(validate::parse_argv(std::vector<std::string>(args.begin() + 1, args.end())));
  if (!args.empty() && args[0] == "fork")
    return cmd_validate_fork(std::vector<std::string>(args.begin() + 1, args.end()));
  po::options_description opt("validate options");
  std::string model_name, db_path, out_md;
  int iterations = 7, warmup = 2, threads = 1, reps = 15;
  int64_t profile_id = 0, comm_id = 0;
  opt.add_options()
      ("model", po::value(&model_name)->default_value("gpt-cpu"), "zoo model (gpt, moe, wrn) or .yaml")
      ("db", po::value(&db_path)->default_value(default_db_path()), "SQLite file (profiles are read and stored here)")
      ("profile", po::value(&profile_id)->default_value(0), "compute profile id (default: profile now and store it)")
      ("comm-profile", po::value(&comm_id)->default_value(0), "comm profile id (default: profile now and store it)")
      ("iterations", po::value(&iterations)->default_value(7), "timed iterations per configuration (median)")
      ("warmup", po::value(&warmup)->default_value(2), "untimed iterations first")
      ("threads", po::value(&threads)->default_value(1), "CPU threads per process (profiles and runs)")
      ("repetitions", po::value(&reps)->default_value(15), "profiling repetitions per measurement")
      ("out", po::value(&out_md), "also write the table as Markdown to this file")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched validate [--model M] [--db PATH] [--iterations N] [--out FILE]", args, opt, {}, vm)) return 0;
  if (iterations < 1 || warmup < 0 || threads < 1 || reps < 1)
    throw InputError("--iterations, --threads and --repetitions must be >= 1, --warmup >= 0");
  const ModelSpec model = load_model(model_name);
  if (!validate::available()) {
    std::cerr << "cellsched validate: this build has no LibTorch (install libtorch-dev and rebuild)\n";
    return 1;
  }
  const int L = static_cast<int>(model.layers.size());
  const std::vector<int> mbs_sizes = {1, 2, 4, 8};
  {
    auto store = db::ProfileStore::open(db_path);
    if (profile_id == 0) {
      profiler::ComputeOptions co;
      co.device = "cpu";
      co.device_type = "cpu";
      co.micro_batches = mbs_sizes;
      co.tp_degrees = {1};
      co.repetitions = reps;
      co.warmup = 2;
      co.threads = threads;
      auto backend = profiler::make_compute_backend(co);
      ModelSpec m = model;
      ProfileRun run = profiler::profile_compute(*backend, m, co);
      profile_id = store.save(run);
      std::cerr << "compute profile " << profile_id << " stored\n";
    }
    if (comm_id == 0) {
      profiler::CommOptions cm;
      cm.backend = "gloo";
      cm.ranks = 2;
      cm.collectives = {"all_reduce", "send_recv"};
      cm.repetitions = reps;
      cm.warmup = 2;
      cm.device_type = "cpu";
      // Powers of two from 1 KiB up to the model's whole gradient (the
      // data-parallel all-reduce), so no size the runs need is extrapolated.
      const double grad_bytes = model.total_params() * model.bytes_per_value;
      for (int64_t b = 1024;; b *= 2) {
        cm.sizes.push_back(b);
        if (static_cast<double>(b) >= grad_bytes) break;
      }
      cm.worker_command = {self_exe(), "profile", "comm-worker"};
      ProfileRun run = profiler::profile_comm(cm);
      comm_id = store.save(run);
      std::cerr << "comm profile " << comm_id << " stored\n";
    }
  }
  const ProfileSelection sel = select_profiles(db_path, model, "cpu", profile_id, comm_id);
  estimator::Options eo;
  eo.optimizer = "sgd";
  eo.memory_fraction = 1;
  const estimator::CostModel cost(model, "cpu", sel.compute, sel.comm ? &*sel.comm : nullptr, eo);

  const std::vector<Config> configs = {
      {"single", 1, 1, 4}, {"single", 1, 2, 2}, {"single", 1, 4, 1}, {"dp", 2, 1, 4}, {"dp", 2, 2, 4},
      {"dp", 2, 4, 2},     {"pp", 2, 2, 2},     {"pp", 2, 4, 2},     {"pp", 2, 8, 1}};
  const fs::path scratch = fs::temp_directory_path() / ("cellsched-validate-" + std::to_string(::getpid()));
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> errs;
  Table t({"config", "procs", "B", "micro-batch", "measured ms", "estimated ms", "error %"});
  for (const Config& c : configs) {
    validate::WorkerArgs a;
    a.mode = c.mode;
    a.model = model_name;
    a.world = c.world;
    a.micro_batches = c.micro_batches;
    a.micro_batch_size = c.micro_batch_size;
    a.split = L / 2;
    a.iterations = iterations;
    a.warmup = warmup;
    a.threads = threads;
    const auto per_rank = run_config(a, scratch);
    // Per iteration the slowest rank's time; the phases are each the largest
    // over the ranks (medians over the iterations).
    auto slowest_of = [&](std::vector<double> RankTimes::*field) {
      std::vector<double> v((per_rank[0].*field).size(), 0);
      for (const auto& r : per_rank)
        for (size_t i = 0; i < (r.*field).size() && i < v.size(); ++i) v[i] = std::max(v[i], (r.*field)[i]);
      return median_of(v);
    };
    const double measured = slowest_of(&RankTimes::iteration);
    // Data-parallel replicas start equal and apply the same averaged
    // gradients, so they must end equal; otherwise the run was not training.
    if (c.mode == "dp")
      for (const auto& r : per_rank)
        if (std::abs(r.param_checksum - per_rank[0].param_checksum) > 1e-9 * std::abs(per_rank[0].param_checksum))
          throw std::runtime_error("data-parallel replicas diverged (weights " + std::to_string(r.param_checksum) +
                                   " vs " + std::to_string(per_rank[0].param_checksum) + ")");
    estimator::Cell cell{model.name, "cpu", 1, c.world, c.mode == "pp" ? 2 : 1};
    estimator::Plan plan;
    plan.micro_batches = c.micro_batches;
    plan.micro_batch_size = c.micro_batch_size;
    if (c.mode == "pp") plan.stages = {{0, L / 2, 1, 1}, {L / 2, L - L / 2, 1, 1}};
    else plan.stages = {{0, L, c.world, 1}};
    const auto e = estimator::estimate(cost, cell, plan);
    const double err = (e.iteration_ms - measured) / measured * 100;
    errs.push_back(std::abs(err));
    const std::string name = c.mode == "single" ? "single process" : c.mode == "dp" ? "data-parallel (Gloo all-reduce)"
                                                                                  : "2-stage pipeline (send/recv)";
    t.add({name, std::to_string(c.world), std::to_string(c.micro_batches), std::to_string(c.micro_batch_size),
           fixed(measured, 2), fixed(e.iteration_ms, 2), fixed(err, 1)});
    rows.push_back({{"config", c.mode}, {"processes", c.world}, {"micro_batches", c.micro_batches},
                    {"micro_batch_size", c.micro_batch_size}, {"measured_ms", measured},
                    {"estimated_ms", e.iteration_ms}, {"error_pct", err}, {"basis", estimator::basis_name(e.basis)},
                    {"param_checksums", [&] {
                       std::vector<double> v;
                       for (const auto& r : per_rank) v.push_back(r.param_checksum);
                       return v;
                     }()},
                    {"measured_breakdown_ms",
                     {{"compute", slowest_of(&RankTimes::compute)},
                      {"gradient_sync", slowest_of(&RankTimes::sync)},
                      {"optimizer", slowest_of(&RankTimes::step)}}},
                    {"estimated_breakdown_ms",
                     {{"compute", e.pipeline_compute_ms + e.pipeline_comm_ms},
                      {"gradient_sync", e.stages.front().grad_sync_ms},
                      {"optimizer", e.sync_ms - e.stages.front().grad_sync_ms}}}});
    if (stderr_is_tty()) std::cerr << "  " << name << " B=" << c.micro_batches << ": " << fixed(measured, 2) << " ms\n";
  }
  const double med = median_of(errs), worst = *std::max_element(errs.begin(), errs.end());
  if (vm.count("json")) {
    std::cout << nlohmann::json{{"model", model.name}, {"compute_profile", profile_id}, {"comm_profile", comm_id},
                                {"threads", threads}, {"rows", rows}, {"median_abs_error_pct", med},
                                {"worst_abs_error_pct", worst}}.dump(2)
              << "\n";
  } else {
    std::cout << "model " << model.name << " on the CPU, " << threads << " thread(s) per process; profiles "
              << profile_id << " (compute) and " << comm_id << " (comm) in " << db_path << "\n";
    t.print(std::cout);
    std::cout << "median |error| " << fixed(med, 1) << "%, worst " << fixed(worst, 1) << "% over " << errs.size()
              << " configurations\n";
  }
  if (vm.count("out")) {
    std::ofstream f(out_md);
    if (!f) throw InputError(out_md + ": cannot write");
    f << "| config | processes | micro-batches | micro-batch size | measured ms | estimated ms | error % |"
         " compute ms meas / est | gradient sync ms meas / est | optimizer ms meas / est |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    auto pair = [](const nlohmann::json& r, const char* part) {
      return fixed(r["measured_breakdown_ms"][part], 1) + " / " + fixed(r["estimated_breakdown_ms"][part], 1);
    };
    for (const auto& r : rows)
      f << "| " << r["config"].get<std::string>() << " | " << r["processes"] << " | " << r["micro_batches"] << " | "
        << r["micro_batch_size"] << " | " << fixed(r["measured_ms"], 2) << " | " << fixed(r["estimated_ms"], 2)
        << " | " << fixed(r["error_pct"], 1) << " | " << pair(r, "compute") << " | " << pair(r, "gradient_sync")
        << " | " << pair(r, "optimizer") << " |\n";
    f << "\nmedian |error| " << fixed(med, 1) << "%, worst " << fixed(worst, 1) << "%\n";
  }
  return 0;
}

}  // namespace cellsched::cli
