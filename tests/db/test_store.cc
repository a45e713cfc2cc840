// Tests of the SQLite store (db/store.h) and its thin SQLite layer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>

#include "core/error.h"
#include "db/profile_store.h"
#include "db/schema.h"
#include "db/sqlite.h"
#include "db/store.h"

namespace cellsched::db {
namespace {

namespace fs = std::filesystem;

// A database file in the temp directory, removed (with -wal and -shm) at the end.
class TempDb {
 public:
  TempDb() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::temp_directory_path() /
             ("cellsched_test_" + std::to_string(::getpid()) + "_" + info->name() + "_" +
              std::to_string(counter++) + ".db"))
                .string();
    remove();
  }
  ~TempDb() { remove(); }
  const std::string& path() const { return path_; }

 private:
  void remove() const {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path_ + suffix, ec);
  }
  std::string path_;
};

int64_t count_rows(Connection& conn, const std::string& table) {
  Statement q(conn, "SELECT COUNT(*) FROM " + table);
  EXPECT_TRUE(q.step());
  return q.column_int64(0);
}

std::string pragma_text(Connection& conn, const std::string& pragma) {
  Statement q(conn, "PRAGMA " + pragma);
  EXPECT_TRUE(q.step());
  return q.column_text(0);
}

Cluster sample_cluster() {
  Cluster c;
  c.name = "v100:8,k80:4";
  c.nodes = {{"v100-0", "10.0.0.1", "v100-16", 4},
             {"v100-1", "10.0.0.2", "v100-16", 4},
             {"k80-0", "gpu-box.example", "k80", 4}};
  return c;
}

Trace sample_trace() {
  Trace t;
  t.name = "philly-small.csv";
  t.source = "/data/traces/philly small.csv";
  t.format = "philly";
  Job a;
  a.id = 1;  // ids in file order, jobs sorted by arrival: order is not by id
  a.arrival_s = 0;
  a.job_type = "ResNet-50 (batch size 64)";
  a.model = "ResNet-50";
  a.batch_size = 64;
  a.total_iterations = 12345.5;
  a.gpus = 4;
  a.weight = 2.5;
  a.deadline_s = 86400;
  a.duration_hint_s = 3600.25;
  a.command = {"python3", "train.py", "--name", "my run with spaces",
               "--note=\"quoted\" and 'single'", "back\\slash", "tab\there",
               "new\nline", "ctl\x01\x1f", "unicode: héllo 日本語 🚀", ""};
  a.checkpoint_dir = "/ckpt/job 1/é";
  Job b;
  b.id = 0;
  b.arrival_s = 10.5;
  b.job_type = "LM (batch size 20)";
  b.model = "LM";
  b.total_iterations = 1;
  b.command = {};  // offline job: no command
  Job c;
  c.id = 2;
  c.arrival_s = 10.5;
  c.job_type = "Transformer";
  c.command = {""};  // one empty argument is not no command
  t.jobs = {a, b, c};
  return t;
}

void expect_job_eq(const Job& want, const Job& got) {
  SCOPED_TRACE("job " + std::to_string(want.id));
  EXPECT_EQ(want.id, got.id);
  EXPECT_EQ(want.arrival_s, got.arrival_s);
  EXPECT_EQ(want.job_type, got.job_type);
  EXPECT_EQ(want.model, got.model);
  EXPECT_EQ(want.batch_size, got.batch_size);
  EXPECT_EQ(want.total_iterations, got.total_iterations);
  EXPECT_EQ(want.gpus, got.gpus);
  EXPECT_EQ(want.weight, got.weight);
  EXPECT_EQ(want.deadline_s, got.deadline_s);
  EXPECT_EQ(want.duration_hint_s, got.duration_hint_s);
  EXPECT_EQ(want.command, got.command);
  EXPECT_EQ(want.checkpoint_dir, got.checkpoint_dir);
}

