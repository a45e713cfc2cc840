#include "db/store.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ctime>
#include <limits>
#include <utility>

#include <unistd.h>

#include "core/error.h"
#include "db/schema.h"
#include "db/sqlite.h"

namespace cellsched::db {

struct Store::Impl {
  Connection conn;
  int version = 0;
};

namespace {


// NULL (what SQLite makes of NaN) reads back as NaN.

Statement& bind_id_or_null(Statement& q, int index, int64_t id) {
  return id > 0 ? q.bind(index, id) : q.bind_null(index);
}

// ---- argv <-> JSON array of strings ----
// Only '"', '\\' and control bytes are escaped; every other byte, valid UTF-8
// or not, is kept as it is, so any argv round-trips exactly.

std::string encode_command(const std::vector<std::string>& argv) {
  std::string out = "[";
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : argv[i]) {
      const auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (u < 0x20 || u == 0x7f) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", u);
            out += esc;
          } else {
            out += c;
          }
      }
    }
    out += '"';
  }
  out += ']';
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Reads what encode_command writes, and any JSON array of strings.
class CommandParser {
 public:
  explicit CommandParser(const std::string& text) : s_(text) {}

  // nullopt when the text is not a JSON array of strings.
  std::optional<std::vector<std::string>> parse() {
    std::vector<std::string> argv;
    skip_ws();
    if (!eat('[')) return std::nullopt;
    skip_ws();
    if (eat(']')) return finish(std::move(argv));
    for (;;) {
      std::string arg;
      skip_ws();
      if (!string(arg)) return std::nullopt;
      argv.push_back(std::move(arg));
      skip_ws();
      if (eat(']')) return finish(std::move(argv));
      if (!eat(',')) return std::nullopt;
    }
  }

 private:
  std::optional<std::vector<std::string>> finish(std::vector<std::string> argv) {
    skip_ws();
    if (i_ != s_.size()) return std::nullopt;
    return argv;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool hex4(uint32_t& v) {
    if (s_.size() - i_ < 4) return false;
    v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else return false;
    }
    return true;
  }
  bool string(std::string& out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: a low one must follow
            uint32_t lo = 0;
            if (!eat('\\') || !eat('u') || !hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return false;
          }
          append_utf8(out, cp);
          break;
        }
        default: return false;
      }
    }
    return false;  // unterminated
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

}  // namespace

// ---- lifetime ----

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

void check_db_file(const std::string& path, bool integrity) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check_db_path(path);                   // a folder, a device, a missing folder: named now
  if (!fs::exists(path, ec)) return;     // created when something is first stored
  Connection conn = Connection::open(path);  // reads the header; a stranger file is named there
  schema::check_ours(conn);                  // a newer or foreign database, named before the work
  // Storing writes the file and its -wal beside it: an unwritable one failed
  // only after the whole measurement (exit 1, the results lost).
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (::access(path.c_str(), W_OK) != 0 || ::access(parent.c_str(), W_OK | X_OK) != 0)
    throw InputError(path + ": the database (or its folder) is not writable");
  if (!integrity) return;
  std::string verdict;
  try {
    Statement q(conn, "PRAGMA quick_check(1)");
    verdict = q.step() ? q.column_text(0) : "no answer";
  } catch (const StoreError& e) {
    // Damage is the file's; anything else (a lock, an I/O error) is not, and
    // is reported as it is.
    if (!e.damaged()) throw;
    verdict = e.what();
  }
  if (verdict != "ok")
    throw InputError(path + ": the database is damaged (SQLite's quick check: " + verdict +
                     "); restore it from a copy or pass another --db");
}

Store Store::open(const std::string& path) {
  Connection conn = Connection::open(path);
  // Connection settings first: the busy timeout also covers the pragmas below.
  conn.exec("PRAGMA busy_timeout = 5000");
  conn.exec("PRAGMA foreign_keys = ON");  // per connection, and only outside a transaction
  conn.exec("PRAGMA synchronous = NORMAL");
  // Refuse a newer file, or another application's, before anything below
  // writes to it (WAL mode rewrites the header).
  schema::check_ours(conn);
  if (!conn.in_memory()) conn.exec("PRAGMA journal_mode = WAL");  // persistent in the file
  schema::migrate(conn, kSchemaVersion);
  auto impl = std::make_unique<Impl>(Impl{std::move(conn), 0});
  impl->version = schema::user_version(impl->conn);
  if (impl->version != kSchemaVersion) {  // a newer build migrated it meanwhile
    throw StoreError(path + ": database schema version " + std::to_string(impl->version) +
                     " is not the version this build supports (version " +
                     std::to_string(kSchemaVersion) + ")");
  }
  return Store(std::move(impl));
}

