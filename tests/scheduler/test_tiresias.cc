// Tiresias (discretized 2D-LAS): hand-computed scenarios through simulate(),
// and single rounds through decide().
#include <gtest/gtest.h>

#include "core/error.h"
#include "scheduler/engine.h"
#include "scheduler/oracle.h"
#include "scheduler/policies.h"
#include "scheduler/policy.h"
#include "tests/scheduler/fake_oracle.h"

namespace cellsched {
namespace {

using testing::FakeOracle;
using testing::make_job;

const JobResult& result(const RunRecord& r, int64_t id) {
  for (const JobResult& j : r.jobs)
    if (j.job_id == id) return j;
  throw std::runtime_error("no job");
}

Cluster one_node(int gpus) {
  Cluster c;
  c.name = "one";
  c.nodes = {{"a", "localhost", "v100", gpus}};
  return c;
}

Trace trace_of(std::vector<Job> jobs) {
  Trace t;
  t.name = "hand";
  t.jobs = std::move(jobs);
  return t;
}

TEST(Tiresias, IsRegistered) {
  const auto names = policy_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "tiresias"), names.end());
  EXPECT_EQ(make_policy("tiresias")->name(), "tiresias");
  EXPECT_THROW(make_tiresias(TiresiasOptions{{7200, 3250}, 2.0}), InputError);
  EXPECT_THROW(make_tiresias(TiresiasOptions{{0}, 2.0}), InputError);
}

// One GPU at 1 it/s, no restart overhead, rounds of 360 s: a job's service
// (GPU-s) equals the seconds it has run. A: 30000 it, B: 25000 it, both at 0.
//   [0,3600)      A runs (Q0; FIFO). At 3600 A has 3600 >= 3250 -> Q1.
//   [3600,7200)   B (Q0) preempts A. At 7200 B has 3600 -> Q1; tie, FIFO: A.
//   [7200,10800)  A runs; at 10800 A has 7200 >= 7200 -> Q2, B (Q1) runs.
//   [10800,14400) B runs; at 14400 B has 7200 -> Q2; tie, FIFO: A.
//   [14400,28800) A runs. B waits from 14400, has executed 7200 s; at 28800
//                 it has waited 14400 = 2 x 7200 -> promoted to Q0.
//   [28800,36000) B runs in Q0, then Q1 (at 32400), then reaches 7200 GPU-s
//                 of service since its promotion -> Q2; tie, FIFO: A.
//   [36000,44400) A (21600 done) finishes its last 8400 it at 44400.
//   from 44640    B (14400 done) runs its last 10600 it -> 55240.
TEST(Tiresias, DemotesAtEachThresholdAndPromotesAStarvedJob) {
  FakeOracle o;
  o.rate = {{"v100", 1}};
  SimOptions so;
  so.restart_s = 0;
  const Trace t = trace_of({make_job(0, 0, 1, 30000), make_job(1, 0, 1, 25000)});
  auto p = make_policy("tiresias");
  const RunRecord r = simulate(t, one_node(1), o, *p, so);
  EXPECT_DOUBLE_EQ(result(r, 0).first_start_s, 0);
  EXPECT_DOUBLE_EQ(result(r, 1).first_start_s, 3600);
  EXPECT_DOUBLE_EQ(result(r, 0).completion_s, 44400);
  EXPECT_DOUBLE_EQ(result(r, 1).completion_s, 55240);
  // Starts: A at 0, 7200, 14400, 36000; B at 3600, 10800, 28800, 44640.
  EXPECT_EQ(result(r, 0).restarts, 4);
  EXPECT_EQ(result(r, 1).restarts, 4);

  // Without the starvation knob A keeps the GPU from 14400 to its end at
  // 37200 (22800 it left); B resumes at 37440 with 17800 it left -> 55240.
  auto q = make_tiresias(TiresiasOptions{{3250, 7200}, 0});
  const RunRecord r2 = simulate(t, one_node(1), o, *q, so);
  EXPECT_DOUBLE_EQ(result(r2, 0).completion_s, 37200);
  EXPECT_DOUBLE_EQ(result(r2, 1).completion_s, 55240);
  EXPECT_EQ(result(r2, 0).restarts, 3);
  EXPECT_EQ(result(r2, 1).restarts, 3);

  // The same policy object replays the trace again with the same result
  // (its promotion marks belong to the previous run's jobs).
  const RunRecord r3 = simulate(t, one_node(1), o, *p, so);
  EXPECT_DOUBLE_EQ(result(r3, 0).completion_s, 44400);
  EXPECT_DOUBLE_EQ(result(r3, 1).completion_s, 55240);
}

