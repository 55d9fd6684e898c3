// The schema migrations of the store and the code that applies them.

#include "store/migrations.h"

#include <sqlite3.h>

#include <string>

#include "store/sqlite_db.h"

namespace unisched::store {
namespace {

// Version 1: the initial schema. Times are Unix milliseconds. A job row keeps
// the columns the list filters use next to the whole job document (the API's
// job object), so a read never joins. Events and idempotency keys go with
// their job (ON DELETE CASCADE; the store turns foreign_keys on).
constexpr std::string_view kMigration1 = R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  queue TEXT NOT NULL,
  pool TEXT NOT NULL,
  state TEXT NOT NULL,
  submitted_at INTEGER NOT NULL,
  ended_at INTEGER,
  doc TEXT NOT NULL
);
CREATE INDEX jobs_state ON jobs(state);
CREATE INDEX jobs_queue ON jobs(queue);
CREATE INDEX jobs_pool ON jobs(pool);
CREATE INDEX jobs_project ON jobs(project);
CREATE INDEX jobs_user ON jobs(user);
CREATE INDEX jobs_ended_at ON jobs(ended_at);

CREATE TABLE idempotency (
  user TEXT NOT NULL,
  key TEXT NOT NULL,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  PRIMARY KEY (user, key)
);
CREATE INDEX idempotency_job ON idempotency(job_id);

CREATE TABLE job_events (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX job_events_job ON job_events(job_id);

CREATE TABLE audit (
  id INTEGER PRIMARY KEY,
  time INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  result TEXT NOT NULL
);

CREATE TABLE users (
  name TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  projects TEXT NOT NULL,  -- JSON array of strings
  queues TEXT NOT NULL,    -- JSON array of strings
  unix_user TEXT NOT NULL,
  from_config INTEGER NOT NULL
);

CREATE TABLE tokens (
  hash TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  kind TEXT NOT NULL,
  pool TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX tokens_user ON tokens(user);

CREATE TABLE node_states (
  name TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  reason TEXT NOT NULL
);
)sql";

// Version 2: decayed fairshare usage per (project, user), as of a time
// (docs/policy/fairshare.md). The controller rewrites it periodically.
constexpr std::string_view kMigration2 = R"sql(
CREATE TABLE fairshare_usage (
  project TEXT NOT NULL,
  user TEXT NOT NULL,
  usage REAL NOT NULL,
  as_of INTEGER NOT NULL,
  PRIMARY KEY (project, user)
);
)sql";

// Version 3: the accounting ledger (docs/ledger.md). Append-only: triggers
// refuse UPDATE and DELETE; `key` (unique) makes every charge idempotent, so
// a replayed or repeated report adds nothing. No foreign key to jobs: the
// ledger outlives job retention.
constexpr std::string_view kMigration3 = R"sql(
CREATE TABLE ledger (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  queue TEXT NOT NULL,
  pool TEXT NOT NULL,
  workload_kind TEXT NOT NULL,
  node TEXT NOT NULL,
  metric TEXT NOT NULL,
  detail TEXT NOT NULL,
  quantity REAL NOT NULL,
  interval_start INTEGER NOT NULL,
  interval_end INTEGER NOT NULL,
  final INTEGER NOT NULL,
  recorded_at INTEGER NOT NULL
);
CREATE INDEX ledger_job ON ledger(job_id, attempt);
CREATE INDEX ledger_end ON ledger(interval_end);
CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: add a correcting entry'); END;
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: add a correcting entry'); END;
)sql";

// Version 4: hourly rollups of the ledger, so a usage query reads one row
// per (hour, group, metric) instead of every entry (docs/ledger.md,
// "Rollups"). Kept by a trigger in the same transaction as each append, so
// the rollup can never disagree with the entries it sums; the entries that
// exist already are summed into it here. An hour is the hour of an entry's
// interval_end (Unix ms / 3,600,000), the same end a window filters on.
constexpr std::string_view kMigration4 = R"sql(
CREATE TABLE ledger_hourly (
  hour INTEGER NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  queue TEXT NOT NULL,
  pool TEXT NOT NULL,
  workload_kind TEXT NOT NULL,
  metric TEXT NOT NULL,
  quantity REAL NOT NULL,
  entries INTEGER NOT NULL,
  PRIMARY KEY (hour, user, project, queue, pool, workload_kind, metric)
) WITHOUT ROWID;
INSERT INTO ledger_hourly(hour, user, project, queue, pool, workload_kind, metric, quantity, entries)
  SELECT interval_end / 3600000, user, project, queue, pool, workload_kind, metric, SUM(quantity), COUNT(*)
  FROM ledger GROUP BY 1, 2, 3, 4, 5, 6, 7;
