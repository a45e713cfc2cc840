// `cellsched validate`: real CPU training runs (single process, data-parallel
// over 2 processes with a Gloo all-reduce, a 2-stage pipeline over 2
// processes) against the estimator's figures from stored profiles. Every
// configuration runs several trials, interleaved round-robin, and is reported
// as the median over trials with its spread; the host is watched for other work.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/estimate_common.h"
#include "cli/validate_report.h"
#include "cli/validate_run.h"
#include "core/error.h"
#include "core/stats.h"
#include "db/profile_store.h"
#include "db/store.h"
#include "profiler/comm.h"
#include "profiler/compute.h"
#include "validate/train.h"
#include "validate/trials.h"


namespace cellsched::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Settings {
  std::string model_name, db_path;
  int iterations = 7, warmup = 2, threads = 1, reps = 15, trials = 3, passes = 3, extra_trials = 2;
  int64_t profile_id = 0, comm_id = 0;
  bool colocation_probe = true;
};

// The co-location probe's step: the whole model, 2 micro-batches of 2; three
// pairs (alone, together) a round, spread over it, each trial with half the
// round's timed iterations (at least 3). One pair at the round's end gave a
// factor that missed the rows' slowdown by up to 15 % (docs/estimator.md).
constexpr int kProbeMicroBatches = 2, kProbeMicroBatchSize = 2, kProbePairsPerRound = 3;
int probe_iterations(int iterations) { return std::max(3, (iterations + 1) / 2); }
// A configuration whose median trial is more than this share of itself above
// its fastest trial gets another trial (up to --extra-trials).
constexpr double kSettledSpread = 0.10;

// Profiles compute and comm unless ids were given; stores them. `between`
// runs after each compute pass but the last (the interleaved trial rounds).
void ensure_profiles(Settings& s, const ModelSpec& model, const std::vector<int>& mbs_sizes,
                     const std::function<void(int)>& between) {
  auto store = db::ProfileStore::open(s.db_path);
  // Comm first: the compute passes are the ones the trial rounds interleave with.
  if (s.comm_id == 0) {
    profiler::CommOptions cm;
    cm.backend = "gloo";
    cm.ranks = 2;
    cm.collectives = {"all_reduce", "send_recv"};
    cm.repetitions = s.reps;
    cm.passes = std::min(s.passes, s.reps);
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
    s.comm_id = store.save(run);
    std::cerr << "comm profile " << s.comm_id << " stored\n";
  }
  if (s.profile_id == 0) {
    profiler::ComputeOptions co;
    co.device = "cpu";
    co.device_type = "cpu";
    co.micro_batches = mbs_sizes;
    co.tp_degrees = {1};
    co.repetitions = s.reps;
    co.passes = std::min(s.passes, s.reps);
    co.extra_passes = s.extra_trials;
    co.settled_spread = kSettledSpread;
    co.warmup = 2;
    co.threads = s.threads;
    co.between_passes = between;
    auto backend = profiler::make_compute_backend(co);
    ModelSpec m = model;
    ProfileRun run = profiler::profile_compute(*backend, m, co);
    s.profile_id = store.save(run);
    std::cerr << "compute profile " << s.profile_id << " stored\n";
  }
}

// One calibration point: the arithmetic loop and the memory pass.
void calibrate(validate::HostObservation& host) {
  host.calibration_s.push_back(validate::calibration_s(host.cpus));
  host.memory_calibration_s.push_back(validate::memory_calibration_s(host.cpus));
}

// The trials: every configuration `trials` times, round-robin, one round
// at a time (so rounds can sit between the profiling passes). Times the
// calibration loop before each round and once after the last.
class TrialRounds {
 public:
  TrialRounds(const Settings& s, const std::vector<Config>& configs, int layers, validate::HostObservation& host)
      : s_(s), configs_(configs), layers_(layers), host_(host), trials_(configs.size()),
        scratch_(fs::temp_directory_path() / ("cellsched-validate-" + std::to_string(::getpid()))) {
    for (const Config& c : configs) probe_ = probe_ || (s.colocation_probe && c.world > 1);
  }

