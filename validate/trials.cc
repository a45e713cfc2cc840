#include "validate/trials.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <functional>
#include <thread>

#include "core/stats.h"

namespace cellsched::validate {

std::vector<std::pair<int, int>> interleaved_order(int configs, int trials) {
  std::vector<std::pair<int, int>> order;
  for (int t = 0; t < trials; ++t)
    for (int c = 0; c < configs; ++c) order.emplace_back(t, c);
  return order;
}

std::vector<int> probe_positions(int configs, int pairs) {
  std::vector<int> at;
  if (configs < 1 || pairs < 1) return at;
  for (int k = 1; k <= pairs; ++k)  // ceil(k * configs / pairs) - 1
    at.push_back(static_cast<int>((static_cast<long long>(k) * configs + pairs - 1) / pairs) - 1);
  return at;
}

int round_after_pass(int round, int passes, int trials) {
  if (passes < 1 || trials < 1 || round < 0 || round >= trials) return passes - 1;
  return static_cast<int>(static_cast<long long>(round) * passes / trials);
}

namespace {

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

}  // namespace

Spread summarize(std::vector<double> v) {
  Spread s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = percentile_of_sorted(v, 50);
  s.q1 = percentile_of_sorted(v, 25);
  s.q3 = percentile_of_sorted(v, 75);
  s.min = v.front();
  s.max = v.back();
  return s;
}

double colocation_factor(const std::vector<double>& alone_ms, const std::vector<double>& together_ms) {
  if (alone_ms.empty() || together_ms.empty()) return 1;
  const auto sensible = [](double x) { return x > 0 && std::isfinite(x); };
  // One probe round runs alone and together back to back, so the two share
  // the host's phase: the round's ratio cancels a slow phase that the ratio
  // of the two medians would take for co-location.
  if (alone_ms.size() == together_ms.size()) {
    std::vector<double> ratios;
    for (size_t i = 0; i < alone_ms.size(); ++i)
      if (sensible(alone_ms[i]) && sensible(together_ms[i])) ratios.push_back(together_ms[i] / alone_ms[i]);
    return ratios.empty() ? 1 : summarize(std::move(ratios)).median;
  }
  const double alone = summarize(alone_ms).median, together = summarize(together_ms).median;
  if (!sensible(alone) || !sensible(together)) return 1;
  return together / alone;
}

CpuClock read_cpu_clock() {
  CpuClock c;
  std::ifstream f("/proc/stat");
  std::string line;
  if (std::getline(f, line) && line.rfind("cpu ", 0) == 0) {
    std::istringstream in(line.substr(4));
    // user nice system idle iowait irq softirq steal (guest is inside user)
    double v[8] = {};
    for (double& x : v) in >> x;
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double idle = v[3] + v[4];
    const double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    c.machine_busy_s = busy / tick;
    c.machine_total_s = (busy + idle) / tick;
  }
  rusage self{}, kids{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  c.own_s = seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(kids.ru_utime) + seconds(kids.ru_stime);
  return c;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `task` on `cpus` threads at once; each times its own measured part
// (setup left out). The slowest thread's seconds.
double slowest_of(int cpus, const std::function<double()>& task) {
  cpus = std::max(1, cpus);
  std::vector<double> took(static_cast<size_t>(cpus), 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < cpus; ++i) threads.emplace_back([&took, &task, i] { took[static_cast<size_t>(i)] = task(); });
  for (auto& t : threads) t.join();
  return *std::max_element(took.begin(), took.end());
}

}  // namespace

double calibration_s(int cpus) {
  return slowest_of(cpus, [] {
    const auto t0 = std::chrono::steady_clock::now();
    volatile double x = 1.0;  // a dependent chain the compiler cannot fold
    for (int k = 0; k < 20'000'000; ++k) x = x * 1.0000001 + 1e-9;
    return seconds_since(t0);
  });
}

double memory_calibration_s(int cpus) {
  return slowest_of(cpus, [] {
    constexpr size_t kDoubles = (64u << 20) / sizeof(double);
    std::vector<double> buf(kDoubles, 1.0);  // touched once before the clock starts
    const auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    for (int pass = 0; pass < 4; ++pass)
      for (size_t k = 0; k < kDoubles; k += 8) {  // one read per cache line, one write per eight lines
        sum += buf[k];
        if (k % 64 == 0) buf[k] = sum * 1e-30;
      }
    const double s = seconds_since(t0);
    volatile double sink = sum;
    (void)sink;
    return s;
  });
}

HostVerdict judge_host(const HostObservation& h) {
  HostVerdict v;
  const double total = h.end.machine_total_s - h.start.machine_total_s;
  const double busy = h.end.machine_busy_s - h.start.machine_busy_s;
  const double own = h.end.own_s - h.start.own_s;
  if (total > 0) v.others_cpu_share = std::clamp((busy - own) / total, 0.0, 1.0);
  if (v.others_cpu_share > 0.10)
    v.reasons.push_back("other processes took " + std::to_string(static_cast<int>(std::lround(v.others_cpu_share * 100))) +
                        " % of the CPU time during the run");
  // Slowest / fastest of a calibration series; a reason when over 15 %.
  auto spread = [&v](const std::vector<double>& t, const std::string& what, const std::string& why) {
    if (t.size() < 2) return 1.0;
    const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
    const double r = *lo > 0 ? *hi / *lo : 1.0;
    if (r > 1.15)
      v.reasons.push_back(what + " ran " + std::to_string(static_cast<int>(std::lround((r - 1) * 100))) +
                          " % slower in one round than in another" + why);
    return r;
  };
  v.calibration_ratio = spread(h.calibration_s, "the calibration loop", "");
  v.memory_calibration_ratio =
      spread(h.memory_calibration_s, "the memory pass", " (memory bandwidth taken by other work)");
  v.busy = !v.reasons.empty();
  return v;
}

}  // namespace cellsched::validate
