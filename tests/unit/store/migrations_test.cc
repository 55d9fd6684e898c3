// Tests of the schema migrations, on raw SQLite files and through Store::Open.

#include "store/migrations.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

using testing::Options;
using testing::TempDir;

// A raw connection for looking at (or preparing) a database file.
class RawDb {
 public:
  explicit RawDb(const std::string& path) { EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK); }
  ~RawDb() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }
  std::string Text(const std::string& sql) const {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

const Timestamp kNow = FromUnixMillis(1'700'000'000'000);

TEST(MigrationsTest, FreshDatabaseGetsEveryVersion) {
  TempDir dir;
  RawDb db(dir.File("a.db"));
  auto version = ApplyMigrations(db.get(), Migrations(), kNow);
  ASSERT_TRUE(version.ok()) << version.error().message;
  EXPECT_EQ(*version, static_cast<int>(Migrations().size()));
  EXPECT_EQ(db.Text("SELECT COUNT(*) FROM schema_migrations"), std::to_string(Migrations().size()));
  EXPECT_EQ(db.Text("SELECT applied_at FROM schema_migrations WHERE version = 1"), "1700000000000");
}

TEST(MigrationsTest, ExistingDatabaseGetsOnlyTheMissingOnes) {
  TempDir dir;
  RawDb db(dir.File("a.db"));
  // Neither script is idempotent: running one twice would fail.
  const std::vector<std::string_view> v1 = {"CREATE TABLE a(x INTEGER)"};
  const std::vector<std::string_view> v2 = {"CREATE TABLE a(x INTEGER)", "CREATE TABLE b(y INTEGER)"};
  ASSERT_EQ(*ApplyMigrations(db.get(), v1, kNow), 1);
  auto again = ApplyMigrations(db.get(), v1, kNow);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, 1);
  auto upgraded = ApplyMigrations(db.get(), v2, FromUnixMillis(1'700'000'099'000));
  ASSERT_TRUE(upgraded.ok()) << upgraded.error().message;
  EXPECT_EQ(*upgraded, 2);
  EXPECT_EQ(db.Text("SELECT applied_at FROM schema_migrations WHERE version = 1"), "1700000000000");
  EXPECT_EQ(db.Text("SELECT applied_at FROM schema_migrations WHERE version = 2"), "1700000099000");
  EXPECT_EQ(db.Text("SELECT COUNT(*) FROM sqlite_master WHERE name = 'b'"), "1");
}

TEST(MigrationsTest, FailingMigrationLeavesNothingBehind) {
  TempDir dir;
  RawDb db(dir.File("a.db"));
  const std::vector<std::string_view> scripts = {"CREATE TABLE a(x INTEGER)",
                                                 "CREATE TABLE b(y INTEGER); CREATE TABLE broken("};
  auto version = ApplyMigrations(db.get(), scripts, kNow);
  EXPECT_FALSE(version.ok());
  EXPECT_EQ(*SchemaVersionOf(db.get()), 1);
  EXPECT_EQ(db.Text("SELECT COUNT(*) FROM sqlite_master WHERE name = 'b'"), "0");
  EXPECT_EQ(sqlite3_get_autocommit(db.get()), 1);  // no transaction left open
}

TEST(MigrationsTest, DatabaseNewerThanTheBinaryIsRefused) {
  TempDir dir;
  RawDb db(dir.File("a.db"));
  const std::vector<std::string_view> two = {"CREATE TABLE a(x)", "CREATE TABLE b(y)"};
  ASSERT_EQ(*ApplyMigrations(db.get(), two, kNow), 2);
  auto older = ApplyMigrations(db.get(), {two[0]}, kNow);
  ASSERT_FALSE(older.ok());
  EXPECT_NE(older.error().message.find("schema version 2"), std::string::npos) << older.error().message;
}

