// Failure replay (issue 15): a hand timeline of two attempts, the first
// failing; and Philly's raw job log read into jobs with failed attempts.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cluster.h"
#include "core/trace_io.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "tests/core/core_test_util.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::input_error;
using testing::make_job;
using testing::TempDir;

Cluster one_node() {
  Cluster c;
  c.name = "v100x4";
  c.nodes = {{"a", "localhost", "v100", 4}};
  return c;
}

// One 1-GPU job at 10 it/s: its first attempt fails after 1,000 iterations
// (100 s), the second trains the whole 2,000 iterations.
TEST(FailureReplay, FirstAttemptFailsThenTheJobRestartsFromScratch) {
  Trace t;
  t.jobs = {make_job(0, 0, 1, 2000)};
  t.jobs[0].failed_attempts = {1000};
  FakeOracle o;
  o.rate = {{"v100", 10}};
  SimOptions so;
  so.round_s = 360;
  so.restart_s = 30;
  so.replay_failures = true;
  auto fifo = make_policy("fifo");
  const RunRecord r = simulate(t, one_node(), o, *fifo, so);
  // Round 0: restart 30 s, fails at 30 + 100 = 130 s. Round 1 (360 s): a
  // fresh placement, restart 30 s, then 200 s of training: done at 590 s.
  EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 360 + 30 + 200);
  EXPECT_EQ(r.metrics.extra.at("failed_attempts"), 1);
  EXPECT_DOUBLE_EQ(r.metrics.extra.at("lost_gpu_s"), 130);
  EXPECT_EQ(r.jobs[0].restarts, 2);
  EXPECT_DOUBLE_EQ(r.jobs[0].iterations_done, 2000);
  // Without replay the failed attempt is ignored.
  so.replay_failures = false;
  auto fifo2 = make_policy("fifo");
  const RunRecord plain = simulate(t, one_node(), o, *fifo2, so);
  EXPECT_DOUBLE_EQ(plain.jobs[0].completion_s, 30 + 200);
  EXPECT_EQ(plain.metrics.extra.count("failed_attempts"), 0u);
}

// A failing attempt longer than the job's whole work still fails where the
// trace says (it cannot complete meanwhile), across rounds.
TEST(FailureReplay, LongFailedAttemptSpansRounds) {
  Trace t;
  t.jobs = {make_job(0, 0, 1, 500)};
  t.jobs[0].failed_attempts = {5000, 100};
  FakeOracle o;
  o.rate = {{"v100", 10}};
  SimOptions so;
  so.round_s = 360;
  so.restart_s = 0;
  so.replay_failures = true;
  auto fifo = make_policy("fifo");
  const RunRecord r = simulate(t, one_node(), o, *fifo, so);
  // Attempt 1: 500 s (fails at 500, in round 1); attempt 2 at 720: 10 s;
  // the last at 1080: 50 s.
  EXPECT_DOUBLE_EQ(r.jobs[0].completion_s, 1080 + 50);
  EXPECT_EQ(r.metrics.extra.at("failed_attempts"), 2);
  EXPECT_DOUBLE_EQ(r.metrics.extra.at("lost_gpu_s"), 510);
}

std::string fixture() { return std::string(CELLSCHED_TEST_DATA) + "/traces/philly_raw_jobs.json"; }

