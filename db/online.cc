#include "db/online.h"

#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "db/sqlite.h"

namespace cellsched::db {

struct OnlineStore::Impl {
  Connection conn;
};

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Real columns: NULL for "none" (< 0) where the schema allows it.
Statement& bind_opt(Statement& q, int i, double v) { return v < 0 ? q.bind_null(i) : q.bind(i, v); }
double opt(const Statement& q, int col) { return q.column_is_null(col) ? -1 : q.column_double(col); }

constexpr const char* kJobColumns =
    "id, name, submitted_at, job_type, model, batch_size, iterations, gpus, weight, command, "
    "checkpoint_dir, workdir, state, iterations_done, checkpoint, epoch, failures, last_error, "
    "cancel_requested, attained_gpu_s, first_start, finished_at";

OnlineJob read_job(const Statement& q) {
  OnlineJob j;
  j.id = q.column_int64(0);
  j.name = q.column_text(1);
  j.submitted_at = q.column_double(2);
  j.job_type = q.column_text(3);
  j.model = q.column_text(4);
  j.batch_size = static_cast<int>(q.column_int64(5));
  j.iterations = q.column_double(6);
  j.gpus = static_cast<int>(q.column_int64(7));
  j.weight = q.column_double(8);
  j.command = decode_argv(q.column_text(9));
  j.checkpoint_dir = q.column_text(10);
  j.workdir = q.column_text(11);
  j.state = q.column_text(12);
  j.iterations_done = q.column_double(13);
  j.checkpoint = q.column_text(14);
  j.epoch = static_cast<int>(q.column_int64(15));
  j.failures = static_cast<int>(q.column_int64(16));
  j.last_error = q.column_text(17);
  j.cancel_requested = q.column_int64(18) != 0;
  j.attained_gpu_s = q.column_double(19);
  j.first_start = opt(q, 20);
  j.finished_at = opt(q, 21);
  return j;
}

constexpr const char* kLaunchColumns =
    "id, job_id, round, copy, epoch, state, executor, token, dir, progress, ckpt_in, ckpt_out, "
    "procs, iterations, started_at, ended_at, outcome";

std::string encode_procs(const std::vector<OnlineProc>& procs) {
  json a = json::array();
  for (const OnlineProc& p : procs)
    a.push_back({{"node", p.node}, {"node_name", p.node_name}, {"gpus", p.gpus},
                 {"gpu_ids", p.gpu_ids}, {"pid", p.pid}, {"start_ticks", p.start_ticks}});
  return dump(a);
}

std::vector<OnlineProc> decode_procs(const std::string& text) {
  std::vector<OnlineProc> out;
  const json a = json::parse(text, nullptr, false);
  if (!a.is_array()) throw StoreError("online_launches.procs: not a JSON array: " + text);
  for (const json& p : a) {
    OnlineProc x;
    x.node = p.value("node", 0);
    x.node_name = p.value("node_name", "");
    x.gpus = p.value("gpus", 0);
    x.gpu_ids = p.value("gpu_ids", "");
    x.pid = p.value("pid", int64_t{0});
    x.start_ticks = p.value("start_ticks", int64_t{0});
    out.push_back(std::move(x));
  }
  return out;
}

OnlineLaunch read_launch(const Statement& q) {
  OnlineLaunch l;
  l.id = q.column_int64(0);
  l.job_id = q.column_int64(1);
  l.round = q.column_int64(2);
  l.copy = static_cast<int>(q.column_int64(3));
  l.epoch = static_cast<int>(q.column_int64(4));
  l.state = q.column_text(5);
  l.executor = q.column_text(6);
  l.token = q.column_text(7);
  l.dir = q.column_text(8);
  l.progress = q.column_text(9);
  l.ckpt_in = q.column_text(10);
  l.ckpt_out = q.column_text(11);
  l.procs = decode_procs(q.column_text(12));
  l.iterations = q.column_double(13);
  l.started_at = opt(q, 14);
  l.ended_at = opt(q, 15);
  l.outcome = q.column_text(16);
  return l;
}

}  // namespace