RunRecord sample_run(const std::string& policy = "hadar", double jct = 1234.5) {
  RunRecord r;
  r.policy = policy;
  r.trace_name = "philly-small.csv";
  r.cluster_name = "v100:8,k80:4";
  r.cluster_gpus = 12;
  r.throughputs = "data/gavel/throughputs.json";
  r.params = {{"round_s", "360"}, {"restart_s", "30"}, {"seed", "42"}, {"note", "a b \"c\""}};
  RunMetrics& m = r.metrics;
  m.jobs = 3;
  m.completed = 2;
  m.jct_mean_s = jct;
  m.jct_median_s = 1000;
  m.jct_p95_s = 2000.25;
  m.jct_p99_s = 2100.75;
  m.queue_mean_s = 12;
  m.queue_median_s = 10;
  m.queue_p95_s = 30;
  m.queue_p99_s = 31;
  m.ttd_s = 5000;
  m.cru = 0.8125;
  m.decision_mean_ms = 1.5;
  m.decision_p99_ms = 4.25;
  m.decision_max_ms = 9;
  m.rounds = 14;
  m.wall_s = 0.75;
  m.extra = {{"ttd_bound_ratio", 1.07}, {"fairness_rho_max", 2.5}};
  JobResult j0;
  j0.job_id = 0;
  j0.job_type = "LM (batch size 20)";
  j0.gpus = 1;
  j0.arrival_s = 10.5;
  j0.first_start_s = 20;
  j0.completion_s = 1234;
  j0.gpu_seconds = 1214;
  j0.iterations_done = 1;
  j0.restarts = 0;
  JobResult j1;
  j1.job_id = 1;
  j1.job_type = "ResNet-50 (batch size 64)";
  j1.gpus = 4;
  j1.arrival_s = 0;
  j1.first_start_s = 0;
  j1.completion_s = 4000;
  j1.gpu_seconds = 16000.5;
  j1.iterations_done = 12345.5;
  j1.restarts = 3;
  JobResult j2;  // never started
  j2.job_id = 2;
  j2.job_type = "Transformer";
  j2.gpus = 8;
  j2.arrival_s = 10.5;
  r.jobs = {j1, j0, j2};
  r.utilization = {{0, 4}, {360, 12}, {720, 9}};
  return r;
}

void expect_run_eq(const RunRecord& want, const RunRecord& got) {
  EXPECT_EQ(want.policy, got.policy);
  EXPECT_EQ(want.trace_name, got.trace_name);
  EXPECT_EQ(want.cluster_name, got.cluster_name);
  EXPECT_EQ(want.cluster_gpus, got.cluster_gpus);
  EXPECT_EQ(want.throughputs, got.throughputs);
  EXPECT_EQ(want.params, got.params);
  const RunMetrics& a = want.metrics;
  const RunMetrics& b = got.metrics;
  EXPECT_EQ(a.jobs, b.jobs);
  EXPECT_EQ(a.completed, b.completed);
  EXPECT_EQ(a.jct_mean_s, b.jct_mean_s);
  EXPECT_EQ(a.jct_median_s, b.jct_median_s);
  EXPECT_EQ(a.jct_p95_s, b.jct_p95_s);
  EXPECT_EQ(a.jct_p99_s, b.jct_p99_s);
  EXPECT_EQ(a.queue_mean_s, b.queue_mean_s);
  EXPECT_EQ(a.queue_median_s, b.queue_median_s);
  EXPECT_EQ(a.queue_p95_s, b.queue_p95_s);
  EXPECT_EQ(a.queue_p99_s, b.queue_p99_s);
  EXPECT_EQ(a.ttd_s, b.ttd_s);
  EXPECT_EQ(a.cru, b.cru);
  EXPECT_EQ(a.decision_mean_ms, b.decision_mean_ms);
  EXPECT_EQ(a.decision_p99_ms, b.decision_p99_ms);
  EXPECT_EQ(a.decision_max_ms, b.decision_max_ms);
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.wall_s, b.wall_s);
  EXPECT_EQ(a.extra, b.extra);
  ASSERT_EQ(want.jobs.size(), got.jobs.size());
  for (std::size_t i = 0; i < want.jobs.size(); ++i) {
    SCOPED_TRACE("job result " + std::to_string(i));
    const JobResult& x = want.jobs[i];
    const JobResult& y = got.jobs[i];
    EXPECT_EQ(x.job_id, y.job_id);
    EXPECT_EQ(x.job_type, y.job_type);
    EXPECT_EQ(x.gpus, y.gpus);
    EXPECT_EQ(x.arrival_s, y.arrival_s);
    EXPECT_EQ(x.first_start_s, y.first_start_s);
    EXPECT_EQ(x.completion_s, y.completion_s);
    EXPECT_EQ(x.gpu_seconds, y.gpu_seconds);
    EXPECT_EQ(x.iterations_done, y.iterations_done);
    EXPECT_EQ(x.restarts, y.restarts);
  }
  ASSERT_EQ(want.utilization.size(), got.utilization.size());
  for (std::size_t i = 0; i < want.utilization.size(); ++i) {
    EXPECT_EQ(want.utilization[i].t_s, got.utilization[i].t_s) << "point " << i;
    EXPECT_EQ(want.utilization[i].busy_gpus, got.utilization[i].busy_gpus) << "point " << i;
  }
}

