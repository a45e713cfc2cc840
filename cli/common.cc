#include "cli/common.h"
#include "core/job.h"

#include <cerrno>
#include <cmath>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <regex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/gpu.h"
#include "db/store.h"
#include "scheduler/policy.h"

namespace cellsched::cli {

int run_verb(const Verb& v, const std::vector<std::string>& args) {
  try {
    return v.run(args);
  } catch (const InputError& e) {
    std::cerr << "cellsched " << v.name << ": " << e.what() << "\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "cellsched " << v.name << ": " << e.what() << " (see --help)\n";
    return 2;
  } catch (const db::StoreError& e) {
    std::cerr << "cellsched " << v.name << ": database: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "cellsched " << v.name << ": error: " << e.what() << "\n";
    return 1;
  }
}

int run_main(int argc, char** argv, int (*dispatch)(const std::vector<std::string>&)) {
  const int rc = dispatch(std::vector<std::string>(argv + 1, argv + argc));
  write_maps_if_asked();
  return rc;
}

void write_maps_if_asked() {
  const char* out = std::getenv("CELLSCHED_MAPS_OUT");
  if (!out || !*out) return;
  std::ofstream f(out, std::ios::app);
  for (const char* file : {"/proc/self/maps", "/proc/self/status"}) {
    std::ifstream in(file);
    f << in.rdbuf();
  }
}

namespace {

// Boost prints a double default with 17 digits ("=0.90000000000000002"):
// print the shortest form that reads back the same ("=0.9").
std::string shortest_defaults(const std::string& help) {
  static const std::regex long_number(R"(\(=(-?[0-9]+\.[0-9]{10,}(e[-+]?[0-9]+)?)\))");
  std::string out;
  auto it = std::sregex_iterator(help.begin(), help.end(), long_number);
  size_t last = 0;
  for (; it != std::sregex_iterator(); ++it) {
    const double v = std::strtod((*it)[1].str().c_str(), nullptr);
    char buf[64];
    for (int digits = 1; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    out += help.substr(last, static_cast<size_t>(it->position()) - last) + "(=" + buf + ")";
    last = static_cast<size_t>(it->position() + it->length());
  }
  return out + help.substr(last);
}

}  // namespace

bool parse(const std::string& usage, const std::vector<std::string>& args,
           const po::options_description& options, const po::positional_options_description& pos,
           po::variables_map& vm) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help");
  // --help anywhere before a "--" asks for help, even where the option
  // before it takes a value (`estimate --validate --help`).
  const auto end = std::find(args.begin(), args.end(), "--");
  const bool asked = std::any_of(args.begin(), end, [](const std::string& a) { return a == "--help" || a == "-h"; });
  if (!asked) po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
  if (asked || vm.count("help")) {
    std::ostringstream text;
    text << all;
    std::cout << "usage: " << usage << "\n\n" << shortest_defaults(text.str()) << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

std::string default_db_path() { return "cellsched.db"; }

std::string data_dir() {
  if (const char* env = std::getenv("CELLSCHED_DATA")) return env;
  return CELLSCHED_DATA_DIR;
}

std::string default_throughputs() { return data_dir() + "/gavel/simulation_throughputs.json"; }

std::string count_of(long n, const std::string& noun) {
  if (n == 1) return "1 " + noun;
  const bool es = noun.ends_with("ch") || noun.ends_with("sh") || noun.ends_with("s") || noun.ends_with("x");
  return std::to_string(n) + " " + noun + (es ? "es" : "s");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

std::string all_policies() {
  std::string s;
  for (const std::string& n : policy_names()) s += (s.empty() ? "" : ",") + n;
  return s;
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

std::function<void(double, long, long)> sim_progress(const std::string& label) {
  if (!stderr_is_tty()) return {};
  using clock = std::chrono::steady_clock;
  struct State {
    clock::time_point start = clock::now(), last{};
    long rounds = 0;
  };
  auto st = std::make_shared<State>();
  return [label, st](double t, long done, long total) {
    ++st->rounds;
    const auto now = clock::now();
    if (now - st->last < std::chrono::milliseconds(200) && done < total) return;
    st->last = now;
    const double secs = std::chrono::duration<double>(now - st->start).count();
    show_progress(label + ": simulated " + fixed(t / 3600, 1) + " h, " + std::to_string(done) + "/" +
                  std::to_string(total) + " jobs done, " +
                  (secs > 0 ? fixed(static_cast<double>(st->rounds) / secs, 0) : "-") + " rounds/s");
  };
}

void show_progress(const std::string& line) {
  if (stderr_is_tty()) std::cerr << "\r\033[K" << line << std::flush;
}

void clear_progress() { show_progress(""); }

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      // First column left-aligned, the rest (numbers) right-aligned unless said.
      const bool left = i == 0 || std::find(left_.begin(), left_.end(), i) != left_.end();
      const bool last = i + 1 == row.size();
      const std::string pad(left && last ? 0 : width[i] - row[i].size(), ' ');
      out << (i ? "  " : "") << (left ? row[i] + pad : pad + row[i]);
    }
    out << "\n";
  };
  line(header_);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
  for (const auto& r : rows_) line(r);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string num(double v) {
  char buf[32];
  // Whole numbers in full ("1000000", not %g's "1e+06": iteration counts, limits).
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

ForkModel fork_model_arg(double efficiency, const std::string& scaling) {
  if (!(std::isfinite(efficiency) && efficiency > 0 && efficiency <= 1))
    throw InputError("--fork-efficiency must be in (0, 1], got " + num(efficiency));
  try {
    return {efficiency, parse_fork_scaling(scaling)};
  } catch (const InputError&) {
    throw InputError("--fork-scaling must be noise or linear, got '" + scaling + "'");
  }
}

po::typed_value<double>* fork_efficiency_value(double* target) {
  return po::value(target)->default_value(kDefaultForkEfficiency, num(kDefaultForkEfficiency));
}

po::typed_value<std::string>* seed_value(uint64_t* target) {
  *target = 0;
  return po::value<std::string>()->default_value("0")->notifier([target](const std::string& v) {
    const bool digits = !v.empty() && v.size() <= 20 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    errno = 0;
    const unsigned long long n = digits ? std::strtoull(v.c_str(), nullptr, 10) : 0;
    if (!digits || errno == ERANGE)
      throw InputError("--seed must be a whole number in [0, 18446744073709551615], got '" + printable(v) + "'");
    *target = n;
  });
}

void add_hadar_options(po::options_description& opt, PolicySettings* s) {
  auto value = [](double* target) { return po::value(target)->default_value(*target, num(*target)); };
  opt.add_options()
      ("hadar-spare-exponent", value(&s->hadar_spare_exponent),
       "hadar, hadare: in a round where every job's gang fits at once, weight each job by (GPU-rounds it has left)^this, so the longest take the fast types (0: off; docs/hadar.md)")
      ("hadar-ratio-exponent", value(&s->hadar_ratio_exponent),
       "hadar, hadare: in a round where jobs wait, weight each job by its response ratio (age + p) / p to this power, p its time left capped at --hadar-ratio-cap (0: off; docs/hadar.md)")
      ("hadar-ratio-cap", value(&s->hadar_ratio_cap_s), "hadar, hadare: the response ratio's cap on the time left, seconds");
}

void check_policy_settings(const PolicySettings& s) {
  check_flag_range("hadar-spare-exponent", s.hadar_spare_exponent, 0, 10);
  check_flag_range("hadar-ratio-exponent", s.hadar_ratio_exponent, 0, 10);
  check_flag_range("hadar-ratio-cap", s.hadar_ratio_cap_s, 1, 1e9);
}

std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

std::string hours(double seconds) { return seconds < 0 ? "-" : fixed(seconds / 3600.0, 2); }

}  // namespace cellsched::cli

namespace cellsched::cli {

namespace {

// A newline or other control character in an output path breaks the gnuplot
// scripts and every log that names the file; it is a typo, not a name.
void check_no_control(const char* flag, const std::string& path) {
  if (printable(path) != path)
    throw InputError(std::string("--") + flag + " '" + printable(path) + "': the path has a control character");
}

}  // namespace

void check_out_file(const char* flag, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string what = std::string("--") + flag + " " + path;
  std::error_code ec;
  if (path.empty()) throw InputError(std::string("--") + flag + ": empty path");
  check_no_control(flag, path);
  if (fs::is_directory(path, ec)) throw InputError(what + ": is a folder, not a file");
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) throw InputError(what + ": no folder " + parent.string());
  if (::access(parent.c_str(), W_OK | X_OK) != 0) throw InputError(what + ": folder " + parent.string() + " is not writable");
  // A database (the --db just read, most often) is never an output: writing
  // a CSV over it lost every stored profile and run, with exit 0.
  const auto is_sqlite = [](const std::string& file) {
    char head[16] = {};
    std::ifstream in(file, std::ios::binary);
    return in.read(head, sizeof head) && std::string(head, sizeof head) == std::string("SQLite format 3\0", 16);
  };
  std::string base = path;
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    if (base.size() > std::strlen(suffix) && base.ends_with(suffix)) base.resize(base.size() - std::strlen(suffix));
  if (fs::is_regular_file(path, ec) && is_sqlite(path))
    throw InputError(what + ": is an SQLite database; refusing to overwrite it (name another file)");
  if (base != path && fs::is_regular_file(base, ec) && is_sqlite(base))
    throw InputError(what + ": belongs to the SQLite database " + base + "; refusing to overwrite it");
}

void check_out_dir(const char* flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw InputError(std::string("--") + flag + ": empty path");
  check_no_control(flag, path);
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path))
    throw InputError(path + ": --" + flag + " must be a directory that can be created" +
                     (ec ? ": " + ec.message() : ""));
}

void check_flag_range(const char* flag, double v, double lo, double hi) {
  if (!std::isfinite(v) || v < lo || v > hi)
    throw InputError(std::string("--") + flag + " must be a number in [" + num(lo) + ", " + num(hi) + "], got " + num(v));
}

void check_limit(long limit) {
  if (limit != -1 && limit < 1)
    throw InputError("--limit must be a number of jobs >= 1 (-1: all, the default), got " + std::to_string(limit));
}

std::string reference_gpu_flag(const std::string& name) {
  try {
    return canonical_gpu_name(name);
  } catch (const InputError& e) {
    throw InputError(std::string("--reference-gpu: ") + e.what());
  }
}

}  // namespace cellsched::cli
