#pragma once
// Workflows in the store (docs/workflows.md, ADR 0012): one row per
// workflow, its spec and the status of every task instance in one JSON
// document (service/workflow_book.h writes it), with the columns lists
// filter by. A task instance's jobs are ordinary job rows.
//
// Like secrets and config versions, these go through the store's lease
// connection, not the write queue: a write is committed when it returns.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

struct WorkflowRecord {
  int64_t id = 0;  // given by InsertWorkflow
  std::string project;
  std::string user;
  std::string name;
  std::string state;  // model::WorkflowState's text
  Timestamp created_at{};
  Timestamp updated_at{};
  // Set once the workflow has ended and none of its jobs is still to be
  // heard of; unset: the book loads it at a start.
  std::optional<Timestamp> ended_at;
  std::string document;  // JSON: {spec, status, owner}
};

struct WorkflowFilter {
  bool active_only = false;     // only those not over (no ended_at)
  bool with_documents = false;  // else the documents are left empty
  std::string state;            // "": any
  std::string project;          // "": any
  int64_t before_id = 0;        // > 0: only older ones (ids below it): the next page, newest first
  int limit = 100;
};

class Workflows {
 public:
  virtual ~Workflows() = default;
  // Stores a new workflow; its id.
  virtual Result<int64_t> InsertWorkflow(const WorkflowRecord& workflow) = 0;
  // Replaces the state, times and document of workflow `workflow.id`;
  // NotFound when there is none.
  virtual Status UpdateWorkflow(const WorkflowRecord& workflow) = 0;
  virtual Result<std::optional<WorkflowRecord>> GetWorkflow(int64_t id) = 0;
  // Newest first, at most `filter.limit`, as the filter says.
  virtual Result<std::vector<WorkflowRecord>> ListWorkflows(const WorkflowFilter& filter) = 0;
};

}  // namespace unisched::store
