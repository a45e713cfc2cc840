#include "cli/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <locale>
#include <map>
#include <sstream>
#include <stdexcept>

#include "cli/common.h"
#include "core/error.h"
#include "core/parse_util.h"

extern char** environ;

namespace cellsched::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInstallHint = "install it with: sudo apt-get install gnuplot-nox";
constexpr size_t kMaxSeriesPoints = 2000;

bool executable(const std::string& path) {
  struct stat st{};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// A gnuplot single-quoted string: only '' needs escaping; control characters
// are dropped.
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "'";
}

fs::path make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create directory: " + ec.message());
  fs::path abs = fs::absolute(dir, ec);
  if (ec) throw InputError(dir + ": " + ec.message());
  return abs;
}

std::ofstream open_out(const fs::path& p) {
  std::ofstream f(p);
  if (!f) throw InputError(p.string() + ": cannot write");
  f.imbue(std::locale::classic());
  f.precision(10);
  return f;
}

void close_out(std::ofstream& f, const fs::path& p) {
  f.close();
  if (!f) throw InputError(p.string() + ": write failed");
}

void check_png(const fs::path& png) {
  std::error_code ec;
  if (!fs::exists(png, ec) || fs::file_size(png, ec) == 0)
    throw std::runtime_error("gnuplot wrote no " + png.string());
}

const char* kTerminal = "set terminal pngcairo noenhanced size 1000,640 font 'sans,11'\n";

}  // namespace

std::string find_gnuplot() {
  if (const char* env = std::getenv("CELLSCHED_GNUPLOT"); env && *env) {
    if (executable(env)) return env;
    throw std::runtime_error(std::string("gnuplot not found at $CELLSCHED_GNUPLOT=") + env + "; " +
                             kInstallHint);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    const std::string candidate = (d.empty() ? std::string(".") : d) + "/gnuplot";
    if (executable(candidate)) return candidate;
  }
  throw std::runtime_error(std::string("gnuplot not found on PATH; ") + kInstallHint);
}

void run_gnuplot(const std::string& script_path) {
  const std::string exe = find_gnuplot();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);  // gnuplot's messages come back here
  std::string arg0 = exe, arg1 = script_path;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("cannot run " + exe + ": " + std::strerror(rc) + "; " + kInstallHint);
  }
  std::string messages;
  char buf[4096];
  while (true) {
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got > 0) {
      if (messages.size() < 16384) messages.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!messages.empty() && std::isspace(static_cast<unsigned char>(messages.back())))
      messages.pop_back();
    throw std::runtime_error("gnuplot failed on " + script_path +
                             (messages.empty() ? std::string() : ":\n" + messages) +
                             "\n(gnuplot-nox provides the pngcairo terminal used here)");
  }
}

