#include "db/cell_store.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/schema.h"
#include "db/sqlite.h"

namespace cellsched::db {

struct CellStore::Impl {
  Connection conn;
};

namespace {

void check(const CellRecord& r, size_t i) {
  const std::string w = "cell record " + std::to_string(i) + " (" + r.model + " on " + r.gpu_type + "): ";
  if (r.model.empty() || r.gpu_type.empty()) throw InputError(w + "model and GPU type must be named");
  if (r.hosts < 1 || r.gpus_per_host < 1 || r.stages < 0 || r.global_batch < 1)
    throw InputError(w + "hosts, GPUs per host and global batch must be >= 1, stages >= 0");
  if (r.basis != "measured" && r.basis != "extrapolated" && r.basis != "transferred" && r.basis != "modeled" &&
      r.basis != "infeasible")
    throw InputError(w + "basis must be measured, extrapolated, transferred, modeled or infeasible, not '" +
                     r.basis + "'");
  if (!nlohmann::json::accept(r.plan) || !nlohmann::json::accept(r.breakdown))
    throw InputError(w + "plan and breakdown must be JSON");
}

constexpr const char* kColumns =
    "id, created_at, model, gpu_type, hosts, gpus_per_host, stages, global_batch, basis, iteration_ms, "
    "samples_per_s, memory_gib, plan, breakdown, profile_run_id";

CellRecord read(const Statement& q) {
  CellRecord r;
  r.id = q.column_int64(0);
  r.created_at = q.column_text(1);
  r.model = q.column_text(2);
  r.gpu_type = q.column_text(3);
  r.hosts = static_cast<int>(q.column_int64(4));
  r.gpus_per_host = static_cast<int>(q.column_int64(5));
  r.stages = static_cast<int>(q.column_int64(6));
  r.global_batch = static_cast<int>(q.column_int64(7));
  r.basis = q.column_text(8);
  r.iteration_ms = column_real(q, 9);
  r.samples_per_s = column_real(q, 10);
  r.memory_gib = column_real(q, 11);
  r.plan = q.column_text(12);
  r.breakdown = q.column_text(13);
  r.profile_run_id = q.column_is_null(14) ? 0 : q.column_int64(14);
  return r;
}

}  // namespace

CellStore::CellStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CellStore::CellStore(CellStore&&) noexcept = default;
CellStore& CellStore::operator=(CellStore&&) noexcept = default;
CellStore::~CellStore() = default;

CellStore CellStore::open(const std::string& path) {
  Connection conn = Connection::open(path);
  conn.exec("PRAGMA busy_timeout = 5000");
  conn.exec("PRAGMA foreign_keys = ON");
  conn.exec("PRAGMA synchronous = NORMAL");
  if (!conn.in_memory()) conn.exec("PRAGMA journal_mode = WAL");
  schema::migrate(conn, Store::kSchemaVersion);
  return CellStore(std::make_unique<Impl>(Impl{std::move(conn)}));
}

void CellStore::save(std::vector<CellRecord>& records) {
  for (size_t i = 0; i < records.size(); ++i) check(records[i], i);
  Connection& conn = impl_->conn;
  Transaction tx(conn);
  Statement ins(conn,
                "INSERT INTO cell_estimates(created_at, model, gpu_type, hosts, gpus_per_host, stages, "
                "global_batch, basis, iteration_ms, samples_per_s, memory_gib, plan, breakdown, profile_run_id) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
                "ON CONFLICT (model, gpu_type, hosts, gpus_per_host, stages, global_batch) DO UPDATE SET "
                "created_at = excluded.created_at, basis = excluded.basis, iteration_ms = excluded.iteration_ms, "
                "samples_per_s = excluded.samples_per_s, memory_gib = excluded.memory_gib, plan = excluded.plan, "
                "breakdown = excluded.breakdown, profile_run_id = excluded.profile_run_id");
  Statement id(conn,
               "SELECT id FROM cell_estimates WHERE model = ?1 AND gpu_type = ?2 AND hosts = ?3 AND "
               "gpus_per_host = ?4 AND stages = ?5 AND global_batch = ?6");
  const std::string now = now_utc_iso8601();
  for (CellRecord& r : records) {
    if (r.created_at.empty()) r.created_at = now;
    ins.bind(1, r.created_at).bind(2, r.model).bind(3, r.gpu_type).bind(4, r.hosts).bind(5, r.gpus_per_host);
    ins.bind(6, r.stages).bind(7, r.global_batch).bind(8, r.basis).bind(9, r.iteration_ms);
    ins.bind(10, r.samples_per_s).bind(11, r.memory_gib).bind(12, r.plan).bind(13, r.breakdown);
    if (r.profile_run_id > 0) ins.bind(14, r.profile_run_id);
    else ins.bind_null(14);
    ins.execute();
    id.bind(1, r.model).bind(2, r.gpu_type).bind(3, r.hosts).bind(4, r.gpus_per_host).bind(5, r.stages);
    id.bind(6, r.global_batch);
    if (id.step()) r.id = id.column_int64(0);
    id.reset();
  }
  tx.commit();
}

std::optional<CellRecord> CellStore::find(const std::string& model, const std::string& gpu_type, int hosts,
                                          int gpus_per_host, int stages, int global_batch) const {
  Statement q(impl_->conn, std::string("SELECT ") + kColumns +
                               " FROM cell_estimates WHERE model = ?1 AND gpu_type = ?2 AND hosts = ?3 AND "
                               "gpus_per_host = ?4 AND stages = ?5 AND global_batch = ?6");
  q.bind(1, model).bind(2, gpu_type).bind(3, hosts).bind(4, gpus_per_host).bind(5, stages).bind(6, global_batch);
  if (!q.step()) return std::nullopt;
  return read(q);
}

std::vector<CellRecord> CellStore::list(const std::string& model, const std::string& gpu_type) const {
  Statement q(impl_->conn, std::string("SELECT ") + kColumns +
                               " FROM cell_estimates WHERE (?1 = '' OR model = ?1) AND (?2 = '' OR gpu_type = ?2) "
                               "ORDER BY model, gpu_type, hosts * gpus_per_host, stages, global_batch");
  q.bind(1, model).bind(2, gpu_type);
  std::vector<CellRecord> out;
  while (q.step()) out.push_back(read(q));
  return out;
}

}  // namespace cellsched::db
