// Slurm's dependency syntax, parsed and printed (model/dependency.h).

#include "unisched/model/dependency.h"

#include <algorithm>
#include <charconv>
#include <unordered_set>

namespace unisched::model {
namespace {

struct TypeName {
  DependencyType type;
  std::string_view name;
};
constexpr TypeName kTypes[] = {
    {DependencyType::kAfter, "after"},         {DependencyType::kAfterAny, "afterany"},
    {DependencyType::kAfterOk, "afterok"},     {DependencyType::kAfterNotOk, "afternotok"},
    {DependencyType::kSingleton, "singleton"}, {DependencyType::kAfterCorr, "aftercorr"},
};

constexpr std::string_view kForm =
    "write TYPE:JOBID[:JOBID...] terms joined by ',' (all must hold) or '?' (one is enough), e.g. "
    "\"afterok:12:13,afterany:14\", or \"singleton\"; types: after, afterany, afterok, afternotok, aftercorr, "
    "singleton";

// Unlike model::Split (words.h), empty items are kept: "afterok:12," has an
// empty term, which is an error to report, not to skip.
std::vector<std::string_view> SplitKeepingEmpty(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  while (true) {
    const size_t at = text.find(separator, from);
    parts.push_back(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
    if (at == std::string_view::npos) return parts;
    from = at + 1;
  }
}

}  // namespace

std::string_view ToString(DependencyType type) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "afterok";
}

std::vector<JobId> Dependency::NamedJobs() const {
  std::vector<JobId> ids;
  std::unordered_set<JobId> seen;
  for (const auto& term : terms) {
    for (JobId id : term.jobs) {
      if (seen.insert(id).second) ids.push_back(id);
    }
  }
  return ids;
}

bool Dependency::HasSingleton() const {
  return std::any_of(terms.begin(), terms.end(),
                     [](const DependencyTerm& t) { return t.type == DependencyType::kSingleton; });
}

bool Dependency::HasAfterCorr() const {
  return std::any_of(terms.begin(), terms.end(),
                     [](const DependencyTerm& t) { return t.type == DependencyType::kAfterCorr; });
}

Dependency Dependency::WithoutAfterCorr() const {
  Dependency out = *this;
  std::erase_if(out.terms, [](const DependencyTerm& t) { return t.type == DependencyType::kAfterCorr; });
  return out;
}

Result<Dependency> ParseDependency(std::string_view text, const std::string& field) {
  Dependency out;
  if (text.empty()) return out;
  auto bad = [&](const std::string& what) {
    return Error::Unprocessable("invalid_value",
                                field + " '" + std::string(text) + "': " + what + "; " + std::string(kForm), field);
  };
  const bool has_and = text.find(',') != std::string_view::npos;
  out.any = text.find('?') != std::string_view::npos;
  if (has_and && out.any) return bad("',' and '?' cannot be mixed (Slurm's rule too)");
  size_t named = 0;
  for (std::string_view term_text : SplitKeepingEmpty(text, out.any ? '?' : ',')) {
    if (term_text.empty()) return bad("a term is empty");
    const std::vector<std::string_view> words = SplitKeepingEmpty(term_text, ':');
    const auto type =
        std::find_if(std::begin(kTypes), std::end(kTypes), [&](const TypeName& t) { return t.name == words.front(); });
    if (type == std::end(kTypes)) return bad("'" + std::string(words.front()) + "' is not a dependency type");
    DependencyTerm term{type->type, {}, {}};
    if (term.type == DependencyType::kAfterCorr && out.any) {
      return bad("aftercorr pairs tasks one by one and cannot be one of '?' alternatives");
    }
    if (term.type == DependencyType::kSingleton) {
      if (words.size() > 1) return bad("singleton names no jobs");
    } else if (words.size() < 2) {
      return bad(std::string(type->name) + " needs at least one job id");
    }
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string_view word = words[i];
      if (word.find('+') != std::string_view::npos) {
        return bad("a delay after a job ('" + std::string(word) + "', Slurm's after:ID+MINUTES) is not supported");
      }
      JobId id = 0;
      auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
      int64_t index = -1;
      if (ec == std::errc() && id > 0 && end != word.data() + word.size() && *end == '_') {
        // A task of an array, ID_INDEX (afterok:123_7).
        auto [index_end, index_ec] = std::from_chars(end + 1, word.data() + word.size(), index);
        if (index_ec != std::errc() || index_end != word.data() + word.size() || index < 0) index = -2;
        end = word.data() + word.size();
      }
      if (word.empty() || ec != std::errc() || end != word.data() + word.size() || id <= 0 || index == -2) {
        return bad("'" + std::string(word) +
                   "' is not a job id (a positive integer, or ID_INDEX for a task of an "
                   "array)");
      }
      if (index >= 0) {
        term.tasks.emplace_back(id, index);
      } else {
        term.jobs.push_back(id);
      }
      if (++named > kMaxDependencyJobs) {
        return bad("it names more than " + std::to_string(kMaxDependencyJobs) + " jobs");
      }
    }
    out.terms.push_back(std::move(term));
  }
  return out;
}

std::string ToString(const Dependency& dependency) {
  std::string text;
  for (const auto& term : dependency.terms) {
    if (!text.empty()) text += dependency.any ? '?' : ',';
    text += ToString(term.type);
    for (JobId id : term.jobs) text += ":" + std::to_string(id);
    for (const auto& [array, index] : term.tasks) text += ":" + std::to_string(array) + "_" + std::to_string(index);
  }
  return text;
}

}  // namespace unisched::model
