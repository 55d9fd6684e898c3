// The leader lease, the replicas' directory and the cluster secrets in SQL
// (sql_lease.h), on the lease's own connection.

#include "store/sql_lease.h"

namespace unisched::store::sql {

Result<LeaseState> AcquireOrRenewLease(Connection& conn, const std::string& replica, std::chrono::milliseconds ttl) {
  const std::string now = conn.NowMillis();
  // Renewed by its holder (the same epoch), or taken (the next epoch)
  // when it lapsed or when the database session its holder renewed it
  // from has ended: a holder killed with -9, or whose machine died, is
  // replaced at once instead of after the lease (PostgreSQL notices the
  // closed socket at once, a vanished machine through TCP keepalive). A
  // holder that is alive but paused keeps its session: the lease then
  // lapses. One statement, so two replicas racing for it cannot both
  // take it: the database serializes the updates of the row, and the
  // second finds it held again.
  auto take = conn.Prepare(
      "UPDATE leader_lease SET epoch = CASE WHEN holder = ?1 THEN epoch ELSE epoch + 1 END, "
      "holder = ?1, expires_at = " +
      now + " + ?2, holder_session = " + conn.ThisSessionSql() +
      " WHERE name = 'leader' AND (holder = ?1 OR expires_at <= " + now + " OR " +
      conn.SessionEndedSql("holder_session") + ")");
  if (!take.ok()) return take.error();
  take->Bind(1, replica).Bind(2, static_cast<int64_t>(ttl.count()));
  if (Status s = take->Run(); !s) return s.error();
  auto read = conn.Prepare("SELECT epoch, holder, expires_at - " + now + " FROM leader_lease WHERE name = 'leader'");
  if (!read.ok()) return read.error();
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::Internal("store: leader_lease has no row");
  LeaseState state;
  state.epoch = read->Int(0);
  state.holder = read->Text(1);
  state.expires_in_ms = read->Int(2);
  state.ours = state.holder == replica && state.expires_in_ms > 0;
  return state;
}

Status ReleaseLease(Connection& c, const std::string& replica) {
  auto release = c.Prepare("UPDATE leader_lease SET expires_at = 0 WHERE name = 'leader' AND holder = ?");
  if (!release.ok()) return release.error();
  release->Bind(1, replica);
  return release->Run();
}

Status AnnounceReplica(Connection& c, const std::string& replica, const std::string& url) {
  auto upsert = c.Prepare("INSERT INTO replicas(name, url, announced_at) VALUES(?1, ?2, " + c.NowMillis() +
                          ") ON CONFLICT(name) DO UPDATE SET url = excluded.url, announced_at = "
                          "excluded.announced_at");
  if (!upsert.ok()) return upsert.error();
  upsert->Bind(1, replica).Bind(2, url);
  return upsert->Run();
}

Result<std::string> ReplicaUrl(Connection& c, const std::string& replica) {
  auto read = c.Prepare("SELECT url FROM replicas WHERE name = ?");
  if (!read.ok()) return read.error();
  read->Bind(1, replica);
  auto row = read->Step();
  if (!row.ok()) return row.error();
  return *row ? read->Text(0) : std::string();
}

Result<std::string> ClusterSecret(Connection& c, const std::string& name, const std::string& proposed) {
  // Two replicas proposing at once: the database keeps the first insert,
  // and both read it back.
  auto insert = c.Prepare("INSERT INTO cluster_secrets(name, value) VALUES(?1, ?2) ON CONFLICT(name) DO NOTHING");
  if (!insert.ok()) return insert.error();
  insert->Bind(1, name).Bind(2, proposed);
  if (Status s = insert->Run(); !s) return s.error();
  auto read = c.Prepare("SELECT value FROM cluster_secrets WHERE name = ?");
  if (!read.ok()) return read.error();
  read->Bind(1, name);
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::Internal("store: cluster secret " + name + " vanished");
  return read->Text(0);
}
}  // namespace unisched::store::sql
