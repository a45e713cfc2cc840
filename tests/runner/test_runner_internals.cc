// The online runner's internals, deterministically: Runner::Impl driven
// round by round over a real state database, and the pieces it is made of
// (GPU indices, what gangs are worth, the checkpoint commit, the targets).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "core/error.h"
#include "db/online.h"
#include "runner/contract.h"
#include "runner/executor.h"
#include "runner/runner.h"
#include "runner/runner_impl.h"
#include "tests/support/subprocess.h"

namespace fs = std::filesystem;

namespace {

using cellsched::testing::slurp;

// The runner's internals on one node "n" of V100s, over a fresh state
// database that holds one submitted job.
class RunnerInvariant : public ::testing::Test {
 protected:
  using Impl = cellsched::runner::Runner::Impl;

  // A fresh database (in a directory named after `name`) with one job of
  // `iterations` that runs `command`.
  void open(const std::string& name, double iterations, std::vector<std::string> command = {"/bin/true"}) {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
    dir_ = cellsched::testing::fresh_test_dir(name);
    store_.emplace(cellsched::db::OnlineStore::open((dir_ / "state.db").string()));
    cellsched::db::OnlineJob row;
    row.iterations = iterations;
    row.command = std::move(command);
    job_ = store_->submit(row);
  }
  // The runner's internals over `gpus` V100s, with the open jobs read in.
  std::unique_ptr<Impl> impl(int gpus, cellsched::runner::RunnerOptions o = {}) {
    cellsched::Cluster cluster;
    cluster.nodes.push_back(cellsched::Node{});
    cluster.nodes[0].name = "n";
    cluster.nodes[0].gpu_type = "v100";
    cluster.nodes[0].gpus = gpus;
    o.work_dir = (dir_ / "work").string();
    auto i = std::make_unique<Impl>(*store_, cluster, *executor_, nullptr, nullptr, o);
    i->refresh_jobs();
    return i;
  }
  // Waits (10 s at most) until each launch's supervisor has written its exit file.
  static void wait_for_exits(const Impl& impl) {
    for (const auto& [lid, l] : impl.launches)
      for (int i = 0; i < 200 && !fs::exists(impl.exit_file(l, 0)); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  fs::path dir_;
  std::optional<cellsched::db::OnlineStore> store_;
  std::unique_ptr<cellsched::runner::Executor> executor_ = cellsched::runner::make_executor({});
  int64_t job_ = 0;
};

// The invariant behind the old `map::at` crash, deterministically: start()
// is handed a plan for a job that settle_jobs() has just closed (no longer
// in `jobs`) and for one already at its target; it starts neither.
TEST_F(RunnerInvariant, StartSkipsJobsClosedOrDoneSinceTheDecision) {
  using namespace cellsched;
  open("cellsched-invariant", 10);
  const auto impl = this->impl(2);
  ASSERT_EQ(impl->jobs.count(job_), 1u);
  impl->jobs.at(job_).row.iterations_done = 10;  // consolidated to its target meanwhile
  const std::vector<std::vector<Placement>> gang = {{Placement{0, 1}}};
  EXPECT_NO_THROW(impl->start(1, 0, {{job_, gang}, {job_ + 41, gang}}));
  EXPECT_TRUE(store_->live_launches().empty());
  EXPECT_TRUE(impl->launches.empty());
}

// A restart with an edited node list: the launches a previous runner left
// running must find their nodes by name with the GPUs they hold (the runner
// used to map them by position: two jobs on one GPU, or a crash).
TEST_F(RunnerInvariant, LiveLaunchesMustFindTheirNodesByName) {
  using namespace cellsched;
  open("cellsched-live-nodes", 10);
  auto launch = [&](const std::string& node, const std::string& gpus, const std::string& state) {
    db::OnlineLaunch l;
    l.job_id = job_;
    l.state = state;
    db::OnlineProc p;
    p.node = 0;
    p.node_name = node;
    p.gpu_ids = gpus;
    p.gpus = static_cast<int>(std::count(gpus.begin(), gpus.end(), ',')) + 1;
    l.procs.push_back(p);
    store_->insert_launch(l);
  };
  launch("fast", "0,1", "running");
  launch("fast", "0", "ended");  // ended launches hold nothing
  auto cluster = [](std::vector<std::pair<std::string, int>> nodes) {
    Cluster c;
    for (const auto& [name, gpus] : nodes) {
      c.nodes.push_back(Node{});
      c.nodes.back().name = name;
      c.nodes.back().gpu_type = "v100";
      c.nodes.back().gpus = gpus;
    }
    return c;
  };
  auto error = [&](const Cluster& c) {
    try {
      runner::check_live_launches(*store_, c, "nodes.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(cluster({{"slow", 2}, {"fast", 2}})), "");  // another order is fine
  EXPECT_NE(error(cluster({{"slow", 4}})).find("nodes.yaml: launch 1 (job 1) still runs on node 'fast', which this "
                                               "node list lacks"),
            std::string::npos)
      << error(cluster({{"slow", 4}}));
  EXPECT_NE(error(cluster({{"fast", 1}})).find("holds GPU 1 of node 'fast', which has only 1 GPU in this node list"), std::string::npos)
      << error(cluster({{"fast", 1}}));
  launch("fast", "1", "stopping");
  EXPECT_NE(error(cluster({{"fast", 2}})).find("launch 3 (job 1) and launch 1 both hold GPU 1 of node 'fast'"),
            std::string::npos)
      << error(cluster({{"fast", 2}}));
}

// The GPU indices a launch's process holds, as the runner reads them back:
// a hand-edited token is skipped, not thrown on.
TEST(GpuIndices, ReadsTheIndicesAndSkipsWhatIsNoIndex) {
  cellsched::db::OnlineProc p;
  p.gpu_ids = "0,1,7";
  EXPECT_EQ(cellsched::db::gpu_indices(p), (std::vector<int>{0, 1, 7}));
  p.gpu_ids = "";
  EXPECT_TRUE(cellsched::db::gpu_indices(p).empty());
  p.gpu_ids = "2,,x,-1,3 ,99999999999,4";
  EXPECT_EQ(cellsched::db::gpu_indices(p), (std::vector<int>{2, 4}));
}

// The job tracker's targets reach the trainers: two equal gangs of a job
// with 1,000 iterations left, under the noise model at e = 0.5, are each
// launched for 667 (worth 1,000.5 together), and for 500 with copies that
// count in full.
TEST_F(RunnerInvariant, ForkedGangsAreLaunchedForWhatMakesThemWorthTheRemainder) {
  using namespace cellsched;
  for (const auto& [model, want] : {std::pair{ForkModel{0.5, ForkScaling::noise}, "667"},
                                    std::pair{ForkModel{1.0, ForkScaling::linear}, "500"}}) {
    open("cellsched-targets", 1000, {"/bin/sh", "-c", "echo $CELLSCHED_ITERATIONS > \"$CELLSCHED_PROGRESS.target\""});
    runner::RunnerOptions o;
    o.fork_efficiency = model.efficiency;
    o.fork_scaling = model.scaling;
    const auto impl = this->impl(2, o);
    ASSERT_EQ(impl->jobs.count(job_), 1u);
    const std::vector<Placement> one = {Placement{0, 1}};
    impl->start(1, 0, {{job_, {one, one}}});
    ASSERT_EQ(impl->launches.size(), 2u);
    std::vector<std::string> paths;
    for (const auto& [lid, l] : impl->launches) paths.push_back(l.progress + ".target");
    for (const std::string& f : paths) {
      for (int i = 0; i < 200 && slurp(f).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::string got = slurp(f);
      while (!got.empty() && got.back() == '\n') got.pop_back();
      EXPECT_EQ(got, want) << f;
    }
    wait_for_exits(*impl);  // the supervisors are done once they have written their exit files
  }
}

// What status and the runner count a job's gangs as: two of 667 under the
// noise model at e = 0.5 are worth 1,000.5 (the targets above), in full 1,334.
TEST(LaunchesWorth, CountsTheMainGangAndItsCopiesAtTheForkModel) {
  using namespace cellsched;
  std::vector<db::OnlineLaunch> gangs(2);
  gangs[0].iterations = 667;
  gangs[1].copy = 1;
  gangs[1].iterations = 667;
  const std::vector<const db::OnlineLaunch*> both = {&gangs[0], &gangs[1]};
  EXPECT_NEAR(runner::launches_worth({0.5, ForkScaling::noise}, both), 1000.5, 1e-9);
  EXPECT_NEAR(runner::launches_worth({1.0, ForkScaling::linear}, both), 1334, 1e-9);
  EXPECT_NEAR(runner::launches_worth({0.5, ForkScaling::noise}, {&gangs[0]}), 667, 1e-9);
  EXPECT_EQ(runner::launches_worth({0.5, ForkScaling::noise}, {}), 0);
}

// No more gangs than iterations left: a job with 2 to go, given 3 gangs,
// launches 2 (each trained at least one; a job with 1 left ran on three GPUs).
TEST_F(RunnerInvariant, NoMoreGangsThanIterationsLeft) {
  using namespace cellsched;
  open("cellsched-few-left", 2);
  const auto impl = this->impl(3);
  const std::vector<Placement> one = {Placement{0, 1}};
  impl->start(1, 0, {{job_, {one, one, one}}});
  EXPECT_EQ(impl->launches.size(), 2u);
  wait_for_exits(*impl);
}

// The runner's half of the checkpoint commit, on hand-made files.
TEST(CommitCheckpoint, RenamesTheCommittedTemporaryAndRemovesTheRest) {
  using cellsched::runner::commit_checkpoint;
  const fs::path d = cellsched::testing::fresh_test_dir("cellsched-commit");
  auto put = [&](const std::string& name, const std::string& text) { std::ofstream(d / name) << text; };
  put("launch-1.pt", "5");
  put("launch-1.pt.6.tmp", "6");    // committed (progress says 6), not renamed
  put("launch-1.pt.7.tmp", "7");    // written, never committed
  put("launch-10.pt.6.tmp", "x");   // another launch's
  put("launch-1.pt.tmp", "old");    // the old protocol's temporary: not ours to judge
  put("launch-1.pt.a.tmp", "a");    // not a count
  commit_checkpoint((d / "launch-1.pt").string(), 6);
  EXPECT_EQ(slurp(d / "launch-1.pt"), "6");
  EXPECT_FALSE(fs::exists(d / "launch-1.pt.6.tmp"));
  EXPECT_FALSE(fs::exists(d / "launch-1.pt.7.tmp"));
  EXPECT_TRUE(fs::exists(d / "launch-10.pt.6.tmp"));
  EXPECT_TRUE(fs::exists(d / "launch-1.pt.tmp"));
  EXPECT_TRUE(fs::exists(d / "launch-1.pt.a.tmp"));
  // Again (a runner killed in the middle and restarted): nothing changes.
  commit_checkpoint((d / "launch-1.pt").string(), 6);
  EXPECT_EQ(slurp(d / "launch-1.pt"), "6");
  // The rename already done by the trainer: only stale temporaries go.
  put("launch-1.pt.9.tmp", "9");
  commit_checkpoint((d / "launch-1.pt").string(), 6);
  EXPECT_EQ(slurp(d / "launch-1.pt"), "6");
  EXPECT_FALSE(fs::exists(d / "launch-1.pt.9.tmp"));
  fs::remove_all(d);
}

// The job tracker: forked copies share the job's remaining iterations.
TEST(SplitIterations, CopiesTargetsSumToTheRemainder) {
  using cellsched::runner::split_iterations;
  const std::vector<std::vector<double>> cases = {
      {10}, {10, 10}, {10, 10, 10}, {30, 10, 0}, {1, 2, 3, 4}, {0, 0}, {5, 5, 5, 5, 5, 5, 5}};
  for (const auto& rates : cases)
    for (long long remaining : {0LL, 1LL, 2LL, 7LL, 10LL, 1001LL, 123456789LL}) {
      const auto t = split_iterations(remaining, rates);
      ASSERT_EQ(t.size(), rates.size());
      long long sum = 0;
      for (long long x : t) {
        EXPECT_GE(x, 0);
        if (remaining >= static_cast<long long>(rates.size())) {
          EXPECT_GE(x, 1);
        }
        sum += x;
      }
      EXPECT_EQ(sum, remaining) << rates.size() << " gangs";
    }
  // In proportion to the gangs' rates: 30 : 10 : (smallest positive) 10.
  EXPECT_EQ(split_iterations(500, {30, 10, 0}), (std::vector<long long>{300, 100, 100}));
  EXPECT_EQ(split_iterations(10, {1, 1}), (std::vector<long long>{5, 5}));
  EXPECT_EQ(split_iterations(1, {1, 1}), (std::vector<long long>{1, 0}));
  EXPECT_THROW(split_iterations(-1, {1}), std::invalid_argument);
  EXPECT_THROW(split_iterations(5, {}), std::invalid_argument);
}

// Under the noise model (or a linear one below 1) copies are worth less than
// their iterations: the targets are set so that the gangs, all at their
// targets, are worth the job's remainder, and so the job is done then.
TEST(SplitIterations, TargetsAreWorthTheRemainderWhenCopiesCountLess) {
  using cellsched::ForkModel;
  using cellsched::ForkScaling;
  using cellsched::runner::split_iterations;
  auto worth = [](const ForkModel& m, const std::vector<long long>& t) {
    return cellsched::fork_worth(m, std::vector<double>(t.begin(), t.end()));
  };
  // By hand: two equal gangs at e = 0.5 are worth 1.5 gangs, so 1,000
  // iterations take 666.7 each; 667 + 667 are worth 1,000.5.
  const ForkModel noise{0.5, ForkScaling::noise};
  EXPECT_EQ(split_iterations(1000, {10, 10}, noise), (std::vector<long long>{667, 667}));
  // Linear at 0.3: 30 t + 0.3 x 10 t = 500, t = 15.15: 455 and 152.
  EXPECT_EQ(split_iterations(500, {30, 10}, {0.3, ForkScaling::linear}), (std::vector<long long>{455, 152}));
  const std::vector<std::vector<double>> cases = {
      {10}, {10, 10}, {10, 10, 10}, {30, 10, 0}, {1, 2, 3, 4}, {0, 0}, {5, 5, 5, 5, 5, 5, 5}, {1, 40}};
  for (const ForkModel& m : {noise, ForkModel{0.05, ForkScaling::noise}, ForkModel{0.3, ForkScaling::linear},
                             ForkModel{1.0, ForkScaling::noise}})
    for (const auto& rates : cases)
      for (long long remaining : {0LL, 1LL, 2LL, 7LL, 10LL, 1001LL, 123456789LL}) {
        const auto t = split_iterations(remaining, rates, m);
        ASSERT_EQ(t.size(), rates.size());
        const double w = worth(m, t);
        EXPECT_GE(w, static_cast<double>(remaining) * (1 - 1e-12)) << rates.size() << " gangs, " << remaining;
        // Not more than rounding up: one iteration a gang, at what the
        // largest gang's iteration is worth (under 1 + phi).
        const double phi = m.efficiency < 1 ? 2 * m.efficiency / (1 - m.efficiency) : 0;
        EXPECT_LE(w, static_cast<double>(remaining) + static_cast<double>(rates.size()) * (2 + phi))
            << rates.size() << " gangs, " << remaining;
        if (remaining >= static_cast<long long>(rates.size())) {
          for (long long x : t) EXPECT_GE(x, 1);
        }
      }
}

}  // namespace