namespace {

// The data blocks of one plot's file: block i is drawn titled titles[i].
struct Blocks {
  std::vector<std::string> titles;
  std::vector<int> index;
  std::vector<std::string> policies;  // each block's policy (its colour)
};

// CDF of JCT: (hours, fraction of all the run's jobs), one block per run. A
// run that left jobs unfinished tops out below 1 and says how many it did: a
// curve scaled to the finished jobs alone would hide its slowest ones.
Blocks write_cdf_data(const std::vector<RunRecord>& runs, const fs::path& dat) {
  Blocks b;
  std::ofstream f = open_out(dat);
  for (const RunRecord& r : runs) {
    std::vector<double> h;
    for (const JobResult& j : r.jobs)
      if (j.finished()) h.push_back(std::max(j.jct_s(), 1.0) / 3600.0);  // log axis: >= 1 s
    if (h.empty()) continue;
    std::sort(h.begin(), h.end());
    const double all = static_cast<double>(r.jobs.size());
    f << "# " << r.policy << ": JCT hours, fraction of all " << r.jobs.size() << " jobs\n";
    f << h.front() << " 0\n";
    for (size_t i = 0; i < h.size(); ++i) f << h[i] << " " << static_cast<double>(i + 1) / all << "\n";
    f << "\n\n";
    b.index.push_back(static_cast<int>(b.titles.size()));
    b.titles.push_back(h.size() == r.jobs.size() ? r.policy
                                                 : r.policy + " (" + std::to_string(h.size()) + " of " +
                                                       std::to_string(r.jobs.size()) + " done)");
    b.policies.push_back(r.policy);
  }
  close_out(f, dat);
  return b;
}

// Utilization: (hours, busy / total), each point the time-weighted mean of a
// bucket of samples. A sample holds until the next one (the engine records
// an idle gap as a sample of 0 GPUs); the last holds for one round.
Blocks write_utilization_data(const std::vector<RunRecord>& runs, const fs::path& dat) {
  Blocks b;
  std::ofstream f = open_out(dat);
  for (const RunRecord& r : runs) {
    const auto& u = r.utilization;
    if (u.empty() || r.cluster_gpus <= 0) continue;
    const auto round = r.params.find("round_s");
    const double last = round == r.params.end() ? 0 : detail::to_double(round->second).value_or(0);
    const auto lasts = [&](size_t j) { return j + 1 < u.size() ? u[j + 1].t_s - u[j].t_s : last; };
    const size_t k = (u.size() + kMaxSeriesPoints - 1) / kMaxSeriesPoints;  // samples per point
    f << "# " << r.policy << ": hours, busy GPUs / " << r.cluster_gpus << " (time-weighted mean of " << k
      << " samples a point)\n";
    for (size_t i = 0; i < u.size(); i += k) {
      const size_t end = std::min(u.size(), i + k);
      double busy = 0, span = 0;
      for (size_t j = i; j < end; ++j) busy += u[j].busy_gpus * lasts(j), span += lasts(j);
      busy = span > 0 ? busy / span : u[i].busy_gpus;
      f << u[i].t_s / 3600.0 << " " << busy / r.cluster_gpus << "\n";
    }
    f << "\n\n";
    b.index.push_back(static_cast<int>(b.titles.size()));
    b.titles.push_back(r.policy);
    b.policies.push_back(r.policy);
  }
  close_out(f, dat);
  return b;
}

// One colour per policy in every figure (gnuplot's default eight repeat, and
// follow the order of --policy); others take the rest of the palette in turn.
std::string policy_colour(const std::string& policy, size_t i) {
  static const std::map<std::string, std::string> fixed_colours = {
      {"fifo", "#1b9e77"},   {"yarn-cs", "#d95f02"},        {"tiresias", "#7570b3"},
      {"gavel", "#e7298a"},  {"gavel-makespan", "#66a61e"}, {"hadar", "#1f78b4"},
      {"hadare", "#e31a1c"}, {"crius", "#a6761d"},          {"hadar-design", "#666666"}};
  static const char* const others[] = {"#000000", "#17becf", "#bcbd22", "#8c564b", "#ff7f0e", "#9467bd"};
  const auto it = fixed_colours.find(policy);
  return it != fixed_colours.end() ? it->second : others[i % std::size(others)];
}

// The plot command of one file's blocks. Lines drawn later are thinner and
// dashed differently, so a policy whose curve coincides with an earlier one's
// still shows on top of it.
std::string plot_command(const fs::path& dat, const Blocks& b, const char* style) {
  std::string s;
  for (size_t i = 0; i < b.index.size(); ++i) {
    const double lw = std::max(0.8, 3.0 - 0.35 * static_cast<double>(i));
    s += (i ? ", \\\n     " : "plot ") + quote(dat.string()) + " index " + std::to_string(b.index[i]) +
         " using 1:2 " + style + " lw " + fixed(lw, 2) + " dt " + std::to_string(i % 5 + 1) + " lc rgb " +
         quote(policy_colour(b.policies[i], i)) + " title " + quote(b.titles[i]);
  }
  return s.empty() ? std::string("plot NaN notitle") : s;
}

}  // namespace

