#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/parse_util.h"
#include "core/throughput.h"
#include "core/trace_io.h"
#include "core_test_util.h"

namespace cellsched {
namespace {

using testing::input_error;
using testing::shared_data;
using testing::gavel_table;
using testing::TempDir;

void expect_same_jobs(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    const Job& x = a.jobs[i];
    const Job& y = b.jobs[i];
    SCOPED_TRACE("job " + std::to_string(i));
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.arrival_s, y.arrival_s);  // exact: the writer keeps every digit
    EXPECT_EQ(x.job_type, y.job_type);
    EXPECT_EQ(x.model, y.model);
    EXPECT_EQ(x.batch_size, y.batch_size);
    EXPECT_EQ(x.total_iterations, y.total_iterations);
    EXPECT_EQ(x.gpus, y.gpus);
    EXPECT_EQ(x.weight, y.weight);
    EXPECT_EQ(x.deadline_s, y.deadline_s);
    EXPECT_EQ(x.duration_hint_s, y.duration_hint_s);
    EXPECT_EQ(x.command, y.command);
  }
}

// ---- formats -----------------------------------------------------------------

TEST(TraceFormatNames, ParseAndPrint) {
  for (auto f : {TraceFormat::Auto, TraceFormat::Gavel, TraceFormat::GavelLegacy,
                 TraceFormat::Philly, TraceFormat::Csv})
    EXPECT_EQ(parse_trace_format(to_string(f)), f);
  EXPECT_EQ(to_string(TraceFormat::GavelLegacy), "gavel-legacy");
  EXPECT_EQ(parse_trace_format("Philly"), TraceFormat::Philly);
  const std::string msg = input_error([] { parse_trace_format("tsv"); });
  EXPECT_NE(msg.find("gavel-legacy"), std::string::npos) << msg;
}

// ---- Gavel -------------------------------------------------------------------

TEST(TraceGavel, SmallTest) {
  const std::string path = shared_data("gavel/traces/physical_cluster/small_test.trace");
  const Trace t = load_trace(path);
  EXPECT_EQ(t.format, "gavel");
  EXPECT_EQ(t.name, "small_test.trace");
  EXPECT_EQ(t.source, path);
  ASSERT_EQ(t.jobs.size(), 20u);
  const Job& j = t.jobs[0];
  EXPECT_EQ(j.id, 0);
  EXPECT_EQ(j.job_type, "Transformer (batch size 128)");
  EXPECT_EQ(j.model, "Transformer");
  EXPECT_EQ(j.batch_size, 128);
  EXPECT_EQ(j.total_iterations, 346);
  EXPECT_EQ(j.gpus, 2);
  EXPECT_EQ(j.weight, 1);
  EXPECT_EQ(j.deadline_s, -1);
  EXPECT_EQ(j.duration_hint_s, -1);
  EXPECT_EQ(j.arrival_s, 0);
  ASSERT_EQ(j.command.size(), 7u);
  EXPECT_EQ(j.command[0], "python3");
  EXPECT_EQ(j.command[1], "train.py");
  EXPECT_EQ(j.command[6], "-proj_share_weight");
  EXPECT_EQ(t.jobs[1].job_type, "Recommendation (batch size 8192)");
  EXPECT_EQ(t.jobs[1].total_iterations, 36);
  for (size_t i = 0; i < t.jobs.size(); ++i) EXPECT_EQ(t.jobs[i].id, static_cast<int64_t>(i));
}

TEST(TraceGavel, AllPhysicalClusterTraces) {
  const std::map<std::string, size_t> sizes = {{"small_test.trace", 20},
                                               {"artifact_evaluation.trace", 15},
                                               {"max_min_fairness.trace", 96},
                                               {"minimize_makespan.trace", 100}};
  for (const auto& [name, n] : sizes) {
    const Trace t = load_trace(shared_data("gavel/traces/physical_cluster/" + name));
    EXPECT_EQ(t.jobs.size(), n) << name;
    for (const Job& j : t.jobs) {
      EXPECT_TRUE(gavel_table().get("v100", j.job_type, j.gpus).has_value())
          << name << ": " << j.job_type << " x" << j.gpus;
    }
  }
  const Trace mmf = load_trace(shared_data("gavel/traces/physical_cluster/max_min_fairness.trace"));
  double gpu_iterations = 0;
  for (const Job& j : mmf.jobs) gpu_iterations += j.total_iterations * j.gpus;
  EXPECT_EQ(gpu_iterations, 40225862);  // awk '{s+=$6*$7}'
  EXPECT_EQ(mmf.jobs[35].arrival_s, 0);
  EXPECT_EQ(mmf.jobs[36].arrival_s, 536);
  EXPECT_EQ(mmf.jobs[36].job_type, "ResNet-50 (batch size 64)");
  EXPECT_EQ(mmf.jobs[36].total_iterations, 28657);
  EXPECT_EQ(mmf.jobs.back().arrival_s, 46317);
}

