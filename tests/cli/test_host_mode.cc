// `simulate --malleable` end to end: the host-scheduler mode's table, files,
// stored runs and learned curves, and its bad inputs (exit 2, nothing stored).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cli/malle_mix.h"
#include "core/cluster.h"
#include "core/error.h"
#include "core/throughput.h"
#include "db/store.h"
#include "scheduler/oracle.h"
#include "tests/support/subprocess.h"

namespace fs = std::filesystem;

namespace {

using cellsched::testing::Result;
using cellsched::testing::slurp;

class HostMode : public cellsched::testing::CliTest {
 protected:
  HostMode() : CliTest("cellsched-host") {}
  std::string philly() { return std::string(CELLSCHED_EXAMPLES) + "/data/philly/philly.csv"; }
  std::string db() { return (dir_ / "runs.db").string(); }
  std::vector<std::string> base(const std::string& mix) {
    return {"simulate", "--trace", philly(), "--limit", "400", "--cluster", "v100:32", "--malleable", mix,
            "--seed", "1", "--db", db()};
  }
};

TEST_F(HostMode, ComparesTheThreePoliciesWritesFilesAndStoresCurves) {
  const std::string mix = write("mix.csv",
                                "name,arrival_s,iterations,max_nodes,rescale_s,curve,declared\n"
                                "# an HPO sweep and a NAS search\n"
                                "hpo-1,0,50000000,8,60,amdahl:0.05:4,\n"
                                "hpo-2,0,50000000,4,30,points:2;3.8;5.4;6.8,\n"
                                "nas,3600,50000000,8,90,amdahl:0.25:2,amdahl:0:2\n"
                                "resnet,0,50000000,4,60,table:ResNet-50 (batch size 64),\n"
                                "lm,0,50000000,4,60,oracle:LM (batch size 20),\n");
  std::vector<std::string> args = base(mix);
  args.insert(args.end(), {"--out", (dir_ / "out").string()});
  const Result r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* p : {"malletrain", "freetrain", "malletrain-advisor", "idle used %", "primary delay max s"})
    EXPECT_NE(r.out.find(p), std::string::npos) << p << "\n" << r.out;
  const nlohmann::json summary = nlohmann::json::parse(slurp(dir_ / "out/summary.json"));
  ASSERT_EQ(summary.size(), 3u);
  for (const auto& e : summary) {
    for (const char* k : {"malleable_throughput", "idle_node_time_used", "primary_delay_s", "milp_solve_ms_p99"})
      EXPECT_TRUE(e.contains(k)) << k;
    EXPECT_GT(e["malleable_throughput"].get<double>(), 0);
    EXPECT_GT(e["idle_node_time_used"].get<double>(), 0);
    EXPECT_LE(e["idle_node_time_used"].get<double>(), 1 + 1e-9);
    EXPECT_EQ(e["primary_delay_s"].get<double>(), 0);
  }
  EXPECT_TRUE(fs::exists(dir_ / "out/occupancy-malletrain.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "out/occupancy.gp"));
  auto store = cellsched::db::Store::open(db());
  const auto runs = store.list_runs();
  ASSERT_EQ(runs.size(), 3u);
  size_t curves = 0;
  for (const auto& s : runs) {
    const auto run = store.load_run(s.id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->params.at("mode"), "host");
    EXPECT_TRUE(run->metrics.extra.count("malleable_throughput"));
    curves += store.load_learned_curves(s.id).size();
  }
  EXPECT_GE(curves, 2u);  // the advisor's run stored what it learned
  // --json: the same entries on stdout.
  args = base(mix);
  args.insert(args.end(), {"--no-db", "--json", "--policy", "freetrain"});
  const Result j = run(args);
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out).at(0).at("policy"), "freetrain");
}