// ---- the SQLite layer ----

TEST(Sqlite, StatementBindsAndReadsEveryType) {
  Connection conn = Connection::open(":memory:");
  conn.exec("CREATE TABLE t(i INTEGER, r REAL, s TEXT, n TEXT)");
  Statement ins(conn, "INSERT INTO t VALUES (?1, ?2, ?3, ?4)");
  const std::string with_nul("a\0b", 3);
  ins.bind(1, int64_t{1} << 40).bind(2, 0.1).bind(3, with_nul).bind_null(4).execute();
  ins.bind(1, -7).bind(2, -2.5).bind(3, "").bind(4, "x").execute();  // reused after reset
  Statement q(conn, "SELECT i, r, s, n FROM t ORDER BY rowid");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_count(), 4);
  EXPECT_EQ(q.column_int64(0), int64_t{1} << 40);
  EXPECT_EQ(q.column_double(1), 0.1);
  EXPECT_EQ(q.column_text(2), with_nul);
  EXPECT_TRUE(q.column_is_null(3));
  EXPECT_EQ(q.column_text(3), "");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_int64(0), -7);
  EXPECT_EQ(q.column_text(2), "");
  EXPECT_FALSE(q.column_is_null(2));
  EXPECT_FALSE(q.step());
}

TEST(Sqlite, ErrorsNameTheSqlAndTheCause) {
  Connection conn = Connection::open(":memory:");
  try {
    Statement bad(conn, "SELEC 1");
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("SELEC 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), 1);  // SQLITE_ERROR
    EXPECT_FALSE(e.damaged());
  }
  conn.exec("CREATE TABLE t(k INTEGER PRIMARY KEY)");
  Statement ins(conn, "INSERT INTO t VALUES (?1)");
  ins.bind(1, 1).execute();
  try {
    ins.bind(1, 1).execute();
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("UNIQUE constraint failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("INSERT INTO t"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), 19);  // SQLITE_CONSTRAINT (the primary code of the extended one)
    EXPECT_FALSE(e.damaged());
  }
  ins.bind(1, 2).execute();  // still usable after a failed step
  EXPECT_EQ(count_rows(conn, "t"), 2);
  EXPECT_THROW(conn.exec("DROP TABLE missing"), StoreError);
}

TEST(Sqlite, TransactionRollsBackUnlessCommitted) {
  Connection conn = Connection::open(":memory:");
  conn.exec("CREATE TABLE t(x)");
  {
    Transaction tx(conn);
    conn.exec("INSERT INTO t VALUES (1)");
  }  // no commit
  EXPECT_EQ(count_rows(conn, "t"), 0);
  try {
    Transaction tx(conn);
    conn.exec("INSERT INTO t VALUES (1)");
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(count_rows(conn, "t"), 0);
  {
    Transaction tx(conn);
    conn.exec("INSERT INTO t VALUES (1)");
    tx.commit();
  }
  EXPECT_EQ(count_rows(conn, "t"), 1);
}

// The path is the user's --db: a file that cannot be opened is bad input (exit 2).
TEST(Sqlite, OpenFailureIsBadInput) {
  EXPECT_THROW(Connection::open("/nonexistent-dir-cellsched/x/y.db"), InputError);
  EXPECT_THROW(Store::open("/nonexistent-dir-cellsched/x/y.db"), InputError);
}

// ---- round trips ----

TEST(Store, OpensInMemoryAtCurrentVersion) {
  Store store = Store::open(":memory:");
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(store.path(), ":memory:");
  EXPECT_TRUE(store.list_runs().empty());
  EXPECT_FALSE(store.load_cluster(1).has_value());
  EXPECT_FALSE(store.load_trace(1).has_value());
  EXPECT_FALSE(store.load_run(1).has_value());
}

TEST(Store, ClusterRoundTrip) {
  Store store = Store::open(":memory:");
  const Cluster want = sample_cluster();
  const int64_t id = store.save_cluster(want);
  EXPECT_GT(id, 0);
  const auto got = store.load_cluster(id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->name, want.name);
  ASSERT_EQ(got->nodes.size(), want.nodes.size());
  for (std::size_t i = 0; i < want.nodes.size(); ++i) {
    EXPECT_EQ(got->nodes[i].name, want.nodes[i].name);
    EXPECT_EQ(got->nodes[i].address, want.nodes[i].address);
    EXPECT_EQ(got->nodes[i].gpu_type, want.nodes[i].gpu_type);
    EXPECT_EQ(got->nodes[i].gpus, want.nodes[i].gpus);
  }
  Cluster nothing;
  nothing.name = "empty";
  const int64_t empty = store.save_cluster(nothing);
  EXPECT_NE(empty, id);
  ASSERT_TRUE(store.load_cluster(empty).has_value());
  EXPECT_TRUE(store.load_cluster(empty)->nodes.empty());
}

TEST(Store, TraceRoundTripKeepsOrderAndAwkwardCommands) {
  Store store = Store::open(":memory:");
  const Trace want = sample_trace();
  const int64_t id = store.save_trace(want);
  const auto got = store.load_trace(id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->name, want.name);
  EXPECT_EQ(got->source, want.source);
  EXPECT_EQ(got->format, want.format);
  ASSERT_EQ(got->jobs.size(), want.jobs.size());
  for (std::size_t i = 0; i < want.jobs.size(); ++i) expect_job_eq(want.jobs[i], got->jobs[i]);
}

TEST(Store, CommandIsStoredAsAJsonArray) {
  TempDb db;
  Trace t;
  t.name = "t";
  Job j;
  j.command = {"a b", "say \"hi\"", "é"};
  t.jobs = {j};
  {
    Store store = Store::open(db.path());
    store.save_trace(t);
  }
  Connection conn = Connection::open(db.path());
  Statement q(conn, "SELECT command FROM jobs");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_text(0), "[\"a b\",\"say \\\"hi\\\"\",\"é\"]");
}

TEST(Store, RunRoundTrip) {
  Store store = Store::open(":memory:");
  RunRecord run = sample_run();
  const int64_t id = store.save_run(run);
  EXPECT_GT(id, 0);
  EXPECT_EQ(run.id, id);
  EXPECT_TRUE(std::regex_match(run.created_at,
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)")))
      << run.created_at;
  const auto got = store.load_run(id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->id, id);
  EXPECT_EQ(got->created_at, run.created_at);
  expect_run_eq(run, *got);
}

TEST(Store, NanAndInfinityMetricsRoundTrip) {
  Store store = Store::open(":memory:");
  RunRecord run = sample_run();
  run.metrics.extra = {{"nan_metric", std::numeric_limits<double>::quiet_NaN()},
                       {"inf_metric", std::numeric_limits<double>::infinity()}};
  store.save_run(run);
  const auto got = store.load_run(run.id);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->metrics.extra.count("nan_metric"), 1u);
  EXPECT_TRUE(std::isnan(got->metrics.extra.at("nan_metric")));
  EXPECT_EQ(got->metrics.extra.at("inf_metric"), std::numeric_limits<double>::infinity());
}

TEST(Store, RunLinksTraceAndCluster) {
  Store store = Store::open(":memory:");
  const int64_t trace_id = store.save_trace(sample_trace());
  const int64_t cluster_id = store.save_cluster(sample_cluster());
  RunRecord run = sample_run();
  const int64_t id = store.save_run(run, trace_id, cluster_id);
  const auto got = store.load_run(id);
  ASSERT_TRUE(got.has_value());
  expect_run_eq(run, *got);
}

TEST(Store, EmptyRunRoundTrip) {
  Store store = Store::open(":memory:");
  RunRecord run;
  run.policy = "fifo";
  store.save_run(run);
  const auto got = store.load_run(run.id);
  ASSERT_TRUE(got.has_value());
  expect_run_eq(run, *got);
}

TEST(Store, ListRunsNewestFirstWithSummaryMetrics) {
  Store store = Store::open(":memory:");
  RunRecord a = sample_run("fifo", 100);
  RunRecord b = sample_run("gavel", 200);
  RunRecord c = sample_run("hadar", 300);
  store.save_run(a);
  store.save_run(b);
  store.save_run(c);
  const auto runs = store.list_runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id, c.id);
  EXPECT_EQ(runs[1].id, b.id);
  EXPECT_EQ(runs[2].id, a.id);
  EXPECT_GE(runs[0].created_at, runs[1].created_at);
  EXPECT_GE(runs[1].created_at, runs[2].created_at);
  const RunSummary& s = runs[1];
  EXPECT_EQ(s.created_at, b.created_at);
  EXPECT_EQ(s.policy, "gavel");
  EXPECT_EQ(s.trace_name, b.trace_name);
  EXPECT_EQ(s.cluster_name, b.cluster_name);
  EXPECT_EQ(s.jobs, 3);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.jct_mean_s, 200);
  EXPECT_EQ(s.ttd_s, 5000);
  EXPECT_EQ(s.cru, 0.8125);
  EXPECT_EQ(s.decision_mean_ms, 1.5);
}