TEST(TraceGavel, LegacySevenFields) {
  TempDir dir;
  const std::string path = dir.write(
      "legacy.trace",
      "LM (batch size 20)\tpython main.py --cuda\t--steps\t1\t5000\t12.5\t4\n"
      "A3C\tpython3 main.py\t--max-steps\t0\t800\t3.25\t1\n");
  const Trace t = load_trace(path);
  EXPECT_EQ(t.format, "gavel-legacy");
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].job_type, "A3C");  // sorted by arrival
  EXPECT_EQ(t.jobs[0].arrival_s, 3.25);
  EXPECT_EQ(t.jobs[0].id, 0);
  EXPECT_EQ(t.jobs[0].batch_size, 0);
  EXPECT_EQ(t.jobs[1].job_type, "LM (batch size 20)");
  EXPECT_EQ(t.jobs[1].model, "LM");
  EXPECT_EQ(t.jobs[1].batch_size, 20);
  EXPECT_EQ(t.jobs[1].total_iterations, 5000);
  EXPECT_EQ(t.jobs[1].gpus, 4);
  EXPECT_EQ(t.jobs[1].arrival_s, 12.5);
  EXPECT_EQ(t.jobs[1].id, 1);
  EXPECT_EQ(t.jobs[1].command, (std::vector<std::string>{"python", "main.py", "--cuda"}));
}

TEST(TraceGavel, SloIsAMultipleOfTheDuration) {
  ThroughputTable table;
  table.set("v100", "ResNet-50 (batch size 64)", 2, 4.0);
  TempDir dir;
  const std::string path =
      dir.write("slo.trace",
                "ResNet-50 (batch size 64)\tpython3 main.py\tic\t--num_steps\t1\t400\t2\t2.5\t"
                "1.5\t100\n"
                "ResNet-50 (batch size 64)\tpython3 main.py\tic\t--num_steps\t1\t400\t2\t1\t"
                "-1.000000\t200\n");
  TraceReadOptions options;
  options.table = &table;
  const Trace t = load_trace(path, options);
  ASSERT_EQ(t.jobs.size(), 2u);
  // duration = 400 steps / 4 steps/s = 100 s; deadline = 100 + 1.5 * 100.
  EXPECT_DOUBLE_EQ(t.jobs[0].deadline_s, 250);
  EXPECT_EQ(t.jobs[0].weight, 2.5);
  EXPECT_EQ(t.jobs[1].deadline_s, -1);
  // Without a table the SLO cannot become a deadline.
  EXPECT_INPUT_ERROR_PREFIX(load_trace(path), path + ":1: SLO");
  options.reference_gpu = "k80";
  EXPECT_INPUT_ERROR_PREFIX(load_trace(path, options), path + ":1: SLO");
}