  // Runs the rounds due after compute pass `pass` (all that remain for pass < 0).
  void after_pass(int pass) {
    while (next_ < s_.trials &&
           (pass < 0 || validate::round_after_pass(next_, std::max(1, std::min(s_.passes, s_.reps)), s_.trials) <= pass))
      round(next_++);
  }
  // The remaining rounds, then up to `extra_trials` more trials of each
  // configuration (and of the probe) whose trials are still unsettled: a slow
  // phase of the host that hit one or two rounds then no longer sets the
  // median. The extra trials run round by round like the others.
  std::vector<std::vector<Trial>> finish() {
    after_pass(-1);
    for (int extra = 0; extra < s_.extra_trials; ++extra) {
      std::vector<size_t> again;
      for (size_t ci = 0; ci < configs_.size(); ++ci) {
        std::vector<double> ms;
        for (const Trial& t : trials_[ci]) ms.push_back(t.iteration_ms);
        if (median_far_above_fastest(ms, kSettledSpread)) again.push_back(ci);
      }
      const bool probe_again = probe_ && (median_far_above_fastest(alone_, kSettledSpread) ||
                                          median_far_above_fastest(together_, kSettledSpread));
      if (again.empty() && !probe_again) break;
      calibrate(host_);
      for (const size_t ci : again) run_trial(ci, s_.trials + extra);
      if (probe_again) probe();
      extra_runs_ += static_cast<int>(again.size()) + (probe_again ? 1 : 0);
    }
    calibrate(host_);
    return std::move(trials_);
  }
  // How many extra trials ran (configurations and probe rounds).
  int extra_runs() const { return extra_runs_; }
  // The co-location probe's trials (empty when it did not run).
  const std::vector<double>& alone_ms() const { return alone_; }
  const std::vector<double>& together_ms() const { return together_; }

 private:
  validate::WorkerArgs worker_args(const Config& c) const {
    validate::WorkerArgs a;
    a.mode = c.mode;
    a.model = s_.model_name;
    a.world = c.world;
    a.micro_batches = c.micro_batches;
    a.micro_batch_size = c.micro_batch_size;
    a.split = layers_ / 2;
    a.iterations = s_.iterations;
    a.warmup = s_.warmup;
    a.threads = s_.threads;
    return a;
  }

  // Not a row of the report: the same single-process step run alone and as
  // two processes at once (one per CPU, each iteration the slower of the
  // two), so that the multi-process rows' estimates account for what the
  // processes cost each other (validate::colocation_factor). Which goes first
  // alternates from pair to pair.
  void probe() {
    const Config alone{"single", 1, kProbeMicroBatches, kProbeMicroBatchSize};
    const Config together{"single", 2, kProbeMicroBatches, kProbeMicroBatchSize};
    const bool alone_first = alone_.size() % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      const bool alone_now = (k == 0) == alone_first;
      const Config& c = alone_now ? alone : together;
      validate::WorkerArgs a = worker_args(c);
      a.iterations = probe_iterations(s_.iterations);
      (alone_now ? alone_ : together_).push_back(measure(run_config(a, scratch_), c).iteration_ms);
    }
  }

  void round(int t) {
    calibrate(host_);
    const std::vector<int> at = probe_ ? validate::probe_positions(static_cast<int>(configs_.size()), kProbePairsPerRound)
                                       : std::vector<int>{};
    size_t next = 0;
    int pos = 0;
    for (const auto& [trial, config] : validate::interleaved_order(static_cast<int>(configs_.size()), s_.trials)) {
      if (trial != t) continue;
      run_trial(static_cast<size_t>(config), t);
      for (; next < at.size() && at[next] == pos; ++next) probe();
      ++pos;
    }
  }

  void run_trial(size_t ci, int t) {
    const Config& c = configs_[ci];
    trials_[ci].push_back(measure(run_config(worker_args(c), scratch_), c));
    if (stderr_is_tty())
      std::cerr << "  [" << ++done_ << "/" << configs_.size() * static_cast<size_t>(s_.trials) << "] trial " << t + 1
                << " " << config_name(c) << " B=" << c.micro_batches << ": "
                << fixed(trials_[ci].back().iteration_ms, 2) << " ms" << (t >= s_.trials ? " (extra)" : "") << "\n";
  }

  const Settings& s_;
  const std::vector<Config>& configs_;
  int layers_;
  validate::HostObservation& host_;
  std::vector<std::vector<Trial>> trials_;
  fs::path scratch_;
  int next_ = 0, extra_runs_ = 0;
  size_t done_ = 0;
  bool probe_ = false;
  std::vector<double> alone_, together_;
};