TEST(Store, LargeTraceRoundTrip) {
  // A trace the size of the large public ones: saved with one prepared insert
  // in one transaction (the timing itself belongs in a benchmark).
  TempDb db;
  Store store = Store::open(db.path());
  Trace t;
  t.name = "large";
  t.format = "generated";
  for (int64_t i = 0; i < 82000; ++i) {
    Job j;
    j.id = i;
    j.arrival_s = static_cast<double>(i) * 0.5;
    j.job_type = "ResNet-18 (batch size 32)";
    j.model = "ResNet-18";
    j.total_iterations = 1000 + static_cast<double>(i);
    j.gpus = 1 << (i % 4);
    j.command = {"python", "train.py", "--job", std::to_string(i)};
    t.jobs.push_back(std::move(j));
  }
  const int64_t id = store.save_trace(t);
  const auto got = store.load_trace(id);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->jobs.size(), t.jobs.size());
  for (std::size_t i = 0; i < t.jobs.size(); i += 997) expect_job_eq(t.jobs[i], got->jobs[i]);
  expect_job_eq(t.jobs.back(), got->jobs.back());
}

// ---- files, WAL, foreign keys ----

TEST(Store, FileStoreIsWalAndPersists) {
  TempDb db;
  RunRecord run = sample_run();
  int64_t cluster_id = 0;
  {
    Store store = Store::open(db.path());
    EXPECT_EQ(store.path(), db.path());
    cluster_id = store.save_cluster(sample_cluster());
    store.save_run(run, 0, cluster_id);
  }
  {
    Connection conn = Connection::open(db.path());
    EXPECT_EQ(pragma_text(conn, "journal_mode"), "wal");
    EXPECT_EQ(pragma_text(conn, "user_version"), std::to_string(Store::kSchemaVersion));
  }
  Store store = Store::open(db.path());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  ASSERT_TRUE(store.load_cluster(cluster_id).has_value());
  EXPECT_EQ(store.load_cluster(cluster_id)->nodes.size(), 3u);
  const auto got = store.load_run(run.id);
  ASSERT_TRUE(got.has_value());
  expect_run_eq(run, *got);
  ASSERT_EQ(store.list_runs().size(), 1u);
}

