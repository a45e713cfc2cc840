#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <unistd.h>

#include "db/profile_store.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "tests/estimator/estimator_fixture.h"
#include "tuner/cells.h"

namespace cellsched {
namespace {

using testing::toy_comm;
using testing::toy_compute;
using testing::toy_model;

Cluster two_types() {
  Cluster c;
  c.name = "a100x4+v100x4";
  c.nodes = {{"a0", "localhost", "a100-80", 2}, {"a1", "localhost", "a100-80", 2},
             {"v0", "localhost", "v100", 4}};
  return c;
}

Job toy_job(int batch) {
  Job j;
  j.model = "toy";
  j.batch_size = batch;
  j.gpus = 2;
  return j;
}

db::CellRecord record(const std::string& type, int hosts, int gph, double samples_per_s,
                      int64_t profile_id) {
  db::CellRecord r;
  r.model = "toy";
  r.gpu_type = type;
  r.hosts = hosts;
  r.gpus_per_host = gph;
  r.stages = 0;
  r.global_batch = 8;
  r.basis = "extrapolated";
  r.iteration_ms = 8000 / samples_per_s;
  r.samples_per_s = samples_per_s;
  r.memory_gib = 1;
  r.profile_run_id = profile_id;
  r.plan = R"({"stages":[{"first_layer":0,"num_layers":4,"dp":1,"tp":1}],"micro_batches":1,"micro_batch_size":8})";
  return r;
}

// A store file holding the toy profiles (cells refer to their compute
// profile), and a factory over the toy model; removes the file at the end.
struct Fixture {
  std::string path;
  ProfileRun compute = toy_compute(), comm = toy_comm();
  Fixture() {
    path = (std::filesystem::temp_directory_path() /
            ("cellsched-cells-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db"))
               .string();
    std::filesystem::remove(path);
    // The store insists on complete provenance; the fixtures leave it out.
    for (ProfileRun* r : {&compute, &comm}) {
      r->host = "test";
      r->device = "cpu";
      r->device_type = "cpu";
      r->timer = "steady_clock";
      r->threads = 1;
      r->repetitions = 5;
      for (LayerProfile& l : r->layers) l.repetitions = 5;
      for (CommProfile& c : r->comms) c.repetitions = 5;
    }
    db::ProfileStore profiles = db::ProfileStore::open(path);
    profiles.save(compute);
    profiles.save(comm);
  }
  ~Fixture() {
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  }
  CellOracle::CostModelFactory make() {
    return [this](const std::string& model, const std::string& type)
               -> std::shared_ptr<const estimator::CostModel> {
      if (model != "toy") return nullptr;
      return std::make_shared<estimator::CostModel>(toy_model(), type, compute, &comm);
    };
  }
};

TEST(CellOracle, ReadsAHandMadeCellTable) {
  Fixture f;
  db::CellStore store = db::CellStore::open(f.path);
  const int64_t id = 0;  // the GPU types are modeled: their cells come from no profile
  // a100-80: 1 GPU 80 samples/s, 2 GPUs on one host 150, 4 over 2 hosts 280;
  // v100: 1 GPU 40, 2 GPUs 70.
  std::vector<db::CellRecord> recs = {record("a100-80", 1, 1, 80, id), record("a100-80", 1, 2, 150, id),
                                      record("a100-80", 2, 2, 280, id), record("v100", 1, 1, 40, id),
                                      record("v100", 1, 2, 70, id)};
  store.save(recs);
  const Cluster c = two_types();
  const CellOracle oracle(store, f.make(), c);
  const Job j = toy_job(8);
  // iterations/s = samples/s / global batch (8).
  EXPECT_DOUBLE_EQ(oracle.throughput(j, "a100-80", 1, true), 10.0);
  EXPECT_DOUBLE_EQ(oracle.throughput(j, "a100-80", 2, true), 150.0 / 8);
  EXPECT_DOUBLE_EQ(oracle.throughput(j, "a100-80", 4, false), 35.0);  // 2 hosts x 2
  EXPECT_DOUBLE_EQ(oracle.throughput(j, "v100", 2, true), 70.0 / 8);
  EXPECT_EQ(oracle.store_hits(), 4);
  EXPECT_EQ(oracle.tuned(), 0);
  EXPECT_EQ(oracle.plan(j, "v100", 2), "pp=1 [0-3 dp1 tp1] mb 1x8 (extrapolated)");
  // Mixed allocation: 2 workers, one A100 node and the V100 node, both
  // single-host cells of 2 GPUs: W x min(per-worker) = 2 x min(150, 70) / 8 / 2.
  Job g = toy_job(8);
  EXPECT_NEAR(allocation_throughput(oracle, g, c, {{0, 1}, {2, 1}}),
              2 * std::min(oracle.throughput(g, "a100-80", 2, false),
                           oracle.throughput(g, "v100", 2, false)) / 2,
              1e-12);
  // A model the factory cannot price cannot run.
  Job other = toy_job(8);
  other.model = "unknown";
  EXPECT_EQ(oracle.throughput(other, "v100", 1, true), 0.0);
}

TEST(CellOracle, TunesMissingCellsOnceAndTheStoreAnswersTheSecondTime) {
  Fixture f;
  db::CellStore store = db::CellStore::open(f.path);
  const Cluster c = two_types();
  const Job j = toy_job(8);
  double first = 0;
  {
    const CellOracle oracle(store, f.make(), c);
    first = oracle.throughput(j, "a100-80", 2, true);
    EXPECT_GT(first, 0);
    EXPECT_EQ(oracle.tuned(), 1);
    EXPECT_EQ(oracle.store_hits(), 0);
    // The same question again comes from memory.
    EXPECT_EQ(oracle.throughput(j, "a100-80", 2, true), first);
    EXPECT_EQ(oracle.tuned(), 1);
    EXPECT_NE(oracle.plan(j, "a100-80", 2).find("(modeled)"), std::string::npos);
  }
  const auto stored = store.find("toy", "a100-80", 1, 2, 0, 8);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->profile_run_id, 0);  // modeled: priced from no profile (the CPU one gave the structure only)
  const CellOracle again(store, f.make(), c);
  EXPECT_DOUBLE_EQ(again.throughput(j, "a100-80", 2, true), first);
  EXPECT_EQ(again.tuned(), 0);
  EXPECT_EQ(again.store_hits(), 1);
}

TEST(CellOracle, EveryPolicyRunsOnCells) {
  Fixture f;
  db::CellStore store = db::CellStore::open(f.path);
  const Cluster c = two_types();
  const CellOracle oracle(store, f.make(), c);
  Trace t;
  t.name = "toy";
  for (int i = 0; i < 6; ++i) {
    Job j = toy_job(8);
    j.id = i;
    j.arrival_s = i * 300.0;
    j.gpus = 1 << (i % 2);
    j.total_iterations = 2e4;
    t.jobs.push_back(j);
  }
  for (const std::string& p : policy_names()) {
    auto policy = make_policy(p);
    const RunRecord r = simulate(t, c, oracle, *policy, {});
    EXPECT_EQ(r.metrics.completed, 6) << p;
  }
  EXPECT_GT(oracle.tuned(), 0);
}

}  // namespace
}  // namespace cellsched