// Migration 4 sums the entries written before it into the hourly rollup,
// and from then on every append adds to it.
TEST(MigrationsTest, LedgerRollupIncludesEntriesWrittenBeforeIt) {
  TempDir dir;
  RawDb db(dir.File("a.db"));
  const std::vector<std::string_view> up_to_3(Migrations().begin(), Migrations().begin() + 3);
  ASSERT_EQ(*ApplyMigrations(db.get(), up_to_3, kNow), 3);
  const std::string insert =
      "INSERT INTO ledger(key, job_id, attempt, user, project, queue, pool, workload_kind, node, metric, detail, "
      "quantity, interval_start, interval_end, final, recorded_at) VALUES";
  ASSERT_EQ(sqlite3_exec(db.get(),
                         (insert + "('a', 1, 1, 'u', 'p', 'q', 'pool', 'hpc', 'n', 'm', '', 2.5, 0, 3600000, 0, 0),"
                                   "('b', 2, 1, 'u', 'p', 'q', 'pool', 'hpc', 'n', 'm', '', 1.5, 0, 3600001, 0, 0)")
                             .c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_EQ(*ApplyMigrations(db.get(), Migrations(), kNow), static_cast<int>(Migrations().size()));
  EXPECT_EQ(db.Text("SELECT quantity || '/' || entries FROM ledger_hourly WHERE hour = 1"), "4.0/2");
  ASSERT_EQ(
      sqlite3_exec(db.get(),
                   (insert + "('c', 3, 1, 'u', 'p', 'q', 'pool', 'hpc', 'n', 'm', '', 6, 0, 7199999, 0, 0)").c_str(),
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  EXPECT_EQ(db.Text("SELECT quantity || '/' || entries FROM ledger_hourly WHERE hour = 1"), "10.0/3");
  // A refused duplicate key adds nothing to the rollup either.
  sqlite3_exec(db.get(),
               (insert + "('c', 3, 1, 'u', 'p', 'q', 'pool', 'hpc', 'n', 'm', '', 6, 0, 7199999, 0, 0) "
                         "ON CONFLICT(key) DO NOTHING")
                   .c_str(),
               nullptr, nullptr, nullptr);
  EXPECT_EQ(db.Text("SELECT quantity || '/' || entries FROM ledger_hourly WHERE hour = 1"), "10.0/3");
}

// Migration 17 keeps the rollup's rows (tier "") and from then on rolls up
// each tier of storage apart; the ledger stays append-only.
TEST(MigrationsTest, StorageTiersKeepTheRollupAndGroupByTierFromThenOn) {
  TempDir dir;
  RawDb db(dir.File("a.db"));
  const std::vector<std::string_view> up_to_16(Migrations().begin(), Migrations().begin() + 16);
  ASSERT_EQ(*ApplyMigrations(db.get(), up_to_16, kNow), 16);
  const std::string columns =
      "INSERT INTO ledger(key, job_id, attempt, user, project, queue, pool, workload_kind, node, metric, detail, "
      "quantity, interval_start, interval_end, final, recorded_at";
  ASSERT_EQ(sqlite3_exec(db.get(),
                         (columns + ") VALUES('a', 0, 0, '', 'p', '', '', '', '', 'storage_gb_hours', 'shared:home', "
                                    "2.5, 0, 3600000, 0, 0)")
                             .c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_EQ(*ApplyMigrations(db.get(), Migrations(), kNow), static_cast<int>(Migrations().size()));
  EXPECT_EQ(db.Text("SELECT tier || '=' || quantity FROM ledger_hourly WHERE hour = 1"), "=2.5");
  for (const std::string row :
       {"('b', 0, 0, '', 'p', '', '', '', '', 'storage_gb_hours', 'x', 1, 0, 3600001, 0, 0, 'cold')",
        "('c', 0, 0, '', 'p', '', '', '', '', 'storage_gb_hours', 'y', 2, 0, 3600002, 0, 0, 'cold')",
        "('d', 0, 0, '', 'p', '', '', '', '', 'storage_gb_hours', 'z', 4, 0, 3600003, 0, 0, 'hot')"}) {
    ASSERT_EQ(sqlite3_exec(db.get(), (columns + ", tier) VALUES" + row).c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  }
  EXPECT_EQ(db.Text("SELECT group_concat(tier || '=' || quantity || '/' || entries, ' ') FROM "
                    "(SELECT * FROM ledger_hourly WHERE hour = 1 ORDER BY tier)"),
            "=2.5/1 cold=3.0/2 hot=4.0/1");
  EXPECT_NE(sqlite3_exec(db.get(), "UPDATE ledger SET tier = 'hot' WHERE key = 'a'", nullptr, nullptr, nullptr),
            SQLITE_OK);
}

TEST(StoreOpenTest, CreatesAFileOnlyTheOwnerCanReadInWalMode) {
  TempDir dir;
  const std::string path = dir.File("unisched.db");
  {
    auto store = Store::Open(Options(path));
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_EQ((*store)->SchemaVersion(), static_cast<int>(Migrations().size()));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    // While the store is open the WAL files exist, with the same mode.
    ASSERT_EQ(::stat((path + "-wal").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  RawDb db(path);
  EXPECT_EQ(db.Text("PRAGMA journal_mode"), "wal");  // persistent in the file
  EXPECT_EQ(db.Text("SELECT COUNT(*) FROM schema_migrations"), std::to_string(Migrations().size()));
}

TEST(StoreOpenTest, ReopeningAppliesNothingNew) {
  TempDir dir;
  const std::string path = dir.File("unisched.db");
  ASSERT_TRUE(Store::Open(Options(path)).ok());
  std::string applied_at;
  {
    RawDb db(path);
    applied_at = db.Text("SELECT applied_at FROM schema_migrations WHERE version = 1");
  }
  auto again = Store::Open(Options(path));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ((*again)->SchemaVersion(), static_cast<int>(Migrations().size()));
  RawDb db(path);
  EXPECT_EQ(db.Text("SELECT COUNT(*) FROM schema_migrations"), std::to_string(Migrations().size()));
  EXPECT_EQ(db.Text("SELECT applied_at FROM schema_migrations WHERE version = 1"), applied_at);
}

TEST(StoreOpenTest, TightensTheModeOfAnExistingFile) {
  TempDir dir;
  const std::string path = dir.File("unisched.db");
  ASSERT_TRUE(Store::Open(Options(path)).ok());
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_TRUE(Store::Open(Options(path)).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(StoreOpenTest, Options) {
  TempDir dir;
  struct Case {
    std::string synchronous;
    bool ok;
  };
  for (const Case& c : std::vector<Case>{
           {"full", true}, {"normal", true}, {"off", true}, {"FULL", true}, {"extra", false}, {"", false}}) {
    auto store = Store::Open(Options(dir.File("s.db"), c.synchronous));
    EXPECT_EQ(store.ok(), c.ok) << "synchronous=" << c.synchronous;
  }
  EXPECT_FALSE(Store::Open(Options("")).ok());
  auto missing_dir = Store::Open(Options(dir.File("no/such/dir/s.db")));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.error().kind, ErrorKind::kUnavailable);
}

}  // namespace
}  // namespace unisched::store