CREATE TRIGGER ledger_rollup AFTER INSERT ON ledger BEGIN
  INSERT INTO ledger_hourly(hour, user, project, queue, pool, workload_kind, metric, quantity, entries)
  VALUES(NEW.interval_end / 3600000, NEW.user, NEW.project, NEW.queue, NEW.pool, NEW.workload_kind, NEW.metric,
         NEW.quantity, 1)
  ON CONFLICT(hour, user, project, queue, pool, workload_kind, metric)
  DO UPDATE SET quantity = quantity + excluded.quantity, entries = entries + 1;
END;
)sql";

// Version 5: events of the cluster that belong to no job (nodes, alerts),
// shown with the jobs' events by GET /v1/events (docs/events.md).
constexpr std::string_view kMigration5 = R"sql(
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL,
  object TEXT NOT NULL,
  severity TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX events_time ON events(time);
CREATE INDEX job_events_time ON job_events(time);
)sql";

// Version 6: alerts (docs/alerts.md), one row per firing, resolved in place.
constexpr std::string_view kMigration6 = R"sql(
CREATE TABLE alerts (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  object TEXT NOT NULL,
  severity TEXT NOT NULL,
  message TEXT NOT NULL,
  fired_at INTEGER NOT NULL,
  resolved_at INTEGER
);
CREATE INDEX alerts_open ON alerts(resolved_at);
)sql";

// Version 7: sandboxes and images (docs/sandboxes.md). A sandbox row holds
// the sandbox as JSON; image versions are kept forever, and image_current
// is each image's stack of current versions, so a rollback pops its top.
constexpr std::string_view kMigration7 = R"sql(
CREATE TABLE sandboxes (
  id INTEGER PRIMARY KEY,
  state TEXT NOT NULL,
  record TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  ended_at INTEGER
);
CREATE INDEX sandboxes_active ON sandboxes(id) WHERE ended_at IS NULL;
CREATE TABLE images (
  name TEXT NOT NULL,
  version TEXT NOT NULL,
  spec TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE TABLE image_current (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  version TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX image_current_name ON image_current(name, seq);
)sql";

// Version 8: job ids come from the database in blocks (job_id_pool.h).
// next_id is the first id no block has reserved: after the highest id ever
// used (sqlite_sequence keeps it even when retention deleted that job; it
// exists since version 7's AUTOINCREMENT table).
constexpr std::string_view kMigration8 = R"sql(
CREATE TABLE id_blocks (
  name TEXT PRIMARY KEY,
  next_id INTEGER NOT NULL
);
INSERT INTO id_blocks(name, next_id) SELECT 'jobs', max(
  coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0),
  coalesce((SELECT max(id) FROM jobs), 0)) + 1;
)sql";

// Version 9: tokens that expire, are revoked, carry their own address
// ranges and rate, and remember their last use (docs/access.md). `id` names
// a token in lists without revealing it: "tok_" and 16 hex digits of its hash.
constexpr std::string_view kMigration9 = R"sql(
ALTER TABLE tokens ADD COLUMN id TEXT;
UPDATE tokens SET id = 'tok_' || substr(hash, 1, 16);
CREATE UNIQUE INDEX tokens_id ON tokens(id);
ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE tokens ADD COLUMN revoked_at INTEGER;
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
ALTER TABLE tokens ADD COLUMN allow_from TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tokens ADD COLUMN requests_per_second REAL NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN burst REAL NOT NULL DEFAULT 0;
)sql";

// Version 10: the Unix ids allocated to users and projects
// (executor.user_accounts, docs/accounts.md): once each, never reused.
constexpr std::string_view kMigration10 = R"sql(
CREATE TABLE unix_ids (
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  id INTEGER NOT NULL,
  PRIMARY KEY (kind, name),
  UNIQUE (kind, id)
);
)sql";

// Version 11: the leader lease of daemon replicas sharing one database
// (unisched/store/lease.h, docs/replicas.md): one row, never held yet.
constexpr std::string_view kMigration11 = R"sql(
CREATE TABLE leader_lease (
  name TEXT PRIMARY KEY,
  epoch INTEGER NOT NULL,
  holder TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
INSERT INTO leader_lease(name, epoch, holder, expires_at) VALUES('leader', 0, '', 0);
)sql";

