#pragma once
// A job's data staging (docs/data.md, "Stage-in and stage-out"): objects
// copied from an object store into the job's work directory before it
// starts, and files copied from there to a store after it ends. Pure: the
// shapes and their rules; the executor moves the bytes.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::model {

// "s3://STORE/bucket/key-or-prefix": STORE is a name of the config's
// storage.object_stores, not a host.
struct StoreUrl {
  std::string store;
  std::string bucket;
  std::string key;  // a prefix when it ends in '/' (or is empty)
  bool operator==(const StoreUrl&) const = default;
};
// The URL's parts, or a 422 naming `field`.
Result<StoreUrl> ParseStoreUrl(const std::string& url, const std::string& field);

struct StageIn {
  std::string from;  // s3://STORE/bucket/prefix/ (every object under it) or s3://STORE/bucket/key (one)
  std::string to;    // relative to the work directory; a prefix's objects keep their path below it
  bool operator==(const StageIn&) const = default;
};

enum class StageWhen { kSuccess, kAlways };
// Inline: the supervisor reads launch specs without the model library.
inline std::string_view ToString(StageWhen when) {
  return when == StageWhen::kAlways ? "always" : "success";
}
inline std::optional<StageWhen> ParseStageWhen(std::string_view text) {
  if (text == "success") return StageWhen::kSuccess;
  if (text == "always") return StageWhen::kAlways;
  return std::nullopt;
}

struct StageOut {
  std::string from;  // relative to the work directory: a directory (every file below it) or a file
  std::string to;    // s3://STORE/bucket/prefix/ ; {job_id} and {attempt} are replaced at launch
  StageWhen when = StageWhen::kSuccess;
  bool operator==(const StageOut&) const = default;
};

struct DataStaging {
  std::vector<StageIn> stage_in;
  std::vector<StageOut> stage_out;
  bool empty() const { return stage_in.empty() && stage_out.empty(); }
  bool operator==(const DataStaging&) const = default;
};

inline constexpr size_t kMaxStagesPerJob = 64;

// Why `path` cannot name a place in the work directory, or "": relative,
// no "..", no empty or "." parts but a trailing '/', no NUL, at most 1024
// bytes. "" and "." name the work directory itself.
std::string CheckWorkPath(std::string_view path);

// `pattern` with {job_id} and {attempt} replaced.
std::string ExpandStagePattern(std::string pattern, int64_t job_id, int attempt);

// Where each object of a stage-in lands: `to` joined with the object key's
// part below the stage's prefix (`from` ends in '/'), or with the key's base
// name (`to` ends in '/' or is empty), or `to` itself. Relative to the work
// directory; "" when the key cannot be a path (a ".." part, say).
std::string StageInTarget(const StoreUrl& from, const std::string& to, const std::string& key);

// The object key a stage-out gives a file found at `relative` below its
// `from` (a directory), or the key for `from` itself (a file, relative
// empty): `to`'s key, plus the relative path or the file's base name when
// `to` ends in '/'.
std::string StageOutKey(const StoreUrl& to, const std::string& from, const std::string& relative);

}  // namespace unisched::model
