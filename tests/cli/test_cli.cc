// End-to-end tests of the `cellsched` binary: real processes, real files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "db/store.h"
#include "tests/support/subprocess.h"

namespace fs = std::filesystem;

namespace {

using cellsched::testing::Result;
using cellsched::testing::slurp;

class Cli : public cellsched::testing::CliTest {
 protected:
  std::string examples(const std::string& rel) { return std::string(CELLSCHED_EXAMPLES) + "/" + rel; }
  std::string db() { return (dir_ / "runs.db").string(); }
};

TEST_F(Cli, HelpAndUnknownVerb) {
  Result r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("simulate"), std::string::npos);
  EXPECT_NE(r.out.find("--version"), std::string::npos) << r.out;  // it worked, unlisted
  EXPECT_NE(r.out.find("`validate fork`"), std::string::npos) << r.out;
  r = run({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown verb"), std::string::npos);
  r = run({"simulate", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--throughputs"), std::string::npos);
  r = run({"simulate", "--bogus"});
  EXPECT_EQ(r.status, 2);
  // --help after an option that takes a value is still a request for help.
  r = run({"estimate", "--validate", "--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--transfer-from"), std::string::npos);
  r = run({"simulate", "--trace", "--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--throughputs"), std::string::npos);
}

TEST_F(Cli, SimulateComparesPoliciesAndStoresRuns) {
  Result r = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"),
                  "--cluster", examples("clusters/gavel-physical.yaml"), "--policy",
                  "fifo,yarn-cs", "--db", db(), "--json", "--out", (dir_ / "out").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["policy"], "fifo");
  EXPECT_EQ(j["runs"][1]["policy"], "yarn-cs");
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["metrics"]["jobs"], 20);
    EXPECT_EQ(run["metrics"]["completed"], 20);
    EXPECT_GT(run["metrics"]["cru"].get<double>(), 0);
    EXPECT_LE(run["metrics"]["cru"].get<double>(), 1);
    // Parameters stored as text go out as numbers where they are numbers.
    EXPECT_EQ(run["params"]["round_s"], 360) << run["params"];
    EXPECT_TRUE(run["params"]["trace_format"].is_string()) << run["params"];
    // The flags that change results are stored with them (--reference-gpu was not).
    EXPECT_EQ(run["params"]["reference_gpu"], "v100") << run["params"];
    EXPECT_EQ(run["params"]["oracle"], "table") << run["params"];
  }
  const Result stored = run({"db", "show", "1", "--db", db(), "--json"});
  EXPECT_NE(stored.out.find("\"reference_gpu\": \"v100\""), std::string::npos) << stored.out.substr(0, 2000);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "jobs-fifo.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "utilization-yarn-cs.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "summary.csv"));
  // Elastic policies are held to another bound: the table says so under itself.
  const Result mixed = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster",
                            examples("clusters/gavel-physical.yaml"), "--policy", "fifo,hadare", "--no-db"});
  ASSERT_EQ(mixed.status, 0) << mixed.err;
  EXPECT_NE(mixed.out.find("TTD/bound: hadare is measured against the bound without the one-gang cap"),
            std::string::npos)
      << mixed.out;

  r = run({"db", "runs", "--db", db(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto runs = nlohmann::json::parse(r.out);
  ASSERT_EQ(runs.size(), 2u);
  r = run({"db", "show", std::to_string(runs[0]["id"].get<int64_t>()), "--db", db(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto shown_all = nlohmann::json::parse(r.out);
  ASSERT_TRUE(shown_all.is_array());  // one run or several: always an array
  ASSERT_EQ(shown_all.size(), 1u);
  const auto& shown = shown_all[0];
  EXPECT_EQ(shown["jobs"].size(), 20u);

  EXPECT_TRUE(shown["metrics"]["jobs"].is_number_integer());
  EXPECT_TRUE(shown["metrics"]["completed"].is_number_integer());
  EXPECT_TRUE(shown["metrics"]["rounds"].is_number_integer());
  EXPECT_EQ(shown["policy"], "yarn-cs");  // newest first
  r = run({"db", "show", "999", "--db", db()});
  EXPECT_EQ(r.status, 2);
  // --jobs-csv naming the database is refused, the runs intact (it was overwritten, exit 0).
  r = run({"db", "show", "1", "--db", db(), "--jobs-csv", db()});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--jobs-csv " + db() + ": is an SQLite database"), std::string::npos) << r.err;
  EXPECT_EQ(run({"db", "runs", "--db", db(), "--json"}).out, nlohmann::json(runs).dump(2) + "\n");
}

TEST_F(Cli, BadTraceNamesFileAndLineAndStoresNothing) {
  // A good run first, so the store has something to keep.
  ASSERT_EQ(run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"),
                 "--cluster", "v100:8,k80:8", "--policy", "fifo", "--db", db()})
                .status,
            0);
  const auto before = cellsched::db::Store::open(db()).list_runs().size();
  std::string good = slurp(examples("data/gavel/traces/small_test.trace"));
  std::istringstream in(good);
  std::string l1, l2;
  std::getline(in, l1);
  std::getline(in, l2);
  const std::string bad = write("bad.trace", l1 + "\n" + l2 + "\nResNet-50\tnot enough fields\n");
  Result r = run({"simulate", "--trace", bad, "--cluster", "v100:8", "--db", db()});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(bad + ":3:"), std::string::npos) << r.err;
  EXPECT_EQ(cellsched::db::Store::open(db()).list_runs().size(), before);
  // Iterations past 2^53 (a hang before: the simulation never finished).
  const std::string huge = write("huge.csv",
                                 "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n"
                                 "0,0,ResNet-18 (batch size 16),,,1e300,1,,,,\n");
  r = run({"simulate", "--trace", huge, "--cluster", "v100:4", "--policy", "fifo", "--db", db()});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(huge + ":2: iterations must be in [1, 2^53]"), std::string::npos) << r.err;
  EXPECT_EQ(cellsched::db::Store::open(db()).list_runs().size(), before);
  // --out naming a plain file: exit 2 before anything runs, and no run stored.
  const std::string plain = write("plain.txt", "x\n");
  r = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:8",
           "--policy", "fifo", "--db", db(), "--out", plain});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--out must be a directory"), std::string::npos) << r.err;
  EXPECT_EQ(cellsched::db::Store::open(db()).list_runs().size(), before);
  // Absurd engine numbers: exit 2 naming the flag and its range, nothing stored, no hang.
  const std::vector<std::vector<std::string>> absurd = {
      {"--round", "nan"}, {"--round", "inf"}, {"--round", "1e-9"}, {"--round", "1e308"},
      {"--restart", "nan"}, {"--restart", "-1"}, {"--restart", "400"}, {"--horizon", "nan"},
      {"--fork-efficiency", "0"}, {"--consolidation", "inf"}, {"--hadar-spare-exponent", "-1"},
      {"--hadar-spare-exponent", "nan"}, {"--hadar-spare-exponent", "1e308"}, {"--hadar-ratio-exponent", "inf"},
      {"--hadar-ratio-cap", "0"}, {"--hadar-ratio-cap", "-5"}, {"--fork-scaling", "cubic"},
      {"--fork-scaling", ""}, {"--locality-penalty", "-1"}, {"--locality-penalty", "1e308"}};
  for (const auto& flag : absurd) {
    std::vector<std::string> args = {"simulate", "--trace", examples("data/gavel/traces/small_test.trace"),
                                     "--cluster", "v100:8", "--policy", "fifo", "--db", db()};
    args.insert(args.end(), flag.begin(), flag.end());
    r = run(args);
    EXPECT_EQ(r.status, 2) << flag[0] << " " << flag[1];
    EXPECT_NE(r.err.find(flag[0] + " must be"), std::string::npos) << r.err;
  }
  // Host-mode flags without --malleable would be ignored: named instead.
  for (const std::string flag : {"--grace", "--walltime-factor", "--checkpoint-interval"}) {
    r = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:8",
             "--policy", "fifo", "--db", db(), flag, "5"});
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_NE(r.err.find(flag + " applies only to the host-scheduler mode (--malleable)"), std::string::npos) << r.err;
  }
  // A policy named twice (its run would be stored twice).
  r = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:8",
           "--policy", "fifo,gavel,fifo", "--db", db()});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--policy: fifo is named twice"), std::string::npos) << r.err;
  for (const std::string id : {"abc", "0", "1.5", "9999999999999999999999"}) {
    r = run({"db", "show", id, "--db", db()});
    EXPECT_EQ(r.status, 2) << id;
    EXPECT_NE(r.err.find("a run id is a whole number from 1 (cellsched db runs lists them), got '" + id + "'"),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(cellsched::db::Store::open(db()).list_runs().size(), before);
}

TEST_F(Cli, BadClusterAndImpossibleCluster) {
  const std::string yaml = write("c.yaml", "nodes:\n  - {name: a, gpu_type: v100, gpus: 4}\n"
                                           "  - {name: b, gpu_type: z999, gpus: 4}\n");
  Result r = run({"cluster", yaml});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(yaml + ":3:"), std::string::npos) << r.err;
  r = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster",
           "v100:1", "--no-db"});
  EXPECT_EQ(r.status, 2);  // the trace has 2-GPU jobs: the first is named at its line (issue 13)
  EXPECT_NE(r.err.find("small_test.trace:1: job 0 (Transformer, 2 GPUs) cannot run on cluster v100:1: it needs 2 GPUs"),
            std::string::npos) << r.err;
  r = run({"simulate", "--trace", (dir_ / "missing.trace").string(), "--cluster", "v100:4",
           "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("missing.trace"), std::string::npos) << r.err;
}

TEST_F(Cli, TraceGenerateIsReproducibleAndConvertRoundTrips) {
  Result a = run({"trace", "generate", "--jobs", "300", "--seed", "7", "--interarrival", "120"});
  Result b = run({"trace", "generate", "--jobs", "300", "--seed", "7", "--interarrival", "120"});
  Result c = run({"trace", "generate", "--jobs", "300", "--seed", "8", "--interarrival", "120"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  const std::string gen = write("gen.csv", a.out);
  Result conv = run({"trace", "convert", gen});
  ASSERT_EQ(conv.status, 0) << conv.err;
  EXPECT_EQ(conv.out, a.out);
  Result insp = run({"trace", "inspect", gen, "--json"});
  ASSERT_EQ(insp.status, 0) << insp.err;
  const nlohmann::json ij = nlohmann::json::parse(insp.out);
  EXPECT_EQ(ij["jobs"], 300);
  EXPECT_TRUE(ij["total_gpu_iterations"].is_number_integer()) << ij["total_gpu_iterations"];
  EXPECT_GT(ij["mean_duration_s"].get<double>(), 0);  // the generator writes each job's duration
  // Gavel's traces carry none: null, where it was -1.
  Result gavel = run({"trace", "inspect", examples("data/gavel/traces/small_test.trace"), "--json"});
  ASSERT_EQ(gavel.status, 0) << gavel.err;
  EXPECT_TRUE(nlohmann::json::parse(gavel.out)["mean_duration_s"].is_null()) << gavel.out;
  // Counts agree with their nouns ("wrote 1 jobs" before).
  const Result one = run({"trace", "generate", "--jobs", "1", "--out", (dir_ / "one.csv").string()});
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.err.find("wrote 1 job to "), std::string::npos) << one.err;
  const Result est = run({"estimate", "--model", "gpt-125m", "--gpu-type", "a100-80", "--gpus", "2", "--db", (dir_ / "none.db").string()});
  ASSERT_EQ(est.status, 0) << est.err;
  EXPECT_TRUE(std::regex_search(est.out, std::regex(R"(1 stage; \d+ micro-batch(es)? of)"))) << est.out;
  // A gap of 1e308 s wrote arrivals of inf; now the range is named.
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--interarrival", "1e308"}, {"--interarrival", "nan"}, {"--interarrival", "-1"}, {"--jobs", "100000000"}}) {
    const Result bad = run({"trace", "generate", flag, value});
    EXPECT_EQ(bad.status, 2) << flag << " " << value;
    EXPECT_NE(bad.err.find(flag + " must be"), std::string::npos) << bad.err;
    EXPECT_EQ(bad.out, "");
  }
}

TEST_F(Cli, PhillyConvertsWithSeededJobTypes) {
  Result a = run({"trace", "convert", examples("data/philly/philly.csv"), "--limit", "50",
                  "--seed", "3"});
  Result b = run({"trace", "convert", examples("data/philly/philly.csv"), "--limit", "50",
                  "--seed", "3"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), '\n'), 51);
}