// Version 12: the replicas' directory, the cluster-wide secrets, and the
// database session the lease's holder renewed it from (lease.h:
// AnnounceReplica, ClusterSecret; docs/replicas.md).
constexpr std::string_view kMigration12 = R"sql(
CREATE TABLE replicas (
  name TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  announced_at INTEGER NOT NULL
);
CREATE TABLE cluster_secrets (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
ALTER TABLE leader_lease ADD COLUMN holder_session TEXT NOT NULL DEFAULT '';
)sql";

// Version 13: config versions (unisched/store/config_versions.h,
// docs/config-versions.md): every accepted config text, and the head row
// saying which version runs, which a canary queue tries, which ran before.
constexpr std::string_view kMigration13 = R"sql(
CREATE TABLE config_versions (
  version INTEGER PRIMARY KEY,
  digest TEXT NOT NULL,
  text TEXT NOT NULL,
  author TEXT NOT NULL,
  comment TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE config_head (
  name TEXT PRIMARY KEY,
  current_version INTEGER NOT NULL,
  previous_version INTEGER NOT NULL,
  canary_version INTEGER NOT NULL,
  canary_queue TEXT NOT NULL,
  changes INTEGER NOT NULL,
  changed_at INTEGER NOT NULL,
  changed_by TEXT NOT NULL
);
INSERT INTO config_head VALUES('cluster', 0, 0, 0, '', 0, 0, '');
)sql";

// Version 14: performance baseline runs (unisched/store/baselines.h,
// docs/baseline.md), each with the pools it measured, for comparing a run
// with the previous one of the same pools.
constexpr std::string_view kMigration14 = R"sql(
CREATE TABLE baselines (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  pools TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  record TEXT NOT NULL
);
CREATE INDEX baselines_pools ON baselines(pools, id);
)sql";

// Version 15: the steps of jobs' attempts (`unisched step`,
// unisched/store/jobs.h StepRecord), stored when they start and when they
// end, so a 201 for a step means it is committed and a restart numbers on.
constexpr std::string_view kMigration15 = R"sql(
CREATE TABLE job_steps (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  doc TEXT NOT NULL,
  PRIMARY KEY (job_id, step)
);
)sql";

// Version 16: secrets (unisched/store/secrets.h, docs/secrets.md), their
// values sealed with a key that is not in the database.
constexpr std::string_view kMigration16 = R"sql(
CREATE TABLE secrets (
  project TEXT NOT NULL,
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  sealed TEXT NOT NULL,
  description TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (project, name)
);
)sql";

// Version 17: storage tiers (docs/data.md, "Storage tiers"). Entries gain
// `tier` (storage_gb_hours' hot, cold, scratch, ...; "" otherwise and for
// what was charged before), and the hourly rollup keeps it as a group of
// its own, so GET /v1/usage?group_by=tier reads the rollup like any other
// key. SQLite cannot change a table's primary key: the rollup is made
// anew with the rows it had (each of tier ""), and its trigger with it.
constexpr std::string_view kMigration17 = R"sql(
ALTER TABLE ledger ADD COLUMN tier TEXT NOT NULL DEFAULT '';
DROP TRIGGER ledger_rollup;
CREATE TABLE ledger_hourly_17 (
  hour INTEGER NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  queue TEXT NOT NULL,
  pool TEXT NOT NULL,
  workload_kind TEXT NOT NULL,
  tier TEXT NOT NULL,
  metric TEXT NOT NULL,
  quantity REAL NOT NULL,
  entries INTEGER NOT NULL,
  PRIMARY KEY (hour, user, project, queue, pool, workload_kind, tier, metric)
) WITHOUT ROWID;
INSERT INTO ledger_hourly_17(hour, user, project, queue, pool, workload_kind, tier, metric, quantity, entries)
  SELECT hour, user, project, queue, pool, workload_kind, '', metric, quantity, entries FROM ledger_hourly;
DROP TABLE ledger_hourly;
ALTER TABLE ledger_hourly_17 RENAME TO ledger_hourly;
CREATE TRIGGER ledger_rollup AFTER INSERT ON ledger BEGIN
  INSERT INTO ledger_hourly(hour, user, project, queue, pool, workload_kind, tier, metric, quantity, entries)
  VALUES(NEW.interval_end / 3600000, NEW.user, NEW.project, NEW.queue, NEW.pool, NEW.workload_kind, NEW.tier,
         NEW.metric, NEW.quantity, 1)
  ON CONFLICT(hour, user, project, queue, pool, workload_kind, tier, metric)
  DO UPDATE SET quantity = quantity + excluded.quantity, entries = entries + 1;
