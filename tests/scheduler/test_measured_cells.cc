// The measured-cell oracle (issue 15): lookups and each fallback on a hand
// table, and the table's reader.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cluster.h"
#include "core/error.h"
#include "core/trace_io.h"
#include "scheduler/engine.h"
#include "scheduler/measured_cells.h"
#include "scheduler/policies.h"
#include "scheduler/policy.h"
#include "tests/core/core_test_util.h"

namespace cellsched {
namespace {

using testing::input_error;
using testing::TempDir;

const char* const kHeader = "model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s\n";

MeasuredCellOracle oracle_of(const std::string& rows, double penalty = 0.5,
                             const std::string& precision = "") {
  TempDir d;
  return MeasuredCellOracle(load_measured_cells(d.write("cells.csv", kHeader + rows)), "hand",
                            penalty, precision);
}

Job job(const std::string& model, int batch, int gpus = 1) {
  Job j;
  j.model = model;
  j.job_type = model;
  j.batch_size = batch;
  j.gpus = gpus;
  return j;
}

const char* const kHand =
    "bert__760M,128,amp,a40,1,1,0.8\n"
    "bert__760M,128,amp,a40,1,4,0.25\n"
    "bert__760M,128,amp,a40,2,4,0.2\n"
    "bert__760M,128,amp,a40,4,2,0.3\n"
    "bert__760M,128,fp32,a40,1,1,2.0\n"
    "bert__760M,128,amp,V100,1,2,0.5\n"
    "moe__1.3B,256,amp,a10,2,2,1.0\n";

TEST(MeasuredCells, ExactCellsByLocality) {
  const auto o = oracle_of(kHand);
  const Job b = job("bert__760M", 128);
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 1, true), 1 / 0.8);
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 1, false), 1 / 0.8);  // one GPU is never spread
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 4, true), 1 / 0.25);
  // Eight spread GPUs: 2x4 and 4x2 are both measured; the fewest hosts wins.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 8, false), 1 / 0.2);
  EXPECT_EQ(o.plan(b, "a40", 4), "measured");
  EXPECT_DOUBLE_EQ(o.throughput(b, "v100", 2, true), 1 / 0.5);  // catalogue names ("V100")
}

TEST(MeasuredCells, FallbackOtherLocalityWithPenalty) {
  const auto o = oracle_of(kHand, 0.5);
  const Job b = job("bert__760M", 128);
  // Four GPUs spread: only one host measured -> x 0.5.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 4, false), 0.5 / 0.25);
  // Eight on one host: only spread measured -> the spread figure as it is.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 8, true), 1 / 0.2);
  // moe on a10: only 2x2 spread is measured; four on one host takes it.
  EXPECT_DOUBLE_EQ(o.throughput(job("moe__1.3B", 256), "a10", 4, true), 1.0);
}

TEST(MeasuredCells, FallbackNearestSmallerCountScaled) {
  const auto o = oracle_of(kHand, 0.5);
  const Job b = job("bert__760M", 128);
  // Two GPUs on one host: the largest measured below is 1 -> x 2.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 2, true), 2 / 0.8);
  // Six on one host: largest below is 4 (one host) -> x 6/4.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 6, true), 1 / 0.25 * 6 / 4);
  // Sixteen spread: largest below is 8 spread (2x4) -> x 2, no penalty.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 16, false), 1 / 0.2 * 2);
  // Three spread: basis 1 GPU on one host -> x 3 x penalty.
  EXPECT_DOUBLE_EQ(o.throughput(b, "a40", 3, false), 3 / 0.8 * 0.5);
}

TEST(MeasuredCells, CannotRunWithoutACellAtOrBelow) {
  const auto o = oracle_of(kHand);
  EXPECT_EQ(o.throughput(job("bert__760M", 128), "a10", 1, true), 0);  // type never measured
  EXPECT_EQ(o.throughput(job("moe__1.3B", 256), "a10", 2, true), 0);  // only 4 measured
  EXPECT_EQ(o.throughput(job("gpt", 8), "a40", 1, true), 0);  // model unknown
  EXPECT_EQ(o.plan(job("gpt", 8), "a40", 1), "");
}

TEST(MeasuredCells, BatchAndPrecision) {
  const auto o = oracle_of(kHand);
  // Batch 256 is not measured: the nearest (128) with samples/s held.
  EXPECT_DOUBLE_EQ(o.throughput(job("bert__760M", 256), "a40", 1, true), 128.0 / 256 / 0.8);
  // No batch: the smallest measured.
  EXPECT_DOUBLE_EQ(o.throughput(job("bert__760M", 0), "a40", 1, true), 1 / 0.8);
  // The first precision in the file is amp; fp32 when asked.
  const auto fp32 = oracle_of(kHand, 0.8, "FP32");
  EXPECT_DOUBLE_EQ(fp32.throughput(job("bert__760M", 128), "a40", 1, true), 1 / 2.0);
  EXPECT_EQ(fp32.throughput(job("bert__760M", 128), "a40", 4, true), 4 / 2.0);
  EXPECT_NE(input_error([] { oracle_of(kHand, 0.8, "bf16"); }).find("no cell has precision"),
            std::string::npos);
  EXPECT_NE(input_error([] { oracle_of(kHand, 1.5); }).find("locality penalty"), std::string::npos);
}

