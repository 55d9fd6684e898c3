// Workflows in SQL (sql_workflows.h): the table workflows (migration 18).

#include "store/sql_workflows.h"

namespace unisched::store::sql {

namespace {

std::string Columns(bool with_documents) {
  return std::string("SELECT id, project, user_name, name, state, created_at, updated_at, ended_at, ") +
         (with_documents ? "document" : "''") + " FROM workflows";
}

WorkflowRecord RecordFrom(const Statement& read) {
  WorkflowRecord r;
  r.id = read.Int(0);
  r.project = read.Text(1);
  r.user = read.Text(2);
  r.name = read.Text(3);
  r.state = read.Text(4);
  r.created_at = FromUnixMillis(read.Int(5));
  r.updated_at = FromUnixMillis(read.Int(6));
  if (read.Int(7) != 0) r.ended_at = FromUnixMillis(read.Int(7));
  r.document = read.Text(8);
  return r;
}

int64_t EndedMillis(const WorkflowRecord& w) {
  return w.ended_at ? ToUnixMillis(*w.ended_at) : 0;
}

}  // namespace

Result<int64_t> InsertWorkflow(Connection& c, const WorkflowRecord& w) {
  auto insert = c.Prepare(
      "INSERT INTO workflows(project, user_name, name, state, created_at, updated_at, ended_at, document) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id");
  if (!insert.ok()) return insert.error();
  insert->Bind(1, w.project)
      .Bind(2, w.user)
      .Bind(3, w.name)
      .Bind(4, w.state)
      .Bind(5, ToUnixMillis(w.created_at))
      .Bind(6, ToUnixMillis(w.updated_at))
      .Bind(7, EndedMillis(w))
      .Bind(8, w.document);
  auto row = insert->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::Internal("store: inserting a workflow returned no id");
  const int64_t id = insert->Int(0);
  if (auto done = insert->Step(); !done.ok()) return done.error();
  return id;
}

Status UpdateWorkflow(Connection& c, const WorkflowRecord& w) {
  auto update = c.Prepare(
      "UPDATE workflows SET state = ?2, updated_at = ?3, ended_at = ?4, document = ?5, name = ?6 WHERE id = ?1");
  if (!update.ok()) return update.error();
  update->Bind(1, w.id)
      .Bind(2, w.state)
      .Bind(3, ToUnixMillis(w.updated_at))
      .Bind(4, EndedMillis(w))
      .Bind(5, w.document)
      .Bind(6, w.name);
  if (Status done = update->Run(); !done) return done;
  if (c.ChangedRows() == 0) return Error::NotFound("no workflow " + std::to_string(w.id));
  return Status::Ok();
}

Result<std::optional<WorkflowRecord>> GetWorkflow(Connection& c, int64_t id) {
  auto read = c.Prepare(Columns(true) + " WHERE id = ?1");
  if (!read.ok()) return read.error();
  read->Bind(1, id);
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<WorkflowRecord>();
  return std::optional<WorkflowRecord>(RecordFrom(*read));
}

Result<std::vector<WorkflowRecord>> ListWorkflows(Connection& c, const WorkflowFilter& filter) {
  // Newest first from `before_id` down: the primary key's order, so a page
  // reads its rows and no more (with a filter, those it passes over too).
  auto read = c.Prepare(Columns(filter.with_documents) + " WHERE (?1 = 0 OR ended_at = 0) AND (?2 = 0 OR id < ?2)" +
                        " AND (?3 = '' OR state = ?3) AND (?4 = '' OR project = ?4) ORDER BY id DESC LIMIT ?5");
  if (!read.ok()) return read.error();
  read->Bind(1, int64_t{filter.active_only ? 1 : 0})
      .Bind(2, filter.before_id)
      .Bind(3, filter.state)
      .Bind(4, filter.project)
      .Bind(5, static_cast<int64_t>(filter.limit));
  std::vector<WorkflowRecord> out;
  while (true) {
    auto row = read->Step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    out.push_back(RecordFrom(*read));
  }
  return out;
}

}  // namespace unisched::store::sql