json spread_json(const validate::Spread& sp) {
  return {{"median", sp.median}, {"q1", sp.q1}, {"q3", sp.q3}, {"min", sp.min}, {"max", sp.max}, {"n", sp.n}};
}

// One row of the report: measured (median over trials, with spread) against the estimate.
// `alone` is the same estimate with no co-location factor (the processes
// priced at the single-process profile's speed), reported beside it so each
// run shows what the probe changed.
json report_row(const Config& c, const std::vector<Trial>& trials, const estimator::Estimate& e,
                const estimator::Estimate& alone) {
  std::vector<double> it, comp, sync, step, wait;
  for (const Trial& t : trials) {
    it.push_back(t.iteration_ms);
    comp.push_back(t.compute_ms);
    sync.push_back(t.sync_ms);
    step.push_back(t.step_ms);
    wait.push_back(t.wait_ms);
  }
  const validate::Spread sp = validate::summarize(it);
  const auto error_pct = [&](const estimator::Estimate& x) { return (x.iteration_ms - sp.median) / sp.median * 100; };
  return {{"config", c.mode},
          {"processes", c.world},
          {"micro_batches", c.micro_batches},
          {"micro_batch_size", c.micro_batch_size},
          {"measured_ms", sp.median},
          {"measured_spread_ms", spread_json(sp)},
          {"trial_ms", it},
          {"estimated_ms", e.iteration_ms},
          {"error_pct", error_pct(e)},
          {"estimated_ms_without_colocation", alone.iteration_ms},
          {"error_pct_without_colocation", error_pct(alone)},
          {"within_spread", e.iteration_ms >= sp.min && e.iteration_ms <= sp.max},
          {"basis", estimator::basis_name(e.basis)},
          {"param_checksums", trials.back().checksums},
          {"measured_breakdown_ms",
           {{"compute", median(comp)},
            {"gradient_sync", median(sync)},
            {"waiting_for_slower_rank", median(wait)},
            {"optimizer", median(step)}}},
          {"estimated_breakdown_ms",
           {{"compute", e.pipeline_compute_ms + e.pipeline_comm_ms},
            {"gradient_sync", e.stages.front().grad_sync_ms},
            {"optimizer", e.sync_ms - e.stages.front().grad_sync_ms}}}};
}

std::vector<Config> chosen_configs(const std::string& list) {
  const std::vector<Config> all = {{"single", 1, 1, 4}, {"single", 1, 2, 2}, {"single", 1, 4, 1},
                                   {"dp", 2, 1, 4},     {"dp", 2, 2, 4},     {"dp", 2, 4, 2},
                                   {"pp", 2, 2, 2},     {"pp", 2, 4, 2},     {"pp", 2, 8, 1}};
  const auto wanted = split_list(list);
  for (const auto& w : wanted)
    if (w != "single" && w != "dp" && w != "pp") throw InputError("--configs: '" + w + "' is not single, dp or pp");
  std::vector<Config> out;
  for (const Config& c : all)
    if (std::find(wanted.begin(), wanted.end(), c.mode) != wanted.end()) out.push_back(c);
  if (out.empty()) throw InputError("--configs: name at least one of single, dp, pp");
  return out;
}

