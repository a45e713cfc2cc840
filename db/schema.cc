#include "db/schema.h"

#include "core/error.h"

#include <iterator>
#include <string>

namespace cellsched::db::schema {

namespace {

struct Migration {
  int version;      // the version the file has after this migration
  const char* sql;  // run as one script inside the migration's transaction
};

// Append only: a released migration never changes, a change is a new one.
// REAL columns stay nullable: SQLite stores NaN as NULL and the store reads
// NULL back as NaN.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE clusters (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE nodes (
  cluster_id INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
  idx        INTEGER NOT NULL,
  name       TEXT NOT NULL,
  address    TEXT NOT NULL,
  gpu_type   TEXT NOT NULL,
  gpus       INTEGER NOT NULL,
  PRIMARY KEY (cluster_id, idx)
);
CREATE TABLE traces (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  source     TEXT NOT NULL,
  format     TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE jobs (
  trace_id       INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
  job_id         INTEGER NOT NULL,
  idx            INTEGER NOT NULL,  -- position in the trace (sorted by arrival)
  arrival_s      REAL,
  job_type       TEXT NOT NULL,
  model          TEXT NOT NULL,
  batch_size     INTEGER NOT NULL,
  iterations     REAL,
  gpus           INTEGER NOT NULL,
  weight         REAL,
  deadline_s     REAL,
  duration_s     REAL,
  command        TEXT NOT NULL,     -- JSON array of strings
  checkpoint_dir TEXT NOT NULL,
  PRIMARY KEY (trace_id, job_id)
);
CREATE TABLE runs (
  id           INTEGER PRIMARY KEY,
  created_at   TEXT NOT NULL,
  policy       TEXT NOT NULL,
  trace_name   TEXT NOT NULL,
  cluster_name TEXT NOT NULL,
  cluster_gpus INTEGER NOT NULL,
  throughputs  TEXT NOT NULL,
  trace_id     INTEGER REFERENCES traces(id) ON DELETE SET NULL,
  cluster_id   INTEGER REFERENCES clusters(id) ON DELETE SET NULL
);
CREATE TABLE run_params (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL,
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
CREATE TABLE run_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name   TEXT NOT NULL,
  value  REAL
);
CREATE TABLE job_results (
  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_id          INTEGER NOT NULL,
  job_type        TEXT NOT NULL,
  gpus            INTEGER NOT NULL,
  arrival_s       REAL,
  first_start_s   REAL,
  completion_s    REAL,
  gpu_seconds     REAL,
  iterations_done REAL,
  restarts        INTEGER NOT NULL
);
)sql"},
    {2, R"sql(
CREATE TABLE run_utilization (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t_s       REAL,
  busy_gpus INTEGER NOT NULL
);
CREATE INDEX run_utilization_run ON run_utilization(run_id);
CREATE INDEX job_results_run ON job_results(run_id);
CREATE INDEX run_metrics_run ON run_metrics(run_id);
)sql"},
    // v3: profiles (compute per layer, communication per collective).
    {3, R"sql(
CREATE TABLE profile_runs (
  id          INTEGER PRIMARY KEY,
  created_at  TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('compute', 'comm')),
  model       TEXT NOT NULL,       -- compute: model name; comm: ''
  device      TEXT NOT NULL,       -- 'cpu', 'cuda:0'
  device_type TEXT NOT NULL,       -- catalogue name
  host        TEXT NOT NULL,
  timer       TEXT NOT NULL,
  threads     INTEGER NOT NULL,
  repetitions INTEGER NOT NULL,
  versions    TEXT NOT NULL        -- JSON object
);
CREATE TABLE layer_profiles (
  run_id           INTEGER NOT NULL REFERENCES profile_runs(id) ON DELETE CASCADE,
  layer_index      INTEGER NOT NULL,
  layer_name       TEXT NOT NULL,
  shape_key        TEXT NOT NULL,
  tp_degree        INTEGER NOT NULL,
  micro_batch      INTEGER NOT NULL,
  param_bytes      REAL,
  activation_bytes REAL,
  flops            REAL,
  fwd_ms           REAL,
  bwd_ms           REAL,
  fwd_spread_ms    REAL,
  bwd_spread_ms    REAL,
  repetitions      INTEGER NOT NULL
);
CREATE INDEX layer_profiles_run ON layer_profiles(run_id);
CREATE TABLE comm_profiles (
  run_id           INTEGER NOT NULL REFERENCES profile_runs(id) ON DELETE CASCADE,
  backend          TEXT NOT NULL,
  collective       TEXT NOT NULL,
  hosts            INTEGER NOT NULL,
  devices_per_host INTEGER NOT NULL,
  link             TEXT NOT NULL,
  bytes            INTEGER NOT NULL,
  time_us          REAL,
  algbw_gbps       REAL,
  busbw_gbps       REAL,
  repetitions      INTEGER NOT NULL
);
CREATE INDEX comm_profiles_run ON comm_profiles(run_id);
)sql"},
    // v4: tuned cells (the tuner's best plan of each cell, with its throughput).
    {4, R"sql(
CREATE TABLE cell_estimates (
  id             INTEGER PRIMARY KEY,
  created_at     TEXT NOT NULL,
  model          TEXT NOT NULL,
  gpu_type       TEXT NOT NULL,
  hosts          INTEGER NOT NULL,
  gpus_per_host  INTEGER NOT NULL,
  stages         INTEGER NOT NULL,   -- 0 = the tuner chose (auto)
  global_batch   INTEGER NOT NULL,
  basis          TEXT NOT NULL CHECK (basis IN ('measured', 'extrapolated', 'infeasible')),
  iteration_ms   REAL,
  samples_per_s  REAL,
  memory_gib     REAL,
  plan           TEXT NOT NULL,      -- JSON
  breakdown      TEXT NOT NULL,      -- JSON
  profile_run_id INTEGER REFERENCES profile_runs(id) ON DELETE SET NULL,
  UNIQUE (model, gpu_type, hosts, gpus_per_host, stages, global_batch)
);
)sql"},
    // v5: the online runner's state (jobs submitted to `cellsched run`, each
    // launch of a gang or forked copy, rounds, consolidations, learned throughputs).
    {5, R"sql(
CREATE TABLE online_jobs (
  id               INTEGER PRIMARY KEY,
  name             TEXT NOT NULL,
  submitted_at     REAL,                 -- unix seconds
  job_type         TEXT NOT NULL,
  model            TEXT NOT NULL,
  batch_size       INTEGER NOT NULL,
  iterations       REAL,
  gpus             INTEGER NOT NULL,
  weight           REAL,
  command          TEXT NOT NULL,        -- JSON array of strings (argv)
  checkpoint_dir   TEXT NOT NULL,
  workdir          TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
  iterations_done  REAL NOT NULL DEFAULT 0,  -- consolidated: in `checkpoint`
  checkpoint       TEXT NOT NULL DEFAULT '', -- latest consolidated checkpoint ('' = none)
  epoch            INTEGER NOT NULL DEFAULT 0,
  failures         INTEGER NOT NULL DEFAULT 0,
  last_error       TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  attained_gpu_s   REAL NOT NULL DEFAULT 0,
  first_start      REAL,
  finished_at      REAL
);
CREATE TABLE online_launches (
  id          INTEGER PRIMARY KEY,
  job_id      INTEGER NOT NULL REFERENCES online_jobs(id),
  round       INTEGER NOT NULL,
  copy        INTEGER NOT NULL,            -- 0 = the job's gang, 1.. = forked copies
  epoch       INTEGER NOT NULL,            -- the job epoch whose checkpoint it started from
  state       TEXT NOT NULL CHECK (state IN ('planned', 'running', 'stopping', 'ended', 'consolidated', 'abandoned')),
  executor    TEXT NOT NULL,
  token       TEXT NOT NULL,
  dir         TEXT NOT NULL,               -- pid, exit and log files of its processes
  progress    TEXT NOT NULL,
  ckpt_in     TEXT NOT NULL,
  ckpt_out    TEXT NOT NULL,
  procs       TEXT NOT NULL,               -- JSON: one process per placement
  iterations  REAL NOT NULL DEFAULT 0,     -- last `iterations=N` read
  started_at  REAL,
  ended_at    REAL,
  outcome     TEXT NOT NULL DEFAULT ''     -- 'exit 0', 'signal 15', 'stopped', 'lost', ...
);
CREATE INDEX online_launches_job ON online_launches(job_id);
CREATE INDEX online_launches_state ON online_launches(state);
CREATE TABLE online_rounds (
  round       INTEGER PRIMARY KEY,
  started_at  REAL,
  policy      TEXT NOT NULL,
  decision_ms REAL,
  allocations TEXT NOT NULL                -- JSON
);
CREATE TABLE online_consolidations (
  job_id     INTEGER NOT NULL REFERENCES online_jobs(id),
  epoch      INTEGER NOT NULL,             -- the epoch it produced
  inputs     TEXT NOT NULL,                -- JSON [[checkpoint, iterations], ...]
  output     TEXT NOT NULL,
  iterations REAL,
  method     TEXT NOT NULL,
  at         REAL,
  PRIMARY KEY (job_id, epoch)
);
CREATE TABLE online_throughputs (
  job_id     INTEGER NOT NULL REFERENCES online_jobs(id),
  gpu_type   TEXT NOT NULL,
  per_gpu    REAL,                         -- observed iterations/s per GPU
  samples    INTEGER NOT NULL,
  PRIMARY KEY (job_id, gpu_type)
);
CREATE TABLE online_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
)sql"},
    // v6: how a compute profile was taken: the device's measured memory
    // bandwidth (prices the optimizer step) and the cache flush before each
    // timed region. Older profiles read back as 0 (not measured, warm caches).
    {6, R"sql(
ALTER TABLE profile_runs ADD COLUMN mem_gbps REAL NOT NULL DEFAULT 0;
ALTER TABLE profile_runs ADD COLUMN cache_flush_bytes INTEGER NOT NULL DEFAULT 0;
)sql"},
    // v7: cells priced without a profile of their GPU type: basis 'transferred'
    // (another GPU type's profile) or 'modeled' (the analytic model). SQLite
    // cannot change a CHECK, so the table is rebuilt with its rows.
    {7, R"sql(
CREATE TABLE cell_estimates_v7 (
  id             INTEGER PRIMARY KEY,
  created_at     TEXT NOT NULL,
  model          TEXT NOT NULL,
  gpu_type       TEXT NOT NULL,
  hosts          INTEGER NOT NULL,
  gpus_per_host  INTEGER NOT NULL,
  stages         INTEGER NOT NULL,   -- 0 = the tuner chose (auto)
  global_batch   INTEGER NOT NULL,
  basis          TEXT NOT NULL CHECK (basis IN ('measured', 'extrapolated', 'transferred', 'modeled', 'infeasible')),
  iteration_ms   REAL,
  samples_per_s  REAL,
  memory_gib     REAL,
  plan           TEXT NOT NULL,      -- JSON
  breakdown      TEXT NOT NULL,      -- JSON
  profile_run_id INTEGER REFERENCES profile_runs(id) ON DELETE SET NULL,
  UNIQUE (model, gpu_type, hosts, gpus_per_host, stages, global_batch)
);
INSERT INTO cell_estimates_v7 SELECT * FROM cell_estimates;
DROP TABLE cell_estimates;
ALTER TABLE cell_estimates_v7 RENAME TO cell_estimates;
)sql"},
    // v8: scaling curves the malletrain advisor learned online (Amdahl fits),
    // one row per malleable job of a host-mode run.
    {8, R"sql(
CREATE TABLE learned_curves (
  run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  job_id         INTEGER NOT NULL,
  name           TEXT NOT NULL,
  model          TEXT NOT NULL,      -- 'amdahl': thr(n) = t1 n / (1 + sigma (n - 1))
  t1             REAL NOT NULL,      -- iterations/s on one node
  sigma          REAL NOT NULL,
  samples        INTEGER NOT NULL,
  error_after_3  REAL,               -- largest relative error vs the true curve after 3 windows (NULL: fewer)
  error          REAL,               -- the same for the final fit
  PRIMARY KEY (run_id, job_id)
);
)sql"},
    // v9: a CPU compute profile's memory bandwidth per process while k
    // processes of the host stream at once (JSON array, element k-1); older
    // profiles read back as '[]' (not measured: no sharing priced).
    {9, R"sql(
ALTER TABLE profile_runs ADD COLUMN mem_gbps_streams TEXT NOT NULL DEFAULT '[]';
)sql"},
};

