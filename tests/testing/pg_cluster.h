#pragma once
// PostgreSQL for the tests: throw-away clusters (tests/pg/cluster.sh) and a
// fresh schema per test.
//
// ctest starts one cluster for the store's tests (the fixture pg_cluster in
// tests/CMakeLists.txt) and names its socket directory in
// UNISCHED_TEST_PG_DIR; a test binary run by hand starts its own, stopped
// when the process exits.

#include <memory>
#include <string>

namespace unisched::testing {

class PgCluster {
 public:
  // Starts a cluster in `dir` (created) listening on a Unix socket there.
  explicit PgCluster(std::string dir, int port = 5432);
  // Stops it (fast shutdown, by PID).
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // A libpq connection string for `database` on this cluster.
  std::string Conninfo(const std::string& database = "postgres") const;
  void Stop();
  void Start();
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }

  // A streaming-replication standby of `primary` in `dir`, started; the
  // primary then commits synchronously to it (tests/pg/cluster.sh standby).
  static std::unique_ptr<PgCluster> StandbyOf(const PgCluster& primary, std::string dir, int port = 5432);
  // The standby becomes a primary (pg_ctl promote).
  void Promote();

 private:
  struct StandbyTag {};
  PgCluster(StandbyTag, const PgCluster& primary, std::string dir, int port);
  std::string dir_;
  int port_;
  bool running_ = false;
};

// The socket directory of the cluster this process's tests use: the ctest
// fixture's, or one started on first use.
std::string SharedPgDir();

// A new, empty schema on the shared cluster; returns a connection string
// whose search_path is that schema, so a store opened with it sees only its
// own tables. DropPgSchema removes it with everything in it.
std::string CreatePgSchema();
// Runs one statement as the superuser `unisched` on the shared cluster's
// database `postgres`; throws if it fails.
void PgAdmin(const std::string& sql);
void DropPgSchema(const std::string& conninfo);

}  // namespace unisched::testing
