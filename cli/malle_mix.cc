// The malleable mix of `simulate --malleable` (cli/malle.h): its reader, on
// its own so that the fuzz harness (fuzz/fuzz_mix.cc) links it without the CLI.
#include "cli/malle_mix.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/parse_util.h"

namespace cellsched::cli {

using detail::trim;

namespace {

// Where a field was read, for `file:line:` errors.
struct Ctx {
  const std::string& path;
  long line;
  [[noreturn]] void fail(const std::string& what) const { fail_input(path, line, what); }
};

// `%g`, as cli::num writes it (this file links without the CLI library).
std::string g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A finite number in [lo, hi] filling the field, else `file:line: WHAT must be a number in [lo, hi]`.
double number_in(const Ctx& c, std::string_view field, const std::string& what, double lo, double hi) {
  const auto v = detail::to_double(field);
  if (!v || *v < lo || *v > hi)
    c.fail(what + " must be a number in [" + g(lo) + ", " + (hi == 9007199254740992.0 ? std::string("2^53") : g(hi)) +
           "], got '" + std::string(trim(field)) + "'");
  return *v;
}

constexpr double kMaxIterations = 9007199254740992.0;  // 2^53

// Iterations/s at 1..max_nodes whole nodes from `oracle` (consolidated on one
// node), all checked; the first `keep` kept.
ScalingCurve oracle_curve(const Ctx& c, const Job& job, int max_nodes, int keep, const ThroughputOracle& oracle,
                          const Cluster& cluster) {
  const Node& node = cluster.nodes.front();
  ScalingCurve curve;
  for (int n = 1; n <= max_nodes; ++n) {
    const double t = oracle.throughput(job, node.gpu_type, n * node.gpus, n == 1);
    if (!(t > 0) || !std::isfinite(t))
      c.fail("'" + job.job_type + "' has no throughput on " + node.gpu_type + " at " + std::to_string(n * node.gpus) +
             " GPUs in " + oracle.source());
    if (n <= keep) curve.thr.push_back(t);
  }
  return curve;
}

// A curve over 1..max_nodes, checked in full; only its first `keep` nodes (the
// cluster's) are kept, so that memory follows the cluster, not max_nodes (up
// to 100,000 per line: 2,400 such lines went past 2 GB).
ScalingCurve parse_curve(const Ctx& c, std::string_view spec, int max_nodes, int keep, const ThroughputTable& table,
                         const ThroughputOracle& oracle, const Cluster& cluster) {
  spec = trim(spec);
  if (spec.rfind("amdahl:", 0) == 0) {
    const auto parts = detail::split(spec.substr(7), ':');
    if (parts.size() != 2) c.fail("amdahl curve: expected amdahl:SIGMA:T1, got '" + std::string(spec) + "'");
    const double sigma = number_in(c, parts[0], "amdahl SIGMA", 0, 1);
    const double t1 = number_in(c, parts[1], "amdahl T1 (iterations/s on one node)", 1e-9, 1e9);
    return amdahl_curve(t1, sigma, keep);
  }
  if (spec.rfind("points:", 0) == 0) {
    ScalingCurve curve;
    for (std::string_view f : detail::split(spec.substr(7), ';'))
      curve.thr.push_back(number_in(c, f, "points throughput (iterations/s)", 1e-9, 1e9));
    if (curve.max_nodes() != max_nodes)
      c.fail("points curve: " + std::to_string(curve.max_nodes()) + " throughputs for max_nodes " +
             std::to_string(max_nodes) + " (give one per node count 1..max_nodes)");
    // Faster than n nodes each at the 1-node rate: "node-equivalents" then
    // exceed the nodes held (10 on a 4-node cluster). Allowed (caches can do
    // it), but said.
    for (int n = 2; n <= curve.max_nodes(); ++n)
      if (curve.thr[n - 1] > n * curve.thr[0] * (1 + 1e-9)) {
        std::cerr << c.path << ":" << c.line << ": note: the points curve is superlinear at " << n << " nodes ("
                  << g(curve.thr[n - 1]) << " iterations/s, over " << n << " x " << g(curve.thr[0])
                  << "): its node-equivalents can exceed the nodes it holds\n";
        break;
      }
    curve.thr.resize(keep);
    curve.thr.shrink_to_fit();
    return curve;
  }
  if (spec.rfind("table:", 0) == 0 || spec.rfind("oracle:", 0) == 0) {
    const bool from_table = spec.front() == 't';
    Job job;
    job.job_type = std::string(trim(spec.substr(from_table ? 6 : 7)));
    if (const auto at = job.job_type.rfind('@'); !from_table && at != std::string::npos) {  // model@batch
      const auto batch = detail::to_int(std::string_view(job.job_type).substr(at + 1));
      if (!batch || *batch < 1 || *batch > 1000000) c.fail("oracle curve: bad batch in '" + job.job_type + "'");
      job.model = job.job_type.substr(0, at);
      job.batch_size = static_cast<int>(*batch);
    }
    if (from_table) return oracle_curve(c, job, max_nodes, keep, TableOracle(table), cluster);
    return oracle_curve(c, job, max_nodes, keep, oracle, cluster);
  }
  c.fail("unknown curve '" + std::string(spec) +
         "' (amdahl:SIGMA:T1, points:T1;T2;..., table:JOB TYPE, oracle:JOB TYPE or oracle:MODEL@BATCH)");
}

std::vector<MalleableJob> generate_mix(long n, double hours, uint64_t seed, int cluster_nodes) {
  detail::Rng rng(seed ^ 0x6d616c6cULL);
  std::vector<MalleableJob> jobs;
  const int sizes[] = {4, 8, 16, 32};
  for (long i = 0; i < n; ++i) {
    MalleableJob j;
    j.id = i;
    j.name = "malleable-" + std::to_string(i);
    const double sigma = rng.uniform(0.01, 0.3);
    const double t1 = rng.uniform(1, 10);
    const int max_nodes = std::min(sizes[rng.below(4)], cluster_nodes);
    j.rescale_s = rng.uniform(30, 120);
    j.truth = amdahl_curve(t1, sigma, max_nodes);
    j.declared = j.truth;
    j.iterations = std::round(t1 * rng.uniform(hours / 10, hours) * 3600);  // hours/10..hours on one node
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace

std::vector<MalleableJob> load_malleable_mix(const std::string& spec, const ThroughputTable& table,
                                             const ThroughputOracle& oracle, const Cluster& cluster, uint64_t seed) {
  const int cluster_nodes = static_cast<int>(cluster.nodes.size());
  if (spec.rfind("generate:", 0) == 0) {
    const auto parts = detail::split(std::string_view(spec).substr(9), ':');
    const auto n = detail::to_int(parts[0]);
    const auto hours = parts.size() == 2 ? detail::to_double(parts[1]) : std::optional<double>(500);
    if (parts.size() > 2 || !n || *n < 1 || *n > 100000 || !hours || *hours < 0.01 || *hours > 1e6)
      throw InputError("--malleable " + spec + ": expected generate:N[:HOURS] with N in [1, 100000] and HOURS in [0.01, 1e6]");
    return generate_mix(static_cast<long>(*n), *hours, seed, cluster_nodes);
  }
  std::string text = detail::read_file(spec);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 byte-order mark
  const auto lines = detail::split_lines(text);
  std::vector<MalleableJob> jobs;
  std::map<std::string, long> seen;
  bool header = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Ctx c{spec, static_cast<long>(i + 1)};
    const std::string_view line = trim(lines[i]);
    if (line.empty() || line.front() == '#') continue;
    auto f = detail::split(line, ',');
    if (!header) {
      if (line != "name,arrival_s,iterations,max_nodes,rescale_s,curve,declared" &&
          line != "name,arrival_s,iterations,max_nodes,rescale_s,curve")
        c.fail("expected the header name,arrival_s,iterations,max_nodes,rescale_s,curve,declared");
      header = true;
      continue;
    }
    if (f.size() == 6) f.push_back("");
    if (f.size() != 7) c.fail("expected 7 fields, got " + std::to_string(f.size()));
    MalleableJob j;
    j.id = static_cast<int64_t>(jobs.size());
    j.name = std::string(trim(f[0]));
    if (j.name.empty()) c.fail("empty name");
    if (auto [it, fresh] = seen.emplace(j.name, c.line); !fresh)
      c.fail("duplicate name '" + j.name + "' (first on line " + std::to_string(it->second) + ")");
    j.arrival_s = number_in(c, f[1], "arrival_s", 0, 1e12);
    j.iterations = number_in(c, f[2], "iterations", 1, kMaxIterations);
    if (j.iterations != std::floor(j.iterations)) c.fail("iterations must be a whole number");
    const auto max_nodes = detail::to_int(f[3]);
    if (!max_nodes || *max_nodes < 1 || *max_nodes > 100000)
      c.fail("max_nodes must be a whole number in [1, 100000], got '" + std::string(trim(f[3])) + "'");
    const int nmax = static_cast<int>(std::min<long long>(*max_nodes, cluster_nodes));
    j.rescale_s = number_in(c, f[4], "rescale_s", 0, 86400);
    j.truth = parse_curve(c, f[5], static_cast<int>(*max_nodes), nmax, table, oracle, cluster);
    j.declared =
        trim(f[6]).empty() ? j.truth : parse_curve(c, f[6], static_cast<int>(*max_nodes), nmax, table, oracle, cluster);
    jobs.push_back(std::move(j));
  }
  if (!header) fail_input(spec, 0, "empty: expected the header name,arrival_s,iterations,max_nodes,rescale_s,curve,declared");
  if (jobs.empty()) fail_input(spec, 0, "no malleable jobs (only a header)");
  std::stable_sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
  return jobs;
}

}  // namespace cellsched::cli
