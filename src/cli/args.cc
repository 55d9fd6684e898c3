// The client's flag parser and value parsers.

#include "cli/args.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "unisched/model/batch_script.h"

namespace unisched::cli {

std::optional<std::string> ParsedArgs::Get(const std::string& name) const {
  auto it = flags.find(name);
  if (it == flags.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

const std::vector<std::string>& ParsedArgs::All(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = flags.find(name);
  return it == flags.end() ? kNone : it->second;
}

const std::vector<FlagSpec>& CommonFlags() {
  static const std::vector<FlagSpec> kCommon = {
      {"url", true, false}, {"token-file", true, false}, {"json", false, false}, {"help", false, false}};
  return kCommon;
}

Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs,
                             bool stop_at_positional) {
  auto find_spec = [&](const std::string& name) -> const FlagSpec* {
    for (const auto* list : {&specs, &CommonFlags()}) {
      for (const auto& s : *list) {
        if (s.name == name || std::find(s.aliases.begin(), s.aliases.end(), name) != s.aliases.end()) return &s;
      }
    }
    return nullptr;
  };
  auto find_short = [&](char c) -> const FlagSpec* {
    for (const auto& s : specs) {
      if (s.short_name == c) return &s;
    }
    return nullptr;
  };
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      out.rest.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (word == "-h" && !find_short('h')) {
      out.flags["help"] = {""};
      continue;
    }
    if (word.size() < 2 || word[0] != '-') {
      if (stop_at_positional) {
        out.rest.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
        break;
      }
      out.positionals.push_back(word);
      continue;
    }
    std::string name;
    std::optional<std::string> joined_value;  // -tPD
    if (word[1] != '-') {
      // -X, -XP (switches joined), -tPD (a value joined).
      size_t at = 1;
      for (;;) {
        const FlagSpec* spec = find_short(word[at]);
        if (!spec) return UsageError("unknown option '-" + std::string(1, word[at]) + "'");
        const bool last = at + 1 == word.size();
        if (spec->takes_value || last) {
          name = spec->name;
          if (!last) joined_value = word.substr(at + 1);
          break;
        }
        out.flags[spec->name] = {""};
        ++at;
      }
    } else {
      name = word.substr(2);
    }
    std::optional<std::string> inline_value = joined_value;
    if (auto eq = name.find('='); !joined_value && eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const FlagSpec* spec = find_spec(name);
    if (!spec) return UsageError("unknown option '--" + name + "'");
    name = spec->name;  // an alias parses as the flag it names
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return UsageError("option '--" + name + "' needs a value", name);
      }
    } else if (inline_value) {
      return UsageError("option '--" + name + "' takes no value", name);
    }
    auto& values = out.flags[name];
    if (!values.empty() && !spec->repeatable && spec->takes_value) {
      return UsageError("option '--" + name + "' given more than once", name);
    }
    if (!spec->takes_value) values.clear();
    values.push_back(std::move(value));
  }
  return out;
}

Result<int64_t> ParseInteger(std::string_view text, const std::string& flag) {
  int64_t value = 0;
  std::string_view digits = text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return UsageError("--" + flag + " must be a whole number, got '" + std::string(text) + "'", flag);
  }
  return value;
}

Result<int64_t> ParseDuration(std::string_view text) {
  // One parser for --time and #SBATCH -t: the server's, too.
  const auto seconds = model::ParseSlurmTime(text);
  if (!seconds) {
    return UsageError(
        "--time takes Slurm's formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours, "
        "days-hours:minutes, days-hours:minutes:seconds (e.g. 90, 1:30:00, 2-12); got '" +
            std::string(text) + "'",
        "time");
  }
  if (*seconds == model::kUnlimitedTime || *seconds == 0) {
    return UsageError(
        "--time must be longer than zero: unisched has no unlimited wall time (leave --time out for "
        "the queue's default)",
        "time");
  }
  return *seconds;
}

Result<std::pair<std::string, std::string>> ParseKeyValue(std::string_view text, const std::string& flag) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return UsageError("--" + flag + " takes KEY=VALUE, got '" + std::string(text) + "'", flag);
  }
  return std::pair{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

Result<std::vector<std::string>> ParseGroupBy(std::string_view text) {
  std::vector<std::string> keys;
  std::string allowed;
  for (const char* k : kUsageGroupKeys) allowed += std::string(allowed.empty() ? "" : ", ") + k;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string key(text.substr(start, comma - start));
    auto not_space = [](unsigned char c) { return !std::isspace(c); };
    key.erase(std::find_if(key.rbegin(), key.rend(), not_space).base(), key.end());
    key.erase(key.begin(), std::find_if(key.begin(), key.end(), not_space));
    if (std::find(std::begin(kUsageGroupKeys), std::end(kUsageGroupKeys), key) == std::end(kUsageGroupKeys)) {
      return UsageError("--group-by takes a comma-separated list of " + allowed + ", got '" + std::string(text) + "'",
                        "group-by");
    }
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      return UsageError("--group-by names '" + key + "' twice", "group-by");
    }
    keys.push_back(std::move(key));
    start = comma + 1;
  }
  return keys;
}

std::string UrlEncode(std::string_view text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string BuildQuery(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? '?' : '&';
    out += UrlEncode(key) + "=" + UrlEncode(value);
  }
  return out;
}

Result<ConnectionSettings> ResolveConnection(const ParsedArgs& args, const EnvLookup& env,
                                             const FileReader& read_file) {
  ConnectionSettings s;
  if (auto url = args.Get("url")) {
    s.url = *url;
  } else if (auto from_env = env("UNISCHED_URL"); from_env && !from_env->empty()) {
    s.url = *from_env;
  } else {
    s.url = kDefaultUrl;
  }
  if (auto path = args.Get("token-file")) {
    auto text = read_file(*path);
    if (!text.ok()) return text.error();
    std::string token = *text;
    auto not_space = [](unsigned char c) { return !std::isspace(c); };
    token.erase(std::find_if(token.rbegin(), token.rend(), not_space).base(), token.end());
    token.erase(token.begin(), std::find_if(token.begin(), token.end(), not_space));
    if (token.empty()) return Error::BadRequest("empty_token", "token file " + *path + " is empty");
    s.token = std::move(token);
  } else if (auto from_env = env("UNISCHED_TOKEN")) {
    s.token = *from_env;
  }
  return s;
}

}  // namespace unisched::cli
