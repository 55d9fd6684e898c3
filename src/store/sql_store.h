#pragma once
// The engine both SQL stores share (sql_store.cc), and what opening one
// needs from it. Internal to src/store.

#include <functional>
#include <memory>

#include "store/sql.h"
#include "unisched/store/store.h"

namespace unisched::store {

// Opens one more connection for the readers' pool.
using ConnectionFactory = std::function<Result<std::unique_ptr<Connection>>()>;

// Moves the database's first unreserved job id up by `count` on `c` (inside
// the caller's transaction, or committing at once outside one); returns the
// first id of the block reserved.
Result<model::JobId> ReserveIdBlock(Connection& c, int64_t count);

// A Store over an opened and migrated database: `writer` becomes the writer
// thread's connection, readers come from `readers`; `first_id` starts the
// first block of job ids (reserved with ReserveIdBlock by the opener).
// `lease_connection` opens the writable connection the leader lease uses
// (lease.h), apart from the writer so a backlog of writes cannot delay a
// renewal; opened at the first lease call.
std::unique_ptr<Store> MakeSqlStore(const StoreOptions& options, std::unique_ptr<Connection> writer,
                                    ConnectionFactory readers, ConnectionFactory lease_connection, int schema_version,
                                    model::JobId first_id);

// The two openers (sqlite_store.cc, pg_store.cc).
Result<std::unique_ptr<Store>> OpenSqliteStore(const StoreOptions& options);
Result<std::unique_ptr<Store>> OpenPostgresStore(const StoreOptions& options);

}  // namespace unisched::store