void write_plots(const std::vector<RunRecord>& runs, const std::string& dir) {
  const fs::path d = make_dir(dir);
  const fs::path cdf_dat = d / "jct_cdf.dat", util_dat = d / "utilization.dat";
  const fs::path script = d / "plots.gp";
  const Blocks cdf = write_cdf_data(runs, cdf_dat);
  const Blocks util = write_utilization_data(runs, util_dat);
  // What was run, in every title: once copied out of its folder a plot
  // named neither its trace nor its cluster (sweep's rate folders looked alike).
  std::string what;
  if (!runs.empty())
    what = ": " + printable(runs[0].trace_name) + " on " + printable(runs[0].cluster_name) + " (" +
           std::to_string(runs[0].cluster_gpus) + " GPUs)";
  {
    std::ofstream f = open_out(script);
    f << kTerminal;
    f << "set output " << quote((d / "jct_cdf.png").string()) << "\n"
      << "set title " << quote("CDF of job completion time" + what) << "\n"
      << "set xlabel 'JCT (hours, log scale)'\nset ylabel 'fraction of jobs finished'\n"
      << "set logscale x\nset yrange [0:1.02]\nset grid\nset key bottom right\n";
    if (cdf.index.empty())
      f << "set xrange [0.1:10]\nset label 1 'no finished jobs' at graph 0.5,0.5 center\n";
    f << plot_command(cdf_dat, cdf, "with steps") << "\n";
    f << "unset label 1\nunset logscale x\nset autoscale x\n"
      << "set output " << quote((d / "utilization.png").string()) << "\n"
      << "set title " << quote("GPU utilization" + what) << "\n"
      << "set xlabel 'time (hours)'\nset ylabel 'busy GPUs / total'\n"
      // The key beside the plot: the curves crowd near 1, where it sat on them.
      << "set yrange [0:1.05]\nset key outside right top vertical font 'sans,9'\n";
    if (util.index.empty())
      f << "set xrange [0:1]\nset label 1 'no rounds recorded' at graph 0.5,0.5 center\n";
    f << plot_command(util_dat, util, "with steps") << "\n";
    f << "unset output\n";
    close_out(f, script);
  }
  run_gnuplot(script.string());
  check_png(d / "jct_cdf.png");
  check_png(d / "utilization.png");
}

void plot_jct_vs_load(const std::vector<LoadPoint>& points, const std::string& dir) {
  const fs::path d = make_dir(dir);
  const fs::path dat = d / "jct_vs_load.dat", script = d / "jct_vs_load.gp";
  // Policies in order of first appearance, each with its points by load.
  std::vector<std::string> policies;
  std::map<std::string, std::vector<std::pair<double, double>>> by_policy;
  for (const LoadPoint& p : points) {
    if (!by_policy.count(p.policy)) policies.push_back(p.policy);
    auto& v = by_policy[p.policy];
    if (p.avg_jct_s >= 0) v.emplace_back(p.jobs_per_hour, p.avg_jct_s / 3600.0);
  }
  std::vector<std::string> titles;
  std::vector<int> blocks;
  {
    std::ofstream f = open_out(dat);
    int block = 0;
    for (const std::string& name : policies) {
      auto& v = by_policy[name];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      f << "# " << name << ": load (jobs/hour), average JCT (hours)\n";
      for (const auto& [load, jct] : v) f << load << " " << jct << "\n";
      f << "\n\n";
      titles.push_back(name);
      blocks.push_back(block++);
    }
    close_out(f, dat);
  }
  {
    std::ofstream f = open_out(script);
    f << kTerminal << "set output " << quote((d / "jct_vs_load.png").string()) << "\n"
      << "set title 'Average JCT of the steady-state window of jobs (--window-start/end) against input load'\n"
      << "set xlabel 'input load (jobs/hour)'\nset ylabel 'average JCT over the window (hours)'\n"
      << "set grid\nset key top left\nset yrange [0:*]\n";
    if (blocks.empty()) {
      f << "set xrange [0:1]\nset label 1 'no finished jobs' at graph 0.5,0.5 center\n"
        << "plot NaN notitle\n";
    } else {
      for (size_t i = 0; i < blocks.size(); ++i) {
        // Later lines thinner, dashed and with their own marks: coinciding curves stay visible.
        f << (i ? ", \\\n     " : "plot ") << quote(dat.string()) << " index " << blocks[i]
          << " using 1:2 with linespoints lw " << fixed(std::max(0.8, 3.0 - 0.35 * static_cast<double>(i)), 2)
          << " dt " << (i % 5 + 1) << " pt " << (i % 13 + 1) << " lc rgb " << quote(policy_colour(titles[i], i))
          << " title " << quote(titles[i]);
      }
      f << "\n";
    }
    f << "unset output\n";
    close_out(f, script);
  }
  run_gnuplot(script.string());
  check_png(d / "jct_vs_load.png");
}

