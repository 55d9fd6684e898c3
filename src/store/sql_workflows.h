#pragma once
// Workflows (unisched/store/workflows.h) in SQL, for SQLite and PostgreSQL
// alike, on the connection given (the store's lease connection). Internal
// to src/store.

#include <optional>
#include <vector>

#include "store/sql.h"
#include "unisched/store/workflows.h"

namespace unisched::store::sql {

Result<int64_t> InsertWorkflow(Connection& c, const WorkflowRecord& workflow);
Status UpdateWorkflow(Connection& c, const WorkflowRecord& workflow);
Result<std::optional<WorkflowRecord>> GetWorkflow(Connection& c, int64_t id);
Result<std::vector<WorkflowRecord>> ListWorkflows(Connection& c, const WorkflowFilter& filter);

}  // namespace unisched::store::sql
