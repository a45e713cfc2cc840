// Running and measuring one configuration of `cellsched validate` (cli/validate_run.h).
#include "cli/validate_run.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/self_exe.h"
#include "core/stats.h"

namespace cellsched::cli {

namespace fs = std::filesystem;
using nlohmann::json;

std::string self_exe() {
  const std::string self = self_executable();
  return self.empty() ? "/proc/self/exe" : self;
}

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
    const pid_t pid = spawn_worker(argv);  // ends with this process
    if (pid < 0) throw std::runtime_error("cannot start a validate worker");
    pids.push_back(pid);
  }
  // Waits for all; the first that fails ends the others (its peers then
  // sat in Gloo until its 300 s timeout, and validate said nothing).
  bool ok = true;
  for (size_t left = pids.size(); left > 0;) {
    for (pid_t& p : pids) {
      if (p <= 0) continue;
      int status = 0;
      const pid_t w = waitpid(p, &status, ok ? WNOHANG : 0);
      if (w == 0 || (w < 0 && errno == EINTR)) continue;
      // w < 0 otherwise (ECHILD: a parent that ignores SIGCHLD lets the
      // kernel reap it): gone, its outcome unknown here; its rank file says.
      const bool failed = w == p && !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      p = 0;
      --left;
      if (ok && failed) {
        ok = false;
        for (pid_t q : pids)
          if (q > 0) ::kill(q, SIGKILL);
      }
    }
    if (ok && left > 0) ::usleep(20 * 1000);
  }
  if (!ok) throw std::runtime_error("a validate worker failed (" + base.mode + "); the others were stopped");
  std::vector<RankTimes> out;
  for (int r = 0; r < base.world; ++r) {
    std::ifstream f(dir / ("rank" + std::to_string(r) + ".json"));
    const auto j = json::parse(f);
    out.push_back({j.at("iteration_ms").get<std::vector<double>>(), j.at("compute_ms").get<std::vector<double>>(),
                   j.at("sync_ms").get<std::vector<double>>(), j.at("step_ms").get<std::vector<double>>(),
                   j.at("param_checksum").is_number() ? j.at("param_checksum").get<double>() : NAN});
    if (!std::isfinite(out.back().param_checksum))
      throw std::runtime_error("rank " + std::to_string(r) + " of the " + base.mode + " run diverged (weights not finite)");
  }
  fs::remove_all(dir);
  return out;
}

std::string config_name(const Config& c) {
  return c.mode == "single" ? "single process" : c.mode == "dp" ? "data-parallel (Gloo all-reduce)"
                                                                : "2-stage pipeline (send/recv)";
}

Trial measure(const std::vector<RankTimes>& per_rank, const Config& c) {
  auto slowest_of = [&](std::vector<double> RankTimes::*field) {
    std::vector<double> v((per_rank[0].*field).size(), 0);
    for (const auto& r : per_rank)
      for (size_t i = 0; i < (r.*field).size() && i < v.size(); ++i) v[i] = std::max(v[i], (r.*field)[i]);
    return median(v);
  };
  std::vector<double> collective, wait;
  for (size_t i = 0; i < per_rank[0].sync.size(); ++i) {
    double lo = per_rank[0].sync[i], hi = lo;
    for (const auto& r : per_rank)
      if (i < r.sync.size()) {
        lo = std::min(lo, r.sync[i]);
        hi = std::max(hi, r.sync[i]);
      }
    collective.push_back(lo);
    wait.push_back(hi - lo);
  }
  Trial t{slowest_of(&RankTimes::iteration), slowest_of(&RankTimes::compute),
          collective.empty() ? 0 : median(collective), slowest_of(&RankTimes::step),
          wait.empty() ? 0 : median(wait), {}};
  for (const auto& r : per_rank) t.checksums.push_back(r.param_checksum);
  // Data-parallel replicas start equal and apply the same averaged
  // gradients, so they must end equal; otherwise the run was not training.
  if (c.mode == "dp")
    for (const auto& r : per_rank)
      if (std::abs(r.param_checksum - per_rank[0].param_checksum) > 1e-9 * std::abs(per_rank[0].param_checksum))
        throw std::runtime_error("data-parallel replicas diverged (weights " + std::to_string(r.param_checksum) +
                                 " vs " + std::to_string(per_rank[0].param_checksum) + ")");
  return t;
}

}  // namespace cellsched::cli
