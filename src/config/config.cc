// The config loaders: text or file -> YAML tree -> Config, then the value
// rules; every problem of the file comes back at once.

#include "unisched/config/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <sstream>
#include <utility>

#include "config/errors.h"
#include "config/parse.h"
#include "config/version.h"
#include "unisched/common/hash.h"

namespace unisched::config {

// A stable content hash, so every job can record which config it was
// admitted under, and equal files give equal versions on every host.
std::string internal::ContentVersion(std::string_view text) {
  return Fnv1a64Hex(text);
}

namespace {

std::string Located(std::string_view source_name, const YAML::Mark& mark) {
  std::string where(source_name);
  // yaml-cpp counts from 0; editors count from 1. Marks of -1 mean unknown.
  if (mark.line >= 0) where += ":" + std::to_string(mark.line + 1);
  if (mark.line >= 0 && mark.column >= 0) where += ":" + std::to_string(mark.column + 1);
  return where;
}

// A handler of the parser's events that builds nothing: CountDocuments
// needs only where the documents start.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The number of YAML documents in `text`, counting no further than `limit`.
// Not YAML::LoadAll: yaml-cpp 0.7 finds an endless run of documents in some
// malformed texts (one that starts with ","), and LoadAll then builds them
// until memory runs out (found by tests/fuzz/config_fuzz.cc). Throws what
// the parser throws on invalid YAML.
size_t CountDocuments(const std::string& text, size_t limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  size_t count = 0;
  while (count < limit && parser.HandleNextDocument(counter)) ++count;
  return count;
}

// Parsing and validation each report in file order, but one after the
// other; grouping by section and list item puts a file's errors back in
// reading order, keeping the order within each group.
void SortBySection(std::vector<ConfigError>& errors) {
  static constexpr std::string_view kSections[] = {"server", "store",  "executor", "scheduler", "pools",
                                                   "nodes",  "queues", "routing",  "projects",  "users"};
  const auto key = [](const std::string& path) {
    const size_t end = path.find_first_of(".[");
    const std::string_view section = std::string_view(path).substr(0, end);
    int rank = -1;  // the document itself ("") first
    for (size_t i = 0; i < std::size(kSections); ++i) {
      if (section == kSections[i]) rank = static_cast<int>(i);
    }
    long index = -1;  // the section itself before its items
    const size_t open = path.find('[');
    if (open != std::string::npos) index = std::strtol(path.c_str() + open + 1, nullptr, 10);
    return std::pair<int, long>(rank, index);
  };
  std::stable_sort(errors.begin(), errors.end(),
                   [&](const ConfigError& a, const ConfigError& b) { return key(a.path) < key(b.path); });
}

}  // namespace

std::string SharedVariable(const std::string& name) {
  std::string var = "UNISCHED_SHARED_";
  for (char c : name) var.push_back(c == '-' ? '_' : (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c);
  return var;
}

double WorkDirRetentionHours(const Config& config) {
  if (config.executor.work_dir_retention_hours) return *config.executor.work_dir_retention_hours;
  constexpr double kWeekHours = 24.0 * 7;
  // Half the record's retention: 24 h a day, halved.
  if (config.store.job_retention_days > 0) return std::min(kWeekHours, 12.0 * config.store.job_retention_days);
  return kWeekHours;
}

LoadResult LoadConfigText(std::string_view yaml_text, std::string_view source_name) {
  const std::string text(yaml_text);
  YAML::Node document;
  try {
    // Every document after the first takes at least its "---" line, so a
    // text holds at most size + 1 of them; a parser that finds more is
    // looping on malformed input.
    const size_t documents = CountDocuments(text, text.size() + 2);
    if (documents > text.size() + 1) {
      return std::vector<ConfigError>{
          {"", std::string(source_name) + ": invalid YAML: the parser finds no end to its documents"}};
    }
    if (documents > 1) {
      return std::vector<ConfigError>{
          {"", std::string(source_name) + ": holds " + std::to_string(documents) +
                   " YAML documents (separated by '---'); put the whole configuration in one"}};
    }
    if (documents == 1) document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return std::vector<ConfigError>{{"", Located(source_name, e.mark) + ": invalid YAML: " + e.msg}};
  }

  internal::Errors errors;
  Config config;
  try {
    config = internal::ParseConfig(document, errors);
  } catch (const YAML::Exception& e) {
    // The readers avoid every throwing yaml-cpp call; this keeps a missed one
    // a reported error rather than a crash of validate-config.
    errors.Add("", Located(source_name, e.mark) + ": cannot read the document: " + e.msg);
  }

  std::vector<ConfigError> all = errors.list();
  // A value that could not be read is reported once, where it is; its
  // default stand-in is not judged again by the value rules.
  for (auto& error : ValidateConfig(config)) {
    if (!errors.IsBroken(error.path)) all.push_back(std::move(error));
  }
  if (!all.empty()) {
    SortBySection(all);
    return all;
  }
  internal::DerivePolicies(config);
  config.version = internal::ContentVersion(yaml_text);
  config.text = std::string(yaml_text);
  return config;
}

LoadResult LoadConfigFileOrDefault(const std::string& path) {
  return path.empty() ? LoadConfigText(EmbeddedDefaultConfig(), "<embedded>") : LoadConfigFile(path);
}

LoadResult LoadConfigFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    return std::vector<ConfigError>{{"", "cannot read config file '" + path + "': " + std::strerror(errno)}};
  }
  std::string text;
  char buffer[64 * 1024];
  while (true) {
    const size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get())) {
    return std::vector<ConfigError>{{"", "cannot read config file '" + path + "': " + std::strerror(errno)}};
  }
  return LoadConfigText(text, path);
}

}  // namespace unisched::config