// Two GPUs on one node at 1 it/s per GPU, restart 30 s.
// J0: 1 GPU, 10000 it; J1: 1 GPU, 600 it (both at 0); J2: 2 GPUs, 2000 it at 360.
//   t=0     J0, J1 start, each pays 30 s: 330 it each.
//   t=360   J0, J1 continue on the same GPUs: no restart; J1 ends at 630.
//           J2 (Q0, later arrival) does not fit beside J0 and waits.
//   t=3600  J0 has 3600 GPU-s -> Q1; J2 (Q0) preempts it: 30 s + 2000/2 s
//           -> J2 ends at 4630. J0 has done 330 + 9 x 360 = 3570 it.
//   t=4680  J0 restarts (30 s) and trains its last 6430 it -> 11140.
TEST(Tiresias, PreemptsDemotedJobsAndContinuingJobsPayNoRestart) {
  FakeOracle o;
  o.rate = {{"v100", 1}};
  SimOptions so;
  so.restart_s = 30;
  const Trace t = trace_of(
      {make_job(0, 0, 1, 10000), make_job(1, 0, 1, 600), make_job(2, 360, 2, 2000)});
  auto p = make_policy("tiresias");
  const RunRecord r = simulate(t, one_node(2), o, *p, so);
  EXPECT_DOUBLE_EQ(result(r, 1).completion_s, 630);
  EXPECT_EQ(result(r, 1).restarts, 1);
  EXPECT_DOUBLE_EQ(result(r, 2).first_start_s, 3600);
  EXPECT_DOUBLE_EQ(result(r, 2).completion_s, 4630);
  EXPECT_EQ(result(r, 2).restarts, 1);
  EXPECT_DOUBLE_EQ(result(r, 0).completion_s, 11140);
  EXPECT_EQ(result(r, 0).restarts, 2);
}

// Single rounds through decide(): node 0 has 2 V100, node 1 has 2 K80.
struct Round {
  Cluster cluster;
  FakeOracle oracle;
  std::vector<Job> jobs;
  std::vector<JobState> states;
  std::vector<JobState*> active;
  Round() {
    cluster.name = "two";
    cluster.nodes = {{"a", "localhost", "v100", 2}, {"b", "localhost", "k80", 2}};
    oracle.rate = {{"v100", 10}, {"k80", 5}};
  }
  JobState& add(int64_t id, double arrival, int gpus, double attained, Allocation current = {}) {
    jobs.push_back(make_job(id, arrival, gpus, 1e6));
    JobState s;
    s.attained_gpu_s = attained;
    s.executed_s = attained / gpus;
    s.current = std::move(current);
    states.push_back(std::move(s));
    return states.back();
  }
  std::vector<Allocation> decide(Policy& p) {
    active.clear();
    for (size_t i = 0; i < states.size(); ++i) {
      states[i].job = &jobs[i];
      states[i].remaining = jobs[i].total_iterations;
      active.push_back(&states[i]);
    }
    std::vector<Allocation> out;
    for (const JobState* s : active) out.push_back(s->current);
    RoundContext ctx;
    ctx.cluster = &cluster;
    ctx.oracle = &oracle;
    ctx.jobs = &active;
    p.decide(ctx, out);
    return out;
  }
};

Allocation on(std::vector<Placement> ps) {
  Allocation a;
  a.workers = std::move(ps);
  return a;
}

TEST(Tiresias, OrdersByQueueThenArrivalAndSkipsWhatDoesNotFit) {
  Round r;
  r.add(0, 0, 4, 8000, on({{0, 2}, {1, 2}}));  // Q2, running everywhere
  r.add(1, 10, 2, 4000).waiting_s = 100;       // Q1, waited 100 s of 2 x 2000
  r.add(2, 20, 1, 0);                          // Q0
  r.add(3, 30, 2, 0);                          // Q0
  auto p = make_policy("tiresias");
  std::vector<Allocation> out = r.decide(*p);
  // Order J2, J3, J1, J0: J2 (1) and J3 (2) run, J1 (2) does not fit in the
  // one GPU left, J0 is preempted. J2 takes the tightest node (tie: node 0),
  // J3 the node with 2 free.
  EXPECT_EQ(out[0], Allocation{});
  EXPECT_EQ(out[1], Allocation{});
  EXPECT_EQ(out[2], on({{0, 1}}));
  EXPECT_EQ(out[3], on({{1, 2}}));

  // Once J1 has waited twice its executed time it is back in Q0, ahead of
  // the later arrivals J2 and J3: J1 and J2 run, J3 no longer fits.
  r.states[1].waiting_s = 4000;
  auto p2 = make_policy("tiresias");
  out = r.decide(*p2);
  EXPECT_EQ(out[0], Allocation{});
  EXPECT_EQ(out[1], on({{0, 2}}));
  EXPECT_EQ(out[2], on({{1, 1}}));
  EXPECT_EQ(out[3], Allocation{});
}

