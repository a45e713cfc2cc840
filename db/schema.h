// The versioned schema, private to db/: an ordered list of migrations, each
// taking the file from version N-1 to N in one transaction, with the version
// kept in `PRAGMA user_version`. Tests use migrate() to build old files.
#pragma once

#include "db/sqlite.h"

namespace cellsched::db::schema {

// The file's `PRAGMA user_version` (0 for a new, empty file).
int user_version(Connection& conn);

// Applies, in order, each migration after the file's version up to and
// including `target` (<= Store::kSchemaVersion), one transaction each.
// Safe against a concurrent opener: the version is re-read under the write
// lock. Throws StoreError when the file is newer than `target`, when `target`
// is unknown, or when a version-0 file already holds tables (not ours).
void migrate(Connection& conn, int target);

// Reads only: throws InputError (the user's --db, exit 2) when the file is
// newer than this build or is another application's database (tables but no
// version). Called before anything writes to it, WAL mode included.
void check_ours(Connection& conn);

}  // namespace cellsched::db::schema