TEST(TraceGavel, BadLines) {
  const std::string good =
      "A3C\tpython3 main.py\trl\t--max-steps\t0\t8857\t1\t1\t-1.000000\t0\n";
  struct Case {
    std::string line;
    const char* needle;
  } cases[] = {
      {"A3C\tpython3 main.py\trl\t--max-steps\t0\t8857\t1\t1\t-1.000000", "expected 10"},
      {"A3C\tpython3\trl\t--max-steps\t0\tmany\t1\t1\t-1\t0", "total_steps must be a number"},
      {"A3C\tpython3\trl\t--max-steps\t0\t0\t1\t1\t-1\t0", "total_steps must be positive"},
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t0\t1\t-1\t0", "scale_factor must be a positive"},
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t1.5\t1\t-1\t0", "scale_factor must be an integer"},
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t1\t0\t-1\t0", "the priority weight must be in [1e-6, 1e6], got 0"},
      // Weights so far apart overflow hadar's utilities or stop Gavel's LP.
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t1\t1e308\t-1\t0", "priority weight must be in [1e-6, 1e6]"},
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t1\t1e-20\t-1\t0", "priority weight must be in [1e-6, 1e6]"},
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t1\t1\t-1\t-5", "arrival_time must not be negative"},
      {"A3C\tpython3\trl\t--max-steps\t0\t10\t1\t1\tx\t0", "SLO must be a number"},
      {"A3C\tpython3\trl\t--max-steps\t0\tnan\t1\t1\t-1\t0", "total_steps must be a number"},
      {"\tpython3\trl\t--max-steps\t0\t10\t1\t1\t-1\t0", "empty job type"},
  };
  TempDir dir;
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("g" + std::to_string(i++) + ".trace",
                                       good + "\n" + c.line + "\n");
    const std::string msg = input_error([&] { load_trace(path); });
    EXPECT_TRUE(testing::starts_with(msg, path + ":3: ")) << msg;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
  // A legacy line in a current-format file.
  const std::string mixed = dir.write("mixed.trace", good + "A3C\tpython3\t--max\t0\t10\t0\t1\n");
  EXPECT_INPUT_ERROR_PREFIX(load_trace(mixed), mixed + ":2: expected 10");
  // Forcing the legacy format on a current-format file.
  TraceReadOptions legacy;
  legacy.format = TraceFormat::GavelLegacy;
  const std::string cur = dir.write("cur.trace", good);
  EXPECT_INPUT_ERROR_PREFIX(load_trace(cur, legacy), cur + ":1: expected 7");
}

// ---- Philly ------------------------------------------------------------------

TEST(TracePhilly, RealTrace) {
  const std::string path = shared_data("pollux_adaptdl/philly.csv");
  TraceReadOptions options;
  options.table = &gavel_table();
  options.seed = 7;
  const Trace t = load_trace(path, options);
  EXPECT_EQ(t.format, "philly");
  ASSERT_EQ(t.jobs.size(), 82247u);
  // Earliest row: 2017-09-04 10:30:41, 2240194 s on 8 GPUs; latest 2017-12-22 08:02:11.
  EXPECT_EQ(t.jobs.front().arrival_s, 0);
  EXPECT_EQ(t.jobs.front().duration_hint_s, 2240194);
  EXPECT_EQ(t.jobs.front().gpus, 8);
  EXPECT_EQ(t.jobs.back().arrival_s, 9408690);
  std::map<int, long> gpus;
  std::map<std::string, long> single_gpu_types;
  double prev = 0;
  for (size_t i = 0; i < t.jobs.size(); ++i) {
    const Job& j = t.jobs[i];
    ASSERT_EQ(j.id, static_cast<int64_t>(i));
    ASSERT_GE(j.arrival_s, prev);
    prev = j.arrival_s;
    ++gpus[j.gpus];
    const auto tp = gavel_table().get("v100", j.job_type, j.gpus);
    ASSERT_TRUE(tp.has_value()) << j.job_type << " x" << j.gpus;
    ASSERT_EQ(j.total_iterations, std::max(1.0, std::round(j.duration_hint_s * *tp)));
    ASSERT_EQ(j.weight, 1);
    ASSERT_EQ(j.deadline_s, -1);
    if (j.gpus == 1) ++single_gpu_types[j.job_type];
  }
  // SOURCES.md: 1 -> 76,627; 2 -> 1,818; 4 -> 1,870; 8 -> 1,643; 16+ -> 289 (capped to 8).
  EXPECT_EQ(gpus, (std::map<int, long>{{1, 76627}, {2, 1818}, {4, 1870}, {8, 1643 + 289}}));
  // Uniform over the 26 single-GPU types: ~2,947 each (sd ~53).
  EXPECT_EQ(single_gpu_types.size(), 26u);
  for (const auto& [type, n] : single_gpu_types) {
    EXPECT_GT(n, 2650) << type;
    EXPECT_LT(n, 3250) << type;
  }
}

TEST(TracePhilly, DeterministicPerSeedAndLimit) {
  const std::string path = shared_data("pollux_adaptdl/philly.csv");
  TraceReadOptions options;
  options.table = &gavel_table();
  options.seed = 1;
  const Trace a = load_trace(path, options);
  const Trace b = load_trace(path, options);
  expect_same_jobs(a, b);
  options.seed = 2;
  const Trace c = load_trace(path, options);
  long differ = 0;
  for (size_t i = 0; i < a.jobs.size(); ++i) differ += a.jobs[i].job_type != c.jobs[i].job_type;
  EXPECT_GT(differ, 70000);  // ~25/26 of the single-GPU jobs change type
  options.seed = 1;
  options.limit = 1000;
  const Trace d = load_trace(path, options);
  ASSERT_EQ(d.jobs.size(), 1000u);
  for (size_t i = 0; i < d.jobs.size(); ++i) {
    EXPECT_EQ(d.jobs[i].job_type, a.jobs[i].job_type);
    EXPECT_EQ(d.jobs[i].arrival_s, a.jobs[i].arrival_s);
    EXPECT_EQ(d.jobs[i].id, static_cast<int64_t>(i));
  }
}

