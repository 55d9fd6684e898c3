#include "store/sql_common.h"

#include <nlohmann/json.hpp>

namespace unisched::store {

using nlohmann::json;

std::string StatesSql(bool terminal) {
  std::string sql;
  for (auto state :
       {model::JobState::kPending, model::JobState::kHeld, model::JobState::kRunning, model::JobState::kCompleted,
        model::JobState::kFailed, model::JobState::kCancelled, model::JobState::kTimeout, model::JobState::kNodeFail}) {
    if (model::IsTerminal(state) != terminal) continue;
    if (!sql.empty()) sql += ",";
    // Appended piecewise: "'" + std::string(...) trips GCC 12's -Wrestrict (PR 105329).
    sql += '\'';
    sql += model::ToString(state);
    sql += '\'';
  }
  return sql;
}

std::string JsonList(const std::vector<std::string>& items) {
  return json(items).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> ParseJsonList(const std::string& text) {
  std::vector<std::string> out;
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return out;
  for (const auto& item : doc) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

void BindAll(Statement& stmt, const std::vector<Param>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i + 1);
    if (const auto* n = std::get_if<int64_t>(&params[i])) {
      stmt.Bind(index, *n);
    } else {
      stmt.Bind(index, std::get<std::string>(params[i]));
    }
  }
}

}  // namespace unisched::store
