#include "db/sqlite.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <utility>

#include "core/error.h"

namespace cellsched::db {

namespace {

// Long SQL (a migration) is cut in error messages; the start names it.
std::string sql_excerpt(std::string_view sql) {
  constexpr std::size_t kMax = 160;
  while (!sql.empty() && (sql.front() == ' ' || sql.front() == '\n')) sql.remove_prefix(1);
  if (sql.size() <= kMax) return std::string(sql);
  return std::string(sql.substr(0, kMax)) + "...";
}

std::string db_label(sqlite3* db) {
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  return (file && *file) ? file : ":memory:";
}

std::string error_message(sqlite3* db, std::string_view sql) {
  std::string msg = db_label(db) + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
  if (!sql.empty()) msg += " (in: " + sql_excerpt(sql) + ")";
  return msg;
}

}  // namespace

void throw_sqlite_error(sqlite3* db, std::string_view sql) {
  throw StoreError(error_message(db, sql), db ? (sqlite3_extended_errcode(db) & 0xff) : SQLITE_NOMEM);
}

bool StoreError::damaged() const { return code_ == SQLITE_CORRUPT || code_ == SQLITE_NOTADB; }

// ---- Connection ----

void Connection::Close::operator()(sqlite3* db) const noexcept {
  // Statements are finalized before their connection (RAII order), so a plain
  // close succeeds; close_v2 is the safety net if one is still alive.
  sqlite3_close_v2(db);
}

Connection::Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

void check_db_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (path == ":memory:") return;
  if (path.empty()) throw InputError("the database path is empty (give --db FILE)");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw InputError(path + ": is a folder, not an SQLite database file");
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw InputError(path + ": not a regular file (an SQLite database is a plain file)");
  if (!fs::exists(st)) {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec))
      throw InputError(path + ": folder " + parent.string() + " does not exist");
  }
}

Connection Connection::open(const std::string& path) {
  check_db_path(path);
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  Connection conn(raw, path);  // owns raw even on failure
  if (rc != SQLITE_OK) {
    // The path was checked above, so what is left is the user's too (permissions).
    throw InputError(path + ": cannot open database: " +
                     (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(raw, 1);
  // Opening reads nothing; the first read of the header is where a file that
  // holds something else shows. That is the caller's input, not a store fault.
  sqlite3_busy_timeout(raw, 5000);
  if (sqlite3_exec(raw, "PRAGMA schema_version", nullptr, nullptr, nullptr) != SQLITE_OK) {
    if ((sqlite3_errcode(raw) & 0xff) == SQLITE_NOTADB)
      throw InputError(path + ": not an SQLite database (the file holds something else; give another --db)");
    throw_sqlite_error(raw, "PRAGMA schema_version");
  }
  return conn;
}

bool Connection::in_memory() const {
  const char* file = sqlite3_db_filename(db_.get(), "main");
  return file == nullptr || *file == '\0';
}

void Connection::exec(std::string_view sql) {
  std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  if (sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw_sqlite_error(db_.get(), sql);
  }
}

int64_t Connection::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

// ---- Statement ----

void Statement::Finalize::operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }

Statement::Statement(const Connection& conn, std::string_view sql) : db_(conn.get()), sql_(sql) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql_.data(), static_cast<int>(sql_.size()), &raw, &tail);
  stmt_.reset(raw);
  if (rc != SQLITE_OK) throw_sqlite_error(db_, sql_);
  if (!stmt_) throw StoreError(db_label(db_) + ": empty SQL statement");
}

void Statement::check_bind(int rc) const {
  if (rc != SQLITE_OK) throw_sqlite_error(db_, sql_);
}

Statement& Statement::bind(int index, int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_.get(), index, value));
  return *this;
}

Statement& Statement::bind(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_.get(), index, value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  // An empty view may carry a null data(); SQLite would then bind NULL.
  const char* data = value.data() ? value.data() : "";
  check_bind(sqlite3_bind_text64(stmt_.get(), index, data, value.size(), SQLITE_TRANSIENT,
                                 SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind_null(int index) {
  check_bind(sqlite3_bind_null(stmt_.get(), index));
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string msg = error_message(db_, sql_);  // before reset, while errmsg is ours
  sqlite3_reset(stmt_.get());                 // leave the statement reusable
  throw StoreError(msg, rc & 0xff);
}

void Statement::execute() {
  while (step()) {
  }
  reset();
}

void Statement::reset() { sqlite3_reset(stmt_.get()); }

int Statement::column_count() const { return sqlite3_column_count(stmt_.get()); }

bool Statement::column_is_null(int col) const {
  return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL;
}

int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(stmt_.get(), col); }

double Statement::column_double(int col) const { return sqlite3_column_double(stmt_.get(), col); }

std::string Statement::column_text(int col) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_.get(), col));
  if (!text) return {};
  return std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt_.get(), col)));
}

// ---- Transaction ----

Transaction::Transaction(Connection& conn, Mode mode) : conn_(conn) {
  conn_.exec(mode == Mode::Immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
}

Transaction::~Transaction() {
  // Some errors (SQLITE_FULL, IOERR, ...) already rolled back on their own;
  // ROLLBACK then would only fail, so check first. Errors here are dropped:
  // a destructor has nobody to report to, and SQLite undoes an unfinished
  // transaction on close or on the next open anyway.
  if (!done_ && !sqlite3_get_autocommit(conn_.get())) {
    sqlite3_exec(conn_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  conn_.exec("COMMIT");
  done_ = true;
}

std::string now_utc_iso8601() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

double column_real(const Statement& q, int col) {
  return q.column_is_null(col) ? std::numeric_limits<double>::quiet_NaN() : q.column_double(col);
}

}  // namespace cellsched::db
