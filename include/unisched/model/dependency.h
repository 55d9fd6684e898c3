#pragma once
// A job's dependency on other jobs, written as Slurm's --dependency
// (docs/dependencies.md): "afterok:12:13,afterany:14" (every term must
// hold) or "afterok:12?afternotok:13" (one term is enough), and
// "singleton". Parsing and printing only; whether it holds is
// policy::CheckDependency.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::model {

using JobId = int64_t;

enum class DependencyType {
  kAfter,       // the named jobs have started (or ended without starting)
  kAfterAny,    // the named jobs have ended, however
  kAfterOk,     // the named jobs have ended COMPLETED
  kAfterNotOk,  // the named jobs have ended, not COMPLETED
  kSingleton,   // no earlier job of the same user and name is still active
  kAfterCorr,   // an array's task i after task i of the named arrays ended COMPLETED (docs/arrays.md)
};
std::string_view ToString(DependencyType type);  // "after", "afterany", ...

struct DependencyTerm {
  DependencyType type = DependencyType::kAfterOk;
  std::vector<JobId> jobs;  // in the order written; empty for singleton
  // Tasks named as Slurm names them (afterok:123_7): (array id, index),
  // until admission turns each into the task's own id in `jobs`
  // (service::JobService; a task's id exists before it starts).
  std::vector<std::pair<JobId, int64_t>> tasks = {};
  bool operator==(const DependencyTerm&) const = default;
};

struct Dependency {
  std::vector<DependencyTerm> terms;  // empty: no dependency
  bool any = false;                   // joined by '?' (one term holds) rather than ',' (all hold)

  bool empty() const { return terms.empty(); }
  // Every job named, once each, in the order first written.
  std::vector<JobId> NamedJobs() const;
  bool HasSingleton() const;
  bool HasAfterCorr() const;
  // The terms that apply to the job as a whole: all but aftercorr, which
  // applies task by task (policy::CorrespondingDependency).
  Dependency WithoutAfterCorr() const;
  bool operator==(const Dependency&) const = default;
};

// The most job ids one dependency may name: enough for any hand-written
// chain, small enough that checking it at submit stays cheap.
inline constexpr size_t kMaxDependencyJobs = 1000;

// Slurm's syntax: TYPE:ID[:ID...] terms joined by ',' or by '?' (not both),
// or "singleton"; ids are positive integers. "" is no dependency. A bad text
// is a 422 naming `field` and what to write instead.
Result<Dependency> ParseDependency(std::string_view text, const std::string& field = "dependency");
// The canonical text: ParseDependency(ToString(d)) == d.
std::string ToString(const Dependency& dependency);

}  // namespace unisched::model
