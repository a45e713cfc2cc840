// A thin RAII layer over the SQLite C API, private to db/: a connection, a
// prepared statement and a transaction. Every failure throws db::StoreError
// with SQLite's message and the SQL that failed. sqlite3.h stays in sqlite.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "db/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace cellsched::db {

// [[noreturn]] helper: throws StoreError("<file>: <sqlite message> (in: <sql>)").
[[noreturn]] void throw_sqlite_error(sqlite3* db, std::string_view sql);

// An open database handle; closes it when destroyed. Not thread-safe: one
// Connection per thread.
// The path is the user's --db: one that cannot hold a database (a folder, a
// device, a file in a missing folder, "") is their input, an InputError named
// before SQLite turns it into "unable to open" or "disk I/O error".
// ":memory:" passes. Connection::open calls it first.
void check_db_path(const std::string& path);

class Connection {
 public:
  // Opens (creating if missing) `path`; ":memory:" opens a private in-memory
  // database. Extended result codes are on. Sets no pragmas. Reads the
  // header once: a file that is not a database is InputError.
  static Connection open(const std::string& path);

  sqlite3* get() const { return db_.get(); }
  const std::string& path() const { return path_; }
  // True for ":memory:" and temporary databases (no file, so no WAL).
  bool in_memory() const;

  // Runs one or more statements whose results, if any, are discarded.
  void exec(std::string_view sql);
  int64_t last_insert_rowid() const;

 private:
  struct Close {
    void operator()(sqlite3* db) const noexcept;
  };
  Connection(sqlite3* db, std::string path);

  std::unique_ptr<sqlite3, Close> db_;
  std::string path_;
};

// A prepared statement; parameters are 1-based, columns 0-based. The
// Connection must outlive it. Reuse it in a loop with bind..., execute().
class Statement {
 public:
  Statement(const Connection& conn, std::string_view sql);

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, double value);  // NaN is stored as NULL (SQLite's rule)
  Statement& bind(int index, std::string_view value);  // copied; embedded NULs kept
  Statement& bind_null(int index);

  // Advances: true when a row is ready to read, false when done.
  bool step();
  // Steps until done, then resets so the statement can be bound and run again.
  void execute();
  // Makes the statement runnable again; bindings are kept.
  void reset();

  int column_count() const;
  bool column_is_null(int col) const;
  int64_t column_int64(int col) const;
  double column_double(int col) const;  // 0 for NULL
  std::string column_text(int col) const;  // "" for NULL

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* stmt) const noexcept;
  };
  void check_bind(int rc) const;

  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
  std::string sql_;
};

// BEGIN on construction; ROLLBACK in the destructor unless commit() succeeded.
class Transaction {
 public:
  // Immediate takes the write lock at once (waiting up to the busy timeout),
  // so a writer never fails half-way on a lock upgrade; Deferred is for reads.
  enum class Mode { Deferred, Immediate };

  explicit Transaction(Connection& conn, Mode mode = Mode::Immediate);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Connection& conn_;
  bool done_ = false;
};

// The current time as ISO-8601 UTC with milliseconds, 2024-05-01T12:34:56.789Z
// (sorts as text): what every table's created_at holds.
std::string now_utc_iso8601();

// A REAL column that may be NULL (SQLite stores NaN as NULL): NULL reads as NaN.
double column_real(const Statement& q, int col);

}  // namespace cellsched::db
