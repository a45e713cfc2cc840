#include "db/profile_store.h"

#include <chrono>
#include <cmath>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/schema.h"
#include "db/sqlite.h"
#include "db/store.h"

namespace cellsched::db {

struct ProfileStore::Impl {
  Connection conn;
};

namespace {

void check(bool ok, const std::string& where, const std::string& what) {
  if (!ok) throw InputError("profile run: " + where + ": " + what);
}

bool nonneg(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

void validate_profile_run(const ProfileRun& r) {
  check(r.kind == "compute" || r.kind == "comm", "kind", "must be 'compute' or 'comm', got '" + r.kind + "'");
  check(!r.device.empty() && !r.device_type.empty(), "device", "device and device_type must be set");
  check(r.threads >= 0 && r.repetitions >= 0, "run", "threads and repetitions must be >= 0");
  check(nonneg(r.mem_gbps) && r.cache_flush_bytes >= 0, "run", "mem_gbps and cache_flush_bytes must be >= 0");
  for (double v : r.mem_gbps_streams)
    check(std::isfinite(v) && v > 0, "run", "mem_gbps_streams must hold finite bandwidths > 0");
  if (r.kind == "compute") {
    check(!r.model.empty(), "model", "a compute profile names its model");
    check(r.comms.empty(), "comms", "a compute profile holds no collective records");
  } else {
    check(r.layers.empty(), "layers", "a comm profile holds no layer records");
  }
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const LayerProfile& l = r.layers[i];
    const std::string w = "layer record " + std::to_string(i + 1) + " (" + l.layer_name + ")";
    check(l.layer_index >= 0 && !l.shape_key.empty(), w, "needs a layer index >= 0 and a shape_key");
    check(l.tp_degree >= 1 && l.micro_batch >= 1 && l.repetitions >= 1, w,
          "tp_degree, micro_batch and repetitions must be >= 1");
    for (double v : {l.param_bytes, l.activation_bytes, l.flops, l.fwd_ms, l.bwd_ms,
                     l.fwd_spread_ms, l.bwd_spread_ms})
      check(nonneg(v), w, "sizes and times must be finite and >= 0");
  }
  for (size_t i = 0; i < r.comms.size(); ++i) {
    const CommProfile& c = r.comms[i];
    const std::string w = "collective record " + std::to_string(i + 1) + " (" + c.collective + ")";
    check(!c.backend.empty() && !c.collective.empty() && !c.link.empty(), w, "backend, collective and link must be set");
    check(c.hosts >= 1 && c.devices_per_host >= 1 && c.bytes > 0 && c.repetitions >= 1, w,
          "hosts, devices_per_host, bytes and repetitions must be positive");
    for (double v : {c.time_us, c.algbw_gbps, c.busbw_gbps}) check(nonneg(v), w, "times and bandwidths must be finite and >= 0");
  }
}

ProfileStore::ProfileStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProfileStore::ProfileStore(ProfileStore&&) noexcept = default;
ProfileStore& ProfileStore::operator=(ProfileStore&&) noexcept = default;
ProfileStore::~ProfileStore() = default;

ProfileStore ProfileStore::open(const std::string& path) {
  Connection conn = Connection::open(path);
  conn.exec("PRAGMA busy_timeout = 5000");
  conn.exec("PRAGMA foreign_keys = ON");
  conn.exec("PRAGMA synchronous = NORMAL");
  schema::check_ours(conn);  // before WAL mode rewrites the header
  if (!conn.in_memory()) conn.exec("PRAGMA journal_mode = WAL");
  schema::migrate(conn, Store::kSchemaVersion);
  return ProfileStore(std::make_unique<Impl>(Impl{std::move(conn)}));
}

int64_t ProfileStore::save(ProfileRun& run) {
  validate_profile_run(run);
  Connection& conn = impl_->conn;
  if (run.created_at.empty()) run.created_at = now_utc_iso8601();
  nlohmann::json versions(run.versions);
  Transaction tx(conn);
  Statement ins(conn,
                "INSERT INTO profile_runs(created_at, kind, model, device, device_type, host, timer,"
                " threads, repetitions, versions, mem_gbps, cache_flush_bytes, mem_gbps_streams)"
                " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)");
  ins.bind(1, run.created_at).bind(2, run.kind).bind(3, run.model).bind(4, run.device)
      .bind(5, run.device_type).bind(6, run.host).bind(7, run.timer).bind(8, run.threads)
      .bind(9, run.repetitions).bind(10, versions.dump()).bind(11, run.mem_gbps)
      .bind(12, run.cache_flush_bytes).bind(13, nlohmann::json(run.mem_gbps_streams).dump());
  ins.execute();
  const int64_t id = conn.last_insert_rowid();
  Statement lay(conn,
                "INSERT INTO layer_profiles(run_id, layer_index, layer_name, shape_key, tp_degree,"
                " micro_batch, param_bytes, activation_bytes, flops, fwd_ms, bwd_ms, fwd_spread_ms,"
                " bwd_spread_ms, repetitions) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)");
  for (const LayerProfile& l : run.layers) {
    lay.bind(1, id).bind(2, l.layer_index).bind(3, l.layer_name).bind(4, l.shape_key)
        .bind(5, l.tp_degree).bind(6, l.micro_batch).bind(7, l.param_bytes)
        .bind(8, l.activation_bytes).bind(9, l.flops).bind(10, l.fwd_ms).bind(11, l.bwd_ms)
        .bind(12, l.fwd_spread_ms).bind(13, l.bwd_spread_ms).bind(14, l.repetitions);
    lay.execute();
  }
  Statement com(conn,
                "INSERT INTO comm_profiles(run_id, backend, collective, hosts, devices_per_host, link,"
                " bytes, time_us, algbw_gbps, busbw_gbps, repetitions)"
                " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)");
  for (const CommProfile& c : run.comms) {
    com.bind(1, id).bind(2, c.backend).bind(3, c.collective).bind(4, c.hosts)
        .bind(5, c.devices_per_host).bind(6, c.link).bind(7, c.bytes).bind(8, c.time_us)
        .bind(9, c.algbw_gbps).bind(10, c.busbw_gbps).bind(11, c.repetitions);
    com.execute();
  }
  tx.commit();
  run.id = id;
  return id;
}

std::optional<ProfileRun> ProfileStore::load(int64_t id) const {
  Connection& conn = impl_->conn;
  Transaction tx(conn, Transaction::Mode::Deferred);
  Statement q(conn,
              "SELECT created_at, kind, model, device, device_type, host, timer, threads,"
              " repetitions, versions, mem_gbps, cache_flush_bytes, mem_gbps_streams FROM profile_runs WHERE id = ?1");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  ProfileRun r;
  r.id = id;
  r.created_at = q.column_text(0);
  r.kind = q.column_text(1);
  r.model = q.column_text(2);
  r.device = q.column_text(3);
  r.device_type = q.column_text(4);
  r.host = q.column_text(5);
  r.timer = q.column_text(6);
  r.threads = static_cast<int>(q.column_int64(7));
  r.repetitions = static_cast<int>(q.column_int64(8));
  r.mem_gbps = q.column_double(10);
  r.cache_flush_bytes = q.column_int64(11);
  const auto streams = nlohmann::json::parse(q.column_text(12), nullptr, false);
  if (streams.is_array())
    for (const auto& v : streams)
      if (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0) r.mem_gbps_streams.push_back(v.get<double>());
  const auto v = nlohmann::json::parse(q.column_text(9), nullptr, false);
  if (v.is_object())
    for (const auto& [k, val] : v.items()) r.versions[k] = val.is_string() ? val.get<std::string>() : val.dump();
  Statement lq(conn,
               "SELECT layer_index, layer_name, shape_key, tp_degree, micro_batch, param_bytes,"
               " activation_bytes, flops, fwd_ms, bwd_ms, fwd_spread_ms, bwd_spread_ms, repetitions"
               " FROM layer_profiles WHERE run_id = ?1 ORDER BY rowid");
  lq.bind(1, id);
  while (lq.step()) {
    LayerProfile l;
    l.layer_index = static_cast<int>(lq.column_int64(0));
    l.layer_name = lq.column_text(1);
    l.shape_key = lq.column_text(2);
    l.tp_degree = static_cast<int>(lq.column_int64(3));
    l.micro_batch = static_cast<int>(lq.column_int64(4));
    l.param_bytes = lq.column_double(5);
    l.activation_bytes = lq.column_double(6);
    l.flops = lq.column_double(7);
    l.fwd_ms = lq.column_double(8);
    l.bwd_ms = lq.column_double(9);
    l.fwd_spread_ms = lq.column_double(10);
    l.bwd_spread_ms = lq.column_double(11);
    l.repetitions = static_cast<int>(lq.column_int64(12));
    r.layers.push_back(std::move(l));
  }
  Statement cq(conn,
               "SELECT backend, collective, hosts, devices_per_host, link, bytes, time_us,"
               " algbw_gbps, busbw_gbps, repetitions FROM comm_profiles WHERE run_id = ?1 ORDER BY rowid");
  cq.bind(1, id);
  while (cq.step()) {
    CommProfile c;
    c.backend = cq.column_text(0);
    c.collective = cq.column_text(1);
    c.hosts = static_cast<int>(cq.column_int64(2));
    c.devices_per_host = static_cast<int>(cq.column_int64(3));
    c.link = cq.column_text(4);
    c.bytes = cq.column_int64(5);
    c.time_us = cq.column_double(6);
    c.algbw_gbps = cq.column_double(7);
    c.busbw_gbps = cq.column_double(8);
    c.repetitions = static_cast<int>(cq.column_int64(9));
    r.comms.push_back(std::move(c));
  }
  tx.commit();
  return r;
}

std::vector<ProfileSummary> ProfileStore::list() const {
  Statement q(impl_->conn,
              "SELECT p.id, p.created_at, p.kind, p.model, p.device, p.device_type, p.host, p.timer,"
              " p.threads, p.repetitions,"
              " (SELECT COUNT(*) FROM layer_profiles l WHERE l.run_id = p.id) +"
              " (SELECT COUNT(*) FROM comm_profiles c WHERE c.run_id = p.id)"
              " FROM profile_runs p ORDER BY p.id DESC");
  std::vector<ProfileSummary> out;
  while (q.step()) {
    ProfileSummary s;
    s.id = q.column_int64(0);
    s.created_at = q.column_text(1);
    s.kind = q.column_text(2);
    s.model = q.column_text(3);
    s.device = q.column_text(4);
    s.device_type = q.column_text(5);
    s.host = q.column_text(6);
    s.timer = q.column_text(7);
    s.threads = static_cast<int>(q.column_int64(8));
    s.repetitions = static_cast<int>(q.column_int64(9));
    s.records = static_cast<long>(q.column_int64(10));
    out.push_back(std::move(s));
  }
  return out;
}

int64_t ProfileStore::latest_compute(const std::string& model, const std::string& device_type) const {
  Statement q(impl_->conn,
              "SELECT id FROM profile_runs WHERE kind = 'compute' AND model = ?1"
              " AND (?2 = '' OR device_type = ?2)"
              // Only a run the estimator can use: every estimate needs the
              // layers at tp 1 (a --tp 2 run hid an older usable one).
              " AND EXISTS (SELECT 1 FROM layer_profiles l WHERE l.run_id = profile_runs.id AND l.tp_degree = 1)"
              " ORDER BY id DESC LIMIT 1");
  q.bind(1, model).bind(2, device_type);
  return q.step() ? q.column_int64(0) : 0;
}

}  // namespace cellsched::db
