#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/schedule.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "scheduler/recorder.h"
#include "scheduler/replay.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::make_job;

struct Recorded {
  RunRecord run;
  Schedule schedule;
};

Recorded record(const std::string& policy, const Trace& t, const Cluster& c, const FakeOracle& o) {
  Schedule header;
  header.policy = policy;
  header.round_s = 360;
  ScheduleRecorder rec(c, o, header);
  SimOptions so;
  so.on_round = [&](double now, const std::vector<JobState*>& jobs,
                    const std::vector<Allocation>& out) { rec.record(now, jobs, out); };
  auto p = make_policy(policy);
  Recorded r;
  r.run = simulate(t, c, o, *p, so);
  r.schedule = rec.finish(r.run);
  return r;
}

Cluster mixed() {
  Cluster c;
  c.name = "mixed";
  c.nodes = {{"a", "localhost", "v100", 4}, {"b", "localhost", "p100", 4}, {"c", "localhost", "k80", 4}};
  return c;
}

Trace several() {
  Trace t;
  t.name = "several";
  for (int i = 0; i < 10; ++i)
    t.jobs.push_back(make_job(i, i * 400.0, 1 << (i % 3), 2e4 + 5e3 * (i % 4)));
  return t;
}

// No two entries that overlap in time share a GPU of a node; every index is
// on the node; every entry lies within its job's life.
void expect_consistent(const Recorded& r, const Cluster& c) {
  std::map<std::string, int> gpus;
  for (const Node& n : c.nodes) gpus[n.name] = n.gpus;
  std::map<int64_t, const JobResult*> job;
  for (const JobResult& j : r.run.jobs) job[j.job_id] = &j;
  const auto& e = r.schedule.entries;
  for (size_t i = 0; i < e.size(); ++i) {
    ASSERT_TRUE(gpus.count(e[i].node)) << e[i].node;
    for (int g : e[i].gpu_indices) {
      EXPECT_GE(g, 0);
      EXPECT_LT(g, gpus[e[i].node]);
    }
    EXPECT_LE(e[i].start_s, e[i].end_s);
    EXPECT_GE(e[i].start_s, job[e[i].job_id]->arrival_s);
    if (job[e[i].job_id]->finished()) {
      EXPECT_LE(e[i].end_s, job[e[i].job_id]->completion_s + 1e-9);
    }
    for (size_t k = i + 1; k < e.size(); ++k) {
      if (e[k].node != e[i].node || !(e[k].start_s < e[i].end_s && e[i].start_s < e[k].end_s))
        continue;
      for (int g : e[i].gpu_indices)
        EXPECT_EQ(std::count(e[k].gpu_indices.begin(), e[k].gpu_indices.end(), g), 0)
            << "GPU " << g << " of " << e[i].node << " given to job " << e[i].job_id << " and job "
            << e[k].job_id << " at once";
    }
  }
}

TEST(Recorder, SchedulesAreConsistentForEveryPolicy) {
  const Cluster c = mixed();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}, {"k80", 3}};
  for (const std::string& p : policy_names()) {
    SCOPED_TRACE(p);
    const Recorded r = record(p, several(), c, o);
    EXPECT_EQ(r.run.metrics.completed, 10);
    ASSERT_FALSE(r.schedule.entries.empty());
    EXPECT_EQ(r.schedule.rounds.size(), static_cast<size_t>(r.run.metrics.rounds));
    expect_consistent(r, c);
    // GPU-seconds in the schedule = GPU-seconds the engine accounted.
    double sched = 0, engine = 0;
    for (const ScheduleEntry& e : r.schedule.entries) sched += (e.end_s - e.start_s) * e.gpu_indices.size();
    for (const JobResult& j : r.run.jobs) engine += j.gpu_seconds;
    EXPECT_NEAR(sched, engine, 1e-6 * engine);
  }
}

