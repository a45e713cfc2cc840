// Tuned cells in the SQLite store (table cell_estimates, schema v4): the best
// plan of each (model, GPU type, hosts x GPUs per host, stages, global batch)
// with its throughput, memory and breakdown. Plans and breakdowns are kept as
// the tuner's JSON text, so db/ stays independent of estimator/ and tuner/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cellsched::db {

struct CellRecord {
  int64_t id = 0;
  std::string created_at;
  std::string model, gpu_type;
  int hosts = 1, gpus_per_host = 1;
  int stages = 0;            // 0 = the tuner chose the stage count (auto)
  int global_batch = 0;
  std::string basis;         // "measured", "extrapolated", "transferred", "modeled", "infeasible"
  double iteration_ms = 0, samples_per_s = 0, memory_gib = 0;  // NaN when infeasible
  std::string plan = "{}";       // JSON (tuner::plan_json)
  std::string breakdown = "{}";  // JSON (tuner::breakdown_json)
  int64_t profile_run_id = 0;    // the compute profile it was priced from (0 = none)
};

class CellStore {
 public:
  // Opens (creating if missing) and migrates like Store::open; ":memory:" works.
  static CellStore open(const std::string& path);
  CellStore(CellStore&&) noexcept;
  CellStore& operator=(CellStore&&) noexcept;
  ~CellStore();

  // Saves every record in one transaction (all or nothing), replacing a stored
  // record with the same key. Checks first: InputError naming the bad record
  // (empty names, sizes < 1, unknown basis, text that is not JSON).
  void save(std::vector<CellRecord>& records);
  std::optional<CellRecord> find(const std::string& model, const std::string& gpu_type, int hosts,
                                 int gpus_per_host, int stages, int global_batch) const;
  // Every record of `model` ("" = all) on `gpu_type` ("" = all), by GPUs then stages.
  std::vector<CellRecord> list(const std::string& model = "", const std::string& gpu_type = "") const;

  struct Impl;

 private:
  explicit CellStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellsched::db