TEST(TracePhilly, SmallFileUnsortedAndScaleFactors) {
  ThroughputTable table;
  table.set("v100", "A (batch size 32)", 1, 2.0);
  table.set("v100", "A (batch size 32)", 2, 3.0);
  table.set("v100", "A (batch size 32)", 4, 5.0);
  table.set("k80", "B", 8, 1.0);  // another GPU type: ignored
  TempDir dir;
  const std::string path = dir.write("p.csv",
                                     "timestamp,duration,num_gpus,gpu_time,cluster\r\n"
                                     "2017-10-09 07:01:55,66.0,1,66.0,11cb48\r\n"
                                     "2017-10-09 06:13:03,10,3,30,6214e9\r\n"
                                     "2017-10-10 06:13:03,100,16,1600,6214e9\r\n"
                                     "\r\n");
  TraceReadOptions options;
  options.table = &table;
  const Trace t = load_trace(path, options);
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].arrival_s, 0);
  EXPECT_EQ(t.jobs[0].gpus, 2);  // 3 GPUs -> largest measured scale factor <= 3
  EXPECT_EQ(t.jobs[0].total_iterations, 30);
  EXPECT_EQ(t.jobs[1].arrival_s, 48 * 60 + 52);
  EXPECT_EQ(t.jobs[1].gpus, 1);
  EXPECT_EQ(t.jobs[1].total_iterations, 132);
  EXPECT_EQ(t.jobs[1].duration_hint_s, 66);
  EXPECT_EQ(t.jobs[1].model, "A");
  EXPECT_EQ(t.jobs[1].batch_size, 32);
  EXPECT_EQ(t.jobs[2].arrival_s, 86400);
  EXPECT_EQ(t.jobs[2].gpus, 4);  // capped at the table's largest scale factor
  EXPECT_EQ(t.jobs[2].total_iterations, 500);
  // Arrivals are seconds after the earliest timestamp, whenever it is: one
  // before 1970 was refused as a negative arrival ("got -1").
  const Trace old = load_trace(dir.write("o.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
                                                   "1969-12-31 23:59:59,10,1,10,x\n1970-01-01 00:01:00,10,1,10,x\n"),
                               options);
  ASSERT_EQ(old.jobs.size(), 2u);
  EXPECT_EQ(old.jobs[0].arrival_s, 0);
  EXPECT_EQ(old.jobs[1].arrival_s, 61);
}