TEST(Recorder, AJobThatStaysKeepsItsGpusInOneEntry) {
  Cluster c;
  c.name = "one";
  c.nodes = {{"a", "localhost", "v100", 4}};
  FakeOracle o;
  o.rate = {{"v100", 1}};
  Trace t;
  t.name = "two";
  t.jobs = {make_job(0, 0, 2, 2000), make_job(1, 10, 1, 100)};
  const Recorded r = record("fifo", t, c, o);
  ASSERT_EQ(r.schedule.entries.size(), 2u);
  // Job 0: 2 GPUs from 0 until it completes at 30 + 1000 s, one entry.
  EXPECT_EQ(r.schedule.entries[0].job_id, 0);
  EXPECT_EQ(r.schedule.entries[0].gpu_indices, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(r.schedule.entries[0].end_s, 1030);
  // Job 1 starts at the next round on the next free index.
  EXPECT_EQ(r.schedule.entries[1].gpu_indices, (std::vector<int>{2}));
  EXPECT_DOUBLE_EQ(r.schedule.entries[1].start_s, 360);
}

TEST(Schedule, JsonRoundTripsAndBadFilesAreInputErrors) {
  const Cluster c = mixed();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}, {"k80", 3}};
  const Recorded r = record("hadare", several(), c, o);
  const Schedule back = schedule_from_json(schedule_to_json(r.schedule), "s.json");
  ASSERT_EQ(back.entries.size(), r.schedule.entries.size());
  for (size_t i = 0; i < back.entries.size(); ++i) {
    EXPECT_EQ(back.entries[i].job_id, r.schedule.entries[i].job_id);
    EXPECT_EQ(back.entries[i].copy, r.schedule.entries[i].copy);
    EXPECT_EQ(back.entries[i].gpu_indices, r.schedule.entries[i].gpu_indices);
    EXPECT_DOUBLE_EQ(back.entries[i].end_s, r.schedule.entries[i].end_s);
  }
  EXPECT_EQ(back.rounds, r.schedule.rounds);
  try {
    schedule_from_json("{\n\"format\": \"cellsched-schedule-1\",\n oops }", "bad.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad.json:3:", 0), 0u) << e.what();
  }
  EXPECT_THROW(schedule_from_json("{\"format\": \"other\"}", "x.json"), InputError);
  // A number too large for a double (found by fuzz_schedule: it escaped as nlohmann's out_of_range).
  EXPECT_THROW(schedule_from_json("{\"entries\": [{\"end_s\": 64.36E208245706686}]}", "big.json"), InputError);
  // ... and a count that is not a whole number in range (get<int> of 1e82 was undefined behaviour).
  std::string big = schedule_to_json(r.schedule);
  const auto id = big.find("\"job_id\": ");
  ASSERT_NE(id, std::string::npos);
  big.replace(id, 10, "\"job_id\": 1e82, \"x\": ");
  EXPECT_THROW(schedule_from_json(big, "big.json"), InputError);
}

TEST(Replay, ReplayingARecordedScheduleReproducesTheRun) {
  const Cluster c = mixed();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}, {"k80", 3}};
  for (const char* p : {"fifo", "gavel", "hadare", "crius"}) {
    SCOPED_TRACE(p);
    const Recorded r = record(p, several(), c, o);
    auto replay = make_replay(r.schedule, c);
    const RunRecord again = simulate(several(), c, o, *replay, {});
    ASSERT_EQ(again.jobs.size(), r.run.jobs.size());
    for (size_t i = 0; i < again.jobs.size(); ++i) {
      EXPECT_NEAR(again.jobs[i].completion_s, r.run.jobs[i].completion_s, 1e-6) << "job " << i;
      EXPECT_NEAR(again.jobs[i].gpu_seconds, r.run.jobs[i].gpu_seconds, 1e-6) << "job " << i;
    }
  }
}

// A schedule file is checked against the node list at load, each bad entry
// named by file and line: indices out of range, an overlap (with the other
// entry's line), a GPU type the node does not have, a negative job id.
TEST(Replay, BadEntriesNameFileAndLine) {
  const Cluster c = mixed();
  FakeOracle o;
  o.rate = {{"v100", 10}, {"p100", 6}, {"k80", 3}};
  const Recorded r = record("fifo", several(), c, o);
  ASSERT_GE(r.schedule.entries.size(), 2u);
  const std::string good = schedule_to_json(r.schedule);
  EXPECT_NO_THROW(check_schedule(schedule_from_json(good, "ok.json"), c));
  auto expect = [&](Schedule s, const std::string& want) {
    const std::string text = schedule_to_json(s);
    try {
      check_schedule(schedule_from_json(text, "s.json"), c);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("s.json:", 0), 0u) << msg;
      EXPECT_EQ(msg.find("s.json:0:"), std::string::npos) << msg;  // a real line
      EXPECT_NE(msg.find(want), std::string::npos) << msg;
    }
  };
  Schedule s = r.schedule;
  s.entries[0].gpu_indices = {99};
  expect(s, "GPU index 99 is not on node");
  s = r.schedule;
  s.entries[0].gpu_indices = {-1};
  expect(s, "gpu_indices must be a whole number in [0, 1000000], got -1");
  s = r.schedule;
  s.entries[0].gpu_type = "h100";
  expect(s, "gpu_type 'h100' but node");
  s = r.schedule;
  ScheduleEntry twin = s.entries[0];  // the same GPUs at the same time, another job
  twin.job_id = 77;
  s.entries.insert(s.entries.begin() + 1, twin);
  expect(s, "while job");
  s = r.schedule;
  s.entries[0].job_id = -5;
  expect(s, "job_id must be a whole number in [0, 9007199254740992], got -5");
}

TEST(Replay, UnknownNodeIsBadInput) {
  Schedule s;
  s.rounds = {0};
  ScheduleEntry e;
  e.node = "nowhere";
  e.gpu_indices = {0};
  e.end_s = 10;
  s.entries = {e};
  EXPECT_THROW(make_replay(s, mixed()), InputError);
}

}  // namespace
}  // namespace cellsched
