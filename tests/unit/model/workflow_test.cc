// Workflows' graph checks and decisions (model/workflow.h), driven like the
// book drives them: released instances get job ids, then their jobs end.

#include "unisched/model/workflow.h"

#include <gtest/gtest.h>

namespace unisched::model {
namespace {

WorkflowTask Task(std::string name, std::vector<std::string> after = {}, std::vector<std::string> scatter = {}) {
  WorkflowTask task;
  task.name = std::move(name);
  task.job = R"({"command":["true"]})";
  task.after = std::move(after);
  task.scatter = std::move(scatter);
  return task;
}

// A workflow being run: hands each release a job id, as the book does.
struct Harness {
  WorkflowSpec spec;
  WorkflowStatus status;
  WorkflowJobId next_job = 100;
  std::vector<Release> released;  // every release so far
  std::vector<WorkflowJobId> cancelled;

  explicit Harness(std::vector<WorkflowTask> tasks) { spec = {"test", std::move(tasks)}; }
  void Take(const WorkflowActions& actions) {
    for (const auto& r : actions.releases) {
      status.instances[r.task][static_cast<size_t>(r.instance)].jobs.push_back(next_job++);
      released.push_back(r);
    }
    cancelled.insert(cancelled.end(), actions.cancel.begin(), actions.cancel.end());
  }
  void Start() {
    ASSERT_TRUE(ValidateWorkflowGraph(spec).ok());
    WorkflowRun run(spec, status);
    Take(run.Start(Timestamp{}));
  }
  TaskInstance& At(const std::string& task, int64_t i = 0) { return status.instances[task][static_cast<size_t>(i)]; }
  // The latest job of (task, i) ends.
  void End(const std::string& task, int64_t i, bool ok, bool cancelled_by_user = false) {
    WorkflowRun run(spec, status);
    Take(run.JobEnded(task, i, At(task, i).jobs.back(), ok, cancelled_by_user, ok ? "" : "exit 1", Timestamp{}));
  }
  std::vector<std::string> ReleasedNames() const {
    std::vector<std::string> names;
    for (const auto& r : released) names.push_back(r.task + "[" + std::to_string(r.instance) + "]" + r.tool);
    return names;
  }
};

TEST(WorkflowGraphTest, RejectsWhatCannotRunNamingTheField) {
  struct Case {
    std::string what;
    std::vector<WorkflowTask> tasks;
    std::string field;
  };
  WorkflowTask alt_with_after = Task("b", {"a"});
  WorkflowTask uses_alt = Task("c");
  uses_alt.on_failure.alternative = "b";
  WorkflowTask bad_retries = Task("a");
  bad_retries.on_failure.retries = 101;
  WorkflowTask bad_factor = Task("a");
  bad_factor.on_failure.change.memory_factor = 0;
  WorkflowTask self_alt = Task("a");
  self_alt.on_failure.alternative = "a";
  WorkflowTask depends_on_alt = Task("d", {"b2"});
  WorkflowTask with_alt = Task("a2");
  with_alt.on_failure.alternative = "b2";
  const std::vector<Case> cases = {
      {"no tasks", {}, "tasks"},
      {"bad name", {Task("a b")}, "tasks[0].name"},
      {"duplicate", {Task("a"), Task("a")}, "tasks[1].name"},
      {"unknown after", {Task("a", {"x"})}, "tasks[0].after[0]"},
      {"self", {Task("a", {"a"})}, "tasks[0].after[0]"},
      {"cycle", {Task("a", {"c"}), Task("b", {"a"}), Task("c", {"b"})}, "tasks[0].after"},
      {"alternative with after", {Task("a"), alt_with_after, uses_alt}, "tasks[2].on_failure.alternative"},
      {"retries", {bad_retries}, "tasks[0].on_failure.retries"},
      {"factor", {bad_factor}, "tasks[0].on_failure.change.memory_factor"},
      {"own alternative", {self_alt}, "tasks[0].on_failure.alternative"},
      {"after an alternative", {with_alt, Task("b2"), depends_on_alt}, "tasks[2].after[0]"},
  };
  for (const auto& c : cases) {
    const Status status = ValidateWorkflowGraph({"w", c.tasks});
    ASSERT_FALSE(status.ok()) << c.what;
    EXPECT_EQ(status.error().field, c.field) << c.what << ": " << status.error().message;
    EXPECT_EQ(status.error().kind, ErrorKind::kUnprocessable) << c.what;
  }
  EXPECT_TRUE(ValidateWorkflowGraph({"w", {Task("a"), Task("b", {"a"}), Task("c", {"a", "b"})}}).ok());
}

TEST(WorkflowRunTest, ReleasesRootsThenEachDependantOnceAllItsInputsSucceed) {
  Harness h({Task("a"), Task("b"), Task("c", {"a", "b"}), Task("d", {"c"})});
  h.Start();
  EXPECT_EQ(h.ReleasedNames(), (std::vector<std::string>{"a[0]", "b[0]"}));
  h.End("a", 0, true);
  EXPECT_EQ(h.released.size(), 2u) << "c waits for b too";
  h.End("b", 0, true);
  EXPECT_EQ(h.ReleasedNames().back(), "c[0]");
  h.End("c", 0, true);
  h.End("d", 0, true);
  EXPECT_EQ(h.status.state, WorkflowState::kSucceeded);
  EXPECT_EQ(h.released.size(), 4u);
}

TEST(WorkflowRunTest, RetriesCountTheirTriesThenSwitchToTheAlternativeThenFail) {
  WorkflowTask align = Task("align");
  align.on_failure.retries = 1;
  align.on_failure.change.memory_factor = 2;
  align.on_failure.alternative = "align_mm2";
  WorkflowTask alt = Task("align_mm2");
  Harness h({align, alt, Task("call", {"align"}), Task("other")});
  h.Start();
  EXPECT_EQ(h.status.instances.count("align_mm2"), 0u) << "an alternative has no instances of its own";
  h.End("align", 0, false);
  ASSERT_EQ(h.released.back().task, "align");
  EXPECT_EQ(h.released.back().retry, 1);
  EXPECT_EQ(h.released.back().try_number, 2);
  h.End("align", 0, false);
  EXPECT_EQ(h.released.back().tool, "align_mm2");
  EXPECT_EQ(h.released.back().retry, 0);
  EXPECT_EQ(h.released.back().try_number, 3);
  h.End("align", 0, true);
  EXPECT_EQ(h.released.back().task, "call") << "the alternative's success releases what follows";
  EXPECT_EQ(h.At("align").jobs.size(), 3u);

  Harness failing({align, alt, Task("call", {"align"}), Task("other")});
  failing.Start();
  for (int i = 0; i < 3; ++i) failing.End("align", 0, false);
  EXPECT_EQ(failing.status.state, WorkflowState::kFailed);
  EXPECT_EQ(failing.At("align").state, InstanceState::kFailed);
  EXPECT_EQ(failing.cancelled, (std::vector<WorkflowJobId>{failing.At("other").jobs.back()}))
      << "then: fail cancels what still runs";
  failing.End("other", 0, false, true);
  EXPECT_EQ(failing.At("other").state, InstanceState::kCancelled);
  EXPECT_EQ(failing.At("call").state, InstanceState::kWaiting) << "never released";
}

TEST(WorkflowRunTest, SkipAndContinueDecideWhatDependsOnAFailure) {
  WorkflowTask a = Task("a");
  a.on_failure.then = FailureThen::kSkip;
  Harness skip({a, Task("b", {"a"}), Task("c", {"b"}), Task("x")});
  skip.Start();
  skip.End("a", 0, false);
  EXPECT_EQ(skip.At("b").state, InstanceState::kSkipped);
  EXPECT_EQ(skip.At("c").state, InstanceState::kSkipped) << "a skip reaches everything downstream";
  EXPECT_EQ(skip.status.state, WorkflowState::kRunning) << "x still runs";
  skip.End("x", 0, true);
  EXPECT_EQ(skip.status.state, WorkflowState::kFailed);

  a.on_failure.then = FailureThen::kContinue;
  Harness go_on({a, Task("b", {"a"})});
  go_on.Start();
  go_on.End("a", 0, false);
  EXPECT_EQ(go_on.released.back().task, "b");
  go_on.End("b", 0, true);
  EXPECT_EQ(go_on.status.state, WorkflowState::kSucceeded);
  EXPECT_TRUE(go_on.At("a").failure_ignored);
}

TEST(WorkflowRunTest, ScatterCorrespondsInstanceByInstanceAndGathersAtTheEnd) {
  const std::vector<std::string> items = {"s1", "s2", "s3"};
  WorkflowTask align = Task("align", {"index"}, items);
  WorkflowTask sort = Task("sort", {"align"}, items);
  Harness h({Task("index"), align, sort, Task("merge", {"sort"})});
  h.Start();
  h.End("index", 0, true);
  EXPECT_EQ(h.ReleasedNames(), (std::vector<std::string>{"index[0]", "align[0]", "align[1]", "align[2]"}));
  h.End("align", 1, true);
  EXPECT_EQ(h.ReleasedNames().back(), "sort[1]") << "instance 1 after instance 1";
  h.End("align", 0, true);
  h.End("align", 2, true);
  h.End("sort", 0, true);
  h.End("sort", 1, true);
  EXPECT_EQ(h.ReleasedNames().back(), "sort[2]") << "merge waits for every sort";
  h.End("sort", 2, true);
  EXPECT_EQ(h.ReleasedNames().back(), "merge[0]");
  h.End("merge", 0, true);
  EXPECT_EQ(h.status.state, WorkflowState::kSucceeded);
}

TEST(WorkflowRunTest, CancelThenResumeRunsAgainOnlyWhatDidNotSucceed) {
  Harness h({Task("a"), Task("b", {"a"}), Task("c", {"b"})});
  h.Start();
  h.End("a", 0, true);
  {
    WorkflowRun run(h.spec, h.status);
    h.Take(run.Cancel("alice", Timestamp{}));
  }
  EXPECT_EQ(h.status.state, WorkflowState::kCancelled);
  EXPECT_EQ(h.cancelled, (std::vector<WorkflowJobId>{h.At("b").jobs.back()}));
  EXPECT_EQ(h.At("c").state, InstanceState::kCancelled);
  h.End("b", 0, false, true);
  EXPECT_EQ(h.At("b").state, InstanceState::kCancelled);
  {
    WorkflowRun run(h.spec, h.status);
    h.Take(run.Resume("alice", Timestamp{}));
  }
  EXPECT_EQ(h.status.state, WorkflowState::kRunning);
  EXPECT_EQ(h.ReleasedNames(), (std::vector<std::string>{"a[0]", "b[0]", "b[0]"})) << "a is not run again";
  EXPECT_EQ(h.released.back().try_number, 2) << "a new try: a new idempotency key";
  h.End("b", 0, true);
  h.End("c", 0, true);
  EXPECT_EQ(h.status.state, WorkflowState::kSucceeded);
}

TEST(WorkflowRunTest, TasksAddedToARunningWorkflowRunAfterWhatTheyName) {
  Harness h({Task("a")});
  h.Start();
  h.End("a", 0, true);
  EXPECT_EQ(h.status.state, WorkflowState::kSucceeded);
  {
    WorkflowRun run(h.spec, h.status);
    h.Take(run.AddTasks({Task("b", {"a"})}, Timestamp{}));
  }
  EXPECT_EQ(h.status.state, WorkflowState::kRunning);
  EXPECT_EQ(h.ReleasedNames().back(), "b[0]");
  h.End("b", 0, true);
  EXPECT_EQ(h.status.state, WorkflowState::kSucceeded);
}

TEST(WorkflowRunTest, AJobThatIsNotTheInstancesLatestChangesNothing) {
  Harness h({Task("a"), Task("b", {"a"})});
  h.Start();
  WorkflowRun run(h.spec, h.status);
  const auto actions = run.JobEnded("a", 0, 12345, true, false, "", Timestamp{});
  EXPECT_TRUE(actions.releases.empty());
  EXPECT_EQ(h.At("a").state, InstanceState::kReleased);
}

}  // namespace
}  // namespace unisched::model