TEST_F(HostMode, StoresTheMalleableJobsCompletionTimesAndNoJctWhenNoneFinished) {
  // "quick" finishes (1,000 iterations at 1/s on one node), "long" does not:
  // the stored run has one job done, its JCT and both jobs' rows; a run where
  // none finishes stores no JCT (null in JSON, - in the table), not 0.
  const std::string header = "name,arrival_s,iterations,max_nodes,rescale_s,curve\n";
  const std::string some = write("some.csv", header + "quick,0,1000,1,60,amdahl:0:1\nlong,0,900000000,4,60,amdahl:0.1:1\n");
  const std::string none = write("none.csv", header + "long,0,900000000,4,60,amdahl:0.1:1\n");
  for (const std::string& mix : {some, none}) {
    std::vector<std::string> args = base(mix);
    args.insert(args.end(), {"--policy", "malletrain"});
    const Result r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("JCT mean h"), std::string::npos) << r.out;
  }
  const Result show = run({"db", "show", "1", "2", "--db", db(), "--json"});
  ASSERT_EQ(show.status, 0) << show.err;
  const nlohmann::json runs = nlohmann::json::parse(show.out);
  ASSERT_EQ(runs.size(), 2u);
  const nlohmann::json& m1 = runs[0]["metrics"];
  EXPECT_EQ(m1["completed"], 1);
  EXPECT_TRUE(m1["decisions"].is_number_integer()) << m1.dump();  // a count, not 12.0
  // The allocator's solve times: mean, p99 and max all stored (max was 0).
  EXPECT_GT(m1["decision_max_ms"].get<double>(), 0) << m1.dump();
  EXPECT_GE(m1["decision_max_ms"].get<double>(), m1["decision_p99_ms"].get<double>()) << m1.dump();
  EXPECT_GE(m1["decision_max_ms"].get<double>(), m1["decision_mean_ms"].get<double>()) << m1.dump();
  EXPECT_DOUBLE_EQ(m1["milp_solve_ms_mean"].get<double>(), m1["decision_mean_ms"].get<double>()) << m1.dump();
  ASSERT_TRUE(m1["jct_mean_s"].is_number()) << m1.dump();
  EXPECT_GE(m1["jct_mean_s"].get<double>(), 1060);  // a 60 s start, then 1,000 s of training
  ASSERT_EQ(runs[0]["jobs"].size(), 2u);
  EXPECT_EQ(runs[0]["jobs"][0]["job_type"], "quick");
  EXPECT_DOUBLE_EQ(runs[0]["jobs"][0]["jct_s"].get<double>(), m1["jct_mean_s"].get<double>());
  const nlohmann::json& m2 = runs[1]["metrics"];
  EXPECT_EQ(m2["completed"], 0);
  EXPECT_TRUE(m2["jct_mean_s"].is_null()) << m2.dump();
  const Result table = run({"db", "show", "2", "--db", db()});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("malletrain     1     0           -"), std::string::npos) << table.out;
}

TEST_F(HostMode, BadInputNamesTheLineAndStoresNothing) {
  const std::string good = write("good.csv", "name,arrival_s,iterations,max_nodes,rescale_s,curve\na,0,1000,4,60,amdahl:0.1:1\n");
  ASSERT_EQ(run(base(good)).status, 0);
  const size_t before = cellsched::db::Store::open(db()).list_runs().size();
  const std::string header = "name,arrival_s,iterations,max_nodes,rescale_s,curve,declared\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {header + "a,0,1000,4,60,amdahl:0.1:1,\na,0,1000,4,60,amdahl:0.1:1,\n", ":3: duplicate name 'a' (first on line 2)"},
      {header + "a,0,1e300,4,60,amdahl:0.1:1,\n", ":2: iterations must be"},
      {header + "a,0,1000,4,60,amdahl:nan:1,\n", ":2: amdahl SIGMA must be"},
      {header + "a,0,1000,4,60,points:1;2,\n", ":2: points curve: 2 throughputs for max_nodes 4"},
      {header + "a,0,1000,4,60,table:No Such Model,\n", ":2: 'No Such Model' has no throughput"},
      {header + "a,0,1000,4,60,oracle:gpt@x,\n", ":2: oracle curve: bad batch"},
      {header + "a,0,1000,0,60,amdahl:0.1:1,\n", ":2: max_nodes must be"},
      {header, ": no malleable jobs (only a header)"},
      {"\xEF\xBB\xBFname,arrival_s\n", ":1: expected the header"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string f = write("bad" + std::to_string(i) + ".csv", bad[i].first);
    const Result r = run(base(f));
    EXPECT_EQ(r.status, 2) << bad[i].second;
    EXPECT_NE(r.err.find(f + bad[i].second), std::string::npos) << r.err;
  }
  for (const std::vector<std::string>& flag :
       std::vector<std::vector<std::string>>{{"--reclaim", "never"}, {"--grace", "nan"}, {"--walltime-factor", "0.5"},
                                             {"--milp-time-limit", "inf"}, {"--policy", "gavel"}}) {
    std::vector<std::string> args = base(good);
    args.insert(args.end(), flag.begin(), flag.end());
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << flag[0];
    EXPECT_NE(r.err.find(flag[0] + (flag[0] == "--policy" ? ": unknown host-mode policy" : " must be")), std::string::npos)
        << r.err;
  }
  // The rigid engine's flags have no meaning here; they were ignored silently.
  for (const std::string flag : {"--fork-efficiency", "--round", "--restart", "--hadar-ratio-cap", "--replay-failures"}) {
    std::vector<std::string> args = base(good);
    args.push_back(flag);
    if (flag != "--replay-failures") args.push_back("1");
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_NE(r.err.find(flag + " does not apply to the host-scheduler mode"), std::string::npos) << r.err;
  }
  // No policy ran nothing, exit 0, and stored a trace; one named twice ran
  // twice; a k80 node beside a v100 ran as a v100. As in the rigid mode: refused.
  const std::string mixed = write("mixed.yaml", "nodes:\n  - {name: a, gpu_type: v100, gpus: 1}\n"
                                                "  - {name: b, gpu_type: k80, gpus: 1}\n");
  for (const auto& [flag, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--policy", "", "--policy: no policy named"},
           {"--policy", "malletrain,malletrain", "--policy: malletrain is named twice"},
           {"--cluster", mixed, "host mode needs nodes of one GPU type (node b has k80, a v100)"}}) {
    std::vector<std::string> args = base(good);
    if (flag == "--cluster") args[6] = value;
    else args.insert(args.end(), {flag, value});
    const Result bad_run = run(args);
    EXPECT_EQ(bad_run.status, 2) << flag << " " << value << ": " << bad_run.err;
    EXPECT_NE(bad_run.err.find(says), std::string::npos) << bad_run.err;
  }
  // A primary job larger than the cluster is named.
  std::vector<std::string> small = base(good);
  small[6] = "v100:4";
  const Result r = run(small);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nodes of 4 GPUs; the cluster has 1"), std::string::npos) << r.err;
  EXPECT_EQ(cellsched::db::Store::open(db()).list_runs().size(), before);
}

