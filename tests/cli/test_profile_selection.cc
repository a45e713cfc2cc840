// Which stored profiles `estimate` and `tune` price a cell with when none is
// named: each case here was found by an audit of the CPU profiling path
// (2026-12-07).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "db/profile_store.h"
#include "tests/estimator/estimator_fixture.h"
#include "tests/support/subprocess.h"

namespace {

using cellsched::ModelSpec;
using cellsched::ProfileRun;
using cellsched::testing::Result;

class ProfileSelection : public cellsched::testing::CliTest {
 protected:
  // The store insists on complete provenance; the fixtures leave it out.
  static void provenance(ProfileRun& r) {
    r.id = 0;
    r.host = "test";
    r.device = "cpu";
    r.device_type = "cpu";
    r.timer = r.kind == "comm" ? "gloo" : "steady_clock";
    r.threads = 1;
    r.repetitions = 5;
    for (auto& l : r.layers) l.repetitions = 5;
    for (auto& c : r.comms) {
      c.repetitions = 5;
      c.backend = "gloo";
    }
  }
  nlohmann::json estimate(const std::string& db) {
    const Result r = run({"estimate", "--model", "gpt-tiny", "--gpu-type", "cpu", "--gpus", "2", "--stages", "1",
                          "--plan", "dp=2,mb=1", "--batch", "8", "--db", db, "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
  }
};

TEST_F(ProfileSelection, TheNewestProfileWhoseLayersAreTheModelsAndWhoseCollectivesAreFull) {
  const std::string db = (dir_ / "p.db").string();
  const ModelSpec tiny = cellsched::model_by_name("gpt-tiny");
  ProfileRun good = cellsched::testing::roofline_compute(tiny, "cpu", 0.1);
  // A YAML model that names itself gpt-tiny but has gpt-cpu's layers: its
  // profile is newer, under the same name. It hid the good one ("profile
  // the model first", exit 2).
  ProfileRun other = cellsched::testing::roofline_compute(cellsched::model_by_name("gpt-cpu"), "cpu", 0.1);
  other.model = "gpt-tiny";
  ProfileRun full = cellsched::testing::ring_comm("cpu");
  // A quick send/recv check, newer: it priced the gradient all-reduce from
  // the catalogue.
  ProfileRun partial = full;
  std::erase_if(partial.comms, [](const cellsched::CommProfile& c) { return c.collective != "send_recv"; });
  ASSERT_FALSE(partial.comms.empty());
  for (ProfileRun* r : {&good, &full, &other, &partial}) provenance(*r);
  {
    auto store = cellsched::db::ProfileStore::open(db);
    store.save(good);
    store.save(full);
    store.save(other);
    store.save(partial);
  }
  const nlohmann::json e = estimate(db);
  EXPECT_EQ(e.value("profile_run_id", 0), good.id) << e.dump();
  EXPECT_EQ(e.value("comm_profile_run_id", 0), full.id) << e.dump();
  EXPECT_EQ(e.value("basis", ""), "measured") << e.dump();
  // Named explicitly, the other model's profile is still refused by its layers.
  const Result named = run({"estimate", "--model", "gpt-tiny", "--gpu-type", "cpu", "--gpus", "1", "--batch", "8",
                            "--db", db, "--profile", std::to_string(other.id)});
  EXPECT_EQ(named.status, 2) << named.err;
  EXPECT_NE(named.err.find("no tp=1 profile of layer"), std::string::npos) << named.err;
}

}  // namespace
