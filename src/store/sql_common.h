#pragma once
// What the store's concerns share: turning a failed read into an
// exception, JSON lists as one bound parameter, the visibility clause, and
// read snapshots. Internal to src/store.
//
// Reads whose signature has no error channel (ListJobs, ListEvents, ...)
// throw StoreFailure when the database fails under them: on a healthy disk that
// does not happen, so it is exceptional, not an expected failure. Inside a
// Write() callback such a throw fails just that write.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "store/sql.h"
#include "unisched/common/status.h"
#include "unisched/model/job.h"
#include "unisched/store/store.h"

namespace unisched::store {

template <class T>
T OrThrow(Result<T> result) {
  if (!result.ok()) throw StoreFailure(result.error());
  return std::move(result).value();
}

// a / b rounded towards minus infinity (b > 0).
inline int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && a < 0 ? 1 : 0);
}

// The job states that are (or are not) terminal, as an SQL list: 'A','B'.
std::string StatesSql(bool terminal);

// A list of strings as one JSON array (bound as one parameter, so the SQL
// text, and the cached statement, does not depend on the list's length).
std::string JsonList(const std::vector<std::string>& items);
// The strings of a JSON array; anything else gives an empty list.
std::vector<std::string> ParseJsonList(const std::string& text);

using Param = std::variant<int64_t, std::string>;
void BindAll(Statement& stmt, const std::vector<Param>& params);

// The visibility filter of jobs, usage and events: rows of these projects or
// these queues (columns `<table>project`, `<table>queue`); binds two JSON
// lists, appended to `params` (of strings, or of a variant holding them).
template <class Params>
std::string VisibleClause(const Connection& c, const std::string& table, const std::vector<std::string>& projects,
                          const std::vector<std::string>& queues, Params& params) {
  params.emplace_back(JsonList(projects));
  params.emplace_back(JsonList(queues));
  return " AND (" + table + "project IN (" + c.JsonListRows() + ") OR " + table + "queue IN (" + c.JsonListRows() +
         "))";
}

// Ends a read transaction however the read leaves; declare it before the
// statements so they are reset first.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Connection& c) : c_(c) { ok_ = c_.BeginRead().ok(); }
  ~ReadSnapshot() {
    if (ok_) c_.Run("COMMIT");
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Connection& c_;
  bool ok_ = false;
};

}  // namespace unisched::store
