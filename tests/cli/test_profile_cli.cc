// `cellsched profile`: real processes, real files. Bad input exits 2 naming
// the file and line and stores nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"

namespace fs = std::filesystem;

namespace {

using cellsched::testing::Result;
using cellsched::testing::slurp;

class ProfileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = cellsched::testing::fresh_test_dir("cellsched-profile-cli");
    db_ = (dir_ / "p.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), CELLSCHED_BINARY);
    return cellsched::testing::run_in(args, dir_);
  }
  int profiles() {
    const Result r = run({"profile", "list", "--db", db_, "--json"});
    if (r.status != 0) return -1;
    return static_cast<int>(nlohmann::json::parse(r.out).size());
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(ProfileCli, BadModelYamlExits2WithFileAndLineAndStoresNothing) {
  const fs::path y = dir_ / "bad.yaml";
  std::ofstream(y) << "family: gpt\nhidden: 64\nnum_layers: two\n";
  const Result r = run({"profile", "compute", "--model", y.string(), "--db", db_});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(y.string() + ":3:"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(ProfileCli, BadOptionsExit2) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"profile", "compute", "--model", "gpt-9000"},
           {"profile", "compute", "--model", "gpt-tiny", "--tp", "3"},
           {"profile", "compute", "--model", "gpt-tiny", "--micro-batches", "1,x"},
           {"profile", "compute", "--model", "gpt-tiny", "--device", "tpu:0"},
           {"profile", "compute", "--model", "gpt-tiny", "--gpu-type", "v200"},
           {"profile", "compute", "--model", "gpt-tiny", "--gpu-type", "h100"},  // CPU times filed as an H100's
           {"profile", "compute", "--model", "gpt-tiny", "--tp", "1,1"},         // measured and stored twice
           {"profile", "compute", "--model", "gpt-tiny", "--micro-batches", "2,2"},
           {"profile", "compute", "--model", "gpt-tiny", "--input-shape", "3,32"},  // a zoo model has its own
           {"profile", "comm", "--gpu-type", "h100"},  // Gloo on the CPU filed as an H100's
           {"profile", "comm", "--ranks", "1"},        // "4,757 GB/s" with no one to talk to
           {"profile", "comm", "--backend", "nccl", "--ranks", "64"},  // more ranks than GPUs (or none)
           {"profile", "compute", "--model", "gpt-tiny", "--cache-flush-mib", "lots"},
           {"profile", "compute", "--model", "gpt-tiny", "--threads", "99999999"},  // hung
           {"profile", "compute", "--model", "gpt-tiny", "--warmup", "-1"},
           {"profile", "comm", "--timeout", "1e308"},  // overflowed to a negative timeout
           {"profile", "comm", "--warmup", "-3"},
           {"profile", "comm", "--backend", "mpi"},
           {"validate", "--model", "gpt-tiny", "--iterations", "0"},
           {"validate", "--model", "gpt-9000"},
           {"validate", "--model", "cyclegan"},  // not one chain of layers
           {"validate", "--model", "gpt-tiny", "--profile", "999"},  // stored a comm profile, then refused
           {"validate", "--model", "gpt-tiny", "--comm-profile", "-5"},
           {"profile", "comm", "--sizes", "1K,banana"},
           {"profile", "comm", "--collectives", "all_reduce,gossip"},
           {"profile", "show", "1"},
           {"profile", "frobnicate"},
       }) {
    std::vector<std::string> a = args;
    if (a.size() < 2 || a[1] != "show") {
      a.push_back("--db");
      a.push_back(db_);
    }
    const Result r = run(a);
    EXPECT_EQ(r.status, 2) << a[0] << " " << a[1] << " " << (a.size() > 3 ? a[3] : "") << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(ProfileCli, ComputeStoresAndShowListExportReadItBack) {
#ifndef CELLSCHED_TEST_TORCH
  GTEST_SKIP() << "this build has no LibTorch";
#endif
  Result r = run({"profile", "compute", "--model", "gpt-tiny", "--micro-batches", "1", "--tp", "1,2",
                  "--reps", "2", "--threads", "1", "--db", db_, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"].size(), 6u);
  const int id = j["id"];
  EXPECT_EQ(profiles(), 1);
  EXPECT_GT(j["mem_gbps"].get<double>(), 0);                         // measured on this machine
  // With 1 thread a process, as many streams as the CPUs allow (up to 4), each > 0.
  const auto cpus = std::max(1U, std::thread::hardware_concurrency());
  EXPECT_EQ(j["mem_gbps_streams"].size(), cpus > 1 ? std::min(4U, cpus) : 0U);
  for (const auto& v : j["mem_gbps_streams"]) EXPECT_GT(v.get<double>(), 0);
  EXPECT_EQ(j["cache_flush_bytes"], 0);  // gpt-tiny's weights and gradients fit in any cache
  r = run({"profile", "show", std::to_string(id), "--db", db_});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("block.0"), std::string::npos);
  r = run({"profile", "export", std::to_string(id), "--db", db_});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7);  // header + 6 records
  r = run({"profile", "export", std::to_string(id), "--format", "json", "--db", db_});
  EXPECT_EQ(nlohmann::json::parse(r.out)["layers"].size(), 6u);
  r = run({"profile", "export", "99", "--db", db_});
  EXPECT_EQ(r.status, 2);
  // -o naming the database itself (or its WAL) is refused, the store intact:
  // it wrote the CSV over it, exit 0, every profile lost.
  const auto size = std::filesystem::file_size(db_);
  for (const std::string& out : {db_, db_ + "-wal"}) {
    r = run({"profile", "export", std::to_string(id), "--db", db_, "-o", out});
    EXPECT_EQ(r.status, 2) << out;
    EXPECT_NE(r.err.find("SQLite database"), std::string::npos) << r.err;
  }
  EXPECT_EQ(std::filesystem::file_size(db_), size);
  EXPECT_EQ(profiles(), 1);
  // Another model's profile is refused before anything is profiled or trained.
  r = run({"validate", "--model", "wrn-tiny", "--profile", std::to_string(id), "--db", db_});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("profiles model 'gpt-tiny', not 'wrn-tiny'"), std::string::npos) << r.err;
  EXPECT_EQ(profiles(), 1);
  r = run({"profile", "compute", "--model", "gpt-tiny", "--micro-batches", "1", "--tp", "1", "--reps", "1",
           "--threads", "1", "--cache-flush-mib", "8", "--no-db", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto unstored = nlohmann::json::parse(r.out);
  EXPECT_EQ(unstored["cache_flush_bytes"], 8 << 20);
  // No id (it read 0), and byte and FLOP counts as integers (they read 139264.0).
  EXPECT_TRUE(unstored["id"].is_null()) << unstored["id"];
  EXPECT_TRUE(unstored["layers"][0]["param_bytes"].is_number_integer()) << unstored["layers"][0];
  // An unstored run has no id ("profile 0 (compute)" read as one), and counts agree with their nouns.
  r = run({"profile", "compute", "--model", "gpt-tiny", "--micro-batches", "1", "--tp", "1", "--reps", "1",
           "--threads", "1", "--no-db"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("profile (compute) gpt-tiny on cpu", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(", 1 thread, 1 rep,"), std::string::npos) << r.out;
}

// Real training processes: 3 single-process, 3 data-parallel (2 processes,
// Gloo all-reduce) and 3 pipeline (2 processes, send/recv) configurations,
// each measured and estimated from the profiles it stored first.
TEST_F(ProfileCli, ValidateTrainsEveryLayoutAndComparesWithTheEstimate) {
#ifndef CELLSCHED_TEST_TORCH
  GTEST_SKIP() << "this build has no LibTorch";
#endif
  const fs::path md = dir_ / "table.md";
  const Result r = run({"validate", "--model", "gpt-tiny", "--iterations", "2", "--warmup", "1", "--repetitions",
                        "2", "--trials", "2", "--extra-trials", "1", "--db", db_, "--out", md.string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 9u);
  int extra = 0;
  // Whether a pair of trials is off: their median (the mean of two) more than
  // 10 % above the faster, so --extra-trials 1 takes a third.
  auto off = [](double a, double b) { return std::abs(a - b) / 2 > 0.1 * (a + b) / 2; };
  std::map<std::string, int> modes;
  for (const auto& row : j["rows"]) {
    const std::string mode = row["config"];
    ++modes[mode];
    EXPECT_GT(row["measured_ms"].get<double>(), 0);
    EXPECT_GT(row["estimated_ms"].get<double>(), 0);
    EXPECT_EQ(row["basis"], "measured");  // both profiles are of this device
    const auto sums = row["param_checksums"].get<std::vector<double>>();
    ASSERT_EQ(sums.size(), mode == "single" ? 1u : 2u);
    if (mode == "dp") {
      EXPECT_EQ(sums[0], sums[1]);  // replicas stayed equal
    }
    if (mode == "pp") {
      EXPECT_NE(sums[0], sums[1]);  // two different stages
    }
    const double est_sync = row["estimated_breakdown_ms"]["gradient_sync"];
    EXPECT_EQ(est_sync > 0, mode == "dp");
    // The all-reduce of the rank that arrived last, and the first one's wait for it.
    const auto& meas = row["measured_breakdown_ms"];
    EXPECT_EQ(meas["gradient_sync"].get<double>() > 0, mode == "dp");
    EXPECT_GE(meas["waiting_for_slower_rank"].get<double>(), 0);
    if (mode != "dp") {
      EXPECT_EQ(meas["waiting_for_slower_rank"].get<double>(), 0);
    }
    // Two trials each, and a third where their median (the mean of two) is
    // more than 10 % above the faster (gpt-tiny's steps are milliseconds, so
    // some are); the reported time is their median, inside their min-max.
    const auto trials = row["trial_ms"].get<std::vector<double>>();
    ASSERT_GE(trials.size(), 2u);
    const bool unsettled = off(trials[0], trials[1]);
    ASSERT_EQ(trials.size(), unsettled ? 3u : 2u);
    extra += unsettled ? 1 : 0;
    const auto& sp = row["measured_spread_ms"];
    EXPECT_EQ(sp["n"], static_cast<int>(trials.size()));
    EXPECT_LE(sp["min"].get<double>(), row["measured_ms"].get<double>());
    EXPECT_GE(sp["max"].get<double>(), row["measured_ms"].get<double>());
    auto sorted = trials;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_DOUBLE_EQ(row["measured_ms"].get<double>(),
                     unsettled ? sorted[1] : (trials[0] + trials[1]) / 2);
    // Beside it, the same estimate without the co-location factor: equal
    // for one process, which shares its host with no one.
    const double alone = row["estimated_ms_without_colocation"];
    EXPECT_GT(alone, 0);
    if (mode == "single") {
      EXPECT_DOUBLE_EQ(alone, row["estimated_ms"].get<double>());
    }
    const double est = row["estimated_ms"];
    EXPECT_EQ(row["within_spread"].get<bool>(), est >= sp["min"].get<double>() && est <= sp["max"].get<double>());
  }
  EXPECT_EQ(j["trials"], 2);
  // The co-location probe (on by default): alone and two at once, three
  // pairs a round spread over it (each trial at least 3 timed iterations),
  // and one pair more if either side's median is more than 10 % above its fastest.
  const auto& co = j["colocation"];
  EXPECT_TRUE(co["probe"].get<bool>());
  EXPECT_EQ(co["pairs_per_round"], 3);
  EXPECT_EQ(co["iterations"], 3);
  const size_t probes = co["alone_ms"].size();
  ASSERT_GE(probes, 6u);
  ASSERT_LE(probes, 7u);
  EXPECT_EQ(co["together_ms"].size(), probes);
  // Whether the first six are off: their median more than 10 % above the fastest.
  const auto six_off = [](const nlohmann::json& v) {
    auto six = v.get<std::vector<double>>();
    six.resize(6);
    std::sort(six.begin(), six.end());
    const double med = (six[2] + six[3]) / 2;
    return med - six[0] > 0.1 * med;
  };
  EXPECT_EQ(probes == 7, six_off(co["alone_ms"]) || six_off(co["together_ms"]));
  extra += probes == 7 ? 1 : 0;
  EXPECT_EQ(j["extra_trials"], extra);
  EXPECT_GT(co["factor"].get<double>(), 0.2);  // a ratio of medians: gpt-tiny's steps are
  EXPECT_LT(co["factor"].get<double>(), 10);   // milliseconds, so it is a loose one
  EXPECT_GE(co["worst_abs_error_pct_without"].get<double>(), co["median_abs_error_pct_without"].get<double>());
  EXPECT_GE(j["within_spread_share"].get<double>(), 0);
  EXPECT_LE(j["within_spread_share"].get<double>(), 1);
  // The host check: before the profiles, before each of the two rounds of
  // trials (and the extra one, if any) and after the last; the memory pass at
  // the same moments.
  const size_t points = extra > 0 ? 5u : 4u;
  EXPECT_EQ(j["host"]["calibration_s"].size(), points);
  EXPECT_EQ(j["host"]["memory_calibration_s"].size(), points);
  EXPECT_GE(j["host"]["memory_calibration_ratio"].get<double>(), 1);
  EXPECT_TRUE(j["host"]["busy"].is_boolean());
  EXPECT_GE(j["host"]["others_cpu_share"].get<double>(), 0);
  // The profile's own spread beside each layer's time.
  ASSERT_FALSE(j["profile_layers"].empty());
  for (const auto& l : j["profile_layers"]) {
    EXPECT_GT(l["fwd_ms"].get<double>(), 0);
    EXPECT_GE(l["fwd_iqr_ms"].get<double>(), 0);
    // 2, or 3 where the two passes disagreed (--extra-trials 1).
    EXPECT_GE(l["repetitions"].get<int>(), 2);
    EXPECT_LE(l["repetitions"].get<int>(), 3);
  }
  EXPECT_EQ(modes, (std::map<std::string, int>{{"dp", 3}, {"pp", 3}, {"single", 3}}));
  EXPECT_EQ(profiles(), 2);  // compute and comm
  EXPECT_NE(slurp(md).find("median |error|"), std::string::npos);
  EXPECT_NE(slurp(md).find("min-max ms"), std::string::npos);
  EXPECT_NE(slurp(md).find("waiting for the slower rank"), std::string::npos);
  EXPECT_NE(slurp(md).find("co-location factor"), std::string::npos);
}

// `cellsched profile` runs in cellsched-torch: the boundary is real, and the
// profiler's process is the one that loads LibTorch.
TEST_F(ProfileCli, ProfileRunsInTheTorchHelper) {
  const fs::path maps = dir_ / "maps.txt";
  const Result r = cellsched::testing::run_in({CELLSCHED_BINARY, "profile", "--help"}, dir_, "maps",
                                              {"CELLSCHED_MAPS_OUT=" + maps.string()});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string m = slurp(maps);
  EXPECT_NE(m.find("cellsched-torch"), std::string::npos);
#ifdef CELLSCHED_TEST_TORCH
  EXPECT_NE(m.find("libtorch"), std::string::npos);
#endif
  // Without the helper, a clear message and exit 1 (not a crash).
  const Result missing = cellsched::testing::run_in({CELLSCHED_BINARY, "profile", "--help"}, dir_, "miss",
                                                    {"CELLSCHED_TORCH=/nonexistent/cellsched-torch"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("cellsched-torch"), std::string::npos) << missing.err;
  // The path the variable names is in the message (it said to set the variable).
  EXPECT_NE(missing.err.find("CELLSCHED_TORCH names /nonexistent/cellsched-torch"), std::string::npos) << missing.err;
}

TEST_F(ProfileCli, ValidateRejectsBadTrialOptionsAndStoresNothing) {
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--trials", "0"}, {"--trials", "-3"}, {"--configs", "single,zz"}, {"--configs", ""},
        {"--profile-passes", "0"}, {"--profile-passes", "99999999"}, {"--iterations", "0"}, {"--extra-trials", "-1"},
        {"--colocation-probe", "--no-colocation-probe"}, {"--out", "/nonexistent/dir/v.md"}}) {
    std::vector<std::string> argv{"validate", "--db", db_};
    argv.insert(argv.end(), bad.begin(), bad.end());
    const Result r = run(argv);
    EXPECT_EQ(r.status, 2) << bad[0] << " " << bad[1] << ": " << r.err;
    if (bad[0] == "--out") {  // named before any training (it was after the whole run)
      EXPECT_NE(r.err.find("--out /nonexistent/dir/v.md: no folder"), std::string::npos) << r.err;
    }
    if (bad[1][0] != '-' && bad[0] != "--configs" && bad[0] != "--out") {  // the flag and its range are named
      EXPECT_NE(r.err.find(bad[0] + " must be a number in ["), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(db_));  // nothing profiled, nothing stored
}

}  // namespace
