// SQLite's placeholders as PostgreSQL's (store/pg_db.h): the one rewrite the
// shared SQL goes through on its way to PostgreSQL.

#include <gtest/gtest.h>

#include "store/pg_db.h"

namespace unisched::store {
namespace {

TEST(PostgresPlaceholdersTest, NumbersBareAndNumberedPlaceholdersAsSqliteDoes) {
  const struct {
    const char* sqlite;
    const char* postgres;
  } cases[] = {
      {"SELECT 1", "SELECT 1"},
      {"SELECT doc FROM jobs WHERE id = ?", "SELECT doc FROM jobs WHERE id = $1"},
      {"INSERT INTO t(a, b, c) VALUES(?, ?, ?)", "INSERT INTO t(a, b, c) VALUES($1, $2, $3)"},
      // ?N names a parameter; a bare ? after it is the largest so far plus one.
      {"UPDATE t SET x = ?1 WHERE k = ?2 AND (x IS NULL OR x < ?1)",
       "UPDATE t SET x = $1 WHERE k = $2 AND (x IS NULL OR x < $1)"},
      {"SELECT ?2, ?", "SELECT $2, $3"},
      {"SELECT ?10 + ?", "SELECT $10 + $11"},
      // Inside quotes a ? is text.
      {"SELECT '?' || ? || \"a?b\"", "SELECT '?' || $1 || \"a?b\""},
      {"SELECT 'it''s ?', ?", "SELECT 'it''s ?', $1"},
  };
  for (const auto& c : cases) EXPECT_EQ(PostgresPlaceholders(c.sqlite), c.postgres) << c.sqlite;
}

}  // namespace
}  // namespace unisched::store