std::vector<int> gpu_indices(const OnlineProc& p) {
  std::vector<int> ids;
  size_t at = 0;
  while (at <= p.gpu_ids.size()) {
    size_t end = p.gpu_ids.find(',', at);
    if (end == std::string::npos) end = p.gpu_ids.size();
    const std::string x = p.gpu_ids.substr(at, end - at);
    if (!x.empty() && x.size() < 6 && x.find_first_not_of("0123456789") == std::string::npos)
      ids.push_back(std::stoi(x));
    at = end + 1;
  }
  return ids;
}

std::string encode_argv(const std::vector<std::string>& argv) { return dump(json(argv)); }

std::vector<std::string> decode_argv(const std::string& text) {
  const json a = json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (!a.is_array()) throw StoreError("command: not a JSON array: " + text);
  for (const json& s : a) {
    if (!s.is_string()) throw StoreError("command: not an array of strings: " + text);
    out.push_back(s.get<std::string>());
  }
  return out;
}

OnlineStore OnlineStore::open(const std::string& path) {
  { Store::open(path); }  // creates and migrates the file (and checks its version)
  Connection conn = Connection::open(path);
  conn.exec("PRAGMA busy_timeout = 10000");
  conn.exec("PRAGMA foreign_keys = ON");
  conn.exec("PRAGMA synchronous = NORMAL");  // WAL: durable against a killed process
  return OnlineStore(std::make_unique<Impl>(Impl{std::move(conn)}));
}

OnlineStore::OnlineStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnlineStore::OnlineStore(OnlineStore&&) noexcept = default;
OnlineStore& OnlineStore::operator=(OnlineStore&&) noexcept = default;
OnlineStore::~OnlineStore() = default;

const std::string& OnlineStore::path() const { return impl_->conn.path(); }

void OnlineStore::transaction(const std::function<void()>& body) {
  Transaction tx(impl_->conn);
  body();
  tx.commit();
}

int64_t OnlineStore::submit(OnlineJob& j) {
  Transaction tx(impl_->conn);
  Statement q(impl_->conn,
              "INSERT INTO online_jobs (name, submitted_at, job_type, model, batch_size, iterations, "
              "gpus, weight, command, checkpoint_dir, workdir, state) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued')");
  q.bind(1, j.name).bind(2, j.submitted_at).bind(3, j.job_type).bind(4, j.model);
  q.bind(5, j.batch_size).bind(6, j.iterations).bind(7, j.gpus).bind(8, j.weight);
  q.bind(9, encode_argv(j.command)).bind(10, j.checkpoint_dir).bind(11, j.workdir);
  q.execute();
  j.id = impl_->conn.last_insert_rowid();
  j.state = "queued";
  if (j.name.empty()) {
    j.name = "job-" + std::to_string(j.id);
    Statement u(impl_->conn, "UPDATE online_jobs SET name = ? WHERE id = ?");
    u.bind(1, j.name).bind(2, j.id).execute();
  }
  tx.commit();
  return j.id;
}

