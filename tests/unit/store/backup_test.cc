// Backups around schema migrations (store/backup.h): migrate an older
// database, restore it, and open it with the older schema again.

#include "unisched/store/backup.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>

#include "store/migrations.h"
#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

using testing::Options;
using testing::TempDir;

const Timestamp kNow = FromUnixMillis(1'700'000'000'000);

// The scripts a previous unisched knew: every migration but the last.
std::vector<std::string_view> PreviousMigrations() {
  std::vector<std::string_view> previous = Migrations();
  previous.pop_back();
  return previous;
}

// Opens `path` raw, applies `migrations`, runs `sql`; the version it reached
// (or -1 with the error in `error`).
int RawApply(const std::string& path, const std::vector<std::string_view>& migrations, const std::string& sql = {},
             std::string* error = nullptr) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto version = ApplyMigrations(db, migrations, kNow);
  int result = version.ok() ? *version : -1;
  if (!version.ok() && error) *error = version.error().message;
  if (version.ok() && !sql.empty()) {
    char* message = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK) << (message ? message : "");
    sqlite3_free(message);
  }
  sqlite3_close(db);
  return result;
}

std::string RawText(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

TEST(StoreBackupTest, MigrateKeepsABackupAndRestoreBringsThePreviousSchemaBack) {
  TempDir dir;
  const std::string db = dir.File("unisched.db");
  const int previous = static_cast<int>(PreviousMigrations().size());
  const int latest = static_cast<int>(Migrations().size());
  // The database as the previous unisched left it, with a user in it.
  ASSERT_EQ(RawApply(db, PreviousMigrations(),
                     "INSERT INTO users VALUES('alice', 'user', '[\"default\"]', '[]', 'alice', 0)"),
            previous);

  // The current unisched opens it: a backup at the old schema first, then
  // the migration; what it writes after goes to the new schema only.
  {
    auto store = Store::Open(Options(db));
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_EQ((*store)->SchemaVersion(), latest);
    ASSERT_TRUE((*store)
                    ->WriteSync([](Transaction& t) -> Status {
                      return t.UpsertUser({"bob", "user", {"default"}, {}, "bob", false});
                    })
                    .ok());
    (*store)->Close();
  }
  const std::string backup = SchemaBackupPath(db, previous);
  ASSERT_TRUE(std::filesystem::exists(backup));
  struct stat st {};
  ASSERT_EQ(::stat(backup.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(RawText(backup, "SELECT MAX(version) FROM schema_migrations"), std::to_string(previous));
  EXPECT_EQ(RawText(backup, "SELECT COUNT(*) FROM users WHERE name = 'alice'"), "1");

  // The previous unisched cannot open the migrated database...
  std::string refused;
  EXPECT_EQ(RawApply(db, PreviousMigrations(), {}, &refused), -1);
  EXPECT_NE(refused.find("newer unisched"), std::string::npos) << refused;

  // ...until it is restored.
  auto report = RestoreBackup(db);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->backup, backup);
  EXPECT_EQ(report->restored_version, previous);
  EXPECT_EQ(report->replaced_version, latest);
  EXPECT_EQ(RawApply(db, PreviousMigrations()), previous);
  EXPECT_EQ(RawText(db, "SELECT COUNT(*) FROM users WHERE name = 'alice'"), "1");
  EXPECT_EQ(RawText(db, "SELECT COUNT(*) FROM users WHERE name = 'bob'"), "0");
  // The replaced database is kept whole, with what was written after the upgrade.
  ASSERT_TRUE(std::filesystem::exists(report->replaced_kept_at));
  EXPECT_EQ(RawText(report->replaced_kept_at, "SELECT COUNT(*) FROM users WHERE name = 'bob'"), "1");
  EXPECT_EQ(RawText(report->replaced_kept_at, "SELECT MAX(version) FROM schema_migrations"), std::to_string(latest));

  // And the current unisched migrates it again, keeping a new backup.
  auto again = Store::Open(Options(db));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ((*again)->SchemaVersion(), latest);
  (*again)->Close();
}

TEST(StoreBackupTest, ANewOrCurrentDatabaseIsNotCopied) {
  TempDir dir;
  const std::string db = dir.File("unisched.db");
  for (int i = 0; i < 2; ++i) {
    auto store = Store::Open(Options(db));
    ASSERT_TRUE(store.ok()) << store.error().message;
    (*store)->Close();
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.File(""))) {
    EXPECT_EQ(entry.path().string().find(".backup"), std::string::npos) << entry.path();
  }
  auto report = RestoreBackup(db);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(report.error().message.find("no backup"), std::string::npos) << report.error().message;
}

TEST(StoreBackupTest, ADamagedBackupIsRefusedAndChangesNothing) {
  TempDir dir;
  const std::string db = dir.File("unisched.db");
  ASSERT_EQ(RawApply(db, Migrations()), static_cast<int>(Migrations().size()));
  const std::string bad = dir.File("bad.backup");
  {
    std::FILE* f = std::fopen(bad.c_str(), "w");
    std::fputs("not a database", f);
    std::fclose(f);
  }
  auto report = RestoreBackup(db, bad);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(RawText(db, "SELECT MAX(version) FROM schema_migrations"), std::to_string(Migrations().size()));
}

}  // namespace
}  // namespace unisched::store
