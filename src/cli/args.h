#pragma once
// Command-line parsing for the client: a small flag parser shared by every
// command, plus the value parsers (integers, durations) and the query-string
// builder. Pure functions, so the tests need no server.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::cli {

// Errors in what the user typed carry this code; RunCli answers them with a
// usage line and exit status 2.
inline constexpr const char* kUsageCode = "usage";
inline Error UsageError(std::string message, std::string field = {}) {
  return Error{ErrorKind::kBadRequest, kUsageCode, std::move(message), std::move(field)};
}
inline bool IsUsageError(const Error& e) {
  return e.code == kUsageCode;
}

struct FlagSpec {
  std::string name;          // without the leading "--", e.g. "memory-mb"
  bool takes_value = false;  // "--name VALUE" or "--name=VALUE"; otherwise a switch
  bool repeatable = false;   // may be given more than once (--env K=V ...)
  char short_name = 0;       // also "-c" (value in the next word or joined, -cVALUE), as Slurm's -o, -e, -f
  // Other long names for the same flag (Slurm's --partition for --queue);
  // the parsed flag is always `name`.
  std::vector<std::string> aliases = {};
};

struct ParsedArgs {
  std::map<std::string, std::vector<std::string>> flags;  // switches map to {""}
  std::vector<std::string> positionals;
  // Everything after "--", or after the first positional when parsing stops
  // there (the command of `submit`).
  std::vector<std::string> rest;

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // The (last) value of a flag, or nullopt when absent.
  std::optional<std::string> Get(const std::string& name) const;
  const std::vector<std::string>& All(const std::string& name) const;
};

// The flags every command accepts: --url URL, --token-file FILE, --json, --help/-h.
const std::vector<FlagSpec>& CommonFlags();

// Parses `args` (the words after the command name) against `specs` plus
// CommonFlags(). "--" ends the flags. Short switches may be joined (-XP),
// and a short flag's value may follow it in the same word (-tPD); "-h" is
// help unless the command gives -h a meaning of its own (squeue's
// --noheader). With stop_at_positional, the first
// non-flag word and all words after it go to `rest` untouched (so a job's own
// flags are not taken for ours). Unknown flags, missing values and a second
// value for a non-repeatable flag are usage errors.
Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs,
                             bool stop_at_positional = false);

// A whole decimal integer (optional sign), or a usage error naming `flag`.
Result<int64_t> ParseInteger(std::string_view text, const std::string& flag);

// Slurm's --time formats -> seconds (model::ParseSlurmTime): "90" (minutes),
// "1:30" (minutes:seconds), "01:30:00" -> 5400, "2-12" (days-hours), ...
// Zero and UNLIMITED are usage errors: a job's wall time is bounded.
Result<int64_t> ParseDuration(std::string_view text);

// Splits "KEY=VALUE" at the first '='; the key must be non-empty.
Result<std::pair<std::string, std::string>> ParseKeyValue(std::string_view text, const std::string& flag);

// The keys GET /v1/usage can group by (shared/contract/api-v1.md).
inline constexpr const char* kUsageGroupKeys[] = {"user", "project", "queue", "pool", "workload_kind", "job"};

// "project, queue" -> {"project", "queue"}: comma-separated usage group keys,
// each one of kUsageGroupKeys and given once; otherwise a usage error.
Result<std::vector<std::string>> ParseGroupBy(std::string_view text);

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string UrlEncode(std::string_view text);
// "?a=1&b=x%20y" from the non-empty values, in the given order; "" if none.
std::string BuildQuery(const std::vector<std::pair<std::string, std::string>>& params);

// Where and as whom to connect.
struct ConnectionSettings {
  std::string url;
  std::string token;  // may be empty: only /v1 calls need it
};
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
using FileReader = std::function<Result<std::string>(const std::string&)>;
inline constexpr const char* kDefaultUrl = "http://127.0.0.1:8642";

// --url, else UNISCHED_URL, else kDefaultUrl; --token-file (trimmed file
// contents), else UNISCHED_TOKEN.
Result<ConnectionSettings> ResolveConnection(const ParsedArgs& args, const EnvLookup& env, const FileReader& read_file);

}  // namespace unisched::cli
