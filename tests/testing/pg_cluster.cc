#include "testing/pg_cluster.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace unisched::testing {
namespace {

std::string Script() {
  return std::string(UNISCHED_SOURCE_DIR) + "/tests/pg/cluster.sh";
}

void RunScript(const std::string& args) {
  const std::string command = Script() + " " + args;
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

// Runs one statement on the cluster's `postgres` database.
void Admin(const std::string& dir, const std::string& sql) {
  const std::string conninfo = "host=" + dir + " user=unisched dbname=postgres";
  PGconn* conn = PQconnectdb(conninfo.c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);  // "drop cascades to ..."
    PGresult* result = PQexec(conn, sql.c_str());
    if (PQresultStatus(result) != PGRES_COMMAND_OK) error = PQresultErrorMessage(result);
    PQclear(result);
  }
  PQfinish(conn);
  if (!error.empty()) throw std::runtime_error(sql + ": " + error);
}

// The schema a conninfo of CreatePgSchema uses.
std::string SchemaOf(const std::string& conninfo) {
  const auto at = conninfo.find("search_path=");
  return conninfo.substr(at + 12, conninfo.find('\'', at) - at - 12);
}

}  // namespace

PgCluster::PgCluster(std::string dir, int port) : dir_(std::move(dir)), port_(port) {
  Start();
}

PgCluster::~PgCluster() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void PgCluster::Start() {
  RunScript("start " + dir_ + " " + std::to_string(port_));
  running_ = true;
}

void PgCluster::Stop() {
  if (!running_) return;
  RunScript("stop " + dir_);
  running_ = false;
}

PgCluster::PgCluster(StandbyTag, const PgCluster& primary, std::string dir, int port)
    : dir_(std::move(dir)), port_(port) {
  RunScript("standby " + dir_ + " " + std::to_string(port_) + " " + primary.dir_ + " " + std::to_string(primary.port_));
  running_ = true;
}

std::unique_ptr<PgCluster> PgCluster::StandbyOf(const PgCluster& primary, std::string dir, int port) {
  return std::unique_ptr<PgCluster>(new PgCluster(StandbyTag{}, primary, std::move(dir), port));
}

void PgCluster::Promote() {
  RunScript("promote " + dir_);
}

std::string PgCluster::Conninfo(const std::string& database) const {
  return "host=" + dir_ + " port=" + std::to_string(port_) + " user=unisched dbname=" + database;
}

std::string SharedPgDir() {
  if (const char* dir = std::getenv("UNISCHED_TEST_PG_DIR"); dir != nullptr && *dir != '\0') return dir;
  static std::once_flag once;
  static std::unique_ptr<PgCluster> own;
  std::call_once(once, [] {
    std::string tmpl = "/tmp/unisched-pg-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    own = std::make_unique<PgCluster>(tmpl);
    std::atexit([] { own.reset(); });
  });
  return own->dir();
}

std::string CreatePgSchema() {
  static std::atomic<int> counter{0};
  const std::string dir = SharedPgDir();
  const std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
  // A schema, not a database: CREATE DATABASE checkpoints the cluster,
  // which took seconds with tests running side by side.
  Admin(dir, "CREATE SCHEMA " + name);
  return "host=" + dir + " user=unisched dbname=postgres options='-csearch_path=" + name + "'";
}

void PgAdmin(const std::string& sql) {
  Admin(SharedPgDir(), sql);
}

void DropPgSchema(const std::string& conninfo) {
  const std::string dir = conninfo.substr(5, conninfo.find(' ') - 5);
  Admin(dir, "DROP SCHEMA IF EXISTS " + SchemaOf(conninfo) + " CASCADE");
}

}  // namespace unisched::testing