TEST(Tiresias, ContinuingJobKeepsItsExactPlacement) {
  Round r;
  // J0 runs spread over both nodes; a fresh placement would consolidate it,
  // but it keeps its GPUs (no restart), and J1 gets what is left.
  r.add(0, 0, 2, 100, on({{0, 1}, {1, 1}}));
  r.add(1, 5, 2, 0);
  auto p = make_policy("tiresias");
  const std::vector<Allocation> out = r.decide(*p);
  EXPECT_EQ(out[0], on({{0, 1}, {1, 1}}));
  EXPECT_EQ(out[1], on({{0, 1}, {1, 1}}));
}

TEST(Tiresias, NeverPlacesAJobWhereItCannotRun) {
  Round r;
  r.oracle.rate = {{"v100", 10}};  // nothing runs on K80
  r.add(0, 0, 2, 100, on({{0, 2}}));
  r.add(1, 5, 2, 0);  // only the K80 node is free: it waits
  r.add(2, 6, 1, 0);  // likewise
  auto p = make_policy("tiresias");
  const std::vector<Allocation> out = r.decide(*p);
  EXPECT_EQ(out[0], on({{0, 2}}));
  EXPECT_EQ(out[1], Allocation{});
  EXPECT_EQ(out[2], Allocation{});
}

TEST(Tiresias, TriesEachRunnableTypeAloneWhenAMixCannotRun) {
  // K80s run a gang only on one node (spread: 0, as a table's out-of-memory
  // row). Fewest nodes puts the 4-GPU job on the K80 node and a V100: it
  // cannot run there. Before, it then tried the same nodes again (every type
  // can run it) and sat out the round; now the V100s alone take it.
  Round r;
  r.cluster.nodes = {{"a", "localhost", "v100", 2}, {"b", "localhost", "k80", 3}, {"c", "localhost", "v100", 2}};
  r.oracle.type_spread_factor = {{"k80", 0}};
  r.add(0, 0, 4, 0);
  auto p = make_policy("tiresias");
  const std::vector<Allocation> out = r.decide(*p);
  EXPECT_EQ(out[0], on({{0, 2}, {2, 2}}));
}

// A chosen job that cannot be placed sits out and the jobs are chosen again.
// Where that brings a continuing job back in, it keeps its GPUs and the jobs
// placed before it move (the pass starts again); where it does not, the pass
// goes on behind the failed job.
TEST(Tiresias, AJobThatCannotBePlacedSitsOutAndTheOthersAreChosenAgain) {
  Round r;
  r.oracle.spread_factor = 0;  // no gang runs over two nodes: J1's 4 GPUs never run
  r.add(1, 0, 4, 0);                           // Q0, first: chosen alone, cannot run
  r.add(0, 1, 2, 0);                           // Q0
  r.add(2, 2, 2, 4000, on({{0, 2}}));          // Q1, on the V100s
  auto p = make_policy("tiresias");
  std::vector<Allocation> out = r.decide(*p);
  EXPECT_EQ(out[0], Allocation{});
  EXPECT_EQ(out[1], on({{1, 2}}));  // not the V100s, which J2 keeps
  EXPECT_EQ(out[2], on({{0, 2}}));

  Round q;
  q.oracle.spread_factor = 0;
  q.add(0, 0, 2, 0);                           // Q0: the V100s (first of two equal nodes)
  q.add(1, 1, 4, 0);                           // does not fit behind J0
  q.add(2, 2, 3, 0);                           // chosen, cannot run; then J3 fits
  q.add(3, 3, 1, 0);
  auto p2 = make_policy("tiresias");
  out = q.decide(*p2);
  EXPECT_EQ(out[0], on({{0, 2}}));
  EXPECT_EQ(out[1], Allocation{});
  EXPECT_EQ(out[2], Allocation{});
  EXPECT_EQ(out[3], on({{1, 1}}));
}

}  // namespace
}  // namespace cellsched
