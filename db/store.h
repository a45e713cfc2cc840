// The SQLite store: clusters, traces and jobs, runs with their metrics and
// per-job results. One file, WAL, foreign keys, versioned schema with
// migrations. sqlite3.h stays inside db/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/job.h"
#include "core/run.h"

namespace cellsched::db {

// A failure of the database itself (I/O, corruption, locked past the timeout).
// `code` is SQLite's primary result code (SQLITE_CORRUPT, SQLITE_BUSY, ...),
// 0 where the failure is not SQLite's (a bad value read back).
class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& what, int code = 0) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }
  // The file's pages are damaged or it is not a database (SQLITE_CORRUPT, SQLITE_NOTADB).
  bool damaged() const;

 private:
  int code_;
};

// For a verb that stores only after long work: throws InputError now when
// `path` exists and is not an SQLite database, or is missing and so is its
// folder (a missing file is fine: it is created when something is first stored).
// `integrity` also runs SQLite's quick check, which reads the whole file: a
// file with damaged pages passed the header check, then lost the work's
// result, or was written to (profile, validate).
void check_db_file(const std::string& path, bool integrity = false);

struct RunSummary {
  int64_t id = 0;
  std::string created_at;
  std::string policy;
  std::string trace_name;
  std::string cluster_name;
  long jobs = 0, completed = 0;
  double jct_mean_s = 0, ttd_s = 0, cru = 0, decision_mean_ms = 0;
};

// A scaling curve the malletrain advisor fitted to one malleable job.
struct LearnedCurveRow {
  int64_t job_id = 0;
  std::string name;
  double t1 = 0, sigma = 0;          // Amdahl: thr(n) = t1 n / (1 + sigma (n - 1))
  int samples = 0;
  double error_after_3 = -1, error = -1;  // < 0: not known
};

class Store {
 public:
  // The schema version this build writes.
  static constexpr int kSchemaVersion = 9;

  // Opens (creating if missing) and migrates to kSchemaVersion. ":memory:" works.
  // Throws StoreError; a file newer than this build is refused, and one that
  // is not an SQLite database is InputError.
  static Store open(const std::string& path);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  int schema_version() const;
  const std::string& path() const;

  // Each save is one transaction: all or nothing. Returns the new id.
  int64_t save_cluster(const Cluster& cluster);
  int64_t save_trace(const Trace& trace);
  // Saves the run, its metrics, job results and utilization series; links the
  // given trace and cluster ids (0 = none). Sets run.id and run.created_at.
  int64_t save_run(RunRecord& run, int64_t trace_id = 0, int64_t cluster_id = 0);

  // The advisor's curves of a stored run (one transaction).
  void save_learned_curves(int64_t run_id, const std::vector<LearnedCurveRow>& curves);
  std::vector<LearnedCurveRow> load_learned_curves(int64_t run_id) const;

  std::optional<Cluster> load_cluster(int64_t id) const;
  std::optional<Trace> load_trace(int64_t id) const;
  std::optional<RunRecord> load_run(int64_t id) const;  // with jobs and utilization
  std::vector<RunSummary> list_runs() const;            // newest first

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellsched::db
