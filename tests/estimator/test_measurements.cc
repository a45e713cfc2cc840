// `estimate --validate`: the measurement CSV, its errors, and the comparison table.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "estimator/estimator.h"
#include "estimator/measurements.h"

namespace cellsched::estimator {
namespace {

struct TempCsv {
  std::filesystem::path path;
  explicit TempCsv(const std::string& text, const std::string& name = "m.csv") {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("cellsched_meas_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
    path = dir / name;
    std::ofstream(path) << text;
  }
  ~TempCsv() { std::filesystem::remove_all(path.parent_path()); }
};

const char* kHeader = "model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s,split,optimizer\n";

TEST(Measurements, TableAndSummaryOnASmallFixture) {
  const TempCsv f(std::string("# a comment\n") + kHeader +
                  "resnet-18,64,fp32,v100,1,1,0.040,calibration,sgd-momentum\n"
                  "resnet-18,64,fp32,k80,1,1,0.140,calibration,sgd-momentum\n"
                  "gpt-tiny,8,bf16,a100-80,1,2,0.001,validation,adam-fused\n"
                  "gpt-tiny,8,fp16,v100,1,2,0.002,validation,\n");
  const auto ms = read_measurements(f.path.string());
  ASSERT_EQ(ms.size(), 4u);
  EXPECT_EQ(ms[0].line, 3);
  EXPECT_EQ(ms[2].optimizer, "adam-fused");
  EXPECT_EQ(ms[3].optimizer, "adam");  // empty = the default
  const auto rows = compare(ms, f.path.parent_path().string());
  ASSERT_EQ(rows.size(), 4u);
  // Each row is the data-parallel estimate of the modeled cost model.
  Options o;
  o.precision = Precision::FP32;
  o.optimizer = "sgd-momentum";
  const ModelSpec r18 = model_by_name("resnet-18");
  const CostModel cm(r18, "v100", nullptr, nullptr, o);
  Plan p;
  p.micro_batch_size = 64;
  p.stages = {{0, cm.num_layers(), 1, 1}};
  const Estimate e = estimate(cm, Cell{"resnet-18", "v100", 1, 1, 1}, p);
  EXPECT_DOUBLE_EQ(rows[0].estimated_s, e.iteration_ms / 1000);
  EXPECT_EQ(rows[0].basis, "modeled");
  EXPECT_NEAR(rows[0].ratio(), rows[0].estimated_s / 0.040, 1e-12);
  // K80 slower than V100 in the estimate as in the measurement.
  EXPECT_GT(rows[1].estimated_s, rows[0].estimated_s);
  const auto sums = summarize(rows);
  ASSERT_TRUE(sums.count("") && sums.count("calibration") && sums.count("validation"));
  const Summary& cal = sums.at("calibration");
  EXPECT_EQ(cal.rows, 2);
  EXPECT_EQ(cal.pairs, 1);
  EXPECT_EQ(cal.ordered, 1);
  EXPECT_NEAR(cal.median_error, (rows[0].error() + rows[1].error()) / 2, 1e-12);
  EXPECT_NEAR(cal.worst_error, std::max(rows[0].error(), rows[1].error()), 1e-12);
  // gpt-tiny bf16 vs fp16 is not a pair (precisions differ): 1 pair over all rows.
  EXPECT_EQ(sums.at("").pairs, 1);
  EXPECT_EQ(sums.at("").rows, 4);
}

TEST(Measurements, OrderingCountsWrongPairs) {
  // Measured: the K80 faster than the V100 (as some of Gavel's small batches say): the estimate disagrees.
  const TempCsv f(std::string(kHeader) + "resnet-18,64,fp32,v100,1,1,0.5,,sgd\nresnet-18,64,fp32,k80,1,1,0.1,,sgd\n");
  const auto sums = summarize(compare(read_measurements(f.path.string()), f.path.parent_path().string()));
  EXPECT_EQ(sums.at("").pairs, 1);
  EXPECT_EQ(sums.at("").ordered, 0);
  EXPECT_EQ(sums.count(""), 1u);
  EXPECT_EQ(sums.size(), 1u);  // no split column values
}

// A row that does not fit as one micro-batch is priced with the fewest
// gradient-accumulation steps that fit (as the measured runs do).
TEST(Measurements, AccumulatesGradientsWhenOneMicroBatchDoesNotFit) {
  const TempCsv f(std::string(kHeader) + "gpt-350m,1024,bf16,a100-80,1,8,1.0,,adam\n" +
                  "gpt-350m,8,bf16,a100-80,1,8,1.0,,adam\n");
  const auto rows = compare(read_measurements(f.path.string()), f.path.parent_path().string());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GT(rows[0].micro_batches, 1);
  EXPECT_TRUE(rows[0].feasible);
  EXPECT_EQ(rows[1].micro_batches, 1);
  // Accumulation repeats the micro-batch: about 128 / micro-batch-size times
  // the small row's compute (so more than 16x the 8-sample iteration).
  EXPECT_GT(rows[0].estimated_s, 16 * rows[1].estimated_s);
}

// --transfer-from: a row's twin on the source type, moved by the modeled ratio.
TEST(Measurements, TransferredFromTheTwinOnAnotherType) {
  const TempCsv f(std::string(kHeader) + "resnet-18,64,fp32,v100,1,1,0.040,,sgd-momentum\n" +
                  "resnet-18,64,fp32,k80,1,1,0.140,,sgd-momentum\n" +
                  "resnet-18,32,fp32,k80,1,1,0.100,,sgd-momentum\n");
  const auto rows = compare(read_measurements(f.path.string()), f.path.parent_path().string(), "V100");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].transferred_s, 0);  // the source itself
  EXPECT_NEAR(rows[1].transferred_s, 0.040 * rows[1].estimated_s / rows[0].estimated_s, 1e-12);
  EXPECT_EQ(rows[2].transferred_s, 0);  // no twin at batch 32
  const Summary t = summarize_transferred(rows);
  EXPECT_EQ(t.rows, 1);
  EXPECT_NEAR(t.median_error, std::abs(rows[1].transferred_s / 0.140 - 1), 1e-12);
  EXPECT_THROW(compare(read_measurements(f.path.string()), "", "z9000"), InputError);
}

void expect_error_at(const std::string& body, long line, const std::string& what) {
  const TempCsv f(body);
  try {
    read_measurements(f.path.string());
    ADD_FAILURE() << "accepted: " << body;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(f.path.string() + ":" + std::to_string(line) + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Measurements, QuotedFieldsMayHoldCommas) {
  const TempCsv f(std::string("model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s,split,source\n") +
                  "resnet-18,64,fp32,v100,1,1,0.040,validation,\"a table, row 3 (\"\"fp32\"\")\"\n");
  const auto ms = read_measurements(f.path.string());
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].source, "a table, row 3 (\"fp32\")");
  EXPECT_EQ(ms[0].split, "validation");
}

TEST(Measurements, BadRowsNameFileAndLine) {
  const std::string h = kHeader;
  expect_error_at("model,batch\nresnet-18,64\n", 1, "header");
  expect_error_at(h + "resnet-18,64,fp32,v100,1,1,0.1,,sgd\nresnet-18,64,fp32,v100,1,1\n", 3, "fields");
  expect_error_at(h + "no-such-model,64,fp32,v100,1,1,0.1,,sgd\n", 2, "unknown model");
  expect_error_at(h + "resnet-18,64,fp32,no-gpu,1,1,0.1,,sgd\n", 2, "unknown GPU type");
  expect_error_at(h + "resnet-18,64,fp8,v100,1,1,0.1,,sgd\n", 2, "precision");
  expect_error_at(h + "resnet-18,0,fp32,v100,1,1,0.1,,sgd\n", 2, "batch");
  expect_error_at(h + "resnet-18,64,fp32,v100,-1,1,0.1,,sgd\n", 2, "hosts");
  for (const char* t : {"nan", "inf", "-0.1", "0", "1e308", "abc", "1e-300"})  // 1e-300: errors of 1e62 %
    expect_error_at(h + "resnet-18,64,fp32,v100,1,1," + t + ",,sgd\n", 2, "iter_time_s");
  expect_error_at(h + "resnet-18,63,fp32,v100,1,2,0.1,,sgd\n", 2, "does not split");
  expect_error_at(h + "resnet-18,64,fp32,v100,1,1,0.1,,lamb\n", 2, "optimizer");
  // Precision and type together, and a split that is one: these were refused
  // later without a line, or (a misspelled split) made a group of their own.
  expect_error_at(h + "resnet-18,64,bf16,v100,1,1,0.1,,sgd\n", 2, "v100 has no bf16");
  expect_error_at(h + "resnet-18,64,tf32,v100,1,1,0.1,,sgd\n", 2, "v100 has no tf32");
  expect_error_at(h + "resnet-18,64,fp32,cpu,1,1,0.1,,sgd\n", 2, "GPU measurements");
  expect_error_at(h + "resnet-18,64,fp32,v100,1,1,0.1,valdation,sgd\n", 2, "split must be calibration, validation");
  expect_error_at(h + "resnet-18,99999999,fp32,v100,1,1,0.1,,sgd\n", 2, "[1, 16777216]");
  // Fields are RFC 4180, as the measured-cells table reads them: a stray quote is named.
  expect_error_at(h + "resnet-18,64,fp32,v100,1,1,0.1,,sgd\nresnet-18,64,fp32,v100,1,1,0.1,,sgd \"x\"\n", 3, "quote");
  expect_error_at(h, 1, "no measurements");
  expect_error_at("", 1, "empty");
  const std::string hm = "model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s,peak_memory_gib\n";
  for (const char* g : {"nan", "inf", "-1", "0", "1e308", "abc"})
    expect_error_at(hm + "resnet-18,64,fp32,v100,1,1,0.1," + g + "\n", 2, "peak_memory_gib");
}

// A measured peak memory is compared with the estimate's memory for the plan
// the row is priced with; rows without one (empty) stay out of the memory summary.
TEST(Measurements, PeakMemoryAgainstTheEstimate) {
  const TempCsv f("model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s,split,peak_memory_gib\n"
                  "gpt-125m,8,bf16,h100,1,1,0.046,validation,10.0\n"
                  "gpt-125m,16,bf16,h100,1,1,0.084,validation,\n"
                  "resnet-50,64,bf16,h100,1,1,0.019,calibration,3.0\n");
  const auto ms = read_measurements(f.path.string());
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_DOUBLE_EQ(ms[0].peak_memory_gib, 10.0);
  EXPECT_EQ(ms[1].peak_memory_gib, 0);
  const auto rows = compare(ms, f.path.parent_path().string());
  // The estimate's memory of the priced plan (one micro-batch of 8 on one H100).
  Options o;
  o.precision = Precision::BF16;
  const CostModel cm(model_by_name("gpt-125m"), "h100", nullptr, nullptr, o);
  Plan p;
  p.micro_batch_size = 8;
  p.stages = {{0, cm.num_layers(), 1, 1}};
  const Estimate e = estimate(cm, Cell{"gpt-125m", "h100", 1, 1, 1}, p);
  EXPECT_NEAR(rows[0].estimated_memory_gib, e.memory_bytes / double(1 << 30), 1e-9);
  EXPECT_NEAR(rows[0].memory_ratio(), rows[0].estimated_memory_gib / 10.0, 1e-12);
  EXPECT_EQ(rows[1].memory_ratio(), 0);
  EXPECT_GT(rows[1].estimated_memory_gib, rows[0].estimated_memory_gib);  // twice the batch
  const auto sums = summarize(rows);
  EXPECT_EQ(sums.at("").memory_rows, 2);
  EXPECT_NEAR(sums.at("").memory_median_error,
              (std::abs(rows[0].memory_ratio() - 1) + std::abs(rows[2].memory_ratio() - 1)) / 2, 1e-12);
  EXPECT_EQ(sums.at("validation").memory_rows, 1);
  EXPECT_NEAR(sums.at("validation").memory_worst_error, std::abs(rows[0].memory_ratio() - 1), 1e-12);
}

}  // namespace
}  // namespace cellsched::estimator