TEST(MeasuredCells, BadRowsNameFileAndLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"m,0,amp,a40,1,1,0.5", "batch must be a positive integer"},
      {"m,8,amp,z9000,1,1,0.5", "unknown gpu_type 'z9000'"},
      {"m,8,amp,a40,0,1,0.5", "hosts must be a positive integer"},
      {"m,8,amp,a40,1,x,0.5", "gpus_per_host must be an integer"},
      {"m,8,amp,a40,1,1,0", "iter_time_s must be a number of seconds in [1e-6, 1e6), got"},
      {"m,8,amp,a40,1,1,nan", "iter_time_s must be a number"},
      {"m,8,amp,a40,1,1,1e309", "iter_time_s must be a number"},
      {"m,8,amp,a40,1,1,1e308", "iter_time_s must be a number of seconds in [1e-6, 1e6)"},
      {"m,8,amp,a40,1,1,1e-300", "iter_time_s must be a number of seconds in [1e-6, 1e6)"},
      {",8,amp,a40,1,1,0.5", "empty model"},
      {"m,8,,a40,1,1,0.5", "empty precision"},
      {"m,8,amp,a40,1,1", "expected 7 fields"},
      {"m,8,amp,A40,1,1,0.7", "the same cell as line 2"},
  };
  TempDir d;
  for (const auto& [row, what] : cases) {
    const std::string p = d.write("c.csv", std::string(kHeader) + "m,8,amp,a40,1,1,0.5\n" + row + "\n");
    const std::string msg = input_error([&] { load_measured_cells(p); });
    EXPECT_NE(msg.find(p + ":3: " + what), std::string::npos) << row << " -> " << msg;
  }
  const std::string crlf = d.write("w.csv", "\xEF\xBB\xBFmodel,batch,precision,gpu_type,hosts,"
                                            "gpus_per_host,iter_time_s\r\nm,8,amp,a40,1,1,0.5\r\n");
  EXPECT_EQ(load_measured_cells(crlf).size(), 1u);
  EXPECT_NE(input_error([&] { load_measured_cells(d.write("e.csv", kHeader)); }).find("no cells"),
            std::string::npos);
}

// Every policy runs a Crius/Arena trace on the measured cells of the fixture
// and finishes every job; crius's cells come from the table's localities.
TEST(MeasuredCells, EveryPolicyRunsACriusTrace) {
  const std::string dir = std::string(CELLSCHED_TEST_DATA) + "/traces/";
  const Trace trace = load_trace(dir + "arena_dummy_runtime_trace.csv");
  const MeasuredCellOracle o(load_measured_cells(dir + "measured_cells.csv"), "fixture");
  const Cluster cluster = parse_cluster_shorthand("a40:16,a10:16");
  SimOptions so;
  so.round_s = 60;
  for (const std::string& name : policy_names()) {
    auto policy = make_policy(name);
    const RunRecord run = simulate(trace, cluster, o, *policy, so);
    SCOPED_TRACE(name);
    EXPECT_EQ(run.metrics.jobs, 22);
    // fifo and yarn-cs place type-agnostically and may leave jobs unplaced.
    if (name != "fifo" && name != "yarn-cs") EXPECT_EQ(run.metrics.completed, 22);
    else EXPECT_GT(run.metrics.completed, 0);
  }
}

// The GPU validation's own files (a `#` comment first, then split, optimizer
// and source columns after the seven) load as measured-cell tables.
TEST(MeasuredCells, ReadsTheGpuValidationFiles) {
  const std::string dir = std::string(CELLSCHED_TEST_DATA) + "/../../examples/data/gpu_measurements/";
  for (const char* f : {"gavel.csv", "gavel-physical.csv", "published.csv", "h100.csv", "lambda.csv"}) {
    const auto cells = load_measured_cells(dir + f);
    EXPECT_GE(cells.size(), 10u) << f;
    EXPECT_GT(cells.front().iter_time_s, 0) << f;
    EXPECT_GT(cells.front().line, 2) << f;  // after the comment and the header
  }
  TempDir d;
  const std::string p = d.write("x.csv", std::string("# note\n") + std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
                                             ",split\nm,8,fp32,a40,1,1,0.5\n");
  EXPECT_NE(input_error([&] { load_measured_cells(p); }).find(p + ":3: expected 8 fields"), std::string::npos);
}

// crius decides from the cells' localities: a 4-GPU job goes to the A40s when
// one A40 node holds 4 GPUs (consolidated 1x4 is the fastest cell), and to the
// A10s when A40 nodes hold 2 each (the A40 cell is then 2x2, measured slow).
TEST(MeasuredCells, CriusChoosesByLocality) {
  const auto o = oracle_of(
      "m,32,fp32,a40,1,1,0.4\nm,32,fp32,a40,1,2,0.25\nm,32,fp32,a40,1,4,0.1\nm,32,fp32,a40,2,2,0.5\n"
      "m,32,fp32,a10,1,1,0.8\nm,32,fp32,a10,1,2,0.45\nm,32,fp32,a10,1,4,0.2\n");
  Job j = job("m", 32, 4);
  j.total_iterations = 1e6;
  auto type_of = [&](const Cluster& c) {
    JobState s;
    s.job = &j;
    s.remaining = j.total_iterations;
    std::vector<JobState*> active = {&s};
    std::vector<Allocation> out(1);
    auto crius = make_crius();
    RoundContext ctx{0, 360, &c, &o, &active, 30, {}};
    crius->decide(ctx, out);
    int gpus = 0;
    for (const Placement& p : out[0].workers) gpus += p.gpus;
    EXPECT_EQ(gpus, 4);
    return out[0].workers.empty() ? std::string() : c.nodes[out[0].workers[0].node].gpu_type;
  };
  Cluster one;
  one.nodes = {{"a", "localhost", "a40", 4}, {"b", "localhost", "a10", 4}};
  EXPECT_EQ(type_of(one), "a40");
  Cluster split;
  split.nodes = {{"a", "localhost", "a40", 2}, {"a2", "localhost", "a40", 2}, {"b", "localhost", "a10", 4}};
  EXPECT_EQ(type_of(split), "a10");
}

}  // namespace
}  // namespace cellsched