TEST(Store, ForeignKeysAreEnforcedAndAFailedSaveChangesNothing) {
  TempDb db;
  Store store = Store::open(db.path());
  RunRecord run = sample_run();
  // No trace 12345: the run row violates its foreign key; nothing is kept.
  EXPECT_THROW(store.save_run(run, 12345), StoreError);
  EXPECT_EQ(run.id, 0);
  EXPECT_TRUE(run.created_at.empty());
  EXPECT_THROW(store.save_run(run, 0, 777), StoreError);
  EXPECT_TRUE(store.list_runs().empty());
  {
    Connection conn = Connection::open(db.path());
    for (const char* table : {"runs", "run_params", "run_metrics", "job_results", "run_utilization"}) {
      EXPECT_EQ(count_rows(conn, table), 0) << table;
    }
  }
  // The store is still usable afterwards.
  EXPECT_GT(store.save_run(run), 0);
  EXPECT_EQ(store.list_runs().size(), 1u);
}

TEST(Store, FailureHalfWayThroughASaveRollsBackEverything) {
  TempDb db;
  Store store = Store::open(db.path());
  Trace t = sample_trace();
  t.jobs.push_back(t.jobs.front());  // duplicate job id: fails after rows went in
  EXPECT_THROW(store.save_trace(t), StoreError);
  Connection conn = Connection::open(db.path());
  EXPECT_EQ(count_rows(conn, "traces"), 0);
  EXPECT_EQ(count_rows(conn, "jobs"), 0);
  EXPECT_GT(store.save_trace(sample_trace()), 0);
  EXPECT_EQ(count_rows(conn, "traces"), 1);
  EXPECT_EQ(count_rows(conn, "jobs"), 3);
}