void add_validate_options(po::options_description& opt, Settings& s, std::string& out_md, std::string& config_list) {
  opt.add_options()
      ("model", po::value(&s.model_name)->default_value("gpt-cpu"), "zoo model (any but CycleGAN; see cellsched profile --help) or .yaml")
      ("db", po::value(&s.db_path)->default_value(default_db_path()), "SQLite file (profiles are read and stored here)")
      ("profile", po::value(&s.profile_id)->default_value(0), "compute profile id (default: profile now and store it)")
      ("comm-profile", po::value(&s.comm_id)->default_value(0), "comm profile id (default: profile now and store it)")
      ("trials", po::value(&s.trials)->default_value(3),
       "trials per configuration, run round-robin across configurations; a configuration's time is the "
       "median over its trials, reported with their min-max")
      ("extra-trials", po::value(&s.extra_trials)->default_value(2),
       "at most this many more trials of a configuration (or of the co-location probe) whose median trial is "
       "more than 10 % above its fastest, and as many more profiling passes over the layers whose passes are, "
       "so a slow phase of the host that hit most of them does not set the median (0: none)")
      ("iterations", po::value(&s.iterations)->default_value(7), "timed iterations per trial (a trial's time is their median)")
      ("warmup", po::value(&s.warmup)->default_value(2), "untimed iterations first")
      ("threads", po::value(&s.threads)->default_value(1), "CPU threads per process (profiles and runs)")
      ("repetitions", po::value(&s.reps)->default_value(15), "profiling repetitions per measurement")
      ("profile-passes", po::value(&s.passes)->default_value(3),
       "interleaved profiling passes the repetitions are spread over (see profile --passes)")
      ("configs", po::value(&config_list)->default_value("single,dp,pp"), "which configurations to run: single, dp, pp")
      ("colocation-probe",
       "three times a round, spread over it, also run the step alone and as two processes at once, and scale the multi-process rows' "
       "compute estimates by how much slower the pair ran (the default)")
      ("no-colocation-probe", "do not run the co-location probe: the multi-process rows are priced at the "
       "single-process profile's speed")
      ("out", po::value(&out_md), "also write the table as Markdown to this file")
      ("json", "print JSON");
}

void check_settings(const Settings& s) {
  check_flag_range("iterations", s.iterations, 1, 100000);
  check_flag_range("warmup", s.warmup, 0, 100000);
  check_flag_range("threads", s.threads, 1, 4096);
  check_flag_range("repetitions", s.reps, 1, 100000);
  check_flag_range("trials", s.trials, 1, 1000);
  check_flag_range("extra-trials", s.extra_trials, 0, 1000);
  check_flag_range("profile-passes", s.passes, 1, 1000);  // 1e8 ran on and on
}

// The error of every configuration's estimate against its trials, with and
// without the co-location factor, and the run's summary.
json validate_report(const Settings& s, const ModelSpec& model, const std::vector<Config>& configs,
                     const std::vector<std::vector<Trial>>& trials, const TrialRounds& rounds,
                     const estimator::CostModel& cost, const estimator::CostModel& cost_alone,
                     const ProfileRun& compute, const validate::HostObservation& host,
                     const validate::HostVerdict& verdict, double elapsed_s) {
  const int L = static_cast<int>(model.layers.size());
  json rows = json::array();
  std::vector<double> errs, errs_alone;
  int within = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    estimator::Cell cell{model.name, "cpu", 1, c.world, c.mode == "pp" ? 2 : 1};
    estimator::Plan plan;
    plan.micro_batches = c.micro_batches;
    plan.micro_batch_size = c.micro_batch_size;
    if (c.mode == "pp") plan.stages = {{0, L / 2, 1, 1}, {L / 2, L - L / 2, 1, 1}};
    else plan.stages = {{0, L, c.world, 1}};
    rows.push_back(report_row(c, trials[i], estimator::estimate(cost, cell, plan),
                              estimator::estimate(cost_alone, cell, plan)));
    errs.push_back(std::abs(rows.back()["error_pct"].get<double>()));
    errs_alone.push_back(std::abs(rows.back()["error_pct_without_colocation"].get<double>()));
    within += rows.back()["within_spread"].get<bool>() ? 1 : 0;
  }
  return {
      {"model", model.name},
      {"compute_profile", s.profile_id},
      {"comm_profile", s.comm_id},
      {"db", s.db_path},
      {"threads", s.threads},
      {"trials", s.trials},
      {"extra_trials", rounds.extra_runs()},
      {"iterations", s.iterations},
      {"rows", rows},
      {"median_abs_error_pct", median(errs)},
      {"worst_abs_error_pct", *std::max_element(errs.begin(), errs.end())},
      {"within_spread_share", static_cast<double>(within) / static_cast<double>(rows.size())},
      {"colocation",
       {{"probe", !rounds.alone_ms().empty()},
        {"micro_batches", kProbeMicroBatches},
        {"micro_batch_size", kProbeMicroBatchSize},
        {"pairs_per_round", kProbePairsPerRound},
        {"iterations", probe_iterations(s.iterations)},
        {"alone_ms", rounds.alone_ms()},
        {"together_ms", rounds.together_ms()},
        {"factor", cost.options().colocated_compute_factor},
        {"median_abs_error_pct_without", median(errs_alone)},
        {"worst_abs_error_pct_without", *std::max_element(errs_alone.begin(), errs_alone.end())}}},
      {"profile_layers", validate_profile_layers_json(compute)},
      {"host", validate_host_json(host, verdict)},
      {"elapsed_s", elapsed_s}};
}

}  // namespace