END;
)sql";

// Version 18: workflows (unisched/store/workflows.h, docs/workflows.md):
// one row per workflow, its spec and task instances in one document.
constexpr std::string_view kMigration18 = R"sql(
CREATE TABLE workflows (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  user_name TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL,
  document TEXT NOT NULL
);
CREATE INDEX workflows_not_over ON workflows(ended_at, id);
)sql";

// Version 19: since when each idle node has run nothing (NodeWrites::
// SetNodeIdleSince), so the capacity report's idle times outlive a restart.
constexpr std::string_view kMigration19 = R"sql(
CREATE TABLE node_idle (
  name TEXT PRIMARY KEY,
  since INTEGER NOT NULL
);
)sql";

Status Rollback(sqlite3* db, Error error) {
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return error;
}

Status Exec(sqlite3* db, const std::string& sql, const std::string& what) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string text = what + ": " + (message != nullptr ? message : sqlite3_errstr(rc));
  sqlite3_free(message);
  return SqliteError(nullptr, rc, text);
}

}  // namespace

const std::vector<std::string_view>& Migrations() {
  static const std::vector<std::string_view> migrations = {
      kMigration1,  kMigration2,  kMigration3,  kMigration4,  kMigration5,  kMigration6,  kMigration7,
      kMigration8,  kMigration9,  kMigration10, kMigration11, kMigration12, kMigration13, kMigration14,
      kMigration15, kMigration16, kMigration17, kMigration18, kMigration19};
  return migrations;
}

Result<int> SchemaVersionOf(sqlite3* db) {
  Status created = Exec(db,
                        "CREATE TABLE IF NOT EXISTS schema_migrations ("
                        "version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                        "creating schema_migrations");
  if (!created) return created.error();
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "reading the schema version");
  rc = sqlite3_step(stmt);
  const int version = rc == SQLITE_ROW ? sqlite3_column_int(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) return SqliteError(db, rc, "reading the schema version");
  return version;
}

Result<int> ApplyMigrations(sqlite3* db, const std::vector<std::string_view>& migrations, Timestamp now) {
  auto current = SchemaVersionOf(db);
  if (!current.ok()) return current.error();
  int version = *current;
  const int known = static_cast<int>(migrations.size());
  if (version > known) {
    return Error::Internal("store: the database has schema version " + std::to_string(version) +
                           " but this unisched knows only up to " + std::to_string(known) +
                           "; run the newer unisched that wrote it");
  }
  for (int next = version + 1; next <= known; ++next) {
    const std::string label = "schema migration " + std::to_string(next);
    // IMMEDIATE: two processes opening the same file never both migrate.
    if (Status s = Exec(db, "BEGIN IMMEDIATE", label); !s) return s.error();
    // Another opener may have applied it while we waited for the lock.
    sqlite3_stmt* check = nullptr;
    int rc = sqlite3_prepare_v2(db, "SELECT 1 FROM schema_migrations WHERE version = ?", -1, &check, nullptr);
    if (rc != SQLITE_OK) return Rollback(db, SqliteError(db, rc, label)).error();
    sqlite3_bind_int(check, 1, next);
    rc = sqlite3_step(check);
    sqlite3_finalize(check);
    if (rc == SQLITE_ROW) {
      if (Status s = Exec(db, "COMMIT", label); !s) return Rollback(db, s.error()).error();
      version = next;
      continue;
    }
    if (rc != SQLITE_DONE) return Rollback(db, SqliteError(db, rc, label)).error();

    if (Status s = Exec(db, std::string(migrations[next - 1]), label); !s) return Rollback(db, s.error()).error();
    const std::string record = "INSERT INTO schema_migrations(version, applied_at) VALUES(" + std::to_string(next) +
                               ", " + std::to_string(ToUnixMillis(now)) + ")";
    if (Status s = Exec(db, record, label); !s) return Rollback(db, s.error()).error();
    if (Status s = Exec(db, "COMMIT", label); !s) return Rollback(db, s.error()).error();
    version = next;
  }
  return version;
}

}  // namespace unisched::store
