// /v1/baselines: performance baseline runs (launch check 6,
// docs/baseline.md). `unisched baseline` measures and posts a run; the
// daemon checks it, adds what it knows itself (the date, who, the config
// version in force, its own machine's facts) and keeps it. Recording is for
// platform-admins; any user may read the history, as pools and nodes.

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/baseline/baseline.h"
#include "unisched/baseline/machine.h"
#include "unisched/model/words.h"

namespace unisched::api {

namespace {

using nlohmann::json;

constexpr size_t kMaxItems = 10000;  // figures or skipped items of one run
constexpr size_t kNameBytes = 256;   // pool and node names
constexpr const char* kExample =
    R"({"pools": ["cpu-hpc-pool"], "figures": [{"name": "dgemm_gflops", "pool": "cpu-hpc-pool", )"
    R"("node": "x86-c64m256-hpc-01", "value": 41.5, "unit": "GFLOP/s", "better": "higher"}]})";

Error Invalid(const std::string& field, const std::string& message) {
  return Error::Unprocessable("invalid_value", field + " " + message, field);
}

// What figures and skipped items are called: dgemm_gflops, job_start_ms_p99.
std::optional<Error> CheckItemName(const json& item, const std::string& field, std::string& out) {
  if (!item.contains("name") || item["name"].is_null()) {
    return Error::Unprocessable("missing_field", field + ".name is required, e.g. dgemm_gflops", field + ".name");
  }
  if (auto e = body::ReadString(item, "name", field + ".name", 64, out, false)) return e;
  const bool plain = std::all_of(out.begin(), out.end(),
                                 [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
  if (!plain) return Invalid(field + ".name", "must be lower-case letters, digits and '_', e.g. dgemm_gflops");
  return std::nullopt;
}

// A pool a figure or skipped item names must be one of the run's.
std::optional<Error> ReadItemPool(const json& item, const std::string& field, const std::set<std::string>& pools,
                                  std::string& out) {
  if (auto e = body::ReadString(item, "pool", field + ".pool", kNameBytes, out)) return e;
  if (!out.empty() && !pools.count(out)) {
    return Invalid(field + ".pool", "'" + out + "' is not among the run's pools; add it to pools or fix the item");
  }
  return std::nullopt;
}

Result<json> ParseFigure(const json& item, const std::string& field, const std::set<std::string>& pools) {
  if (!item.is_object()) return body::WrongType(field, "an object", item);
  if (auto e = body::CheckKeys(item, field, {"name", "pool", "node", "value", "unit", "better", "detail"})) return *e;
  baseline::Figure figure;
  if (auto e = CheckItemName(item, field, figure.name)) return *e;
  if (auto e = ReadItemPool(item, field, pools, figure.pool)) return *e;
  if (auto e = body::ReadString(item, "node", field + ".node", kNameBytes, figure.node)) return *e;
  for (const char* key : {"value", "unit", "better"}) {
    if (!item.contains(key) || item[key].is_null()) {
      return Error::Unprocessable("missing_field", field + "." + key + " is required", field + "." + key);
    }
  }
  if (!item["value"].is_number()) return body::WrongType(field + ".value", "a number", item["value"]);
  figure.value = item["value"].get<double>();
  if (!std::isfinite(figure.value) || figure.value < 0) {
    return Invalid(field + ".value", "must be a finite number, 0 or more");
  }
  if (auto e = body::ReadString(item, "unit", field + ".unit", 32, figure.unit, false)) return *e;
  std::string better;
  if (auto e = body::ReadString(item, "better", field + ".better", 16, better)) return *e;
  auto parsed = baseline::ParseBetter(better);
  if (!parsed) return Invalid(field + ".better", "must be higher (throughput) or lower (latency)");
  figure.better = *parsed;
  if (auto detail = item.find("detail"); detail != item.end() && !detail->is_null()) {
    if (!detail->is_object()) return body::WrongType(field + ".detail", "an object", *detail);
    figure.detail = *detail;
  }
  return baseline::ToJson(figure);
}

Result<json> ParseSkipped(const json& item, const std::string& field, const std::set<std::string>& pools) {
  if (!item.is_object()) return body::WrongType(field, "an object", item);
  if (auto e = body::CheckKeys(item, field, {"name", "pool", "node", "reason"})) return *e;
  std::string name, pool, node, reason;
  if (auto e = CheckItemName(item, field, name)) return *e;
  if (auto e = ReadItemPool(item, field, pools, pool)) return *e;
  if (auto e = body::ReadString(item, "node", field + ".node", kNameBytes, node)) return *e;
  if (auto e = body::ReadString(item, "reason", field + ".reason", 2048, reason, false)) return *e;
  if (reason.empty()) {
    return Error::Unprocessable("missing_field", field + ".reason is required: why it was not measured",
                                field + ".reason");
  }
  json out = {{"name", name}, {"reason", reason}};
  if (!pool.empty()) out["pool"] = pool;
  if (!node.empty()) out["node"] = node;
  return out;
}

// A list of items, each parsed by `parse`, into record[key].
template <class Parse>
std::optional<Error> ReadItems(const json& body, const char* key, json& record, Parse parse) {
  record[key] = json::array();
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return body::WrongType(key, "a list", *it);
  if (it->size() > kMaxItems) return Invalid(key, "may hold at most " + std::to_string(kMaxItems) + " items");
  for (size_t i = 0; i < it->size(); ++i) {
    auto item = parse((*it)[i], std::string(key) + "[" + std::to_string(i) + "]");
    if (!item.ok()) return item.error();
    record[key].push_back(std::move(*item));
  }
  return std::nullopt;
}

// The body of POST /v1/baselines as the run to keep (without what the
// daemon adds), and the pools it measured, sorted.
Result<json> ParseRun(const json& body, const config::Config& config, std::vector<std::string>& pools) {
  if (auto e = body::CheckKeys(body, "", {"pools", "parameters", "figures", "skipped", "nodes", "jobs"})) return *e;
  if (!body.contains("pools") || body["pools"].is_null()) {
    return Error::Unprocessable(
        "missing_field", "pools is required: the pools the run measured, e.g. " + std::string(kExample), "pools");
  }
  if (auto e = body::ReadStringList(body, "pools", "pools", kNameBytes, pools)) return *e;
  if (pools.empty()) return Invalid("pools", "must name at least one pool");
  for (size_t i = 0; i < pools.size(); ++i) {
    if (config.cluster.FindPool(pools[i]) == nullptr) {
      return Invalid("pools[" + std::to_string(i) + "]", "'" + pools[i] + "' is not a pool; GET /v1/pools lists them");
    }
  }
  std::sort(pools.begin(), pools.end());
  if (std::adjacent_find(pools.begin(), pools.end()) != pools.end()) return Invalid("pools", "names a pool twice");
  const std::set<std::string> pool_set(pools.begin(), pools.end());

  json record = {{"pools", pools}, {"parameters", json::object()}};
  if (auto p = body.find("parameters"); p != body.end() && !p->is_null()) {
    if (!p->is_object()) return body::WrongType("parameters", "an object", *p);
    if (auto e = body::CheckKeys(*p, "parameters", {"size", "repeats", "samples"})) return *e;
    for (const char* key : {"size", "repeats", "samples"}) {
      int64_t value = 0;
      if (auto e = body::ReadInt(*p, key, std::string("parameters.") + key, 1, 1 << 20, value)) return *e;
      if (value > 0) record["parameters"][key] = value;
    }
  }
  if (!body.contains("figures") || body["figures"].is_null()) {
    return Error::Unprocessable("missing_field", "figures is required (it may be empty), e.g. " + std::string(kExample),
                                "figures");
  }
  if (auto e = ReadItems(body, "figures", record, [&](const json& item, const std::string& field) {
        return ParseFigure(item, field, pool_set);
      })) {
    return *e;
  }
  if (auto e = ReadItems(body, "skipped", record, [&](const json& item, const std::string& field) {
        return ParseSkipped(item, field, pool_set);
      })) {
    return *e;
  }
  record["nodes"] = json::object();
  if (auto nodes = body.find("nodes"); nodes != body.end() && !nodes->is_null()) {
    if (!nodes->is_object()) return body::WrongType("nodes", "an object of node name -> machine facts", *nodes);
    for (const auto& [name, facts] : nodes->items()) {
      if (!facts.is_object()) return body::WrongType("nodes." + name, "an object (the node's facts)", facts);
      if (name.size() > kNameBytes) return Invalid("nodes." + name.substr(0, 32), "is not a node name: too long");
    }
    record["nodes"] = *nodes;
  }
  std::vector<std::string> jobs;
  if (auto e = body::ReadStringList(body, "jobs", "jobs", 32, jobs)) return *e;
  record["jobs"] = jobs;
  return record;
}

// A stored run as the API shows it.
json View(const store::BaselineRecord& row) {
  json view = json::parse(row.record, nullptr, false);
  if (!view.is_object()) view = json::object();
  view["id"] = std::to_string(row.id);
  view["created_at"] = FormatRfc3339(row.created_at);
  view["created_by"] = row.created_by;
  return view;
}

// "b,a" -> "a,b": what runs of the same pools share (BaselineRecord::pools).
std::string PoolsKey(std::vector<std::string> pools) {
  std::sort(pools.begin(), pools.end());
  return model::Join(pools, ',');
}

}  // namespace

void Api::RecordBaseline(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may record a baseline run"));
    return;
  }
  auto body = body::ParseObject(call.request.body, kExample);
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  const config::Config& config = ctx_.config->Current();
  std::vector<std::string> pools;
  auto record = ParseRun(*body, config, pools);
  if (!record.ok()) {
    call.reply(FromError(record.error()));
    return;
  }
  // What the daemon knows better than the client: the config in force and
  // the machine it runs on (the nodes' facts come from their jobs).
  (*record)["config"] = {{"version", config.number}, {"digest", config.version}};
  (*record)["server"] = baseline::ToJson(baseline::ReadMachineFacts());
  store::BaselineRecord row{0, PoolsKey(pools), call.principal->user, ctx_.clock->Now(), record->dump()};
  auto id = ctx_.store->InsertBaseline(row);
  if (!id.ok()) {
    call.reply(FromError(id.error()));
    return;
  }
  row.id = *id;
  call.reply(Json(201, View(row)));
}

void Api::ListBaselines(Call& call) {
  const std::vector<std::string> pools = model::Split(call.Query("pools").value_or(""), ',');
  auto runs = ctx_.store->ListBaselines(PoolsKey(pools), static_cast<int>(call.QueryInt("limit", 20)));
  if (!runs.ok()) {
    call.reply(FromError(runs.error()));
    return;
  }
  json list = json::array();
  for (const auto& row : *runs) list.push_back(View(row));
  call.reply(Json(200, {{"baselines", std::move(list)}}));
}

void Api::GetBaseline(Call& call) {
  const std::string& id = call.Param("id");
  const std::optional<int64_t> number = ParseInt64(id);
  std::optional<store::BaselineRecord> found;
  if (number && *number > 0) {
    auto run = ctx_.store->GetBaseline(*number);
    if (!run.ok()) {
      call.reply(FromError(run.error()));
      return;
    }
    found = std::move(*run);
  }
  if (!found) {
    call.reply(ErrorResponse(404, "not_found", "no baseline run " + id + "; GET /v1/baselines lists them"));
    return;
  }
  call.reply(Json(200, View(*found)));
}

}  // namespace unisched::api