int cmd_validate(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "worker")
    return validate::run_worker(validate::parse_argv(std::vector<std::string>(args.begin() + 1, args.end())));
  if (!args.empty() && args[0] == "fork")
    return cmd_validate_fork(std::vector<std::string>(args.begin() + 1, args.end()));
  po::options_description opt("validate options");
  Settings s;
  std::string out_md, config_list;
  add_validate_options(opt, s, out_md, config_list);
  po::variables_map vm;
  if (!parse("cellsched validate [--model M] [--configs C,...] [--db PATH] [--trials N] [--iterations N] [--out FILE] "
             "[--json] [options]\n       cellsched validate fork [options]   (HadarE's copy efficiency; "
             "validate fork --help)", args, opt, {}, vm))
    return 0;
  check_settings(s);
  if (vm.count("out")) check_out_file("out", out_md);  // now, not after minutes of training
  const std::vector<Config> configs = chosen_configs(config_list);
  if (vm.count("colocation-probe") && vm.count("no-colocation-probe"))
    throw InputError("--colocation-probe and --no-colocation-probe contradict each other");
  s.colocation_probe = vm.count("no-colocation-probe") == 0;
  const ModelSpec model = load_model(s.model_name);
  if (model.family == "cyclegan")  // its workers would fail building the chain
    throw InputError(model.name + ": CycleGAN's generators and discriminators are not one chain of layers, so "
                     "validate cannot train it (profile and estimate it instead)");
  db::check_db_file(s.db_path, true);  // unwritable or damaged: named now, not after the comm profile
  check_profile_ids(s.db_path, model.name, s.profile_id, s.comm_id);  // before anything is stored or trained
  if (!validate::available()) {
    std::cerr << "cellsched validate: this build has no LibTorch (install libtorch-dev and rebuild)\n";
    return 1;
  }
  validate::HostObservation host;
  host.cpus = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  double load[1] = {0};
  if (getloadavg(load, 1) == 1) host.load_at_start = load[0];
  host.start = validate::read_cpu_clock();
  const auto t0 = std::chrono::steady_clock::now();

  const int L = static_cast<int>(model.layers.size());
  // Calibrated before the profiles too: a host that slows between profiling
  // and the trials skews every estimate against its measurement.
  calibrate(host);
  // The trial rounds interleave with the compute profile's passes (when it
  // is taken now): profile and runs sample the same phases of the host.
  TrialRounds rounds(s, configs, L, host);
  ensure_profiles(s, model, {1, 2, 4, 8}, [&](int pass) { rounds.after_pass(pass); });
  const ProfileSelection sel = select_profiles(s.db_path, model, "cpu", s.profile_id, s.comm_id);
  const auto trials = rounds.finish();
  estimator::Options eo;
  eo.optimizer = "sgd";
  eo.memory_fraction = 1;
  eo.colocated_compute_factor = validate::colocation_factor(rounds.alone_ms(), rounds.together_ms());
  const estimator::CostModel cost(model, "cpu", sel.compute, sel.comm ? &*sel.comm : nullptr, eo);
  estimator::Options eo_alone = eo;
  eo_alone.colocated_compute_factor = 1;
  const estimator::CostModel cost_alone(model, "cpu", sel.compute, sel.comm ? &*sel.comm : nullptr, eo_alone);

  host.end = validate::read_cpu_clock();
  const validate::HostVerdict verdict = validate::judge_host(host);

  const json report =
      validate_report(s, model, configs, trials, rounds, cost, cost_alone, sel.compute, host, verdict,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (vm.count("json")) std::cout << report.dump(2) << "\n";
  else print_validate_text(std::cout, report);
  if (vm.count("json") && verdict.busy)
    for (const auto& why : verdict.reasons) std::cerr << "warning: the host was busy: " << why << "\n";
  if (vm.count("out")) write_validate_markdown(out_md, report);
  return 0;
}

}  // namespace cellsched::cli
