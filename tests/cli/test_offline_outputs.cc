// What a researcher checks by machine in the offline outputs (schedule,
// sweep, trace generate/convert), and the inputs that used to slip past
// them: each case here was found by an audit of those outputs (2026-12-07).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"

namespace fs = std::filesystem;

namespace {

using cellsched::testing::Result;
using cellsched::testing::slurp;

class OfflineOutputs : public cellsched::testing::CliTest {};

// Fields of one CSV line, RFC 4180 quoting.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      f.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      f.emplace_back();
    } else {
      f.back() += c;
    }
  }
  return f;
}

// A node named "n,1" gave schedule.csv rows of 9 fields under 8; times kept
// 12 significant digits against the JSON's every digit.
TEST_F(OfflineOutputs, ScheduleCsvIsValidCsvWithTheJsonsTimes) {
  const std::string cluster = write("weird.yaml", "nodes:\n  - {name: \"n,1\", gpu_type: v100, gpus: 2}\n"
                                                  "  - {name: \"n\\\"2\", gpu_type: v100, gpus: 2}\n");
  const std::string trace = write("t.csv", run({"trace", "generate", "--jobs", "6", "--seed", "2"}).out);
  const Result r = run({"schedule", "--trace", trace, "--cluster", cluster, "--policy", "gavel", "--out", "s",
                        "--no-plots", "--drop-unrunnable"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream csv(slurp(dir_ / "s" / "schedule.csv"));
  const auto j = nlohmann::json::parse(slurp(dir_ / "s" / "schedule.json"));
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(csv_fields(line).size(), 8u) << line;
  std::set<std::string> nodes;
  size_t rows = 0;
  for (; std::getline(csv, line); ++rows) {
    const auto f = csv_fields(line);
    ASSERT_EQ(f.size(), 8u) << line;
    nodes.insert(f[2]);
    ASSERT_LT(rows, j["entries"].size());
    EXPECT_EQ(std::stod(f[5]), j["entries"][rows]["start_s"].get<double>()) << line;
    EXPECT_EQ(std::stod(f[6]), j["entries"][rows]["end_s"].get<double>()) << line;
  }
  EXPECT_EQ(rows, j["entries"].size());
  EXPECT_TRUE(nodes.count("n,1") || nodes.count("n\"2")) << "no row names a node";
}

// Each flag within its range, their product wrote a trace past the 1e12 s
// that every reader holds arrivals to (exit 0, then unreadable).
TEST_F(OfflineOutputs, TraceGenerateRefusesArrivalsPastWhatATraceMaySpan) {
  const Result r = run({"trace", "generate", "--jobs", "150000", "--interarrival", "1e7", "-o", "big.csv"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("the last job would arrive after 1e12 s"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "big.csv"));
}

// A Gavel SLO of 1e308 became the deadline inf, which `trace convert` wrote
// and no reader takes; a deadline before the arrival was accepted.
TEST_F(OfflineOutputs, DeadlinesAreTimesAfterTheArrival) {
  const std::string gavel = write("e8.trace", "ResNet-18 (batch size 32)\tcmd\tdir\t-step\t1\t100\t1\t1\t1e308\t0\n");
  Result r = run({"trace", "convert", gavel, "-o", "e8.csv"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(gavel + ":1: the deadline must be in [arrival, 1e13] s, got inf"), std::string::npos) << r.err;
  const std::string header = "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,command\n";
  for (const auto& [row, says] : std::vector<std::pair<std::string, std::string>>{
           {"0,10,A3C,,,7,1,1,5,,\n", ":2: the deadline must be in [arrival, 1e13] s, got 5 (arrival 10)"},
           {"0,10,A3C,,,7,1,1,1e308,,\n", ":2: the deadline must be in [arrival, 1e13] s"},
           {"0,10,A3C,,,7,1,1,,1e308,\n", ":2: the duration must be in [0, 1e12] s"}}) {
    const std::string f = write("bad.csv", header + row);
    r = run({"trace", "inspect", f});
    EXPECT_EQ(r.status, 2) << row;
    EXPECT_NE(r.err.find(f + says), std::string::npos) << r.err;
  }
  const std::string ok = write("ok.csv", header + "0,10,A3C,,,7,1,1,20,,\n");
  r = run({"trace", "convert", ok});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(",20,"), std::string::npos) << r.out;
}

// "2,,4" ran rates 2 and 4 silently; 2.0000001 and 2.0000002 were both
// labelled "2" (one rate-2/ folder overwrote the other); sweep.json left out
// settings that change its results.
TEST_F(OfflineOutputs, SweepRatesAndSettingsAreWhatWasAsked) {
  for (const std::string rates : {"2,,4", ",2", "2,"}) {
    const Result r = run({"sweep", "--jobs", "10", "--policy", "fifo", "--cluster", "v100:8", "--rates", rates});
    EXPECT_EQ(r.status, 2) << rates;
    EXPECT_NE(r.err.find("has an empty item"), std::string::npos) << r.err;
  }
  const Result r = run({"sweep", "--jobs", "10", "--policy", "fifo", "--cluster", "v100:8", "--rates",
                        "2.0000001,2.0000002", "--json", "--reference-gpu", "P100"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["reference_gpu"], "p100");
  EXPECT_TRUE(j.contains("hadar_ratio_cap_s")) << j.dump();
  const Result table = run({"sweep", "--jobs", "10", "--policy", "fifo", "--cluster", "v100:8", "--rates",
                            "2.0000001,2.0000002"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("2.0000001 jobs/h"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2.0000002 jobs/h"), std::string::npos) << table.out;
}

// The plots named neither trace nor cluster ("GPU utilization"): copied out
// of their folder, sweep's rate-<r>/ plots could not be told apart.
TEST_F(OfflineOutputs, PlotTitlesNameTheTraceAndTheCluster) {
  const std::string trace = write("ten.csv", run({"trace", "generate", "--jobs", "10"}).out);
  const Result r = run({"simulate", "--trace", trace, "--cluster", "v100:8", "--policy", "fifo", "--no-db", "--out",
                        (dir_ / "o").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string gp = cellsched::testing::slurp(dir_ / "o" / "plots.gp");
  EXPECT_NE(gp.find("set title 'GPU utilization: ten.csv on v100:8 (8 GPUs)'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set title 'CDF of job completion time: ten.csv on v100:8 (8 GPUs)'"), std::string::npos) << gp;
}

}  // namespace