static_assert(std::size(kMigrations) == Store::kSchemaVersion,
              "one migration per schema version, the last one is kSchemaVersion");

std::string too_new(const Connection& conn, int found, int supported) {
  return conn.path() + ": database schema version " + std::to_string(found) +
         " is newer than this build supports (version " + std::to_string(supported) +
         "); use a newer cellsched";
}

bool has_user_tables(Connection& conn) {
  Statement q(conn, "SELECT 1 FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' LIMIT 1");
  return q.step();
}

}  // namespace

int user_version(Connection& conn) {
  Statement q(conn, "PRAGMA user_version");
  return q.step() ? static_cast<int>(q.column_int64(0)) : 0;
}

void check_ours(Connection& conn) {
  const int found = user_version(conn);
  if (found > Store::kSchemaVersion) throw InputError(too_new(conn, found, Store::kSchemaVersion));
  if (found == 0 && has_user_tables(conn))
    throw InputError(conn.path() + ": not a cellsched database (it has tables but no schema version); "
                     "give --db a cellsched database or a new file");
}

void migrate(Connection& conn, int target) {
  if (target < 0 || target > Store::kSchemaVersion) {
    throw StoreError(conn.path() + ": unknown schema version " + std::to_string(target));
  }
  int found = user_version(conn);
  if (found > target) throw StoreError(too_new(conn, found, target));
  for (const Migration& m : kMigrations) {
    if (m.version > target) break;
    if (m.version <= found) continue;
    Transaction tx(conn);  // BEGIN IMMEDIATE: we now hold the write lock
    found = user_version(conn);  // another process may have migrated meanwhile
    if (found >= m.version) continue;  // tx rolls back: nothing to do
    if (found == 0 && has_user_tables(conn)) {
      throw StoreError(conn.path() + ": not a cellsched database (it has tables but no schema version)");
    }
    conn.exec(m.sql);
    conn.exec("PRAGMA user_version = " + std::to_string(m.version));
    tx.commit();
    found = m.version;
  }
}

}  // namespace cellsched::db::schema