TEST(PhillyRaw, ReadsJobsAttemptsAndWhatItLeavesOut) {
  TraceReadOptions ro;
  ro.table = &testing::gavel_table();
  const Trace t = load_trace(fixture(), ro);
  EXPECT_EQ(t.format, "philly-raw");
  ASSERT_EQ(t.jobs.size(), 4u);
  // The README's example: 8 GPUs, two attempts, the first failing.
  const Job* ex = nullptr;
  for (const Job& j : t.jobs)
    if (j.name == "application_1506638472019_14199") ex = &j;
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->gpus, 8);
  EXPECT_EQ(ex->arrival_s, 699);  // 01:11:39 after the earliest submission, 01:00:00
  const double rate = *testing::gavel_table().get("v100", ex->job_type, 8);
  EXPECT_DOUBLE_EQ(ex->duration_hint_s, 2 * 86400 + 5 * 3600 + 39 * 60 + 42);
  EXPECT_EQ(ex->total_iterations, std::round(ex->duration_hint_s * rate));
  ASSERT_EQ(ex->failed_attempts.size(), 1u);
  EXPECT_EQ(ex->failed_attempts[0], std::round(74 * rate));
  // The killed job held 2 + 2 GPUs on two machines.
  EXPECT_EQ(t.jobs[2].name, "application_1_3");
  EXPECT_EQ(t.jobs[2].gpus, 4);
  auto note = [&](const std::string& what) {
    for (const auto& [w, n] : t.import_notes)
      if (w == what) return n;
    return 0L;
  };
  EXPECT_EQ(note("skipped: no attempt with a start and an end"), 1);
  EXPECT_EQ(note("skipped: still running at the snapshot"), 1);
  EXPECT_EQ(note("failed attempts (replayed with --replay-failures)"), 2);
  EXPECT_EQ(note("status Failed"), 1);
}

TEST(PhillyRaw, BadJobsNameFileAndLine) {
  TempDir d;
  TraceReadOptions ro;
  ro.table = &testing::gavel_table();
  const std::string ok =
      R"({"status": "Pass", "jobid": "a", "submitted_time": "2017-10-07 01:00:00", "attempts": []})";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"status": "Done", "jobid": "b", "submitted_time": "2017-10-07 01:00:00", "attempts": []})",
       "job b: status must be Pass, Killed or Failed"},
      {R"({"status": "Pass", "jobid": "b", "submitted_time": "07/10/2017", "attempts": []})",
       "bad submitted_time '07/10/2017'"},
      {R"({"status": "Pass", "jobid": "b", "submitted_time": "2017-10-07 01:00:00", "attempts": [{"start_time": "2017-10-07 02:00:00", "end_time": "2017-10-07 01:00:00"}]})",
       "job b: an attempt ends before it starts"},
      {R"({"status": "Pass", "submitted_time": "2017-10-07 01:00:00", "attempts": []})",
       "job without a jobid string"},
      {R"({"status": "Pass", "jobid": "b", "attempts": []})", "job b has no submitted_time"},
      {R"({"status": "Pass", "jobid": "b", "submitted_time": "2017-10-07 01:00:00", "attempts": 3})",
       "job b: attempts must be a list"},
      {R"({"status": "Pass", "jobid": "b" "x": 1})", "bad JSON"},
  };
  for (const auto& [job, what] : cases) {
    const std::string p = d.write("log.json", "[\n" + ok + ",\n\n" + job + "\n]\n");
    const std::string msg = input_error([&] { load_trace(p, ro); });
    EXPECT_NE(msg.find(p + ":4: " + what), std::string::npos) << job << " -> " << msg;
  }
  const std::string open = d.write("open.json", "[\n" + ok + ",\n{\"status\": \"Pass\"\n");
  EXPECT_NE(input_error([&] { load_trace(open, ro); }).find(open + ":3: expected a JSON list"),
            std::string::npos);
  // A '}' closing nothing or an empty element (found by fuzz_trace: it looped, growing without bound).
  for (const char* bad : {"[}", "[\n" R"({"status": "Pass"}})" "\n]", "[,]", "[ {\"a\": 1},,]"}) {
    const std::string p = d.write("stray.json", bad);
    EXPECT_NE(input_error([&] { load_trace(p, ro); }).find("expected a JSON list"), std::string::npos) << bad;
  }
  // A UTF-8 BOM and CRLF line ends read the same: the job is read (and, without an attempt,
  // skipped, which leaves no job: bad input since issue 13).
  const std::string crlf = d.write("crlf.json", "\xEF\xBB\xBF[\r\n" + ok + "\r\n]\r\n");
  EXPECT_NE(input_error([&] { load_trace(crlf, ro); })
                .find(crlf + ": no jobs in the trace (status Pass 1; skipped: no attempt with a start and an end 1)"),
            std::string::npos);
}

}  // namespace
}  // namespace cellsched
