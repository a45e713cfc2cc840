// Cell estimates through the SQLite store: round trips, replacement, checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "db/cell_store.h"
#include "tests/estimator/estimator_fixture.h"
#include "tuner/tuner.h"

namespace cellsched::db {
namespace {

db::CellRecord record_of(const tuner::TuneResult& r, int global_batch) {
  CellRecord c;
  c.model = r.cell.model;
  c.gpu_type = r.cell.gpu_type;
  c.hosts = r.cell.hosts;
  c.gpus_per_host = r.cell.gpus_per_host;
  c.stages = r.cell.stages;
  c.global_batch = global_batch;
  const auto& e = r.best().estimate;
  c.basis = estimator::basis_name(e.basis);
  c.iteration_ms = e.iteration_ms;
  c.samples_per_s = e.samples_per_s;
  c.memory_gib = e.memory_bytes / (1 << 30);
  c.plan = tuner::plan_json(r.best().plan);
  c.breakdown = tuner::breakdown_json(e);
  return c;
}

TEST(CellStore, TunedCellsRoundTripThroughAFile) {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("cellsched_cells_" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::remove(path);
  const ModelSpec m = testing::uneven_model(6);
  const auto compute = testing::roofline_compute(m, "v100", 15.7);
  const auto comm = testing::ring_comm("v100");
  const estimator::CostModel cm(m, "v100", compute, &comm);
  tuner::TuneOptions o;
  o.global_batch = 16;
  const auto all = tuner::tune_all(cm, 4, 4, o);
  std::vector<CellRecord> recs;
  for (const auto& r : all) recs.push_back(record_of(r, o.global_batch));
  {
    auto store = CellStore::open(path);
    store.save(recs);
  }
  auto store = CellStore::open(path);
  const auto back = store.list("uneven", "v100");
  ASSERT_EQ(back.size(), all.size());
  const auto one = store.find("uneven", "v100", 1, 4, 2, 16);
  ASSERT_TRUE(one);
  EXPECT_GT(one->id, 0);
  EXPECT_FALSE(one->created_at.empty());
  const tuner::TuneResult* src = nullptr;
  for (const auto& r : all)
    if (r.cell.gpus() == 4 && r.cell.stages == 2) src = &r;
  ASSERT_TRUE(src);
  EXPECT_DOUBLE_EQ(one->iteration_ms, src->best().estimate.iteration_ms);
  EXPECT_EQ(one->basis, "measured");
  // The stored plan prices to the same figure.
  const auto plan = tuner::plan_from_json(one->plan);
  EXPECT_DOUBLE_EQ(estimator::estimate(cm, src->cell, plan).iteration_ms, one->iteration_ms);
  EXPECT_FALSE(store.find("uneven", "v100", 1, 4, 2, 32));
  // Same key again: replaced, not duplicated.
  std::vector<CellRecord> again{*one};
  again[0].iteration_ms = 1;
  again[0].created_at.clear();
  store.save(again);
  EXPECT_EQ(store.list().size(), all.size());
  EXPECT_DOUBLE_EQ(store.find("uneven", "v100", 1, 4, 2, 16)->iteration_ms, 1);
  EXPECT_EQ(again[0].id, one->id);
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}

TEST(CellStore, BadRecordsChangeNothing) {
  auto store = CellStore::open(":memory:");
  CellRecord ok;
  ok.model = "m";
  ok.gpu_type = "v100";
  ok.global_batch = 8;
  ok.basis = "measured";
  CellRecord bad = ok;
  bad.stages = 2;
  bad.basis = "guessed";
  std::vector<CellRecord> v{ok, bad};
  try {
    store.save(v);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cell record 1"), std::string::npos);
  }
  EXPECT_TRUE(store.list().empty());
  bad = ok;
  bad.plan = "{not json";
  v = {bad};
  EXPECT_THROW(store.save(v), InputError);
  ok.iteration_ms = std::nan("");
  ok.basis = "infeasible";
  v = {ok};
  store.save(v);
  EXPECT_TRUE(std::isnan(store.list()[0].iteration_ms));
}

}  // namespace
}  // namespace cellsched::db
