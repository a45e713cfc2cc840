// `cellsched scavenge --jobs FILE`: the job file's reader (cli/scavenge_jobs.h).
#include "cli/scavenge_jobs.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/parse_util.h"
#include "runner/process.h"

namespace cellsched::cli {

namespace {

constexpr const char* kHeader = "name,iterations,max_nodes,rescale_s,curve,command";

// Each job holds its curve at 1..max_nodes (8 bytes a node): 2,800 lines of
// max_nodes 100000, 63 KB, took over 2 GB. The sum over the file is bounded
// (80 MB), past any real cluster's nodes times a real job list.
constexpr long long kMaxCurvePoints = 10000000;

}  // namespace

std::vector<runner::ScavengeJob> load_scavenge_jobs(const std::string& path) {
  std::string text = detail::read_file(path);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  std::vector<runner::ScavengeJob> jobs;
  std::set<std::string> names;
  bool header = false;
  long line_no = 0;
  long long curve_points = 0;
  for (std::string_view raw : detail::split_lines(text)) {
    ++line_no;
    const std::string_view line = detail::trim(raw);
    if (line.empty() || line.front() == '#') continue;
    if (!header) {
      if (line != kHeader) fail_input(path, line_no, std::string("expected the header ") + kHeader);
      header = true;
      continue;
    }
    const auto f = detail::split(line, ',');
    if (f.size() < 6) fail_input(path, line_no, "expected at least 6 fields (the command last), got " + std::to_string(f.size()));
    runner::ScavengeJob j;
    j.name = std::string(detail::trim(f[0]));
    if (j.name.empty() || j.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != std::string::npos)
      fail_input(path, line_no, "name must be letters, digits, '_', '.' or '-', got '" + j.name + "'");
    if (!names.insert(j.name).second) fail_input(path, line_no, "duplicate name '" + j.name + "'");
    const auto it = detail::to_double(f[1]);
    if (!it || *it < 1 || *it > 9007199254740992.0 || *it != std::floor(*it))
      fail_input(path, line_no, "iterations must be a whole number in [1, 2^53], got '" + std::string(detail::trim(f[1])) + "'");
    j.iterations = *it;
    const auto mn = detail::to_int(f[2]);
    if (!mn || *mn < 1 || *mn > 100000)
      fail_input(path, line_no, "max_nodes must be a whole number in [1, 100000], got '" + std::string(detail::trim(f[2])) + "'");
    j.max_nodes = static_cast<int>(*mn);
    if ((curve_points += j.max_nodes) > kMaxCurvePoints)
      fail_input(path, line_no, "the jobs' max_nodes add up to more than " + std::to_string(kMaxCurvePoints) +
                                    " (a curve point per node per job): lower max_nodes");
    const auto rs = detail::to_double(f[3]);
    if (!rs || *rs < 0 || *rs > 86400)
      fail_input(path, line_no, "rescale_s must be a number in [0, 86400], got '" + std::string(detail::trim(f[3])) + "'");
    j.rescale_s = *rs;
    double sigma = 0.1;
    const std::string_view curve = detail::trim(f[4]);
    if (!curve.empty()) {
      const auto s = curve.rfind("amdahl:", 0) == 0 ? detail::to_double(curve.substr(7)) : std::nullopt;
      if (!s || *s < 0 || *s > 1)
        fail_input(path, line_no, "curve must be empty or amdahl:SIGMA with SIGMA in [0, 1], got '" + std::string(curve) + "'");
      sigma = *s;
    }
    j.curve = amdahl_curve(1, sigma, j.max_nodes);
    for (size_t i = 5; i < f.size(); ++i) {
      j.command.emplace_back(detail::trim(f[i]));
      if (j.command.back().empty())
        fail_input(path, line_no, i == 5 ? std::string("empty command")
                                         : "argument " + std::to_string(i - 5) + " of the command is empty (a stray comma?)");
    }
    const std::string exe = runner::find_executable(j.command[0]);
    std::error_code ec;
    if (exe.empty() || !std::filesystem::is_regular_file(exe, ec) || access(exe.c_str(), X_OK) != 0)
      fail_input(path, line_no, "'" + j.command[0] + "' is not an executable file");
    // A launch runs in the job's state folder: a relative path found here
    // ("build/trainer") would not be found there, and every launch failed.
    if (j.command[0].find('/') != std::string::npos) j.command[0] = std::filesystem::absolute(exe).lexically_normal().string();
    jobs.push_back(std::move(j));
  }
  if (!header) fail_input(path, 0, std::string("empty: expected the header ") + kHeader);
  if (jobs.empty()) fail_input(path, 0, "no jobs (only a header)");
  return jobs;
}

}  // namespace cellsched::cli
