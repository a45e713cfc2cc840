#include "runner/contract.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace cellsched::runner {

double read_progress(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return -1;
  const std::streamoff size = f.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  f.seekg(from);
  std::string tail((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Only complete lines count: a line still being written is ignored.
  const auto end = tail.rfind('\n');
  if (end == std::string::npos) return -1;
  tail.resize(end);
  std::istringstream in(tail);
  std::string line;
  double last = -1;
  while (std::getline(in, line)) {
    if (line.rfind("iterations=", 0) != 0) continue;
    char* e = nullptr;
    const double v = std::strtod(line.c_str() + 11, &e);
    if (e != line.c_str() + 11 && std::isfinite(v) && v >= 0) last = v;
  }
  return last;
}

void commit_checkpoint(const std::string& ckpt_out, double iterations) {
  if (ckpt_out.empty()) return;
  const fs::path out(ckpt_out);
  const std::string prefix = out.filename().string() + ".";
  const std::string committed =
      iterations > 0 ? prefix + std::to_string(std::llround(iterations)) + ".tmp" : std::string();
  std::error_code ec;
  std::vector<fs::path> temps;
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  for (fs::directory_iterator d(dir, ec), end; !ec && d != end; d.increment(ec)) {
    const std::string name = d->path().filename().string();
    if (name.size() <= prefix.size() + 4 || name.rfind(prefix, 0) != 0 || !name.ends_with(".tmp")) continue;
    const std::string mid = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    if (std::all_of(mid.begin(), mid.end(), [](char c) { return c >= '0' && c <= '9'; })) temps.push_back(d->path());
  }
  for (const fs::path& t : temps) {
    if (t.filename().string() == committed) fs::rename(t, out, ec);
    else fs::remove(t, ec);
  }
}

namespace {

double worth(const ForkModel& model, const std::vector<long long>& it) {
  return fork_worth(model, std::vector<double>(it.begin(), it.end()));
}

}  // namespace

std::vector<long long> split_iterations(long long remaining, const std::vector<double>& rates,
                                        const ForkModel& model) {
  if (remaining < 0 || rates.empty())
    throw std::invalid_argument("split_iterations: need remaining >= 0 and at least one gang");
  double floor_rate = 0;
  for (double r : rates)
    if (r > 0 && (floor_rate == 0 || r < floor_rate)) floor_rate = r;
  std::vector<double> w(rates.size());
  for (size_t g = 0; g < rates.size(); ++g) w[g] = rates[g] > 0 ? rates[g] : (floor_rate > 0 ? floor_rate : 1.0);
  // Training time t makes the gangs worth `remaining`: worth is linear in t.
  const double per_time = fork_worth(model, w);
  const double t = per_time > 0 ? static_cast<double>(remaining) / per_time : 0;
  std::vector<double> exact(w.size());
  double sum = 0;
  for (size_t g = 0; g < w.size(); ++g) sum += exact[g] = w[g] * t;
  // The total, by largest remainders (exact when copies count in full).
  const auto total = static_cast<long long>(std::ceil(sum - 1e-9 * std::max(1.0, sum)));
  std::vector<long long> out(w.size(), 0);
  std::vector<std::pair<double, size_t>> frac;  // (fractional part, gang)
  long long given = 0;
  for (size_t g = 0; g < w.size(); ++g) {
    out[g] = std::min(total - given, static_cast<long long>(std::floor(exact[g])));
    given += out[g];
    frac.push_back({exact[g] - std::floor(exact[g]), g});
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total; ++k, ++given) ++out[frac[k % frac.size()].second];
  // Every gang trains while there is enough: one from the largest share.
  if (remaining >= static_cast<long long>(rates.size()))
    for (long long& x : out)
      if (x == 0) {
        --*std::max_element(out.begin(), out.end());
        x = 1;
      }
  // Worth at least `remaining`: round up the gangs rounded down, then (after
  // the rule above took from the largest) the largest gang, whose iterations
  // add the most (it sets k).
  const double need = static_cast<double>(remaining) * (1 - 1e-12);
  for (size_t k = 0; k < frac.size() && worth(model, out) < need; ++k) {
    const size_t g = frac[k].second;
    if (static_cast<double>(out[g]) < exact[g]) out[g] = static_cast<long long>(std::ceil(exact[g]));
  }
  while (worth(model, out) < need)
    *std::max_element(out.begin(), out.end()) += std::max(1LL, static_cast<long long>(need - worth(model, out)));
  return out;
}

}  // namespace cellsched::runner