// Found with fuzz/fuzz_mix's reader: a curve was built at 1..max_nodes (up to
// 100,000) and then cut to the cluster's nodes, keeping its memory, so 2,400
// lines of max_nodes 100000 (75 KB) went past 2 GB. Every curve is checked in
// full but keeps only the cluster's nodes.
TEST_F(HostMode, MixCurvesKeepOnlyTheClustersNodes) {
  using namespace cellsched;
  const ThroughputTable table = load_gavel_throughputs(std::string(CELLSCHED_EXAMPLES) + "/data/gavel/simulation_throughputs.json");
  const TableOracle oracle(table);
  const Cluster cluster = parse_cluster_shorthand("v100:32");
  const size_t nodes = cluster.nodes.size();
  std::string mix = "name,arrival_s,iterations,max_nodes,rescale_s,curve,declared\n";
  for (int i = 0; i < 200; ++i) mix += "a" + std::to_string(i) + ",0,1000,100000,60,amdahl:0.1:2,\n";
  mix += "d,0,1000,100000,60,amdahl:0.1:2,amdahl:0:2\nt,0,1000,2,60,table:ResNet-50 (batch size 64),\np,0,1000,100000,60,points:";
  for (int i = 1; i <= 100000; ++i) mix += (i > 1 ? ";" : "") + std::to_string(i);
  mix += ",\n";
  const auto jobs = cli::load_malleable_mix(write("big.csv", mix), table, oracle, cluster, 1);
  ASSERT_EQ(jobs.size(), 203u);
  const ScalingCurve want = amdahl_curve(2, 0.1, static_cast<int>(nodes));
  for (const MalleableJob& j : jobs) {
    const size_t n = j.name == "t" ? 2 : nodes;
    EXPECT_EQ(j.truth.thr.size(), n) << j.name;
    EXPECT_EQ(j.declared.thr.size(), n) << j.name;
    EXPECT_LE(j.truth.thr.capacity(), n) << j.name;
    EXPECT_LE(j.declared.thr.capacity(), n) << j.name;
    if (j.name[0] == 'a') {
      EXPECT_EQ(j.truth.thr, want.thr) << j.name;
    } else if (j.name == "d") {
      EXPECT_EQ(j.declared.thr, amdahl_curve(2, 0, static_cast<int>(nodes)).thr);
    } else if (j.name == "p") {
      EXPECT_EQ(j.truth.thr.back(), static_cast<double>(nodes));
    }
  }
  // Still checked past the cluster: 99,999 points for max_nodes 100000.
  const std::string short_points = mix.substr(0, mix.rfind(";100000")) + ",\n";
  try {
    cli::load_malleable_mix(write("short.csv", short_points), table, oracle, cluster, 1);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":204: points curve: 99999 throughputs for max_nodes 100000"), std::string::npos)
        << e.what();
  }
}

}  // namespace
