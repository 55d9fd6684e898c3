// Data staging's shapes and rules (model/data_staging.h).

#include "unisched/model/data_staging.h"

namespace unisched::model {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Join(const std::string& dir, const std::string& rest) {
  if (dir.empty() || dir == ".") return rest;
  return dir.back() == '/' ? dir + rest : dir + "/" + rest;
}

// Every '/'-separated part of `path` is a plain name (a trailing '/' aside).
bool PlainParts(std::string_view path) {
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

Result<StoreUrl> ParseStoreUrl(const std::string& url, const std::string& field) {
  static constexpr std::string_view kScheme = "s3://";
  auto bad = [&](const std::string& why) {
    return Error::Unprocessable("invalid_value",
                                field + " '" + url + "' " + why + "; write s3://STORE/BUCKET/KEY-OR-PREFIX", field);
  };
  if (url.rfind(kScheme, 0) != 0) return bad("is not an s3:// URL");
  const std::string rest = url.substr(kScheme.size());
  const size_t store_end = rest.find('/');
  if (store_end == std::string::npos || store_end == 0) return bad("names no store");
  const size_t bucket_end = rest.find('/', store_end + 1);
  StoreUrl out;
  out.store = rest.substr(0, store_end);
  out.bucket =
      rest.substr(store_end + 1, bucket_end == std::string::npos ? std::string::npos : bucket_end - store_end - 1);
  out.key = bucket_end == std::string::npos ? std::string() : rest.substr(bucket_end + 1);
  if (out.bucket.size() < 3 || out.bucket.size() > 63) return bad("names no bucket of 3 to 63 characters");
  if (out.key.size() > 1024) return bad("has a key longer than S3's 1024 bytes");
  if (out.key.find('\0') != std::string::npos) return bad("holds a NUL");
  return out;
}

std::string CheckWorkPath(std::string_view path) {
  if (path.empty() || path == "." || path == "./") return "";
  if (path.size() > 1024) return "is longer than 1024 bytes";
  if (path.find('\0') != std::string_view::npos) return "holds a NUL";
  if (path.front() == '/') return "is absolute; name a place in the job's work directory, e.g. input/";
  if (!PlainParts(path)) return "has an empty, '.' or '..' part; name a place below the job's work directory";
  return "";
}

std::string ExpandStagePattern(std::string pattern, int64_t job_id, int attempt) {
  for (const auto& [name, value] : {std::pair<std::string, std::string>{"{job_id}", std::to_string(job_id)},
                                    {"{attempt}", std::to_string(attempt)}}) {
    for (size_t at = pattern.find(name); at != std::string::npos; at = pattern.find(name, at + value.size())) {
      pattern.replace(at, name.size(), value);
    }
  }
  return pattern;
}

std::string StageInTarget(const StoreUrl& from, const std::string& to, const std::string& key) {
  std::string target;
  if (from.key.empty() || from.key.back() == '/') {
    if (key.size() <= from.key.size() || key.compare(0, from.key.size(), from.key) != 0) return "";
    target = Join(to, key.substr(from.key.size()));
  } else if (to.empty() || to == "." || to.back() == '/') {
    target = Join(to, BaseName(key));
  } else {
    target = to;
  }
  // A key of the store is anything; a path in the work directory is not.
  if (!target.empty() && target.back() == '/') return "";
  return CheckWorkPath(target).empty() && !target.empty() && target != "." ? target : "";
}

std::string StageOutKey(const StoreUrl& to, const std::string& from, const std::string& relative) {
  const bool into_prefix = to.key.empty() || to.key.back() == '/';
  if (!into_prefix) return relative.empty() ? to.key : to.key + "/" + relative;
  if (!relative.empty()) return to.key + relative;
  std::string base = from;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return to.key + BaseName(base);
}

}  // namespace unisched::model
