// `cellsched validate fork`: what one iteration of a forked copy (HadarE) is
// worth. An example trainer (LibTorch, or PyTorch with --trainer) trains its
// model to a fixed held-out loss, once as one gang and once as k copies whose
// weights are averaged (equal iterations, so equal weights,
// runner/checkpoint.h) after every round; fork efficiency(k) = iterations to
// the target of one gang / total iterations of the k copies to the target.
// --batch and --label-noise set the regime (the trainer's, for every gang; the
// held-out set stays the same).
// docs/hadar.md, "Fork efficiency".
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"
#include "core/fork.h"
#include "core/self_exe.h"
#include "runner/checkpoint.h"

extern char** environ;

namespace cellsched::cli {
namespace {

namespace fs = std::filesystem;

struct ForkRun {
  std::string trainer;
  fs::path dir;
  int round_iterations = 25;
  int max_rounds = 100;
  double lr = 0.05;
  int batch = 64;
  double label_noise = 0.01;
};

std::string exact(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Runs the trainer with `vars` added to the environment; its stdout goes to
// `out`. Throws when it cannot start or fails.
void run_trainer(const ForkRun& r, const std::vector<std::string>& args,
                 const std::vector<std::string>& vars, const fs::path& out) {
  std::vector<std::string> argv{r.trainer, "--save-every", "1e9", "--lr", std::to_string(r.lr)};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("CELLSCHED_", 0) != 0) env.push_back(*e);
  env.insert(env.end(), vars.begin(), vars.end());
  std::vector<char*> cargv, cenv;
  for (auto& s : argv) cargv.push_back(s.data());
  for (auto& s : env) cenv.push_back(s.data());
  cargv.push_back(nullptr);
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (r.dir / "trainer.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start the trainer " + r.trainer);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("the trainer failed; see " + (r.dir / "trainer.log").string());
}

// Held-out loss of a checkpoint ("" = the initial weights) of job `seed`.
double eval_loss(const ForkRun& r, int seed, const std::string& ckpt) {
  const fs::path out = r.dir / "eval.txt";
  run_trainer(r, {"--eval"}, {"CELLSCHED_JOB_ID=" + std::to_string(seed), "CELLSCHED_CKPT_IN=" + ckpt}, out);
  std::ifstream f(out);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("loss=", 0) == 0) return std::stod(line.substr(5));
  throw std::runtime_error("the trainer printed no loss=");
}

// Total iterations k copies (averaged every round) take to reach `target`;
// -1 when max_rounds do not suffice. The copies of a round run side by side.
double iterations_to_target(const ForkRun& r, const runner::CheckpointAverager& avg, int seed, int k,
                            double target) {
  std::string ckpt;
  for (int round = 1; round <= r.max_rounds; ++round) {
    std::vector<std::string> outs;
    for (int c = 0; c < k; ++c) {
      const std::string out = (r.dir / ("k" + std::to_string(k) + "-copy" + std::to_string(c) + ".pt")).string();
      const long data_seed = 1000003L * seed + 7919L * k + 104729L * round + c;
      run_trainer(r,
                  {"--data-seed", std::to_string(data_seed), "--batch", std::to_string(r.batch), "--label-noise",
                   exact(r.label_noise)},
                  {"CELLSCHED_JOB_ID=" + std::to_string(seed), "CELLSCHED_COPY=" + std::to_string(c),
                   "CELLSCHED_ITERATIONS=" + std::to_string(r.round_iterations), "CELLSCHED_CKPT_IN=" + ckpt,
                   "CELLSCHED_CKPT_OUT=" + out,
                   "CELLSCHED_PROGRESS=" + (r.dir / ("progress" + std::to_string(c))).string(), "RANK=0"},
                  r.dir / "train.txt");
      outs.push_back(out);
    }
    ckpt = (r.dir / ("k" + std::to_string(k) + "-avg.pt")).string();
    if (k == 1) fs::copy_file(outs[0], ckpt, fs::copy_options::overwrite_existing);
    else avg.average(outs, std::vector<double>(outs.size(), 1.0), ckpt);
    if (eval_loss(r, seed, ckpt) <= target) return static_cast<double>(round) * k * r.round_iterations;
  }
  return -1;
}

std::vector<int> parse_copies(const std::string& s) {
  std::vector<int> out{1};
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) {
    size_t used = 0;
    int k = 0;
    try {
      k = std::stoi(x, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != x.size() || k < 2 || k > 64)
      throw InputError("--copies: '" + x + "' is not a copy count in 2..64");
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  if (out.size() < 2) throw InputError("--copies: give at least one count of copies (2..64)");
  return out;
}

std::string self_dir() {
  const std::string self = self_executable();
  return self.empty() ? "." : fs::path(self).parent_path().string();
}

void check_fork_options(const ForkRun& r, int seeds, double ratio) {
  if (seeds < 1 || seeds > 1000) throw InputError("--seeds must be in 1..1000");
  if (r.round_iterations < 1 || r.round_iterations > 1000000)
    throw InputError("--round-iterations must be in 1..1000000");
  if (r.max_rounds < 1 || r.max_rounds > 100000) throw InputError("--max-rounds must be in 1..100000");
  if (!(ratio > 0 && ratio < 1)) throw InputError("--target-ratio must be in (0, 1)");
  if (!(r.lr > 0 && r.lr <= 10)) throw InputError("--lr must be in (0, 10]");
  if (r.batch < 1 || r.batch > 1000000) throw InputError("--batch must be in 1..1000000");
  if (!(r.label_noise >= 0 && r.label_noise <= 1000)) throw InputError("--label-noise must be in [0, 1000]");
}

// Iterations to the target of every seed and copy count: [seed][k index],
// -1 where the target was not reached. One gang (the first k) must reach it.
std::vector<std::vector<double>> measure_iterations(const ForkRun& r, runner::CheckpointAverager& avg, int seeds,
                                                    double ratio, const std::vector<int>& copies) {
  std::vector<std::vector<double>> its(static_cast<size_t>(seeds), std::vector<double>(copies.size(), -1));
  for (int s = 0; s < seeds; ++s) {
    const double target = ratio * eval_loss(r, s, "");
    for (size_t i = 0; i < copies.size(); ++i) {
      show_progress("validate fork: seed " + std::to_string(s + 1) + " of " + std::to_string(seeds) + ", " +
                    std::to_string(copies[i]) + (copies[i] == 1 ? " gang" : " copies") + " training to the target");
      its[static_cast<size_t>(s)][i] = iterations_to_target(r, avg, s, copies[i], target);
    }
    if (its[static_cast<size_t>(s)][0] < 0)
      throw std::runtime_error("one gang did not reach the target within --max-rounds (seed " +
                               std::to_string(s) + ")");
  }
  return its;
}

// Efficiency per k (mean, sd, min, max over the seeds) into `out` and, unless
// json, as a table; the noise model fitted on the smallest k > 1 and what it
// then predicts for the other k: how well one --fork-efficiency describes all.
void report_efficiency(nlohmann::json& out, const std::vector<std::vector<double>>& its,
                       const std::vector<int>& copies, bool json) {
  if (!json) std::cout << "k  efficiency mean  sd     min    max    iterations to target per seed (one gang: k=1)\n";
  // The noise model (core/fork.h) fitted on the smallest k > 1, and what it
  // then predicts for the other k: how well one --fork-efficiency describes all.
  double fitted = -1;
  for (size_t i = 0; i < copies.size(); ++i) {
    std::vector<double> eff, per_seed;
    for (const auto& row : its) {
      per_seed.push_back(row[i]);
      if (row[i] > 0) eff.push_back(row[0] / row[i]);
    }
    double mean = 0, sd = 0;
    for (double e : eff) mean += e / static_cast<double>(eff.size());
    for (double e : eff) sd += (e - mean) * (e - mean) / std::max<double>(1, static_cast<double>(eff.size()) - 1);
    sd = std::sqrt(sd);
    const double lo = eff.empty() ? NAN : *std::min_element(eff.begin(), eff.end());
    const double hi = eff.empty() ? NAN : *std::max_element(eff.begin(), eff.end());
    nlohmann::json row = {{"copies", copies[i]}, {"iterations_to_target", per_seed},
                          {"reached", eff.size()}, {"efficiency_mean", eff.empty() ? nlohmann::json() : nlohmann::json(mean)},
                          {"efficiency_sd", sd}, {"efficiency_min", lo}, {"efficiency_max", hi}};
    if (copies[i] > 1 && !eff.empty()) {
      if (fitted < 0) {
        fitted = fork_efficiency_from(copies[i], mean);
        out["noise_model"] = {{"fitted_on_copies", copies[i]}, {"fork_efficiency", fitted}};
      }
      const double k = copies[i];
      row["noise_model_efficiency"] = fork_worth({fitted, ForkScaling::noise}, 1, k - 1, 1) / k;
    }
    out["results"].push_back(row);
    if (!json) {
      char line[128];
      std::snprintf(line, sizeof line, "%-2d %-16.3f %-6.3f %-6.3f %-6.3f ", copies[i], mean, sd, lo, hi);
      std::cout << line;
      for (double v : per_seed) std::cout << (v < 0 ? std::string("not-reached") : std::to_string(static_cast<long long>(v))) << " ";
      std::cout << "\n";
    }
  }
  if (fitted >= 0 && !json) {
    std::cout << "noise model (--fork-scaling noise): --fork-efficiency " << fitted << " (fitted on k="
              << out["noise_model"]["fitted_on_copies"].get<int>() << "); it predicts efficiency";
    for (const auto& row : out["results"])
      if (row.contains("noise_model_efficiency"))
        std::cout << " " << row["noise_model_efficiency"].get<double>() << " at k=" << row["copies"].get<int>();
    std::cout << "\n";
  }
}

}  // namespace

int cmd_validate_fork(const std::vector<std::string>& args) {
  po::options_description opt("validate fork options");
  std::string copies_s, trainer, work;
  int seeds = 3;
  double ratio = 1e-3;
  ForkRun r;
  opt.add_options()
      ("copies", po::value(&copies_s)->default_value("2,4"), "forked copy counts k, compared with one gang")
      ("seeds", po::value(&seeds)->default_value(3), "seeds (model, task and data) per k")
      ("round-iterations", po::value(&r.round_iterations)->default_value(25), "iterations each gang trains per round")
      ("target-ratio", po::value(&ratio)->default_value(1e-3), "target held-out loss, as a fraction of the initial one")
      ("max-rounds", po::value(&r.max_rounds)->default_value(100), "give up after this many rounds")
      ("lr", po::value(&r.lr)->default_value(0.05, "0.05"), "SGD learning rate of every gang")
      ("batch", po::value(&r.batch)->default_value(64), "training samples per iteration of every gang (1..1000000)")
      ("label-noise", po::value(&r.label_noise)->default_value(0.01, "0.01"),
       "standard deviation of the noise on the training labels (0..1000); the held-out set keeps 0.01")
      ("trainer", po::value(&trainer), "example trainer to run: the LibTorch one (default: cellsched_example_trainer "
       "beside cellsched) or the PyTorch one (examples/trainers/train.py)")
      ("work-dir", po::value(&work), "scratch directory (default: a fresh one under the system temp dir)")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse("cellsched validate fork [--copies 2,4] [--seeds N] [--round-iterations N] [--batch N] "
             "[--label-noise S] [--json]",
             args, opt, {}, vm))
    return 0;
  const std::vector<int> copies = parse_copies(copies_s);
  check_fork_options(r, seeds, ratio);
  r.trainer = trainer.empty() ? self_dir() + "/cellsched_example_trainer" : trainer;
  std::unique_ptr<runner::CheckpointAverager> avg;
#if defined(CELLSCHED_HAVE_TORCH)
  avg = runner::make_torch_averager();
#endif
  if (!avg || !fs::exists(r.trainer)) {
    std::cerr << "cellsched validate fork: needs LibTorch and the example trainer (" << r.trainer
              << "; build target cellsched_example_trainer or pass --trainer)\n";
    return 1;
  }
  const bool own_dir = work.empty();
  r.dir = own_dir ? fs::temp_directory_path() / ("cellsched-fork-" + std::to_string(::getpid())) : fs::path(work);
  fs::create_directories(r.dir);

  nlohmann::json out = {{"trainer", r.trainer}, {"round_iterations", r.round_iterations},
                        {"target_ratio", ratio}, {"lr", r.lr}, {"batch", r.batch},
                        {"label_noise", r.label_noise}, {"seeds", seeds}, {"results", nlohmann::json::array()}};
  const auto its = measure_iterations(r, *avg, seeds, ratio, copies);
  clear_progress();
  if (own_dir) fs::remove_all(r.dir);

  const bool json = vm.count("json") > 0;
  report_efficiency(out, its, copies, json);
  if (json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace cellsched::cli