TEST(Store, TwoStoresOnOneFileSeeEachOthersWrites) {
  TempDb db;
  Store first = Store::open(db.path());
  Store second = Store::open(db.path());
  RunRecord run = sample_run();
  first.save_run(run);
  ASSERT_EQ(second.list_runs().size(), 1u);
  EXPECT_EQ(second.list_runs()[0].id, run.id);
  const int64_t cluster_id = second.save_cluster(sample_cluster());
  const auto cluster = first.load_cluster(cluster_id);
  ASSERT_TRUE(cluster.has_value());
  EXPECT_EQ(cluster->nodes.size(), 3u);
  // A reader in the middle of a read transaction does not block a writer (WAL).
  Connection reader = Connection::open(db.path());
  Transaction read(reader, Transaction::Mode::Deferred);
  EXPECT_EQ(count_rows(reader, "runs"), 1);
  RunRecord other = sample_run("gavel");
  first.save_run(other);
  EXPECT_EQ(count_rows(reader, "runs"), 1);  // its snapshot
  EXPECT_EQ(second.list_runs().size(), 2u);
}

// ---- schema versions ----

TEST(Schema, Version6KeepsVersion5ProfilesAndReadsThemAsUnmeasured) {
  TempDb db;
  {
    Connection conn = Connection::open(db.path());
    schema::migrate(conn, 5);
    conn.exec(R"sql(
INSERT INTO profile_runs(id, created_at, kind, model, device, device_type, host, timer, threads,
                         repetitions, versions)
  VALUES (1, '2026-01-01T00:00:00Z', 'compute', 'gpt-tiny', 'cpu', 'cpu', 'h', 'steady_clock', 1, 3, '{}');
INSERT INTO layer_profiles VALUES (1, 0, 'embed', 'embedding', 1, 2, 1.0, 2.0, 3.0, 0.5, 0.75, 0, 0, 3);
)sql");
  }
  Store::open(db.path());  // migrates to the current version
  Connection conn = Connection::open(db.path());
  EXPECT_EQ(schema::user_version(conn), Store::kSchemaVersion);
  Statement q(conn, "SELECT mem_gbps, cache_flush_bytes, (SELECT COUNT(*) FROM layer_profiles), mem_gbps_streams"
                    " FROM profile_runs");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.column_double(0), 0.0);
  EXPECT_EQ(q.column_int64(1), 0);
  EXPECT_EQ(q.column_int64(2), 1);
  EXPECT_EQ(q.column_text(3), "[]");  // v9: sharing not measured
}