namespace {

// The Gantt's data: one row per GPU (nodes stacked top to bottom in cluster
// order) and, per job type, a block of the gangs' boxes and one of the forked
// copies' (hatched in the chart).
struct GanttData {
  std::map<std::string, int> first_row;  // node -> its first GPU's row
  int rows = 0;
  std::vector<std::string> types;        // sorted: the legend
  std::vector<std::string> all_types;    // of every job of the trace, sorted: a type's colour is its rank
  std::map<std::string, std::ostringstream> own, copies;  // by type: "x_center_h y_row half_width_h" lines
};

GanttData gantt_data(const Schedule& schedule, const Cluster& cluster,
                     const std::map<int64_t, std::string>& job_types) {
  GanttData g;
  for (const Node& n : cluster.nodes) {
    g.first_row[n.name] = g.rows;
    g.rows += n.gpus;
  }
  for (const auto& [id, type] : job_types) g.all_types.push_back(type.empty() ? "other" : type);
  std::sort(g.all_types.begin(), g.all_types.end());
  g.all_types.erase(std::unique(g.all_types.begin(), g.all_types.end()), g.all_types.end());
  for (const ScheduleEntry& e : schedule.entries) {
    auto it = g.first_row.find(e.node);
    if (it == g.first_row.end() || e.end_s <= e.start_s) continue;
    const auto t = job_types.find(e.job_id);
    const std::string type = t == job_types.end() || t->second.empty() ? "other" : t->second;
    if (!g.own.count(type) && !g.copies.count(type)) g.types.push_back(type);
    auto& block = e.copy > 0 ? g.copies[type] : g.own[type];
    const double mid = (e.start_s + e.end_s) / 2 / 3600, half = (e.end_s - e.start_s) / 2 / 3600;
    for (int gpu : e.gpu_indices) block << mid << " " << g.rows - 1 - (it->second + gpu) << " " << half << "\n";
  }
  std::sort(g.types.begin(), g.types.end());
  return g;
}

// Twenty distinguishable colours (ColorBrewer Paired, then Dark2 and a few
// more); past twenty types the colours repeat with a hatch pattern.
constexpr const char* kGanttColours[] = {"#1f78b4", "#e31a1c", "#33a02c", "#ff7f00", "#6a3d9a", "#b15928",
                                         "#a6cee3", "#fb9a99", "#b2df8a", "#fdbf6f", "#cab2d6", "#e7298a",
                                         "#1b9e77", "#7570b3", "#66a61e", "#e6ab02", "#a6761d", "#666666",
                                         "#17becf", "#000000"};

// The plot command: per type its gangs' boxes (solid, a thin white border
// parting two jobs that touch) and its copies' (hatched, no legend entry).
std::string gantt_plot_command(const GanttData& g, const fs::path& dat) {
  constexpr size_t kColours = std::size(kGanttColours);
  std::string s;
  int index = 0;
  bool any_copy = false;
  for (const std::string& type : g.types) {
    const auto at = std::lower_bound(g.all_types.begin(), g.all_types.end(), type);
    const size_t c = at != g.all_types.end() && *at == type ? static_cast<size_t>(at - g.all_types.begin())
                                                            : g.all_types.size();
    const std::string colour = std::string("lc rgb '") + kGanttColours[c % kColours] + "'";
    const std::string fill = c < kColours ? "solid 0.9" : "pattern " + std::to_string((c / kColours - 1) % 7 + 1);
    bool titled = false;
    for (const bool copies : {false, true}) {
      if (!(copies ? g.copies : g.own).count(type)) continue;
      any_copy = any_copy || copies;
      s += (s.empty() ? "plot " : ", \\\n     ") + quote(dat.string()) + " index " + std::to_string(index++) +
           " using 1:2:3:(0.45) with boxxyerror fillstyle " + (copies ? std::string("pattern 4") : fill) +
           " border lc rgb '#ffffff' lw 0.6 " + colour + " " +
           (titled ? std::string("notitle") : "title " + quote(printable(type)));
      titled = true;
    }
  }
  if (any_copy)
    s += ", \\\n     keyentry with boxes fillstyle pattern 4 lc rgb '#000000' title 'hatched: forked copies'";
  return s;
}

}  // namespace

