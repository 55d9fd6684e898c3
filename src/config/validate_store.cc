// The store's and the replicas' rules (validate_store.h); docs/config.md
// lists them.

#include "config/validate_store.h"

#include <regex>
#include <string>

#include "config/validate_rules.h"

namespace unisched::config::internal {
namespace {

// A conninfo that carries its own password (keyword form "password=..." or
// a URI's "user:password@").
bool HasInlinePassword(const std::string& conninfo) {
  static const std::regex keyword(R"((^|\s)password\s*=)");
  static const std::regex uri(R"(^postgres(ql)?://[^/@]*:[^/@]*@)");
  return std::regex_search(conninfo, keyword) || std::regex_search(conninfo, uri);
}

}  // namespace

void ValidateStore(const StoreSettings& s, Errors& errors) {
  if (s.backend != "sqlite" && s.backend != "postgresql") {
    errors.Add("store.backend", "unknown value '" + s.backend + "'; expected one of: sqlite, postgresql" +
                                    DidYouMean(s.backend, {"sqlite", "postgresql"}));
  }
  const PostgresSettings& pg = s.postgresql;
  if (s.backend == "postgresql" && pg.conninfo.empty()) {
    errors.Add("store.postgresql.conninfo",
               "required with backend: postgresql: a libpq connection string, e.g. \"host=db1,db2 dbname=unisched "
               "user=unisched target_session_attrs=read-write\"");
  }
  if (s.backend != "postgresql" && (!pg.conninfo.empty() || !pg.password_file.empty() || !pg.password_env.empty())) {
    errors.Add("store.postgresql", "set, but store.backend is " + s.backend + ": set backend: postgresql to use it");
  }
  if (HasInlinePassword(pg.conninfo)) {
    errors.Add("store.postgresql.conninfo",
               "holds a password: the config is no place for it; put it in a file named by password_file (mode 0600) "
               "or an environment variable named by password_env");
  }
  if (!pg.password_file.empty() && !pg.password_env.empty()) {
    errors.Add("store.postgresql.password_env", "set together with password_file: choose one");
  }
  if (s.synchronous != "full" && s.synchronous != "normal" && s.synchronous != "off") {
    errors.Add("store.synchronous", "unknown value '" + s.synchronous + "'; expected one of: full, normal, off" +
                                        DidYouMean(s.synchronous, {"full", "normal", "off"}));
  }
  Positive(errors, "store.group_commit_max_batch", s.group_commit_max_batch);
  Positive(errors, "store.job_retention_days", s.job_retention_days);
  Positive(errors, "store.audit_retention_days", s.audit_retention_days);
  Positive(errors, "store.audit_max_rows", s.audit_max_rows);
  Positive(errors, "store.accounting_interval_seconds", s.accounting_interval_seconds);
  NonNegative(errors, "store.storage_sample_interval_seconds", s.storage_sample_interval_seconds,
              "0 samples no storage");
  NonNegative(errors, "store.reconcile_interval_seconds", s.reconcile_interval_seconds, "0 reconciles only on request");
  NonNegative(errors, "store.max_log_bytes", s.max_log_bytes, "0 keeps no output");
}

// The uid and gid ranges of executor.user_accounts: above the host's
// accounts (1000 is where Debian's adduser starts regular users, and every
// allocated id must stay clear of those), below 2^31 (some file systems and
// tools take ids as signed 32-bit), and clear of the sandboxes' uids, which
// are leased per attempt: a user's files must never belong to a sandbox.
// Replicas (docs/replicas.md) share one PostgreSQL database, and a dead
// leader's local processes cannot be adopted by another machine: jobs run
// on agent nodes only.
void ValidateReplica(const Config& config, Errors& errors) {
  const ServerSettings::Replica& r = config.server.replica;
  if (!r.enabled) return;
  if (config.store.backend != "postgresql") {
    errors.Add("server.replica",
               "replicas share one database: set store.backend: postgresql (SQLite is one machine's)");
  }
  if (!r.name.empty() && !IsPlainName(r.name, ".")) {
    errors.Add("server.replica.name",
               "invalid name '" + r.name + "'; " + std::string(kPlainNameRule) + " (dots allowed, e.g. a host name)");
  }
  if (!r.advertise_url.empty() && r.advertise_url.rfind("http://", 0) != 0 &&
      r.advertise_url.rfind("https://", 0) != 0) {
    errors.Add("server.replica.advertise_url",
               "must be an http:// or https:// URL the other replicas reach this one at, e.g. http://10.0.0.11:8642");
  }
  if (r.lease_seconds < 3 || r.lease_seconds > 300) {
    errors.Add("server.replica.lease_seconds",
               "must be from 3 to 300 (renewed every third of it); got " + std::to_string(r.lease_seconds));
  }
  if (!r.ca_file.empty() && r.ca_file.front() != '/') errors.Add("server.replica.ca_file", "must be an absolute path");
  const auto& nodes = config.cluster.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].agent) continue;
    errors.Add(JoinKey(JoinIndex("nodes", i), "agent"),
               "node '" + nodes[i].name +
                   "' runs its jobs in the daemon's machine, but with server.replica jobs run on agent nodes only "
                   "(another replica cannot adopt a dead leader's processes): set agent: true and run `unisched "
                   "agent` on it");
  }
}

}  // namespace unisched::config::internal