TEST(Schema, MigratesAVersion1File) {
  TempDb db;
  {
    Connection conn = Connection::open(db.path());
    schema::migrate(conn, 1);
    EXPECT_EQ(schema::user_version(conn), 1);
    conn.exec(R"sql(
INSERT INTO clusters(id, name, created_at) VALUES (1, 'old', '2024-01-01T00:00:00Z');
INSERT INTO nodes VALUES (1, 0, 'n0', 'host0', 'v100-16', 4);
INSERT INTO traces(id, name, source, format, created_at)
  VALUES (1, 'old.csv', 'old.csv', 'csv', '2024-01-01T00:00:00Z');
INSERT INTO jobs VALUES (1, 0, 0, 5.0, 'LM', 'LM', 20, 100.0, 2, 1.0, -1.0, -1.0,
                         '["python","t.py"]', '');
INSERT INTO runs(id, created_at, policy, trace_name, cluster_name, cluster_gpus, throughputs,
                 trace_id, cluster_id)
  VALUES (1, '2024-01-01T00:00:00Z', 'fifo', 'old.csv', 'old', 4, 'x.json', 1, 1);
INSERT INTO run_params VALUES (1, 'round_s', '360');
INSERT INTO run_metrics VALUES (1, 'jobs', 1), (1, 'completed', 1), (1, 'jct_mean_s', 50.0);
INSERT INTO job_results VALUES (1, 0, 'LM', 2, 5.0, 5.0, 55.0, 100.0, 100.0, 0);
)sql");
    Statement q(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'run_utilization'");
    EXPECT_FALSE(q.step());
  }
  Store store = Store::open(db.path());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  const auto cluster = store.load_cluster(1);
  ASSERT_TRUE(cluster.has_value());
  EXPECT_EQ(cluster->nodes.size(), 1u);
  const auto trace = store.load_trace(1);
  ASSERT_TRUE(trace.has_value());
  ASSERT_EQ(trace->jobs.size(), 1u);
  EXPECT_EQ(trace->jobs[0].command, (std::vector<std::string>{"python", "t.py"}));
  const auto old = store.load_run(1);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->policy, "fifo");
  EXPECT_EQ(old->params.at("round_s"), "360");
  EXPECT_EQ(old->metrics.jct_mean_s, 50.0);
  ASSERT_EQ(old->jobs.size(), 1u);
  EXPECT_EQ(old->jobs[0].completion_s, 55.0);
  EXPECT_TRUE(old->utilization.empty());
  ASSERT_EQ(store.list_runs().size(), 1u);
  EXPECT_EQ(store.list_runs()[0].jobs, 1);
  // Version 2 can store utilization.
  RunRecord run = sample_run();
  store.save_run(run, 1, 1);
  const auto got = store.load_run(run.id);
  ASSERT_TRUE(got.has_value());
  expect_run_eq(run, *got);

  Connection conn = Connection::open(db.path());
  EXPECT_EQ(schema::user_version(conn), Store::kSchemaVersion);
  for (const char* index : {"job_results_run", "run_metrics_run", "run_utilization_run"}) {
    Statement q(conn, "SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?1");
    EXPECT_TRUE(q.bind(1, index).step()) << index;
  }
}

TEST(Schema, MigrateIsIdempotent) {
  Connection conn = Connection::open(":memory:");
  schema::migrate(conn, 1);
  EXPECT_EQ(schema::user_version(conn), 1);
  schema::migrate(conn, 2);
  schema::migrate(conn, 2);  // nothing left to do
  EXPECT_EQ(schema::user_version(conn), 2);
  EXPECT_THROW(schema::migrate(conn, 1), StoreError);  // cannot go back
  EXPECT_THROW(schema::migrate(conn, Store::kSchemaVersion + 1), StoreError);
}