void plot_gantt(const Schedule& schedule, const Cluster& cluster, const std::string& dir,
                const std::map<int64_t, std::string>& job_types) {
  const fs::path d = make_dir(dir);
  find_gnuplot();
  const GanttData g = gantt_data(schedule, cluster, job_types);
  const fs::path dat = d / "gantt.dat";
  auto f = open_out(dat);
  f << "# x_center_h y_row half_width_h; per job type a block of its gangs, then one of its copies (if any)\n";
  for (const std::string& type : g.types)
    for (const auto* blocks : {&g.own, &g.copies})
      if (const auto b = blocks->find(type); b != blocks->end())
        f << "# " << printable(type) << (blocks == &g.copies ? " (copies)" : "") << "\n" << b->second.str() << "\n\n";
  close_out(f, dat);
  const fs::path png = d / "gantt.png", gp = d / "gantt.gp";
  auto s = open_out(gp);
  const int height = std::clamp(120 + g.rows * 6, 480, 2400);
  s << "set terminal pngcairo noenhanced size 1400," << height << " font 'sans,10'\n"
    << "set output " << quote(png.string()) << "\n"
    << "set title " << quote("Schedule: " + schedule.policy + ", trace " + printable(schedule.trace) + ", on " +
                                  schedule.cluster + " (colour: job type)") << "\n"
    << "set xlabel 'time (hours)'\nset ylabel 'GPU (by node)'\n"
    << "set key outside right top vertical Left reverse noautotitle font 'sans,8'\n"
    << "set yrange [-0.5:" << g.rows - 0.5 << "]\nset grid xtics\n";
  // Node labels at the middle of each node's rows (past 64 nodes, every k-th
  // node's, so that at most 64 labels show).
  const size_t k = (cluster.nodes.size() + 63) / 64;
  s << "set ytics (";
  for (size_t i = 0; i < cluster.nodes.size(); i += k) {
    const Node& n = cluster.nodes[i];
    s << (i ? ", " : "") << quote(n.name + " (" + n.gpu_type + ")") << " "
      << g.rows - 1 - g.first_row.at(n.name) - (n.gpus - 1) / 2.0;
  }
  s << ")" << (k > 1 ? " font 'sans,7'" : "") << "\n";
  if (g.types.empty())
    s << "set xrange [0:1]\nset label 1 'nothing was placed' at graph 0.5,0.5 center\nplot NaN notitle\n";
  else
    s << gantt_plot_command(g, dat) << "\n";
  close_out(s, gp);
  run_gnuplot(gp.string());
  check_png(png);
}

}  // namespace cellsched::cli