TEST_F(Cli, GpusAndClusterShow) {
  Result r = run({"gpus", "--json"});
  ASSERT_EQ(r.status, 0);
  EXPECT_GE(nlohmann::json::parse(r.out).size(), 13u);
  r = run({"cluster", "v100:36,p100:36,k80:36", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto c = nlohmann::json::parse(r.out);
  EXPECT_EQ(c["gpus"], 108);
  EXPECT_EQ(c["nodes"].size(), 27u);
  r = run({"cluster", examples("data/alibaba_pai_2020/pai_machine_spec.csv"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  // P100 1,596 + T4 994 + V100M32 1,080 + V100 832 (MISC skipped by default).
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"], 1596 + 994 + 1080 + 832);
  r = run({"cluster", "v100:4", "--yaml", "--json"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--yaml and --json contradict each other"), std::string::npos) << r.err;
  r = run({"cluster", dir_.string()});  // a folder, not a file
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(dir_.string() + ": is a directory, not a file"), std::string::npos) << r.err;
  // A mistyped subcommand is named; --help lists what each one does.
  for (const std::string verb : {"db", "trace"}) {
    r = run({verb, "frob"});
    EXPECT_EQ(r.status, 2) << verb;
    EXPECT_NE(r.err.find("unknown subcommand 'frob'"), std::string::npos) << r.err;
    r = run({verb, "--help"});
    EXPECT_EQ(r.status, 0) << verb;
    EXPECT_NE(r.out.find(verb == "db" ? "  show " : "  convert "), std::string::npos) << r.out;
  }
}

bool is_png(const fs::path& p) {
  const std::string s = slurp(p);
  return s.size() > 100 && s.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// A policy's run does not depend on the policies run before it in one
// invocation: the LP solver object is reused, and its random stream carried
// over made gavel-makespan swap two identical jobs' outcomes after gavel.
TEST_F(Cli, APolicysRunDoesNotDependOnThePoliciesBeforeIt) {
  const std::vector<std::string> base = {"simulate", "--trace", examples("data/gavel/traces/minimize_makespan.trace"),
                                         "--throughputs", examples("data/gavel/physical_cluster_throughputs.json"),
                                         "--cluster", examples("clusters/gavel-physical.yaml"), "--no-db", "--no-plots",
                                         "--no-bound"};
  auto with = [&](const std::string& policies, const std::string& out) {
    std::vector<std::string> a = base;
    for (const std::string& x : {std::string("--policy"), policies, std::string("--out"), (dir_ / out).string()})
      a.push_back(x);
    const Result r = run(a);
    EXPECT_EQ(r.status, 0) << r.err;
    return slurp(dir_ / out / "jobs-gavel-makespan.csv");
  };
  const std::string alone = with("gavel-makespan", "alone");
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(with("gavel,gavel-makespan", "after"), alone);
  // Nor on the order in which the cluster lists its GPU types: with its K80
  // servers first, gavel's TTD on max_min_fairness went 17.61 -> 18.97 h.
  std::string nodes;
  for (const char* t : {"k80", "p100", "v100"})
    for (int i = 0; i < 2; ++i)
      nodes += "  - {name: " + std::string(t) + "-" + std::to_string(i) + ", gpu_type: " + t + ", gpus: 4}\n";
  const std::string k80_first = write("k80-first.yaml", "nodes:\n" + nodes);
  std::string reversed;
  for (const char* t : {"v100", "p100", "k80"})
    for (int i = 0; i < 2; ++i)
      reversed += "  - {name: " + std::string(t) + "-" + std::to_string(i) + ", gpu_type: " + t + ", gpus: 4}\n";
  const std::string v100_first = write("v100-first.yaml", "nodes:\n" + reversed);
  auto summary = [&](const std::string& cluster) {
    const Result r = run({"simulate", "--trace", examples("data/gavel/traces/max_min_fairness.trace"), "--throughputs",
                          examples("data/gavel/physical_cluster_throughputs.json"), "--cluster", cluster, "--policy",
                          "gavel", "--no-db", "--no-bound", "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    const auto m = nlohmann::json::parse(r.out)["runs"][0]["metrics"];
    return std::make_tuple(m["jct_mean_s"].get<double>(), m["ttd_s"].get<double>(), m["cru"].get<double>());
  };
  EXPECT_EQ(summary(k80_first), summary(v100_first));
}

TEST_F(Cli, SweepTabulatesJctAgainstLoadAndPlotsIt) {
  const std::vector<std::string> base = {"sweep", "--rates", "2,6", "--jobs", "40", "--policy",
                                         "fifo,yarn-cs", "--cluster", "v100:8,k80:8"};
  std::vector<std::string> args = base;
  for (const char* a : {"--out", "out", "--json"}) args.push_back(a);
  Result r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["results"].size(), 4u);  // 2 policies x 2 rates
  EXPECT_EQ(doc["window"]["first_job"], 4);  // 0.1 x 40
  EXPECT_EQ(doc["window"]["last_job"], 35);  // below 0.9 x 40
  for (const auto& cell : doc["results"]) {
    EXPECT_EQ(cell["window_jobs"], 32);
    EXPECT_GT(cell["avg_jct_s"].get<double>(), 0);
    EXPECT_GT(cell["fairness_rho_p95"].get<double>(), 0);
    EXPECT_GE(cell["fairness_rho_p95"].get<double>(), cell["fairness_rho_mean"].get<double>() * 0.5);
  }
  EXPECT_DOUBLE_EQ(doc["results"][2]["mean_interarrival_s"].get<double>(), 600);
  EXPECT_TRUE(is_png(dir_ / "out" / "jct_vs_load.png"));
  EXPECT_TRUE(is_png(dir_ / "out" / "rate-2" / "jct_cdf.png"));
  EXPECT_TRUE(is_png(dir_ / "out" / "rate-6" / "utilization.png"));
  const std::string csv = slurp(dir_ / "out" / "sweep.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_NE(csv.find(",cru,fairness_rho_mean,fairness_rho_p95\n"), std::string::npos) << csv;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "out" / "sweep.json")), doc);
  // Every digit the JSON has (the CSV cut to 10 significant ones): the first
  // row's avg_jct_s (6th field) reads back to the JSON's double exactly.
  const std::string row = csv.substr(csv.find('\n') + 1);
  size_t at = 0;
  for (int i = 0; i < 5; ++i) at = row.find(',', at) + 1;
  EXPECT_EQ(std::stod(row.substr(at, row.find(',', at) - at)), doc["results"][0]["avg_jct_s"].get<double>()) << row;

  // The table: one row per policy, one column per rate; same seed, same numbers.
  r = run(base);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 jobs/h"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6 jobs/h"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("yarn-cs"), std::string::npos) << r.out;
}

TEST_F(Cli, SweepRejectsBadRatesAndWindows) {
  // 1e-300 jobs/h: a mean gap past 1e7 s, whose arrivals overflowed to inf (JCT 0.00 reported).
  for (const std::string rates : {"2,x", "0", "-1", "", "4,4", "1e-300", "1e308", "nan"}) {
    const Result r = run({"sweep", "--rates", rates, "--jobs", "10", "--out", "out"});
    EXPECT_EQ(r.status, 2) << rates << ": " << r.err;
    EXPECT_NE(r.err.find("--rates"), std::string::npos) << r.err;
  }
  Result r = run({"sweep", "--jobs", "10", "--window-start", "0.9", "--window-end", "0.1"});
  EXPECT_EQ(r.status, 2) << r.err;
  r = run({"sweep", "--jobs", "10", "--policy", "nope"});
  EXPECT_EQ(r.status, 2) << r.err;
  // The round's numbers are checked as simulate checks them (1e308 ran, reporting JCT inf).
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--round", "1e308"}, {"--restart", "nan"}, {"--consolidation", "inf"}, {"--jobs", "100000000"}}) {
    r = run({"sweep", "--policy", "fifo", "--out", "out", flag, value});
    EXPECT_EQ(r.status, 2) << flag << " " << value;
    EXPECT_NE(r.err.find(flag + " must be"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  // An --out that cannot be a folder is named before the runs, for sweep and schedule alike.
  const std::string plain = write("plain.txt", "x\n");
  r = run({"sweep", "--jobs", "10", "--policy", "fifo", "--out", plain});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(plain + ": --out must be a directory that can be created"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  r = run({"schedule", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:8", "--policy",
           "fifo", "--out", plain});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(plain + ": --out must be a directory that can be created"), std::string::npos) << r.err;
}

TEST_F(Cli, SweepWithoutGnuplotSaysWhatToInstall) {
  setenv("CELLSCHED_GNUPLOT", "/nonexistent/gnuplot", 1);
  const Result r = run({"sweep", "--rates", "2", "--jobs", "10", "--out", "out"});
  unsetenv("CELLSCHED_GNUPLOT");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("gnuplot-nox"), std::string::npos) << r.err;
}

TEST_F(Cli, ScheduleWritesAReplayableFileAndAGantt) {
  Result r = run({"schedule", "--jobs", examples("data/gavel/traces/small_test.trace"), "--cluster",
                  examples("clusters/gavel-physical.yaml"), "--policy", "hadare", "--out",
                  (dir_ / "sched").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir_ / "sched" / "schedule.json"));
  EXPECT_EQ(j["format"], "cellsched-schedule-1");
  EXPECT_EQ(j["policy"], "hadare");
  ASSERT_FALSE(j["entries"].empty());
  for (const auto& e : j["entries"]) {
    EXPECT_FALSE(e["gpu_indices"].empty());
    EXPECT_LE(e["start_s"].get<double>(), e["end_s"].get<double>());
  }
  const std::string png = slurp(dir_ / "sched" / "gantt.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_NE(slurp(dir_ / "sched" / "schedule.csv").find("job_id,copy,node,gpu_type"), std::string::npos);
  r = run({"schedule", "--jobs", examples("data/gavel/traces/small_test.trace"), "--cluster",
           "v100:8", "--policy", "nonesuch"});
  EXPECT_EQ(r.status, 2);
}

TEST_F(Cli, CellsOracleModelsUnprofiledGpuTypesWithoutWritingAFile) {
  // No database: the A100s are modeled, cells tuned in memory, no file made.
  Result r = run({"simulate", "--trace", examples("data/philly/philly.csv"), "--limit", "10",
                  "--oracle", "cells", "--cells-db", (dir_ / "none.db").string(), "--model-mix",
                  "gpt-tiny@8", "--cluster", "a100-80:8", "--no-db"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "none.db"));
  // The CPU has no analytic model: it needs a profile, named in the error.
  r = run({"simulate", "--trace", examples("data/philly/philly.csv"), "--limit", "10",
           "--oracle", "cells", "--cells-db", (dir_ / "none.db").string(), "--model-mix",
           "gpt-tiny@8", "--cluster", "cpu:8", "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("none.db"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "none.db"));
  r = run({"simulate", "--trace", examples("data/philly/philly.csv"), "--limit", "10",
           "--model-mix", "gpt-tiny@8", "--cluster", "a100-80:8", "--no-db"});
  EXPECT_EQ(r.status, 2);  // a model mix needs the cell oracle
  EXPECT_NE(r.err.find("--oracle cells"), std::string::npos) << r.err;
  // ... and a Philly CSV: on another format it was ignored, and the run then
  // failed with "cannot run on cluster".
  r = run({"simulate", "--trace", examples("data/gavel/traces/max_min_fairness.trace"), "--oracle", "cells",
           "--cells-db", (dir_ / "none.db").string(), "--model-mix", "gpt-tiny@8", "--cluster", "a100-80:8", "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("max_min_fairness.trace: a model mix (--model-mix) maps Pollux's Philly CSV"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "none.db"));
}

TEST_F(Cli, FromATinyProfileToASchedule) {
  // Profile on this CPU, then schedule Philly jobs mapped onto the model with
  // cells tuned on demand for GPU types never profiled (modeled: a CPU profile never prices a GPU).
  Result r = run({"profile", "compute", "--model", "gpt-tiny", "--device", "cpu", "--tp", "1,2",
                  "--db", db()});
  if (r.err.find("this build has no LibTorch") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"schedule", "--trace", examples("data/philly/philly.csv"), "--limit", "30",
           "--oracle", "cells", "--cells-db", db(), "--model-mix", "gpt-tiny@8:1,gpt-tiny@16:1",
           "--cluster", "a100-80:8,v100:8", "--policy", "crius", "--out", (dir_ / "s").string(),
           "--no-plots"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir_ / "s" / "schedule.json"));
  ASSERT_FALSE(j["entries"].empty());
  for (const auto& e : j["entries"])
    EXPECT_NE(e["plan"].get<std::string>().find("(modeled)"), std::string::npos) << e.dump();
  r = run({"tune", "--model", "gpt-tiny", "--gpu-type", "v100", "--gpus", "2", "--batch", "8",
           "--db", db(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
}

// A stored cell answers only a tune under the options it was tuned with:
// another --optimizer or --memory-fraction got the stale plan ("INFEASIBLE",
// exit 0, where another plan fits).
TEST_F(Cli, AStoredCellAnswersOnlyTheOptionsItWasTunedWith) {
  const std::vector<std::string> tune = {"tune", "--model", "gpt-125m", "--gpu-type", "v100", "--gpus", "2",
                                         "--stages", "1", "--db", db()};
  Result r = run(tune);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("from the store"), std::string::npos) << r.out;
  r = run(tune);
  EXPECT_NE(r.out.find("from the store"), std::string::npos) << r.out;
  for (const std::vector<std::string>& other : std::vector<std::vector<std::string>>{
           {"--optimizer", "sgd"}, {"--memory-fraction", "0.3"}}) {
    std::vector<std::string> args = tune;
    args.insert(args.end(), other.begin(), other.end());
    r = run(args);
    ASSERT_EQ(r.status, 0) << other[0] << ": " << r.err;
    EXPECT_EQ(r.out.find("from the store"), std::string::npos) << other[0] << ": " << r.out;
    EXPECT_EQ(r.out.find("INFEASIBLE"), std::string::npos) << other[0] << ": " << r.out;
  }
}

// A cluster YAML's network_gbps prices the cells of jobs that span hosts:
// 8-GPU jobs on 4-GPU nodes run slower over a slow network.
TEST_F(Cli, TheClusterNetworkPricesCellsThatSpanHosts) {
  auto jct = [&](const std::string& gbps) {
    const fs::path yaml = dir_ / ("net-" + gbps + ".yaml");
    std::ofstream(yaml) << "network_gbps: " << gbps << "\nnodes:\n"
                        << "  - {name: a, gpu_type: a100-80, gpus: 4}\n  - {name: b, gpu_type: a100-80, gpus: 4}\n";
    const Result r = run({"simulate", "--trace", examples("data/philly/philly.csv"), "--limit", "200",
                          "--oracle", "cells", "--cells-db", (dir_ / "none.db").string(), "--model-mix",
                          "gpt-125m@64:1", "--cluster", yaml.string(), "--policy", "fifo", "--drop-unrunnable",
                          "--no-db", "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out)["runs"][0]["metrics"]["jct_mean_s"].get<double>();
  };
  const double slow = jct("0.5"), fast = jct("100");
  EXPECT_GT(slow, fast * 1.01);
}

TEST_F(Cli, GpuEstimatesWithoutProfilesAndTheirValidation) {
  // No database: a GPU type is modeled; the basis and precision are printed.
  Result r = run({"estimate", "--model", "gpt-125m", "--gpu-type", "a100-80", "--gpus", "8", "--batch", "64",
                  "--db", (dir_ / "none.db").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("basis: modeled; precision: bf16"), std::string::npos) << r.out;
  r = run({"tune", "--model", "gpt-125m", "--gpu-type", "v100", "--gpus", "2", "--precision", "fp32", "--no-db",
           "--db", (dir_ / "none.db").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["basis"], "modeled");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_TRUE(j.contains("iteration_ms"));
  EXPECT_TRUE(j["feasible"].get<bool>());
  r = run({"estimate", "--model", "gpt-125m", "--gpu-type", "v100", "--precision", "bf16", "--db", db()});
  EXPECT_EQ(r.status, 2);  // no bf16 on a V100
  // A batch below 1 is named as such, by estimate (not as indivisible by mb) and by tune.
  for (const char* verb : {"estimate", "tune"}) {
    r = run({verb, "--model", "gpt-125m", "--gpu-type", "v100", "--batch", "-5", "--db", (dir_ / "none.db").string()});
    EXPECT_EQ(r.status, 2) << verb;
    EXPECT_NE(r.err.find("--batch must be >= 1, got -5"), std::string::npos) << verb << ": " << r.err;
  }
  for (const char* pareto : {"0", "-1", "1001"}) {  // 0 and -1 kept one plan, as 1 does
    r = run({"tune", "--model", "gpt-125m", "--gpu-type", "v100", "--gpus", "2", "--pareto", pareto, "--no-db"});
    EXPECT_EQ(r.status, 2) << pareto;
    EXPECT_NE(r.err.find("--pareto must be a number in [1, 1000], got " + std::string(pareto)), std::string::npos) << r.err;
  }
  // More GPUs than any plan can give a sample: bad input (it read "no plan fits in memory", exit 1).
  r = run({"tune", "--model", "gpt-125m", "--gpu-type", "a100-80", "--gpus", "8192", "--batch", "8", "--no-db"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("no plan of 8192 GPUs splits a global batch of 8"), std::string::npos) << r.err;
  // A model that does not fit is an answer (exit 1); an odd batch says how far it could be split.
  r = run({"tune", "--model", "gpt-1.3b", "--gpu-type", "v100", "--gpus", "1", "--batch", "99", "--no-db"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("fits gpt-1.3b in memory (micro-batch counts tried: powers of two dividing 99, up to 1)"),
            std::string::npos) << r.err;
  // With --json the answer is JSON too, as estimate's is (stdout was empty).
  r = run({"tune", "--model", "gpt-1.3b", "--gpu-type", "v100", "--gpus", "1", "--batch", "99", "--no-db", "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const auto none = nlohmann::json::parse(r.out);
  EXPECT_FALSE(none["feasible"].get<bool>());
  EXPECT_NE(none["infeasible_reason"].get<std::string>().find("fits gpt-1.3b in memory"), std::string::npos);
  // tune --all: an auto row gives the stage count it chose and says it is
  // the best over counts (it read "stages": 0), with its memory; an
  // infeasible cell is null throughout.
  r = run({"tune", "--model", "gpt-1.3b", "--gpu-type", "v100", "--gpus", "2", "--all", "--no-db", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  int autos = 0;
  const auto tuned = nlohmann::json::parse(r.out);
  for (const auto& cell : tuned["cells"]) {
    if (cell["auto"].get<bool>()) ++autos;
    if (!cell["feasible"].get<bool>()) {
      EXPECT_TRUE(cell["stages"].is_null() && cell["plan"].is_null() && cell["memory_gib"].is_null()) << cell;
      continue;
    }
    EXPECT_GE(cell["stages"].get<int>(), 1) << cell;
    EXPECT_EQ(cell["stages"].get<size_t>(), cell["plan"]["stages"].size()) << cell;
    EXPECT_GT(cell["memory_gib"].get<double>(), 0) << cell;
  }
  EXPECT_EQ(autos, 2);  // one per GPU count: 1 and 2
  // The shipped comparison runs; a bad row is named by file and line, exit 2.
  r = run({"estimate", "--validate", examples("data/gpu_measurements/gavel.csv")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("validation: 60 rows"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("memory:"), std::string::npos);  // Gavel's table has no peak memory
  // The H100 rows carry their measured peak memory: compared too.
  r = run({"estimate", "--validate", examples("data/gpu_measurements/h100.csv"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto h = nlohmann::json::parse(r.out);
  EXPECT_EQ(h["summary"]["all"]["memory_rows"], 22);
  EXPECT_GT(h["rows"][0]["peak_memory_gib"].get<double>(), 0);
  EXPECT_GT(h["rows"][0]["estimated_memory_gib"].get<double>(), 0);
  // Lambda's SQuAD fine-tuning rows, the only ones on an A10 or an A40: every
  // row within 30 % either way (the A40's TF32 rows, from a 2021 container,
  // are 0.75-0.83), the median within 15 %, and per model the measured order
  // of the types in fp16: H100 > A100-80 > A40, V100 > A10.
  r = run({"estimate", "--validate", examples("data/gpu_measurements/lambda.csv"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lam = nlohmann::json::parse(r.out);
  ASSERT_EQ(lam["rows"].size(), 20u);
  EXPECT_LT(lam["summary"]["all"]["median_error"].get<double>(), 0.15);
  // No row of Lambda's measured memory: no memory error (0.0 read as perfect).
  EXPECT_EQ(lam["summary"]["all"]["memory_rows"], 0);
  EXPECT_TRUE(lam["summary"]["all"]["memory_median_error"].is_null()) << lam["summary"];
  std::map<std::string, std::map<std::string, double>> est_rate;  // model -> type -> fp16 samples/s
  for (const auto& row : lam["rows"]) {
    EXPECT_GT(row["ratio"].get<double>(), 0.7) << row;
    EXPECT_LT(row["ratio"].get<double>(), 1.3) << row;
    if (row["precision"] == "fp16")
      est_rate[row["model"]][row["gpu_type"]] = row["batch"].get<double>() / row["estimated_s"].get<double>();
  }
  ASSERT_EQ(est_rate.size(), 2u);
  for (auto& [model, rate] : est_rate) {
    EXPECT_GT(rate["h100"], rate["a100-80"]) << model;
    EXPECT_GT(rate["a100-80"], rate["a40"]) << model;
    EXPECT_GT(rate["a100-80"], rate["v100"]) << model;
    EXPECT_GT(rate["a40"], rate["a10"]) << model;
    EXPECT_GT(rate["v100"], rate["a10"]) << model;
  }
  const std::string bad = write("bad.csv",
                                "model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s\n"
                                "resnet-18,64,fp32,v100,1,1,0.04\n"
                                "resnet-18,64,fp32,v100,1,1,nan\n");
  r = run({"estimate", "--validate", bad});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(bad + ":3:"), std::string::npos) << r.err;
  // Transferred from the V100 rows: a summary of its own, and the source's rows have none.
  r = run({"estimate", "--validate", examples("data/gpu_measurements/gavel.csv"), "--transfer-from", "v100", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto t = nlohmann::json::parse(r.out);
  EXPECT_EQ(t["summary"]["transferred"]["from"], "v100");
  EXPECT_EQ(t["summary"]["transferred"]["rows"], 50);  // 75 rows, less the 25 on the V100
  for (const auto& row : t["rows"]) EXPECT_EQ(row["gpu_type"] == "v100", row["transferred_s"].is_null()) << row;
  r = run({"estimate", "--validate", examples("data/gpu_measurements/gavel.csv"), "--transfer-from", "z9000"});
  EXPECT_EQ(r.status, 2);
  // --precision belongs to the cell oracle.
  r = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:4",
           "--precision", "fp16", "--no-db"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--precision needs --oracle cells"), std::string::npos) << r.err;
  // The cell oracle on GPU types with no profile at all (modeled), at the
  // default precision and at fp32: fp32 trains slower, so jobs finish later.
  const std::string trace = write("gpt.csv",
                                  "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n"
                                  "0,0,gpt,gpt-125m,64,2000,4,,,,\n1,60,gpt,gpt-125m,32,1000,2,,,,\n");
  auto jct = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"simulate", "--trace", trace, "--cluster", "a100-80:8", "--oracle", "cells",
                                  "--cells-db", (dir_ / "cells.db").string(), "--policy", "fifo", "--no-db", "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    const Result s = run(a);
    EXPECT_EQ(s.status, 0) << s.err;
    return nlohmann::json::parse(s.out)["runs"][0]["metrics"]["jct_mean_s"].get<double>();
  };
  EXPECT_GT(jct({"--precision", "fp32"}), 2 * jct({}));
}

}  // namespace

namespace {

// The device libraries a scheduling verb must not load (issue 14).
const char* const kDeviceLibs[] = {"libtorch", "libc10", "libcudart", "libcupti", "libnccl", "libgloo", "libcuda."};

class Startup : public Cli {
 protected:
  // Runs `args` with CELLSCHED_MAPS_OUT set; returns the process's /proc/self/maps at exit.
  std::string maps_of(std::vector<std::string> args) {
    const fs::path maps = dir_ / "maps.txt";
    fs::remove(maps);
    args.insert(args.begin(), CELLSCHED_BINARY);
    const Result r = cellsched::testing::run_in(args, dir_, "maps", {"CELLSCHED_MAPS_OUT=" + maps.string()});
    EXPECT_EQ(r.status, 0) << args[1] << ": " << r.err;
    return slurp(maps);
  }
};

TEST_F(Startup, NonGpuVerbsMapNoDeviceLibrary) {
  const std::string trace = (dir_ / "t.csv").string();
  const std::vector<std::vector<std::string>> verbs = {
      {"--help"},
      {"gpus"},
      {"cluster", "v100:2,k80:2"},
      {"trace", "generate", "--jobs", "5", "--seed", "1", "--out", trace},
      {"simulate", "--trace", trace, "--cluster", "v100:4,p100:4,k80:4", "--policy", "fifo,gavel,hadar", "--no-db"},
      {"submit", "--db", db(), "--iterations", "5", "--", "/bin/true"},
      {"status", "--db", db()},
      {"cancel", "--db", db(), "1"},
      {"db", "runs", "--db", db()},
  };
  for (const auto& v : verbs) {
    const std::string maps = maps_of(v);
    ASSERT_NE(maps.find("libc"), std::string::npos) << v[0] << ": no map was written";
    for (const char* lib : kDeviceLibs) EXPECT_EQ(maps.find(lib), std::string::npos) << v[0] << " maps " << lib;
    // COIN-OR (and the OpenBLAS under CLP) only where an LP is solved.
    const bool solves = v[0] == "simulate";
    for (const char* lib : {"cellsched-coin.so", "libClp", "libCbc", "libopenblas"})
      EXPECT_EQ(maps.find(lib) != std::string::npos, solves) << v[0] << (solves ? " does not map " : " maps ") << lib;
  }
}

// Without the COIN-OR module a verb that solves an LP says what is missing
// (exit 1); one that solves none does not need it.
TEST_F(Startup, MissingSolverModuleIsNamed) {
  const std::string trace = (dir_ / "t.csv").string();
  maps_of({"trace", "generate", "--jobs", "20", "--seed", "1", "--out", trace});
  const std::vector<std::string> env = {"CELLSCHED_COIN=" + (dir_ / "none.so").string()};
  const Result r = cellsched::testing::run_in(
      {CELLSCHED_BINARY, "simulate", "--trace", trace, "--cluster", "v100:8,p100:8,k80:8", "--policy", "gavel", "--no-db"},
      dir_, "nocoin", env);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot load the COIN-OR solvers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CELLSCHED_COIN"), std::string::npos) << r.err;
  EXPECT_EQ(cellsched::testing::run_in({CELLSCHED_BINARY, "gpus"}, dir_, "nocoin-gpus", env).status, 0);
}

// OpenBLAS (CLP's LAPACK) starts no pool thread in `cellsched`, whose LPs are
// too small for it: the thread spun on the second core against the TTD
// bound's LP. The process ends with its own thread alone, every CPU it was
// allowed, and no OPENBLAS_NUM_THREADS left for the processes it starts.
TEST_F(Startup, SimulateLeavesNoBlasThreadAndEveryCpu) {
  const std::string trace = (dir_ / "t.csv").string();
  maps_of({"trace", "generate", "--jobs", "20", "--seed", "1", "--out", trace});
  const std::string status =
      maps_of({"simulate", "--trace", trace, "--cluster", "v100:8,p100:8,k80:8", "--policy", "gavel", "--no-db"});
  auto field = [](const std::string& text, const std::string& name) {
    const size_t at = text.find("\n" + name + ":");
    if (at == std::string::npos) return std::string("missing");
    const size_t begin = text.find_first_not_of(" \t", at + name.size() + 2);
    return text.substr(begin, text.find('\n', begin) - begin);
  };
  EXPECT_EQ(field(status, "Threads"), "1");
  std::ifstream self("/proc/self/status");
  const std::string mine((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  EXPECT_EQ(field(status, "Cpus_allowed_list"), field(mine, "Cpus_allowed_list"));
}

}  // namespace

namespace {

// The small things a new user trips over (issue 14).
TEST_F(Cli, HelpDefaultsPrintShort) {
  for (const char* verb : {"simulate", "schedule", "sweep", "estimate", "tune", "run", "submit", "trace", "cluster"}) {
    const Result r = run({verb, "--help"});
    EXPECT_EQ(r.status, 0) << verb;
    // No number printed with Boost's 17 digits (0.90000000000000002).
    const std::regex long_number(R"(\(=-?[0-9]+\.[0-9]{8,})");
    EXPECT_FALSE(std::regex_search(r.out, long_number)) << verb << ":\n" << r.out;
  }
  EXPECT_NE(run({"tune", "--help"}).out.find("(=0.9)"), std::string::npos);
}

TEST_F(Cli, OnlineVerbsSayThingsOnce) {
  Result r = run({"submit", "--db", db(), "--iterations", "5", "--name", "two\nlines", "--", "/bin/true"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("printable"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db()));  // nothing stored
  r = run({"submit", "--db", db(), "--iterations", "5", "--name", "one", "--", "/bin/true"});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"cancel", "--db", db(), "99"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "cellsched cancel: no job 99 in " + db() + "\n");
  r = run({"cancel", "--db", db(), "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["id"], 1);
  EXPECT_EQ(j["state"], "cancelled");  // queued: cancelled at once
  EXPECT_EQ(j["cancel_requested"], true) << r.out;  // as the store and `status --json` say
  // The status table gives a large count in full (it printed 1.23457e+07).
  r = run({"submit", "--db", db(), "--iterations", "12345678", "--name", "big", "--", "/bin/true"});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"status", "--db", db()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("12345678"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("e+0"), std::string::npos) << r.out;
  // ... and --json as integers (12345678, not 12345678.0).
  r = run({"status", "--db", db(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto st = nlohmann::json::parse(r.out);
  ASSERT_EQ(st["jobs"].size(), 2u);
  EXPECT_TRUE(st["jobs"][1]["iterations"].is_number_integer()) << st.dump(2);
  EXPECT_EQ(st["jobs"][1]["iterations"], 12345678);
  EXPECT_TRUE(st["jobs"][1]["iterations_done"].is_number_integer()) << st.dump(2);
}

TEST_F(Cli, ADbThatIsNotADatabaseIsBadInputNamedBeforeTheWork) {
  const std::string bad = write("notes.db", "not an SQLite file\n");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:8", "--policy",
            "fifo", "--db", bad},
           {"db", "runs", "--db", bad},
           {"status", "--db", bad},
           {"tune", "--model", "gpt-125m", "--gpu-type", "v100", "--gpus", "2", "--db", bad}}) {
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.err;  // it was exit 1, simulate's after the runs
    EXPECT_NE(r.err.find(bad + ": not an SQLite database"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << args[0];
  }
  EXPECT_EQ(slurp(bad), "not an SQLite file\n");
}

// A --db that cannot hold a database (a folder, a device, a missing folder)
// was exit 1 "unable to open database file" or "disk I/O error".
TEST_F(Cli, ADbPathThatCannotHoldADatabaseIsNamed) {
  fs::create_directory(dir_ / "folder");
  const std::string folder = (dir_ / "folder").string();
  const std::string missing = (dir_ / "nowhere" / "x.db").string();
  for (const auto& [path, says] : std::vector<std::pair<std::string, std::string>>{
           {folder, ": is a folder"}, {missing, ": folder "}, {"/dev/null", ": not a regular file"}}) {
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"status", "--db", path},
             {"cancel", "--job", "1", "--db", path},
             {"db", "show", "--run", "1", "--db", path},
             {"estimate", "--model", "gpt-125m", "--gpu-type", "a100-80", "--db", path}}) {
      if (path != folder && args[0] == "estimate") continue;  // estimate reads a file only where one is
      const Result r = run(args);
      EXPECT_EQ(r.status, 2) << args[0] << " " << path << ": " << r.err;
      // a missing file: "no such database", with the verb that makes one
      const bool missing_ok = path == missing;
      EXPECT_NE(r.err.find(missing_ok ? path + ": no such database" : path + says), std::string::npos) << r.err;
    }
  }
  // Named before the runs, not when they are stored.
  const Result sim = run({"simulate", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster",
                          "v100:8", "--policy", "fifo", "--db", missing});
  EXPECT_EQ(sim.status, 2) << sim.err;
  EXPECT_NE(sim.err.find(missing + ": folder "), std::string::npos) << sim.err;
  EXPECT_EQ(sim.out, "");
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
}

// Flags that do not apply, or whose value no trace format reads, were taken silently.
TEST_F(Cli, ReplayFlagsAreCheckedWhateverTheTrace) {
  const std::string trace = examples("data/gavel/traces/small_test.trace");
  for (const auto& [extra, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--reference-gpu", "bogus"}, "--reference-gpu: unknown GPU type 'bogus'"},
           {{"--limit", "-5"}, "--limit must be"},
           {{"--limit", "0"}, "--limit must be"},
           {{"--cells-precision", "fp16"}, "--cells-precision needs --oracle measured"},
           {{"--cells-db", "x.db"}, "--cells-db needs --oracle cells"},
           {{"--horizon", "0"}, "--horizon 0 stops before the first round"},
           {{"--seed", "-1"}, "--seed must be a whole number in [0, 18446744073709551615], got '-1'"}}) {
    std::vector<std::string> args = {"simulate", "--trace", trace, "--cluster", "v100:8", "--policy", "fifo", "--no-db"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_EQ(r.status, 2) << extra[0] << ": " << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  for (const std::string verb : {"inspect", "convert"}) {
    const Result r = run({"trace", verb, trace, "--reference-gpu", "h999"});
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--reference-gpu: unknown GPU type 'h999'"), std::string::npos) << r.err;
  }
  // A horizon that ends before any job does: no JCT, TTD or CRU, where the table said 0.00.
  const std::string three = write("three.csv", run({"trace", "generate", "--jobs", "3"}).out);
  const Result early = run({"simulate", "--trace", three, "--cluster", "v100:8", "--policy", "fifo", "--no-db",
                            "--horizon", "1"});
  ASSERT_EQ(early.status, 0) << early.err;
  EXPECT_TRUE(std::regex_search(early.out, std::regex("fifo +3 +0 +- +- +- +- "))) << early.out;
  // And stderr says that its figures cover only the jobs it finished (a
  // --horizon run said nothing, and policies finished different jobs).
  EXPECT_NE(early.err.find("warning: fifo left 3 of 3 jobs unfinished at --horizon 1 s"), std::string::npos)
      << early.err;
  // The JSON says so too (TTD null, not 0.0), and the GPUs it kept busy still
  // count: CRU over the span run (it read 0.0 with them ~88 % busy).
  const Result early_json = run({"simulate", "--trace", three, "--cluster", "v100:8", "--policy", "fifo", "--no-db",
                                 "--horizon", "600", "--json"});
  ASSERT_EQ(early_json.status, 0) << early_json.err;
  const nlohmann::json em = nlohmann::json::parse(early_json.out)["runs"][0]["metrics"];
  EXPECT_TRUE(em["ttd_s"].is_null()) << em.dump();
  EXPECT_TRUE(em["jct_mean_s"].is_null()) << em.dump();
  EXPECT_GT(em["cru"].get<double>(), 0) << em.dump();
  EXPECT_LE(em["cru"].get<double>(), 1) << em.dump();
  // So does the stored run's listing (it read 0.0 and 0.00).
  const std::string early_db = (dir_ / "early.db").string();
  ASSERT_EQ(run({"simulate", "--trace", three, "--cluster", "v100:8", "--policy", "fifo", "--db", early_db,
                 "--horizon", "600"}).status, 0);
  const nlohmann::json listed = nlohmann::json::parse(run({"db", "runs", "--db", early_db, "--json"}).out)[0];
  EXPECT_TRUE(listed["jct_mean_s"].is_null()) << listed.dump();
  EXPECT_TRUE(listed["ttd_s"].is_null()) << listed.dump();
  EXPECT_TRUE(std::regex_search(run({"db", "runs", "--db", early_db}).out, std::regex(" 3 +0 +- +- +0\\.\\d{3}")));
  const Result lim = run({"trace", "inspect", trace, "--limit", "-2"});
  EXPECT_EQ(lim.status, 2) << lim.err;
  const Result gen = run({"trace", "generate", "--reference-gpu", "nope"});
  EXPECT_EQ(gen.status, 2) << gen.err;
  // --seed -1 was 2^64 - 1 (a uint64_t option wraps it); the largest seed is fine.
  for (const std::string seed : {"-1", "1.5", "18446744073709551616", ""}) {
    const Result bad = run({"trace", "generate", "--jobs", "3", "--seed", seed});
    EXPECT_EQ(bad.status, 2) << seed << ": " << bad.err;
    EXPECT_NE(bad.err.find("--seed must be a whole number"), std::string::npos) << bad.err;
  }
  EXPECT_EQ(run({"trace", "generate", "--jobs", "3", "--seed", "18446744073709551615"}).status, 0);
  EXPECT_NE(run({"sweep", "--help"}).out.find("--seed arg (=0)"), std::string::npos);
  // An alias is the catalogue's type.
  EXPECT_EQ(run({"trace", "generate", "--jobs", "3", "--reference-gpu", "V100"}).out,
            run({"trace", "generate", "--jobs", "3"}).out);
}

// An 8-GPU job on 4-GPU nodes (the shorthand's) runs only spread over two,
// at the table's unconsolidated rate: the run says how many such jobs there are.
TEST_F(Cli, JobsWiderThanEveryNodeAreNoted) {
  const std::string trace = write("thirty.csv", run({"trace", "generate", "--jobs", "30"}).out);
  for (const std::string verb : {"simulate", "schedule"}) {
    std::vector<std::string> args = {verb, "--trace", trace, "--cluster", "v100:16", "--policy", "fifo", "--json"};
    if (verb == "simulate") args.push_back("--no-db");
    Result r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("note: 1 job of 30 asks for more GPUs than a node has (4)"), std::string::npos) << r.err;
    args[4] = examples("clusters/gavel-physical.yaml");
    r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("note: 1 job of 30"), std::string::npos) << r.err;
  }
}

// A finished job did all its iterations, exactly: the sum of its rounds'
// shares once came to 925981.9999999999 for 925,982 (40 of fifo's 96 jobs here).
TEST_F(Cli, FinishedJobsReportEveryIterationExactly) {
  Result r = run({"simulate", "--trace", examples("data/gavel/traces/max_min_fairness.trace"), "--cluster",
                  examples("clusters/gavel-physical.yaml"), "--policy", "fifo", "--db", db(), "--no-bound"});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"db", "show", "1", "--db", db(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto jobs = nlohmann::json::parse(r.out).at(0).at("jobs");
  ASSERT_EQ(jobs.size(), 96u);
  for (const auto& job : jobs) {
    const double done = job["iterations_done"].get<double>();
    EXPECT_EQ(done, std::floor(done)) << job;
  }
}

// fifo places type-agnostically, but not on a type a job cannot run on: it
// left four of this trace's jobs unplaced for good (no cell of the table on
// the A40s it took first) and warned; now it finishes all 22. summary.csv
// keeps one header for every run, empty where a figure is not defined (no
// JCT with no job done), as the JSON's null.
TEST_F(Cli, UnfinishedRunsWarnAndSummaryCsvKeepsItsColumns) {
  const std::string data = CELLSCHED_TEST_DATA "/traces/";
  const fs::path out = dir_ / "unfinished";
  Result r = run({"simulate", "--trace", data + "arena_dummy_runtime_trace.csv", "--oracle", "measured",
                  "--cells-table", data + "measured_cells.csv", "--cluster", "a40:16,a10:16", "--round", "60",
                  "--policy", "fifo,hadar", "--no-db", "--out", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning:"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("fifo +22 +22 "))) << r.out;
  const std::string three = write("three.csv", run({"trace", "generate", "--jobs", "3"}).out);
  const fs::path early = dir_ / "early";
  r = run({"simulate", "--trace", three, "--cluster", "v100:8", "--policy", "fifo,hadar", "--no-db", "--horizon",
           "1", "--no-bound", "--out", early.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  // A --horizon stop is asked for, but each policy's figures then cover only
  // the jobs it finished (a different set per policy): said once per policy.
  EXPECT_NE(r.err.find("warning: fifo left 3 of 3 jobs unfinished at --horizon 1 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: hadar left 3 of 3"), std::string::npos) << r.err;
  for (const fs::path& d : {out, early}) {
    std::ifstream f(d / "summary.csv");
    std::string header, row;
    ASSERT_TRUE(std::getline(f, header));
    // The bound's columns are there whether or not a bound was computed (runs' files line up).
    EXPECT_NE(header.find(",ttd_bound_s,"), std::string::npos) << header;
    EXPECT_NE(header.find("ttd_over_bound"), std::string::npos) << header;
    const auto fields = [](const std::string& line) { return std::count(line.begin(), line.end(), ',') + 1; };
    int rows = 0;
    while (std::getline(f, row)) {
      ++rows;
      EXPECT_EQ(fields(row), fields(header)) << d << ": " << row;
      if (d == early) {
        EXPECT_NE(row.find(",3,0,,,,,"), std::string::npos) << "no JCT with no job done: " << row;
      }
    }
    EXPECT_EQ(rows, 2) << d;
  }
}

// -o onto a link writes its target; onto a pipe or device, in place (the
// rename that makes a file appear whole replaced /dev/null with a file).
TEST_F(Cli, TraceOutputKeepsLinksAndPipes) {
  const fs::path target = dir_ / "target.csv", link = dir_ / "link.csv";
  std::ofstream(target) << "old\n";
  fs::create_symlink(target, link);
  ASSERT_EQ(run({"trace", "generate", "--jobs", "4", "-o", link.string()}).status, 0);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_NE(slurp(target.string()).find("id,arrival_s"), std::string::npos);
  const fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo.string()); });
  const Result r = run({"trace", "generate", "--jobs", "4", "-o", fifo.string()});
  reader.join();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(got, slurp(target.string()));
  const Result dir = run({"trace", "generate", "-o", dir_.string()});
  EXPECT_EQ(dir.status, 2) << dir.err;
  EXPECT_NE(dir.err.find("is a folder"), std::string::npos) << dir.err;
}

TEST_F(Cli, ScheduleJsonWritesNoFilesAndClusterHintsTheShorthand) {
  Result r = run({"schedule", "--trace", examples("data/gavel/traces/small_test.trace"), "--cluster", "v100:8",
                  "--policy", "fifo", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["policy"], "fifo");
  EXPECT_FALSE(fs::exists(dir_ / "schedule"));
  r = run({"cluster", "v100"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("v100:8"), std::string::npos) << r.err;
}

}  // namespace