TEST(Schema, RefusesANewerFileAndLeavesItAlone) {
  TempDb db;
  {
    Connection conn = Connection::open(db.path());
    conn.exec("PRAGMA user_version = 99");
  }
  try {
    Store::open(db.path());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {  // the user's --db: exit 2
    const std::string what = e.what();
    EXPECT_NE(what.find("99"), std::string::npos) << what;
    EXPECT_NE(what.find("version " + std::to_string(Store::kSchemaVersion)), std::string::npos)
        << what;
    EXPECT_NE(what.find(db.path()), std::string::npos) << what;
  }
  Connection conn = Connection::open(db.path());
  EXPECT_EQ(schema::user_version(conn), 99);
  EXPECT_EQ(pragma_text(conn, "journal_mode"), "delete");  // not switched to WAL
  // A verb that stores after long work names it before the work.
  EXPECT_THROW(check_db_file(db.path()), InputError);
}

// A database that cannot be written is named before the work (profile
// compute measured for minutes, then failed to store, exit 1).
TEST(Schema, CheckDbFileNamesAnUnwritableDatabase) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes a file whatever its mode";
  TempDb db;
  { Store::open(db.path()); }
  EXPECT_NO_THROW(check_db_file(db.path()));
  std::filesystem::permissions(db.path(), std::filesystem::perms::owner_read);
  EXPECT_THROW(check_db_file(db.path()), InputError);
  std::filesystem::permissions(db.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// A file whose header is sound but whose later pages are damaged passed the
// header check: profile measured, then lost its result (exit 1), or stored
// into the damaged file. With `integrity` (profile, validate) it is named now.
TEST(Schema, CheckDbFileWithIntegrityNamesADamagedDatabase) {
  TempDb db;
  {
    Store store = Store::open(db.path());
    Cluster c;
    c.name = "c";
    for (int i = 0; i < 400; ++i) c.nodes.push_back({"node-" + std::to_string(i), "localhost", "v100", 4});
    store.save_cluster(c);
  }
  ASSERT_GT(std::filesystem::file_size(db.path()), 3 * 4096u);
  EXPECT_NO_THROW(check_db_file(db.path(), true));
  {
    std::FILE* f = std::fopen(db.path().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 2 * 4096, SEEK_SET);
    const std::string junk(4096, '\x5a');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  EXPECT_NO_THROW(check_db_file(db.path()));  // the header alone is fine
  try {
    check_db_file(db.path(), true);
    ADD_FAILURE() << "a damaged database passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(db.path() + ": the database is damaged"), std::string::npos) << e.what();
  }
}

TEST(Schema, RefusesADatabaseThatIsNotOurs) {
  TempDb db;
  {
    Connection conn = Connection::open(db.path());
    conn.exec("CREATE TABLE something_else(x)");
  }
  // The user's --db (exit 2), refused before anything writes to it: the
  // journal mode stays the other application's (WAL used to be switched on).
  EXPECT_THROW(Store::open(db.path()), InputError);
  EXPECT_THROW(ProfileStore::open(db.path()), InputError);
  EXPECT_THROW(check_db_file(db.path()), InputError);
  Connection conn = Connection::open(db.path());
  EXPECT_EQ(pragma_text(conn, "journal_mode"), "delete");
  EXPECT_EQ(schema::user_version(conn), 0);
  Statement q(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'runs'");
  EXPECT_FALSE(q.step());
}

TEST(Schema, RefusesAFileThatIsNotADatabase) {
  TempDb db;
  {
    std::FILE* f = std::fopen(db.path().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string junk(4096, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  // The caller's input, not a store fault: InputError (exit 2), naming the file, which stays as it was.
  try {
    Store::open(db.path());
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(db.path() + ": not an SQLite database"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_db_file(db.path()), InputError);
  EXPECT_NO_THROW(check_db_file(db.path() + ".missing"));
  EXPECT_FALSE(std::filesystem::exists(db.path() + ".missing"));
  EXPECT_EQ(std::filesystem::file_size(db.path()), 4096u);
  // A folder, a device and a file in a missing folder are the caller's input too.
  const std::string folder = std::filesystem::path(db.path()).parent_path().string();
  for (const std::string& p : {folder, std::string("/dev/null"), db.path() + ".d/missing/x.db", std::string()})
    EXPECT_THROW(Store::open(p), InputError) << p;
  EXPECT_FALSE(std::filesystem::exists(db.path() + ".d"));
}

}  // namespace
}  // namespace cellsched::db