TEST(TracePhilly, Errors) {
  TempDir dir;
  const std::string header = "timestamp,duration,num_gpus,gpu_time,cluster\n";
  const std::string good = "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n";
  // Needs a table.
  const std::string ok = dir.write("ok.csv", header + good);
  EXPECT_INPUT_ERROR_PREFIX(load_trace(ok), ok + ": ");
  ThroughputTable table;
  table.set("v100", "A", 2, 1.0);
  TraceReadOptions options;
  options.table = &table;
  struct Case {
    std::string line;
    const char* needle;
  } cases[] = {
      {"2017-10-09 07:01,66.0,2,66.0,11cb48", "bad timestamp"},
      {"2017-13-09 07:01:55,66.0,2,66.0,11cb48", "bad timestamp"},
      {"2017-02-31 07:01:55,66.0,2,66.0,11cb48", "bad timestamp"},  // no such day (read as March 3)
      {"2017-04-31 07:01:55,66.0,2,66.0,11cb48", "bad timestamp"},
      {"2017-10-09 07:01:55,66.0,2,66.0", "expected 5 fields"},
      {"2017-10-09 07:01:55,abc,2,66.0,x", "duration must be a number"},
      {"2017-10-09 07:01:55,0,2,0,x", "duration must be positive"},
      {"2017-10-09 07:01:55,10,0,0,x", "num_gpus must be a positive integer"},
      {"2017-10-09 07:01:55,10,1,10,x", "no job type is measured at 1 GPU"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("e" + std::to_string(i++) + ".csv",
                                       header + "2017-10-09 07:01:55,66.0,2,66.0,11cb48\n" +
                                           c.line + "\n");
    const std::string msg = input_error([&] { load_trace(path, options); });
    EXPECT_TRUE(testing::starts_with(msg, path + ":3: ")) << msg;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
  TraceReadOptions forced = options;
  forced.format = TraceFormat::Philly;
  const std::string noheader = dir.write("nh.csv", good);
  EXPECT_INPUT_ERROR_PREFIX(load_trace(noheader, forced), noheader + ":1: expected the Philly");
  options.reference_gpu = "h100";
  EXPECT_INPUT_ERROR_PREFIX(load_trace(ok, options), ok + ": ");
}

// ---- cellsched CSV -----------------------------------------------------------

TEST(TraceCsv, ReadsQuotedFieldsAndBlanks) {
  TempDir dir;
  const std::string path = dir.write(
      "own.csv",
      "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,"
      "command\n"
      "7,30,\"Odd, \"\"quoted\"\" (batch size 8)\",,,1000,2,,,,\n"
      "3,10.5,ResNet-50 (batch size 64),resnet50,64,2e3,4,2.5,500,120,\"python3 t.py --lr 0.1\"\n");
  const Trace t = load_trace(path);
  EXPECT_EQ(t.format, "csv");
  ASSERT_EQ(t.jobs.size(), 2u);
  const Job& a = t.jobs[0];
  EXPECT_EQ(a.id, 0);
  EXPECT_EQ(a.arrival_s, 10.5);
  EXPECT_EQ(a.job_type, "ResNet-50 (batch size 64)");
  EXPECT_EQ(a.model, "resnet50");
  EXPECT_EQ(a.batch_size, 64);
  EXPECT_EQ(a.total_iterations, 2000);
  EXPECT_EQ(a.gpus, 4);
  EXPECT_EQ(a.weight, 2.5);
  EXPECT_EQ(a.deadline_s, 500);
  EXPECT_EQ(a.duration_hint_s, 120);
  EXPECT_EQ(a.command, (std::vector<std::string>{"python3", "t.py", "--lr", "0.1"}));
  const Job& b = t.jobs[1];
  EXPECT_EQ(b.id, 1);
  EXPECT_EQ(b.job_type, "Odd, \"quoted\" (batch size 8)");
  EXPECT_EQ(b.model, "Odd, \"quoted\"");  // blank: from the job type
  EXPECT_EQ(b.batch_size, 8);
  EXPECT_EQ(b.weight, 1);
  EXPECT_EQ(b.deadline_s, -1);
  EXPECT_EQ(b.duration_hint_s, -1);
  EXPECT_TRUE(b.command.empty());
}

TEST(TraceCsv, RoundTripsExactly) {
  Trace t;
  t.name = "hand";
  for (int i = 0; i < 5; ++i) {
    Job j;
    j.id = i;
    j.arrival_s = i * 0.1 + 1.0 / 3.0;  // digits that need 17 significant figures
    j.job_type = i % 2 ? "Transformer (batch size 32)" : "weird, \"type\"";
    j.model = i % 2 ? "Transformer" : " spaced ";
    j.batch_size = i % 2 ? 32 : 0;
    j.total_iterations = 1e6 / 7 + i;
    j.gpus = 1 << i;
    j.weight = 0.1 * (i + 1);
    j.deadline_s = i % 2 ? 1e5 / 3 : -1;
    j.duration_hint_s = i == 3 ? 2.0 / 3.0 : -1;
    if (i > 1) j.command = {"python3", "train.py", "--name=\"x,y\""};
    t.jobs.push_back(j);
  }
  TempDir dir;
  std::ostringstream out;
  write_trace_csv(t, out);
  const std::string path = dir.write("rt.csv", out.str());
  expect_same_jobs(t, load_trace(path));
  // A second write is byte-identical.
  std::ostringstream again;
  write_trace_csv(load_trace(path), again);
  EXPECT_EQ(again.str(), out.str());
}

TEST(TraceCsv, RoundTripsGeneratedAndGavelTraces) {
  TempDir dir;
  GenerateOptions g;
  g.jobs = 500;
  g.seed = 3;
  const Trace gen = generate_trace(gavel_table(), g);
  std::ostringstream o1;
  write_trace_csv(gen, o1);
  expect_same_jobs(gen, load_trace(dir.write("gen.csv", o1.str())));

  const Trace gavel = load_trace(shared_data("gavel/traces/physical_cluster/max_min_fairness.trace"));
  std::ostringstream o2;
  write_trace_csv(gavel, o2);
  const std::string p2 = dir.write("gavel.csv", o2.str());
  TraceReadOptions csv;
  csv.format = TraceFormat::Csv;
  expect_same_jobs(gavel, load_trace(p2, csv));
}

TEST(TraceCsv, BadLines) {
  const std::string header =
      "id,arrival_s,job_type,model,batch_size,iterations,gpus,weight,deadline_s,duration_s,"
      "command\n";
  const std::string good = "0,0,A3C,,,100,1,1,,,\n";
  struct Case {
    std::string line;
    const char* needle;
  } cases[] = {
      {"1,0,A3C,,,100,1,1,,", "expected 11 fields"},
      {"1,0,\"A3C,,,100,1,1,,,", "unterminated quoted field"},
      {"1,0,\"A3C\"x,,,100,1,1,,,", "unexpected character"},
      {"1,0,A3C,,,100,0,1,,,", "gpus must be a positive integer"},
      {"1,0,A3C,,,-1,1,1,,,", "iterations must be positive"},
      {"1,0,A3C,,,0,1,1,,,", "iterations must be positive"},
      {"1,abc,A3C,,,100,1,1,,,", "arrival_s must be a number"},
      {"1,-3,A3C,,,100,1,1,,,", "arrival_s must not be negative"},
      {"1,0,,,,100,1,1,,,", "empty job_type"},
      {"1,0,A3C,,,100,1,0,,,", "the priority weight must be in [1e-6, 1e6], got 0"},
      {"x,0,A3C,,,100,1,1,,,", "id must be an integer"},
      {"1,0,A3C,,,100,1,1,soon,,", "deadline_s must be a number"},
  };
  TempDir dir;
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = dir.write("c" + std::to_string(i++) + ".csv",
                                       header + good + c.line + "\n");
    const std::string msg = input_error([&] { load_trace(path); });
    EXPECT_TRUE(testing::starts_with(msg, path + ":3: ")) << msg;
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
  TraceReadOptions csv;
  csv.format = TraceFormat::Csv;
  const std::string bad_header = dir.write("h.csv", "id,arrival,job_type\n" + good);
  EXPECT_INPUT_ERROR_PREFIX(load_trace(bad_header, csv), bad_header + ":1: expected the header");
}

// ---- auto-detection ----------------------------------------------------------

TEST(TraceDetect, Errors) {
  TempDir dir;
  const std::string empty = dir.write("empty.trace", "\n\n");
  EXPECT_INPUT_ERROR_PREFIX(load_trace(empty), empty + ": empty file");
  const std::string five = dir.write("five.tsv", "\na\tb\tc\td\te\n");
  EXPECT_INPUT_ERROR_PREFIX(load_trace(five), five + ":2: cannot tell the trace format");
  const std::string other = dir.write("w.csv", "name,time,app,replicas,batch_size\n");
  EXPECT_INPUT_ERROR_PREFIX(load_trace(other), other + ":1: cannot tell the trace format");
  // A Pollux workload's header is known now (issue 15); no rows, no jobs: bad input (issue 13).
  const std::string pollux = dir.write("p.csv", "name,time,application,num_replicas,batch_size\n");
  EXPECT_INPUT_ERROR_PREFIX(load_trace(pollux), pollux + ": no jobs in the trace");
  EXPECT_INPUT_ERROR_PREFIX(load_trace(dir.path("missing.csv")),
                            dir.path("missing.csv") + ": cannot open");
}

// ---- generator ---------------------------------------------------------------

TEST(TraceGenerate, PlatformIndependentRandomStream) {
  // Reference values computed independently (Python) from the published
  // splitmix64 / xoshiro256** algorithms.
  detail::Rng r0(0);
  EXPECT_EQ(r0.next(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(r0.next(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(r0.next(), 0x1a5f849d4933e6e0ULL);
  detail::Rng r42(42);
  EXPECT_EQ(r42.next(), 0x15780b2e0c2ec716ULL);
}

TEST(TraceGenerate, KnownAnswerForSeed42) {
  // Same reference implementation, applied to the generator's draw order.
  GenerateOptions o;
  o.jobs = 6;
  o.seed = 42;
  const Trace t = generate_trace(gavel_table(), o);
  ASSERT_EQ(t.jobs.size(), 6u);
  const std::pair<int, const char*> expected[] = {
      {4, "Transformer (batch size 64)"}, {2, "ResNet-50 (batch size 16)"},
      {1, "ResNet-50 (batch size 16)"},   {2, "ResNet-50 (batch size 64)"},
      {1, "Recommendation (batch size 2048)"}, {1, "LM (batch size 80)"}};
  const double iterations[] = {390653, 495358, 343910, 284495, 63936, 817896};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.jobs[i].gpus, expected[i].first) << i;
    EXPECT_EQ(t.jobs[i].job_type, expected[i].second) << i;
    EXPECT_EQ(t.jobs[i].total_iterations, iterations[i]) << i;
  }
}

TEST(TraceGenerate, DistributionsOver20000Jobs) {
  GenerateOptions o;
  o.jobs = 20000;
  o.seed = 1;
  o.mean_interarrival_s = 60;
  const Trace t = generate_trace(gavel_table(), o);
  EXPECT_EQ(t.format, "generated");
  ASSERT_EQ(t.jobs.size(), 20000u);
  EXPECT_EQ(t.jobs.front().arrival_s, 0);
  std::map<int, long> gpus;
  long short_jobs = 0;
  double prev = 0;
  for (size_t i = 0; i < t.jobs.size(); ++i) {
    const Job& j = t.jobs[i];
    ASSERT_EQ(j.id, static_cast<int64_t>(i));
    ASSERT_GE(j.arrival_s, prev);
    prev = j.arrival_s;
    ++gpus[j.gpus];
    const double minutes = j.duration_hint_s / 60;
    ASSERT_GE(minutes, std::pow(10, 1.5) * (1 - 1e-12));
    ASSERT_LE(minutes, 1e4);
    if (minutes < 1e3) ++short_jobs;
    const auto tp = gavel_table().get("v100", j.job_type, j.gpus);
    ASSERT_TRUE(tp && *tp > 0) << j.job_type << " x" << j.gpus;
    ASSERT_EQ(j.total_iterations, std::max(1.0, std::round(j.duration_hint_s * *tp)));
    ASSERT_EQ(j.weight, 1);
    ASSERT_EQ(j.deadline_s, -1);
  }
  const double n = 20000;
  // sd of a fraction p over 20,000 draws <= 0.0035; tolerance 0.015 is > 4 sd.
  EXPECT_NEAR(gpus[1] / n, 0.70, 0.015);
  EXPECT_NEAR(gpus[2] / n, 0.10, 0.015);
  EXPECT_NEAR(gpus[4] / n, 0.15, 0.015);
  EXPECT_NEAR(gpus[8] / n, 0.05, 0.015);
  EXPECT_EQ(gpus.size(), 4u);
  EXPECT_NEAR(short_jobs / n, 0.80, 0.015);
  // Mean gap 60 s: sd of the mean ~0.42 s.
  EXPECT_NEAR(t.jobs.back().arrival_s / (n - 1), 60, 3);
  const TraceSummary s = summarize(t);
  EXPECT_NEAR(s.mean_interarrival_s, 60, 3);
  EXPECT_EQ(s.jobs, 20000);
  EXPECT_EQ(s.job_types.size(), 26u);
}

TEST(TraceGenerate, SeedDeterminism) {
  GenerateOptions o;
  o.jobs = 300;
  o.seed = 11;
  const Trace a = generate_trace(gavel_table(), o);
  const Trace b = generate_trace(gavel_table(), o);
  expect_same_jobs(a, b);
  o.seed = 12;
  const Trace c = generate_trace(gavel_table(), o);
  long same = 0;
  for (size_t i = 0; i < a.jobs.size(); ++i) same += a.jobs[i].arrival_s == c.jobs[i].arrival_s;
  EXPECT_LT(same, 5);  // only the first job (t = 0) is expected to coincide
}

TEST(TraceGenerate, ZeroGapAndErrors) {
  GenerateOptions o;
  o.jobs = 50;
  o.mean_interarrival_s = 0;
  const Trace t = generate_trace(gavel_table(), o);
  for (const Job& j : t.jobs) EXPECT_EQ(j.arrival_s, 0);
  o.jobs = 0;
  EXPECT_TRUE(generate_trace(gavel_table(), o).jobs.empty());
  o.jobs = -1;
  input_error([&] { generate_trace(gavel_table(), o); });
  ThroughputTable small;
  small.set("v100", "A", 1, 1.0);
  small.set("v100", "A", 2, 1.0);
  small.set("v100", "A", 4, 1.0);
  o.jobs = 10;
  const std::string msg = input_error([&] { generate_trace(small, o); });
  EXPECT_NE(msg.find("8 GPU"), std::string::npos) << msg;
  o.reference_gpu = "h100";
  input_error([&] { generate_trace(gavel_table(), o); });
}

// ---- summary -----------------------------------------------------------------

TEST(TraceSummary, HandChecked) {
  Trace t;
  auto add = [&](double arrival, const char* type, int gpus, double iters, double dur) {
    Job j;
    j.id = static_cast<int64_t>(t.jobs.size());
    j.arrival_s = arrival;
    j.job_type = type;
    j.gpus = gpus;
    j.total_iterations = iters;
    j.duration_hint_s = dur;
    t.jobs.push_back(j);
  };
  add(10, "B", 2, 100, -1);
  add(20, "A", 1, 50, 30);
  add(40, "B", 4, 10, 90);
  add(70, "C", 2, 1, -1);
  const TraceSummary s = summarize(t);
  EXPECT_EQ(s.jobs, 4);
  EXPECT_EQ(s.first_arrival_s, 10);
  EXPECT_EQ(s.last_arrival_s, 70);
  EXPECT_EQ(s.mean_interarrival_s, 20);
  EXPECT_EQ(s.total_gpu_iterations, 200 + 50 + 40 + 2);
  EXPECT_EQ(s.gpus_histogram, (std::vector<std::pair<int, long>>{{1, 1}, {2, 2}, {4, 1}}));
  EXPECT_EQ(s.job_types,
            (std::vector<std::pair<std::string, long>>{{"B", 2}, {"A", 1}, {"C", 1}}));
  EXPECT_EQ(s.mean_duration_hint_s, 60);
  const TraceSummary e = summarize(Trace{});
  EXPECT_EQ(e.jobs, 0);
  EXPECT_EQ(e.mean_duration_hint_s, -1);
}

TEST(TracePhilly, ModelMixAssignsZooModelsDeterministically) {
  TempDir dir;
  const std::string path = dir.write("p.csv",
                                     "timestamp,duration,num_gpus,gpu_time,cluster\n"
                                     "2017-10-09 07:00:00,100.0,1,100.0,a\n"
                                     "2017-10-09 07:01:00,200.0,3,600.0,a\n"
                                     "2017-10-09 07:02:00,300.0,64,19200.0,b\n"
                                     "2017-10-09 07:03:00,50.0,8,400.0,b\n");
  TraceReadOptions o;
  o.model_mix = parse_model_mix("gpt-tiny@8:3, wrn-tiny@16:1");
  ASSERT_EQ(o.model_mix.size(), 2u);
  EXPECT_EQ(o.model_mix[0].model, "gpt-tiny");
  EXPECT_EQ(o.model_mix[0].batch, 8);
  EXPECT_DOUBLE_EQ(o.model_mix[0].weight, 3);
  o.model_rate = [](const std::string& m, int batch, int gpus) {
    return (m == "gpt-tiny" ? 2.0 : 1.0) * gpus + batch / 1000.0;
  };
  o.seed = 5;
  const Trace a = load_trace(path, o), b = load_trace(path, o);
  ASSERT_EQ(a.jobs.size(), 4u);
  const int expect_gpus[] = {1, 2, 16, 8};  // power of two <= num_gpus, at most 16
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    const Job& j = a.jobs[i];
    EXPECT_EQ(j.gpus, expect_gpus[i]);
    EXPECT_TRUE(j.model == "gpt-tiny" || j.model == "wrn-tiny") << j.model;
    EXPECT_EQ(j.job_type, j.model + "@" + std::to_string(j.batch_size));
    EXPECT_DOUBLE_EQ(j.total_iterations,
                     std::max(1.0, std::round(j.duration_hint_s * o.model_rate(j.model, j.batch_size, j.gpus))));
    EXPECT_EQ(j.model, b.jobs[i].model);
  }
  // A model the rate function cannot run is an error at its line.
  o.model_rate = [](const std::string&, int, int gpus) { return gpus >= 16 ? 0.0 : 1.0; };
  try {
    load_trace(path, o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":4:", 0), 0u) << e.what();
  }
  EXPECT_THROW(parse_model_mix("gpt-tiny@x"), InputError);
  EXPECT_THROW(parse_model_mix("gpt-tiny:-1"), InputError);
  EXPECT_THROW(parse_model_mix(""), InputError);
}

}  // namespace
}  // namespace cellsched