std::optional<OnlineJob> OnlineStore::job(int64_t id) const {
  Statement q(impl_->conn, std::string("SELECT ") + kJobColumns + " FROM online_jobs WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return read_job(q);
}

std::vector<OnlineJob> OnlineStore::jobs(bool unfinished_only) const {
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM online_jobs";
  if (unfinished_only) sql += " WHERE state IN ('queued', 'running')";
  sql += " ORDER BY id";
  Statement q(impl_->conn, sql);
  std::vector<OnlineJob> out;
  while (q.step()) out.push_back(read_job(q));
  return out;
}

void OnlineStore::update_job(const OnlineJob& j) {
  Statement q(impl_->conn,
              "UPDATE online_jobs SET state = ?, iterations_done = ?, checkpoint = ?, epoch = ?, "
              "failures = ?, last_error = ?, attained_gpu_s = ?, first_start = ?, finished_at = ? "
              "WHERE id = ?");
  q.bind(1, j.state).bind(2, j.iterations_done).bind(3, j.checkpoint).bind(4, j.epoch);
  q.bind(5, j.failures).bind(6, j.last_error).bind(7, j.attained_gpu_s);
  bind_opt(q, 8, j.first_start);
  bind_opt(q, 9, j.finished_at);
  q.bind(10, j.id);
  q.execute();
}

std::optional<std::string> OnlineStore::request_cancel(int64_t id) {
  Transaction tx(impl_->conn);
  Statement q(impl_->conn, "SELECT state, first_start IS NULL FROM online_jobs WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  std::string state = q.column_text(0);
  const bool never_ran = q.column_int64(1) != 0;
  if (state == "queued" || state == "running") {
    Statement u(impl_->conn, "UPDATE online_jobs SET cancel_requested = 1 WHERE id = ?");
    u.bind(1, id).execute();
    if (state == "queued" && never_ran) {
      Statement c(impl_->conn,
                  "UPDATE online_jobs SET state = 'cancelled', finished_at = (julianday('now') - 2440587.5) * 86400.0 "
                  "WHERE id = ?");
      c.bind(1, id).execute();
      state = "cancelled";
    }
  }
  tx.commit();
  return state;
}

int64_t OnlineStore::insert_launch(OnlineLaunch& l) {
  Statement q(impl_->conn,
              "INSERT INTO online_launches (job_id, round, copy, epoch, state, executor, token, dir, "
              "progress, ckpt_in, ckpt_out, procs, iterations, started_at, ended_at, outcome) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, l.job_id).bind(2, l.round).bind(3, l.copy).bind(4, l.epoch).bind(5, l.state);
  q.bind(6, l.executor).bind(7, l.token).bind(8, l.dir).bind(9, l.progress).bind(10, l.ckpt_in);
  q.bind(11, l.ckpt_out).bind(12, encode_procs(l.procs)).bind(13, l.iterations);
  bind_opt(q, 14, l.started_at);
  bind_opt(q, 15, l.ended_at);
  q.bind(16, l.outcome);
  q.execute();
  l.id = impl_->conn.last_insert_rowid();
  return l.id;
}

void OnlineStore::update_launch(const OnlineLaunch& l) {
  Statement q(impl_->conn,
              "UPDATE online_launches SET state = ?, dir = ?, progress = ?, ckpt_in = ?, ckpt_out = ?, "
              "procs = ?, iterations = ?, started_at = ?, ended_at = ?, outcome = ?, token = ? "
              "WHERE id = ?");
  q.bind(1, l.state).bind(2, l.dir).bind(3, l.progress).bind(4, l.ckpt_in).bind(5, l.ckpt_out);
  q.bind(6, encode_procs(l.procs)).bind(7, l.iterations);
  bind_opt(q, 8, l.started_at);
  bind_opt(q, 9, l.ended_at);
  q.bind(10, l.outcome).bind(11, l.token).bind(12, l.id);
  q.execute();
}

std::vector<OnlineLaunch> OnlineStore::live_launches() const {
  Statement q(impl_->conn, std::string("SELECT ") + kLaunchColumns +
                               " FROM online_launches WHERE state IN ('planned', 'running', "
                               "'stopping', 'ended') ORDER BY id");
  std::vector<OnlineLaunch> out;
  while (q.step()) out.push_back(read_launch(q));
  return out;
}

std::vector<OnlineLaunch> OnlineStore::launches_of(int64_t job_id) const {
  Statement q(impl_->conn, std::string("SELECT ") + kLaunchColumns +
                               " FROM online_launches WHERE job_id = ? ORDER BY id");
  q.bind(1, job_id);
  std::vector<OnlineLaunch> out;
  while (q.step()) out.push_back(read_launch(q));
  return out;
}

void OnlineStore::save_round(const OnlineRound& r) {
  Statement q(impl_->conn,
              "INSERT OR REPLACE INTO online_rounds (round, started_at, policy, decision_ms, allocations) "
              "VALUES (?, ?, ?, ?, ?)");
  q.bind(1, r.round).bind(2, r.started_at).bind(3, r.policy).bind(4, r.decision_ms).bind(5, r.allocations);
  q.execute();
}

int64_t OnlineStore::last_round() const {
  Statement q(impl_->conn, "SELECT COALESCE(MAX(round), 0) FROM online_rounds");
  return q.step() ? q.column_int64(0) : 0;
}

std::optional<OnlineRound> OnlineStore::round(int64_t r) const {
  Statement q(impl_->conn,
              "SELECT round, started_at, policy, decision_ms, allocations FROM online_rounds WHERE round = ?");
  q.bind(1, r);
  if (!q.step()) return std::nullopt;
  return OnlineRound{q.column_int64(0), q.column_double(1), q.column_text(2), q.column_double(3),
                     q.column_text(4)};
}

void OnlineStore::save_consolidation(const OnlineConsolidation& c) {
  json inputs = json::array();
  for (const auto& [path, it] : c.inputs) inputs.push_back({path, it});
  Statement q(impl_->conn,
              "INSERT OR REPLACE INTO online_consolidations (job_id, epoch, inputs, output, iterations, "
              "method, at) VALUES (?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, c.job_id).bind(2, c.epoch).bind(3, dump(inputs)).bind(4, c.output);
  q.bind(5, c.iterations).bind(6, c.method).bind(7, c.at);
  q.execute();
}

std::vector<OnlineConsolidation> OnlineStore::consolidations(int64_t job_id) const {
  Statement q(impl_->conn,
              "SELECT job_id, epoch, inputs, output, iterations, method, at FROM online_consolidations "
              "WHERE job_id = ? ORDER BY epoch");
  q.bind(1, job_id);
  std::vector<OnlineConsolidation> out;
  while (q.step()) {
    OnlineConsolidation c;
    c.job_id = q.column_int64(0);
    c.epoch = static_cast<int>(q.column_int64(1));
    for (const json& in : json::parse(q.column_text(2)))
      c.inputs.emplace_back(in.at(0).get<std::string>(), in.at(1).get<double>());
    c.output = q.column_text(3);
    c.iterations = q.column_double(4);
    c.method = q.column_text(5);
    c.at = q.column_double(6);
    out.push_back(std::move(c));
  }
  return out;
}

void OnlineStore::save_throughput(const Throughput& t) {
  Statement q(impl_->conn,
              "INSERT OR REPLACE INTO online_throughputs (job_id, gpu_type, per_gpu, samples) "
              "VALUES (?, ?, ?, ?)");
  q.bind(1, t.job_id).bind(2, t.gpu_type).bind(3, t.per_gpu).bind(4, static_cast<int64_t>(t.samples));
  q.execute();
}

std::vector<OnlineStore::Throughput> OnlineStore::throughputs() const {
  Statement q(impl_->conn, "SELECT job_id, gpu_type, per_gpu, samples FROM online_throughputs");
  std::vector<Throughput> out;
  while (q.step())
    out.push_back({q.column_int64(0), q.column_text(1), q.column_double(2), static_cast<long>(q.column_int64(3))});
  return out;
}

void OnlineStore::set_meta(const std::string& key, const std::string& value) {
  Statement q(impl_->conn, "INSERT OR REPLACE INTO online_meta (key, value) VALUES (?, ?)");
  q.bind(1, key).bind(2, value).execute();
}

std::optional<std::string> OnlineStore::meta(const std::string& key) const {
  Statement q(impl_->conn, "SELECT value FROM online_meta WHERE key = ?");
  q.bind(1, key);
  if (!q.step()) return std::nullopt;
  return q.column_text(0);
}

}  // namespace cellsched::db
