// Workflows in the store (unisched/store/workflows.h): what every
// implementation of Store must do.

#include <gtest/gtest.h>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

class WorkflowsTest : public testing::StoreContract {
 protected:
  static WorkflowFilter Filter(int limit, int64_t before_id = 0, std::string state = "", std::string project = "",
                               bool active_only = false, bool with_documents = false) {
    WorkflowFilter f;
    f.limit = limit;
    f.before_id = before_id;
    f.state = std::move(state);
    f.project = std::move(project);
    f.active_only = active_only;
    f.with_documents = with_documents;
    return f;
  }
  int64_t Insert(const std::string& name, const std::string& state, int64_t at_ms, bool over = false) {
    WorkflowRecord w;
    w.project = "genomics";
    w.user = "alice";
    w.name = name;
    w.state = state;
    w.created_at = w.updated_at = FromUnixMillis(at_ms);
    if (over) w.ended_at = FromUnixMillis(at_ms);
    w.document = R"({"spec":{"name":")" + name + R"("}})";
    auto id = store_->InsertWorkflow(w);
    EXPECT_TRUE(id.ok()) << id.error().message;
    return id.ok() ? *id : 0;
  }
};

INSTANTIATE_TEST_SUITE_P(Implementations, WorkflowsTest, ::testing::ValuesIn(testing::StoreImplementations()),
                         [](const auto& info) { return info.param; });

TEST_P(WorkflowsTest, AreNumberedKeptWholeUpdatedAndOutliveARestart) {
  auto none = store_->GetWorkflow(1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(Insert("variants", "RUNNING", 1'700'000'000'123), 1);
  EXPECT_EQ(Insert("qc", "RUNNING", 1'700'000'001'000), 2);

  auto first = store_->GetWorkflow(1);
  ASSERT_TRUE(first.ok() && first->has_value());
  WorkflowRecord changed = **first;
  changed.state = "SUCCEEDED";
  changed.updated_at = FromUnixMillis(1'700'000'005'000);
  changed.ended_at = FromUnixMillis(1'700'000'005'000);
  changed.document = R"({"spec":{"name":"variants"},"status":{"state":"SUCCEEDED"}})";
  ASSERT_TRUE(store_->UpdateWorkflow(changed).ok());

  Reopen();
  auto stored = store_->GetWorkflow(1);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->project, "genomics");
  EXPECT_EQ((*stored)->user, "alice");
  EXPECT_EQ((*stored)->name, "variants");
  EXPECT_EQ((*stored)->state, "SUCCEEDED");
  EXPECT_EQ(ToUnixMillis((*stored)->created_at), 1'700'000'000'123);
  ASSERT_TRUE((*stored)->ended_at.has_value());
  EXPECT_EQ(ToUnixMillis(*(*stored)->ended_at), 1'700'000'005'000);
  EXPECT_EQ((*stored)->document, changed.document);
  EXPECT_EQ(Insert("third", "RUNNING", 1'700'000'006'000), 3) << "numbering goes on after a restart";

  WorkflowRecord missing = changed;
  missing.id = 99;
  EXPECT_EQ(store_->UpdateWorkflow(missing).error().kind, ErrorKind::kNotFound);
}

TEST_P(WorkflowsTest, ListsNewestFirstThoseNotOverAloneAndDocumentsOnlyWhenAsked) {
  Insert("a", "SUCCEEDED", 1000, /*over=*/true);
  Insert("b", "FAILED", 2000);  // ended, but a job of it is still being cancelled
  Insert("c", "RUNNING", 3000);
  auto all = store_->ListWorkflows(Filter(10));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "c");
  EXPECT_EQ((*all)[2].name, "a");
  EXPECT_TRUE((*all)[0].document.empty());
  auto active = store_->ListWorkflows(Filter(10, 0, "", "", /*active_only=*/true, /*with_documents=*/true));
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[1].name, "b");
  EXPECT_EQ((*active)[1].document, R"({"spec":{"name":"b"}})");
  EXPECT_EQ(store_->ListWorkflows(Filter(1))->size(), 1u);
}

TEST_P(WorkflowsTest, ListsByStateAndProjectInPagesOlderThanAnId) {
  auto names = [this](const WorkflowFilter& filter) {
    auto got = store_->ListWorkflows(filter);
    EXPECT_TRUE(got.ok()) << got.error().message;
    std::vector<std::string> out;
    for (const auto& w : got.ok() ? *got : std::vector<WorkflowRecord>{}) out.push_back(w.name);
    return out;
  };
  for (int i = 1; i <= 5; ++i) Insert("w" + std::to_string(i), i % 2 ? "RUNNING" : "SUCCEEDED", 1000 * i, i % 2 == 0);
  WorkflowRecord other;
  other.project = "physics";
  other.user = "bob";
  other.name = "w6";
  other.state = "RUNNING";
  other.created_at = other.updated_at = FromUnixMillis(6000);
  ASSERT_TRUE(store_->InsertWorkflow(other).ok());

  using Names = std::vector<std::string>;
  EXPECT_EQ(names(Filter(2)), (Names{"w6", "w5"}));
  EXPECT_EQ(names(Filter(2, 5)), (Names{"w4", "w3"})) << "the page after id 5";
  EXPECT_EQ(names(Filter(2, 2)), (Names{"w1"}));
  EXPECT_EQ(names(Filter(10, 0, "RUNNING")), (Names{"w6", "w5", "w3", "w1"}));
  EXPECT_EQ(names(Filter(10, 5, "RUNNING", "genomics")), (Names{"w3", "w1"}));
  EXPECT_EQ(names(Filter(10, 0, "", "physics")), (Names{"w6"}));
  EXPECT_EQ(names(Filter(10, 0, "SUCCEEDED", "", /*active_only=*/true)), Names{}) << "those succeeded are over";
}

}  // namespace
}  // namespace unisched::store