int Store::schema_version() const { return impl_->version; }

const std::string& Store::path() const { return impl_->conn.path(); }

// ---- clusters ----

int64_t Store::save_cluster(const Cluster& cluster) {
  Connection& conn = impl_->conn;
  Transaction tx(conn);
  Statement ins(conn, "INSERT INTO clusters(name, created_at) VALUES (?1, ?2)");
  ins.bind(1, cluster.name).bind(2, now_utc_iso8601()).execute();
  const int64_t id = conn.last_insert_rowid();
  Statement node(conn,
                 "INSERT INTO nodes(cluster_id, idx, name, address, gpu_type, gpus) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  int64_t idx = 0;
  for (const Node& n : cluster.nodes) {
    node.bind(1, id).bind(2, idx++).bind(3, n.name).bind(4, n.address).bind(5, n.gpu_type);
    node.bind(6, n.gpus).execute();
  }
  tx.commit();
  return id;
}

std::optional<Cluster> Store::load_cluster(int64_t id) const {
  Connection& conn = impl_->conn;
  Transaction tx(conn, Transaction::Mode::Deferred);  // one consistent snapshot
  Statement q(conn, "SELECT name FROM clusters WHERE id = ?1");
  if (!q.bind(1, id).step()) return std::nullopt;
  Cluster cluster;
  cluster.name = q.column_text(0);
  Statement nodes(conn,
                  "SELECT name, address, gpu_type, gpus FROM nodes WHERE cluster_id = ?1 "
                  "ORDER BY idx");
  nodes.bind(1, id);
  while (nodes.step()) {
    Node& n = cluster.nodes.emplace_back();
    n.name = nodes.column_text(0);
    n.address = nodes.column_text(1);
    n.gpu_type = nodes.column_text(2);
    n.gpus = static_cast<int>(nodes.column_int64(3));
  }
  return cluster;
}

// ---- traces ----

int64_t Store::save_trace(const Trace& trace) {
  Connection& conn = impl_->conn;
  Transaction tx(conn);
  Statement ins(conn,
                "INSERT INTO traces(name, source, format, created_at) VALUES (?1, ?2, ?3, ?4)");
  ins.bind(1, trace.name).bind(2, trace.source).bind(3, trace.format);
  ins.bind(4, now_utc_iso8601()).execute();
  const int64_t id = conn.last_insert_rowid();
  Statement job(conn,
                "INSERT INTO jobs(trace_id, job_id, idx, arrival_s, job_type, model, batch_size, "
                "iterations, gpus, weight, deadline_s, duration_s, command, checkpoint_dir) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  int64_t idx = 0;
  for (const Job& j : trace.jobs) {
    job.bind(1, id).bind(2, j.id).bind(3, idx++).bind(4, j.arrival_s).bind(5, j.job_type);
    job.bind(6, j.model).bind(7, j.batch_size).bind(8, j.total_iterations).bind(9, j.gpus);
    job.bind(10, j.weight).bind(11, j.deadline_s).bind(12, j.duration_hint_s);
    job.bind(13, encode_command(j.command)).bind(14, j.checkpoint_dir).execute();
  }
  tx.commit();
  return id;
}

std::optional<Trace> Store::load_trace(int64_t id) const {
  Connection& conn = impl_->conn;
  Transaction tx(conn, Transaction::Mode::Deferred);
  Statement q(conn, "SELECT name, source, format FROM traces WHERE id = ?1");
  if (!q.bind(1, id).step()) return std::nullopt;
  Trace trace;
  trace.name = q.column_text(0);
  trace.source = q.column_text(1);
  trace.format = q.column_text(2);
  Statement jobs(conn,
                 "SELECT job_id, arrival_s, job_type, model, batch_size, iterations, gpus, weight, "
                 "deadline_s, duration_s, command, checkpoint_dir FROM jobs WHERE trace_id = ?1 "
                 "ORDER BY idx");
  jobs.bind(1, id);
  while (jobs.step()) {
    Job& j = trace.jobs.emplace_back();
    j.id = jobs.column_int64(0);
    j.arrival_s = column_real(jobs, 1);
    j.job_type = jobs.column_text(2);
    j.model = jobs.column_text(3);
    j.batch_size = static_cast<int>(jobs.column_int64(4));
    j.total_iterations = column_real(jobs, 5);
    j.gpus = static_cast<int>(jobs.column_int64(6));
    j.weight = column_real(jobs, 7);
    j.deadline_s = column_real(jobs, 8);
    j.duration_hint_s = column_real(jobs, 9);
    const std::string text = jobs.column_text(10);
    auto argv = CommandParser(text).parse();
    if (!argv) {
      throw StoreError(path() + ": trace " + std::to_string(id) + " job " + std::to_string(j.id) +
                       ": command is not a JSON array of strings: " + text);
    }
    j.command = std::move(*argv);
    j.checkpoint_dir = jobs.column_text(11);
  }
  return trace;
}

// ---- runs ----

int64_t Store::save_run(RunRecord& run, int64_t trace_id, int64_t cluster_id) {
  Connection& conn = impl_->conn;
  const std::string created_at = now_utc_iso8601();
  Transaction tx(conn);
  Statement ins(conn,
                "INSERT INTO runs(created_at, policy, trace_name, cluster_name, cluster_gpus, "
                "throughputs, trace_id, cluster_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  ins.bind(1, created_at).bind(2, run.policy).bind(3, run.trace_name).bind(4, run.cluster_name);
  ins.bind(5, run.cluster_gpus).bind(6, run.throughputs);
  bind_id_or_null(ins, 7, trace_id);
  bind_id_or_null(ins, 8, cluster_id);
  ins.execute();
  const int64_t id = conn.last_insert_rowid();

  Statement param(conn, "INSERT INTO run_params(run_id, key, value) VALUES (?1, ?2, ?3)");
  for (const auto& [key, value] : run.params) param.bind(1, id).bind(2, key).bind(3, value).execute();

  Statement metric(conn, "INSERT INTO run_metrics(run_id, name, value) VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : metric_pairs(run.metrics)) {
    metric.bind(1, id).bind(2, name).bind(3, value).execute();
  }

  Statement job(conn,
                "INSERT INTO job_results(run_id, job_id, job_type, gpus, arrival_s, first_start_s, "
                "completion_s, gpu_seconds, iterations_done, restarts) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  for (const JobResult& r : run.jobs) {
    job.bind(1, id).bind(2, r.job_id).bind(3, r.job_type).bind(4, r.gpus).bind(5, r.arrival_s);
    job.bind(6, r.first_start_s).bind(7, r.completion_s).bind(8, r.gpu_seconds);
    job.bind(9, r.iterations_done).bind(10, r.restarts).execute();
  }

  Statement util(conn, "INSERT INTO run_utilization(run_id, t_s, busy_gpus) VALUES (?1, ?2, ?3)");
  for (const UtilizationPoint& p : run.utilization) {
    util.bind(1, id).bind(2, p.t_s).bind(3, p.busy_gpus).execute();
  }

  tx.commit();
  run.id = id;  // only once it is stored
  run.created_at = created_at;
  return id;
}

void Store::save_learned_curves(int64_t run_id, const std::vector<LearnedCurveRow>& curves) {
  Connection& conn = impl_->conn;
  Transaction tx(conn);
  Statement ins(conn,
                "INSERT INTO learned_curves(run_id, job_id, name, model, t1, sigma, samples, error_after_3, error) "
                "VALUES (?1, ?2, ?3, 'amdahl', ?4, ?5, ?6, ?7, ?8)");
  for (const LearnedCurveRow& c : curves) {
    ins.bind(1, run_id).bind(2, c.job_id).bind(3, c.name).bind(4, c.t1).bind(5, c.sigma).bind(6, c.samples);
    if (c.error_after_3 >= 0) ins.bind(7, c.error_after_3); else ins.bind_null(7);
    if (c.error >= 0) ins.bind(8, c.error); else ins.bind_null(8);
    ins.execute();
  }
  tx.commit();
}

std::vector<LearnedCurveRow> Store::load_learned_curves(int64_t run_id) const {
  Connection& conn = impl_->conn;
  Statement q(conn,
              "SELECT job_id, name, t1, sigma, samples, error_after_3, error FROM learned_curves "
              "WHERE run_id = ?1 ORDER BY job_id");
  q.bind(1, run_id);
  std::vector<LearnedCurveRow> out;
  while (q.step()) {
    LearnedCurveRow c;
    c.job_id = q.column_int64(0);
    c.name = q.column_text(1);
    c.t1 = q.column_double(2);
    c.sigma = q.column_double(3);
    c.samples = static_cast<int>(q.column_int64(4));
    c.error_after_3 = q.column_is_null(5) ? -1 : q.column_double(5);
    c.error = q.column_is_null(6) ? -1 : q.column_double(6);
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<RunRecord> Store::load_run(int64_t id) const {
  Connection& conn = impl_->conn;
  Transaction tx(conn, Transaction::Mode::Deferred);
  Statement q(conn,
              "SELECT created_at, policy, trace_name, cluster_name, cluster_gpus, throughputs "
              "FROM runs WHERE id = ?1");
  if (!q.bind(1, id).step()) return std::nullopt;
  RunRecord run;
  run.id = id;
  run.created_at = q.column_text(0);
  run.policy = q.column_text(1);
  run.trace_name = q.column_text(2);
  run.cluster_name = q.column_text(3);
  run.cluster_gpus = static_cast<int>(q.column_int64(4));
  run.throughputs = q.column_text(5);

  Statement params(conn, "SELECT key, value FROM run_params WHERE run_id = ?1");
  params.bind(1, id);
  while (params.step()) run.params[params.column_text(0)] = params.column_text(1);

  Statement metrics(conn, "SELECT name, value FROM run_metrics WHERE run_id = ?1 ORDER BY rowid");
  metrics.bind(1, id);
  std::vector<std::pair<std::string, double>> pairs;
  while (metrics.step()) pairs.emplace_back(metrics.column_text(0), column_real(metrics, 1));
  run.metrics = metrics_from_pairs(pairs);

  Statement jobs(conn,
                 "SELECT job_id, job_type, gpus, arrival_s, first_start_s, completion_s, "
                 "gpu_seconds, iterations_done, restarts FROM job_results WHERE run_id = ?1 "
                 "ORDER BY rowid");
  jobs.bind(1, id);
  while (jobs.step()) {
    JobResult& r = run.jobs.emplace_back();
    r.job_id = jobs.column_int64(0);
    r.job_type = jobs.column_text(1);
    r.gpus = static_cast<int>(jobs.column_int64(2));
    r.arrival_s = column_real(jobs, 3);
    r.first_start_s = column_real(jobs, 4);
    r.completion_s = column_real(jobs, 5);
    r.gpu_seconds = column_real(jobs, 6);
    r.iterations_done = column_real(jobs, 7);
    r.restarts = static_cast<int>(jobs.column_int64(8));
  }

  Statement util(conn, "SELECT t_s, busy_gpus FROM run_utilization WHERE run_id = ?1 ORDER BY rowid");
  util.bind(1, id);
  while (util.step()) {
    run.utilization.push_back({column_real(util, 0), static_cast<int>(util.column_int64(1))});
  }
  return run;
}

std::vector<RunSummary> Store::list_runs() const {
  Connection& conn = impl_->conn;
  Transaction tx(conn, Transaction::Mode::Deferred);
  // One row per run; each summary metric picked out of run_metrics (names as
  // metric_pairs writes them). A missing metric reads as 0.
  Statement q(conn, R"sql(
SELECT r.id, r.created_at, r.policy, r.trace_name, r.cluster_name,
       MAX(CASE WHEN m.name = 'jobs' THEN m.value END),
       MAX(CASE WHEN m.name = 'completed' THEN m.value END),
       MAX(CASE WHEN m.name = 'jct_mean_s' THEN m.value END),
       MAX(CASE WHEN m.name = 'ttd_s' THEN m.value END),
       MAX(CASE WHEN m.name = 'cru' THEN m.value END),
       MAX(CASE WHEN m.name = 'decision_mean_ms' THEN m.value END)
FROM runs r LEFT JOIN run_metrics m ON m.run_id = r.id
GROUP BY r.id
ORDER BY r.created_at DESC, r.id DESC)sql");
  std::vector<RunSummary> out;
  while (q.step()) {
    RunSummary& s = out.emplace_back();
    s.id = q.column_int64(0);
    s.created_at = q.column_text(1);
    s.policy = q.column_text(2);
    s.trace_name = q.column_text(3);
    s.cluster_name = q.column_text(4);
    s.jobs = std::lround(q.column_double(5));
    s.completed = std::lround(q.column_double(6));
    s.jct_mean_s = q.column_double(7);
    s.ttd_s = q.column_double(8);
    s.cru = q.column_double(9);
    s.decision_mean_ms = q.column_double(10);
  }
  return out;
}

}  // namespace cellsched::db
