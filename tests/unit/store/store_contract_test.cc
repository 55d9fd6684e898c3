// The store contract: what every implementation of Store (SQLite, and the
// in-memory one of tests/testing) must do. Jobs, lists, idempotency, group
// commit with writes that fail alone, durability across a reopen,
// retention, and the small record tables.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <stdexcept>
#include <thread>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

using model::Job;
using model::JobId;
using model::JobState;
using testing::Filter;
using testing::MakeJob;

class StoreTest : public testing::StoreContract {
 protected:
  JobId Insert(const Job& job, const std::string& key = "") {
    JobId id = 0;
    Status s = store_->WriteSync([&](Transaction& txn) -> Status {
      auto r = txn.InsertJob(job, key);
      if (!r.ok()) return r.error();
      id = *r;
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.error().message;
    return id;
  }

  Status Update(const Job& job) {
    return store_->WriteSync([&](Transaction& txn) { return txn.UpdateJob(job); });
  }

  static std::vector<JobId> Ids(const JobPage& page) {
    std::vector<JobId> ids;
    for (const auto& j : page.jobs) ids.push_back(j.id);
    return ids;
  }
};

INSTANTIATE_TEST_SUITE_P(Implementations, StoreTest, ::testing::ValuesIn(testing::StoreImplementations()),
                         [](const auto& info) { return info.param; });

TEST_P(StoreTest, InsertAssignsIdsAndGetReturnsTheJob) {
  Job job = MakeJob("first");
  job.id = 0;  // no reservation: the store assigns one
  job.env = {{"A", "1"}};
  job.constraints = {{"interconnect", "ib"}};
  const JobId a = Insert(job);
  const JobId b = Insert(MakeJob("second"));
  EXPECT_GT(a, 0);
  EXPECT_GT(b, a);

  auto got = store_->GetJob(a);
  ASSERT_TRUE(got.ok()) << got.error().message;
  Job want = job;
  want.id = a;
  EXPECT_EQ(*got, want);

  auto missing = store_->GetJob(b + 100);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
}

TEST_P(StoreTest, ReservedIdsAreUsedAndNeverCollide) {
  const JobId r1 = *store_->ReserveJobId();
  const JobId r2 = *store_->ReserveJobId();
  EXPECT_GT(r2, r1);
  Job reserved = MakeJob("reserved");
  reserved.id = r2;  // inserted before r1's job: commit order need not follow reservation order
  EXPECT_EQ(Insert(reserved), r2);
  const JobId unreserved = Insert(MakeJob("plain"));
  EXPECT_GT(unreserved, r2);  // never r1: that id stays reserved
  reserved.id = r1;
  EXPECT_EQ(Insert(reserved), r1);
  EXPECT_EQ(store_->GetJob(r2)->name, "reserved");
}

// An array's task ids (docs/arrays.md): a range reserved in a transaction,
// which no id handed out before or after it, reserved or assigned, falls in;
// a transaction that fails gives its range back to no one (a gap).
TEST_P(StoreTest, ReservedRangesOfIdsAreNeverHandedOutAgain) {
  auto reserve = [&](int64_t count, bool commit) {
    JobId first = 0;
    Status s = store_->WriteSync([&](Transaction& txn) -> Status {
      auto r = txn.ReserveJobIds(count);
      if (!r.ok()) return r.error();
      first = *r;
      return commit ? Status::Ok() : Status(Error::Unavailable("rolled back"));
    });
    EXPECT_EQ(s.ok(), commit) << (s.ok() ? "" : s.error().message);
    return first;
  };
  const JobId before = *store_->ReserveJobId();
  const JobId first = reserve(1000, true);
  EXPECT_GT(first, 0);
  const JobId second = reserve(500, true);
  EXPECT_TRUE(second >= first + 1000 || second + 500 <= first) << first << " " << second;
  (void)reserve(10, false);
  std::set<JobId> taken = {before};
  for (int i = 0; i < 50; ++i) {
    taken.insert(*store_->ReserveJobId());
    taken.insert(Insert(MakeJob("plain")));
  }
  for (JobId id : taken) {
    EXPECT_FALSE(id >= first && id < first + 1000) << id << " is in the first range from " << first;
    EXPECT_FALSE(id >= second && id < second + 500) << id << " is in the second range from " << second;
  }
}

TEST_P(StoreTest, SecretsAreMadeOnceRotatedListedAndDeleted) {
  store::SecretRecord secret;
  secret.project = "genomics";
  secret.name = "db-password";
  secret.sealed = "v1.sealed-one";
  secret.description = "the results database";
  secret.created_by = "alice";
  secret.created_at = FromUnixMillis(1000);
  ASSERT_TRUE(store_->InsertSecret(secret).ok());
  Status again = store_->InsertSecret(secret);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, "secret_exists");

  auto got = store_->GetSecret("genomics", "db-password");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->version, 1);
  EXPECT_EQ((*got)->sealed, "v1.sealed-one");
  EXPECT_EQ((*got)->updated_by, "alice");
  EXPECT_EQ(ToUnixMillis((*got)->updated_at), 1000);

  store::SecretRecord rotation = secret;
  rotation.sealed = "v1.sealed-two";
  rotation.description = "";  // kept
  rotation.updated_by = "bob";
  rotation.updated_at = FromUnixMillis(2000);
  auto rotated = store_->RotateSecret(rotation);
  ASSERT_TRUE(rotated.ok() && rotated->has_value());
  EXPECT_EQ((*rotated)->version, 2);
  EXPECT_EQ((*rotated)->sealed, "v1.sealed-two");
  EXPECT_EQ((*rotated)->description, "the results database");
  EXPECT_EQ((*rotated)->created_by, "alice");
  EXPECT_EQ((*rotated)->updated_by, "bob");
  rotation.name = "nothing-here";
  auto missing = store_->RotateSecret(rotation);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  secret.project = "physics";
  ASSERT_TRUE(store_->InsertSecret(secret).ok());  // the same name in another project
  EXPECT_EQ(store_->ListSecrets("")->size(), 2u);
  auto genomics = store_->ListSecrets("genomics");
  ASSERT_TRUE(genomics.ok());
  ASSERT_EQ(genomics->size(), 1u);
  EXPECT_EQ(genomics->front().version, 2);

  EXPECT_TRUE(*store_->DeleteSecret("genomics", "db-password"));
  EXPECT_FALSE(*store_->DeleteSecret("genomics", "db-password"));
  EXPECT_FALSE(store_->GetSecret("genomics", "db-password")->has_value());
  EXPECT_TRUE(store_->GetSecret("physics", "db-password")->has_value());
}

TEST_P(StoreTest, UpdateRewritesColumnsAndDocument) {
  const JobId id = Insert(MakeJob("job"));
  Job job = *store_->GetJob(id);
  job.state = JobState::kRunning;
  job.started_at = FromUnixMillis(1'700'000'005'000);
  model::Attempt attempt;
  attempt.allocation = {{"x86-c64m256-hpc-01", 4, 4096, {}}};
  attempt.started_at = job.started_at;
  job.attempts.push_back(attempt);
  ASSERT_TRUE(Update(job).ok());
  EXPECT_EQ(*store_->GetJob(id), job);
  EXPECT_EQ(Ids(store_->ListJobs(Filter().State(JobState::kRunning))), std::vector<JobId>{id});
  EXPECT_TRUE(store_->ListJobs(Filter().State(JobState::kPending)).jobs.empty());

  Job ghost = job;
  ghost.id = id + 10;
  Status s = Update(ghost);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kNotFound);
}

TEST_P(StoreTest, TransactionReadsItsOwnUncommittedWrites) {
  Status s = store_->WriteSync([&](Transaction& txn) -> Status {
    auto id = txn.InsertJob(MakeJob("in-flight"), "");
    if (!id.ok()) return id.error();
    auto seen = txn.GetJob(*id);
    EXPECT_TRUE(seen.ok());
    if (seen.ok()) {
      EXPECT_EQ(seen->name, "in-flight");
    }
    // Readers see only committed data.
    EXPECT_FALSE(store_->GetJob(*id).ok());
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok());
}

TEST_P(StoreTest, ListFilters) {
  const JobId a = Insert(MakeJob("a", "alice", "genomics", "hpc-precision", "cpu-hpc-pool"));
  const JobId b = Insert(MakeJob("b", "bob", "vision", "ai-training", "gpu-train-pool", JobState::kRunning));
  const JobId c = Insert(MakeJob("c", "alice", "vision", "ai-inference", "inference-pool", JobState::kHeld));
  const JobId d = Insert(MakeJob("d", "carol", "default", "ai-training", "gpu-train-pool", JobState::kCompleted));

  struct Case {
    std::string name;
    JobFilter filter;
    std::vector<JobId> want;  // newest first
  };
  const std::vector<Case> cases = {
      {"all", {}, {d, c, b, a}},
      {"state", Filter().State(JobState::kRunning), {b}},
      {"queue", Filter().Queue("ai-training"), {d, b}},
      {"pool", Filter().Pool("inference-pool"), {c}},
      {"project", Filter().Project("vision"), {c, b}},
      {"user", Filter().User("alice"), {c, a}},
      {"user and project", Filter().Project("vision").User("alice"), {c}},
      {"no match", Filter().Queue("nope"), {}},
      {"visible by project", Filter().Visible({"genomics"}), {a}},
      {"visible by queue", Filter().Visible({}, {"ai-training"}), {d, b}},
      {"visible by either", Filter().Visible({"genomics"}, {"ai-inference"}), {c, a}},
      {"visible nothing", Filter().Visible({}), {}},
      {"visible and filtered", Filter().User("bob").Visible({"vision", "default"}), {b}},
  };
  for (const auto& c : cases) {
    const JobPage page = store_->ListJobs(c.filter);
    EXPECT_EQ(Ids(page), c.want) << c.name;
    EXPECT_EQ(page.total, static_cast<int64_t>(c.want.size())) << c.name;
    EXPECT_FALSE(page.next_cursor.has_value()) << c.name;
  }
}

TEST_P(StoreTest, CursorPagingAndTotal) {
  std::vector<JobId> ids;
  for (int i = 0; i < 25; ++i) ids.push_back(Insert(MakeJob("job-" + std::to_string(i))));
  Insert(MakeJob("other", "zed"));  // filtered out below
  std::reverse(ids.begin(), ids.end());

  std::vector<JobId> seen;
  std::vector<size_t> sizes;
  JobFilter filter = Filter().User("alice").Limit(10);
  for (;;) {
    const JobPage page = store_->ListJobs(filter);
    EXPECT_EQ(page.total, 25);  // ignores limit and cursor
    sizes.push_back(page.jobs.size());
    for (const auto& j : page.jobs) seen.push_back(j.id);
    if (!page.next_cursor) break;
    EXPECT_EQ(*page.next_cursor, page.jobs.back().id);
    filter.cursor = page.next_cursor;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{10, 10, 5}));
  EXPECT_EQ(seen, ids);

  // An exact multiple ends without a further cursor.
  const JobPage all = store_->ListJobs(Filter().User("alice").Limit(25));
  EXPECT_EQ(all.jobs.size(), 25u);
  EXPECT_FALSE(all.next_cursor.has_value());
}

TEST_P(StoreTest, LimitZeroCountsOnly) {
  for (int i = 0; i < 3; ++i) Insert(MakeJob("job"));
  const JobPage page = store_->ListJobs(Filter().Limit(0));
  EXPECT_TRUE(page.jobs.empty());
  EXPECT_EQ(page.total, 3);
  EXPECT_FALSE(page.next_cursor.has_value());
}

TEST_P(StoreTest, IdempotencyKeys) {
  const JobId first = Insert(MakeJob("a", "alice"), "key-1");
  // The same key again for the same user: refused, and no second job.
  JobId second = 0;
  Status s = store_->WriteSync([&](Transaction& txn) -> Status {
    EXPECT_EQ(txn.FindIdempotentJob("alice", "key-1"), first);
    auto r = txn.InsertJob(MakeJob("a-again", "alice"), "key-1");
    if (!r.ok()) return r.error();
    second = *r;
    return Status::Ok();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kConflict);
  EXPECT_EQ(second, 0);
  EXPECT_EQ(store_->ListJobs({}).total, 1);

  // Another user's key space is separate.
  const JobId bobs = Insert(MakeJob("b", "bob"), "key-1");
  EXPECT_NE(bobs, first);
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "key-1"), first);
                    EXPECT_EQ(txn.FindIdempotentJob("bob", "key-1"), bobs);
                    EXPECT_EQ(txn.FindIdempotentJob("carol", "key-1"), std::nullopt);
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "key-2"), std::nullopt);
                    return Status::Ok();
                  })
                  .ok());
  // No key: nothing recorded.
  Insert(MakeJob("c", "carol"));
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    EXPECT_EQ(txn.FindIdempotentJob("carol", ""), std::nullopt);
                    return Status::Ok();
                  })
                  .ok());
}

TEST_P(StoreTest, ConcurrentWritersAllLandWithUniqueIds) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::vector<JobId>> ids(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        JobId id = 0;
        Status s = store_->WriteSync([&](Transaction& txn) -> Status {
          auto r = txn.InsertJob(MakeJob("t" + std::to_string(t) + "-" + std::to_string(i)), "");
          if (!r.ok()) return r.error();
          id = *r;
          return Status::Ok();
        });
        if (!s.ok()) ++failures;
        ids[t].push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<JobId> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(unique.count(0), 0u);
  EXPECT_EQ(store_->ListJobs(Filter().Limit(0)).total, kThreads * kPerThread);
  for (JobId id : {*unique.begin(), *unique.rbegin()}) EXPECT_TRUE(store_->GetJob(id).ok());
}

TEST_P(StoreTest, AFailingWriteRollsBackAloneInItsBatch) {
  // Hold the writer inside one write so the next four queue up and are
  // committed together in the following batch.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> blocking;
  store_->Write(
      [&](Transaction&) {
        blocking.set_value();
        released.wait();
        return Status::Ok();
      },
      nullptr);
  blocking.get_future().wait();

  JobId a = 0, b = 0, c = 0, d = 0;
  bool a_pending_while_d_ran = false;
  std::vector<std::promise<Status>> done(4);
  auto insert = [&](const std::string& name, JobId& out) {
    return [&, name](Transaction& txn) -> Status {
      auto r = txn.InsertJob(MakeJob(name), "key-" + name);
      if (!r.ok()) return r.error();
      out = *r;
      return Status::Ok();
    };
  };
  auto finish = [&](int i) { return [&, i](Status s) { done[i].set_value(std::move(s)); }; };
  store_->Write(insert("a", a), finish(0));
  store_->Write(
      [&](Transaction& txn) -> Status {
        if (Status s = insert("b", b)(txn); !s) return s;
        if (Status s = txn.AppendEvent(b, {FromUnixMillis(1), "submitted", "b"}); !s) return s;
        return Error::Conflict("refused", "this write changes its mind");
      },
      finish(1));
  store_->Write(
      [&](Transaction& txn) -> Status {
        if (Status s = insert("c", c)(txn); !s) return s;
        throw std::runtime_error("boom");
      },
      finish(2));
  store_->Write(
      [&](Transaction& txn) -> Status {
        if (Status s = insert("d", d)(txn); !s) return s;
        // a is written in this same transaction but not yet committed.
        a_pending_while_d_ran = txn.GetJob(a).ok() && !store_->GetJob(a).ok();
        return Status::Ok();
      },
      finish(3));
  release.set_value();

  std::vector<Status> results;
  for (auto& p : done) results.push_back(p.get_future().get());
  EXPECT_TRUE(results[0].ok());
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, "refused");
  ASSERT_FALSE(results[2].ok());
  EXPECT_EQ(results[2].error().kind, ErrorKind::kInternal);
  EXPECT_NE(results[2].error().message.find("boom"), std::string::npos);
  EXPECT_TRUE(results[3].ok());
  EXPECT_TRUE(a_pending_while_d_ran);

  // Rolled-back ids are handed out again, so look at names, not ids.
  std::vector<std::string> names;
  for (const auto& j : store_->ListJobs({}).jobs) names.push_back(j.name);
  EXPECT_EQ(names, (std::vector<std::string>{"d", "a"}));
  EXPECT_TRUE(store_->ListEvents(d).empty());  // b's event went with b
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "key-b"), std::nullopt);
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "key-c"), std::nullopt);
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "key-d"), d);
                    return Status::Ok();
                  })
                  .ok());
}

TEST_P(StoreTest, DoneRunsAfterTheCommitIsVisible) {
  std::promise<bool> visible;
  JobId id = 0;
  store_->Write(
      [&](Transaction& txn) -> Status {
        id = *txn.InsertJob(MakeJob("x"), "");
        return Status::Ok();
      },
      [&](Status s) { visible.set_value(s.ok() && store_->GetJob(id).ok()); });
  EXPECT_TRUE(visible.get_future().get());
}

TEST_P(StoreTest, DataSurvivesCloseAndReopen) {
  Job job = MakeJob("durable");
  const JobId id = Insert(job, "k");
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    return txn.AppendEvent(id, {FromUnixMillis(5), "submitted", "queued"});
                  })
                  .ok());
  store_->Close();
  store_->Close();  // twice is fine
  Reopen();
  job.id = id;
  auto got = store_->GetJob(id);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, job);
  EXPECT_EQ(store_->ListEvents(id).size(), 1u);
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "k"), id);
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_GT(Insert(MakeJob("next")), id);
}

TEST_P(StoreTest, CloseDrainsQueuedWritesAndLaterWritesAreRefused) {
  std::atomic<int> ok{0};
  for (int i = 0; i < 50; ++i) {
    store_->Write(
        [&](Transaction& txn) { return txn.InsertJob(MakeJob("q"), "").ok() ? Status::Ok() : Error::Internal("x"); },
        [&](Status s) { ok += s.ok() ? 1 : 0; });
  }
  store_->Close();
  EXPECT_EQ(ok.load(), 50);
  EXPECT_EQ(store_->ListJobs(Filter().Limit(0)).total, 50);  // reads still work

  std::optional<Status> late;
  store_->Write([](Transaction&) { return Status::Ok(); }, [&](Status s) { late = s; });
  ASSERT_TRUE(late.has_value());
  ASSERT_FALSE(late->ok());
  EXPECT_EQ(late->error().kind, ErrorKind::kUnavailable);
  EXPECT_FALSE(store_->WriteSync([](Transaction&) { return Status::Ok(); }).ok());
}

TEST_P(StoreTest, WriteSyncFromTheWriterThreadFailsInsteadOfHanging) {
  std::promise<Status> nested;
  store_->Write([](Transaction&) { return Status::Ok(); },
                [&](Status) { nested.set_value(store_->WriteSync([](Transaction&) { return Status::Ok(); })); });
  Status s = nested.get_future().get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kInternal);
}

TEST_P(StoreTest, DeleteJobsEndedBefore) {
  const Timestamp cutoff = FromUnixMillis(1'700'000'100'000);
  auto ended = [](const std::string& name, JobState state, int64_t ended_ms) {
    Job job = MakeJob(name, "alice", "default", "hpc-precision", "cpu-hpc-pool", state);
    job.ended_at = FromUnixMillis(ended_ms);
    return job;
  };
  const JobId old_done = Insert(ended("old-done", JobState::kCompleted, 1'700'000'050'000), "k-old");
  const JobId old_failed = Insert(ended("old-failed", JobState::kFailed, 1'700'000'099'999));
  const JobId at_cutoff = Insert(ended("at-cutoff", JobState::kCancelled, 1'700'000'100'000));
  const JobId recent = Insert(ended("recent", JobState::kTimeout, 1'700'000'200'000));
  const JobId running =
      Insert(MakeJob("running", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kRunning));
  // Not terminal, so kept whatever its ended_at says.
  const JobId odd = Insert(ended("odd", JobState::kPending, 1));
  for (JobId id : {old_done, old_failed, running}) {
    ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) {
                        return txn.AppendEvent(id, {FromUnixMillis(1), "k", "m"});
                      })
                    .ok());
  }

  std::vector<JobId> deleted;
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) -> Status {
                    auto r = txn.DeleteJobsEndedBefore(cutoff);
                    if (!r.ok()) return r.error();
                    deleted = *r;
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(deleted, (std::vector<JobId>{old_done, old_failed}));
  for (JobId id : {old_done, old_failed}) {
    EXPECT_FALSE(store_->GetJob(id).ok());
    EXPECT_TRUE(store_->ListEvents(id).empty());
  }
  for (JobId id : {at_cutoff, recent, running, odd}) EXPECT_TRUE(store_->GetJob(id).ok());
  EXPECT_EQ(store_->ListEvents(running).size(), 1u);
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    EXPECT_EQ(txn.FindIdempotentJob("alice", "k-old"), std::nullopt);
                    return Status::Ok();
                  })
                  .ok());
  // Ids are never reused, even after the newest rows are deleted.
  EXPECT_GT(Insert(MakeJob("new")), odd);
}

TEST_P(StoreTest, LatestEndedJobsPerUserAndPerNameOldestFirst) {
  auto ended = [](const std::string& name, const std::string& user, int64_t ended_ms) {
    Job job = MakeJob(name, user, "default", "hpc-precision", "cpu-hpc-pool", JobState::kCompleted);
    job.ended_at = FromUnixMillis(1'700'000'000'000 + ended_ms);
    return job;
  };
  // alice: a, b, a, c, c by end time; bob: one; and a job that never ended.
  const JobId a1 = Insert(ended("a", "alice", 10));
  const JobId b1 = Insert(ended("b", "alice", 20));
  const JobId a2 = Insert(ended("a", "alice", 30));
  const JobId c1 = Insert(ended("c", "alice", 40));
  const JobId c2 = Insert(ended("c", "alice", 40));  // the same end: the higher id is the later
  const JobId bob = Insert(ended("a", "bob", 5));
  Insert(MakeJob("a", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kRunning));

  auto ids = [&](int per_key) {
    std::vector<JobId> out;
    for (const Job& job : store_->LoadLatestEndedJobs(per_key)) out.push_back(job.id);
    return out;
  };
  // 1 per key: alice's latest (c2), the latest a (a2) and b (b1), bob's only.
  EXPECT_EQ(ids(1), (std::vector<JobId>{bob, b1, a2, c2}));
  // 2 per key: alice's two latest (c1, c2) and every name's two latest.
  EXPECT_EQ(ids(2), (std::vector<JobId>{bob, a1, b1, a2, c1, c2}));
  const auto jobs = store_->LoadLatestEndedJobs(1);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].user, "bob");  // whole records
  EXPECT_EQ(jobs[3].name, "c");
}

TEST_P(StoreTest, WaitingJobsAreListedLongestWaitingFirstWithinTheirVisibility) {
  auto at = [](const std::string& name, const std::string& project, JobState state, int64_t submitted_ms) {
    Job job = MakeJob(name, "alice", project, "hpc-precision", "cpu-hpc-pool", state);
    job.submitted_at = FromUnixMillis(1'700'000'000'000 + submitted_ms);
    return job;
  };
  const JobId late = Insert(at("late", "default", JobState::kPending, 30));
  const JobId held = Insert(at("held", "default", JobState::kHeld, 10));
  const JobId tie = Insert(at("tie", "default", JobState::kPending, 10));  // same time: id order
  Insert(at("running", "default", JobState::kRunning, 0));
  Insert(at("done", "default", JobState::kCompleted, 0));
  const JobId other = Insert(at("other", "physics", JobState::kPending, 20));
  auto ids = [&](const JobFilter& f) {
    std::vector<JobId> out;
    for (const auto& w : store_->ListWaitingJobs(f)) out.push_back(w.id);
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<JobId>{held, tie, other, late}));
  JobFilter mine;
  mine.visible_projects = std::vector<std::string>{"default"};
  EXPECT_EQ(ids(mine), (std::vector<JobId>{held, tie, late}));
  const auto rows = store_->ListWaitingJobs(mine);
  EXPECT_EQ(rows[0].state, JobState::kHeld);
  EXPECT_EQ(rows[0].name, "held");
  EXPECT_EQ(rows[0].queue, "hpc-precision");
  EXPECT_EQ(rows[0].pool, "cpu-hpc-pool");
  EXPECT_EQ(rows[2].submitted_at, FromUnixMillis(1'700'000'000'030));
}

TEST_P(StoreTest, StepsAreKeptPerJobReplacedWhenTheyChangeAndGoWithTheirJob) {
  const JobId running = Insert(MakeJob("r", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kRunning));
  Job ended_job = MakeJob("d", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kCompleted);
  ended_job.ended_at = FromUnixMillis(1'700'000'000'000);
  const JobId ended = Insert(ended_job);
  auto put = [&](const StepRecord& step) { return store_->WriteSync([&](Transaction& t) { return t.PutStep(step); }); };
  ASSERT_TRUE(put({running, 1, R"({"state":"RUNNING"})"}).ok());
  ASSERT_TRUE(put({running, 2, R"({"state":"RUNNING"})"}).ok());
  ASSERT_TRUE(put({running, 1, R"({"state":"COMPLETED"})"}).ok());  // its end replaces its start
  ASSERT_TRUE(put({ended, 1, R"({"state":"FAILED"})"}).ok());
  const Status missing = put({ended + 1000, 1, "{}"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);

  auto one = store_->GetStep(running, 1);
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(*one, (StepRecord{running, 1, R"({"state":"COMPLETED"})"}));
  EXPECT_EQ(store_->GetStep(running, 3).error().kind, ErrorKind::kNotFound);
  // At start: the active jobs' steps only, by job and number.
  EXPECT_EQ(store_->LoadActiveSteps(), (std::vector<StepRecord>{{running, 1, R"({"state":"COMPLETED"})"},
                                                                {running, 2, R"({"state":"RUNNING"})"}}));
  // Deleted with their job.
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& t) -> Status {
                    auto deleted = t.DeleteJobsEndedBefore(FromUnixMillis(1'800'000'000'000));
                    return deleted.ok() ? Status::Ok() : Status(deleted.error());
                  })
                  .ok());
  EXPECT_EQ(store_->GetStep(ended, 1).error().kind, ErrorKind::kNotFound);
  EXPECT_TRUE(store_->GetStep(running, 2).ok());
}

TEST_P(StoreTest, ActiveJobsAndCounts) {
  const JobId p = Insert(MakeJob("p", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kPending));
  const JobId r = Insert(MakeJob("r", "alice", "default", "ai-training", "gpu-train-pool", JobState::kRunning));
  Insert(MakeJob("c", "alice", "default", "ai-training", "gpu-train-pool", JobState::kCompleted));
  const JobId h = Insert(MakeJob("h", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kHeld));
  const JobId p2 = Insert(MakeJob("p2", "bob", "default", "hpc-precision", "cpu-hpc-pool", JobState::kPending));

  std::vector<JobId> active;
  for (const auto& j : store_->LoadActiveJobs()) active.push_back(j.id);
  EXPECT_EQ(active, (std::vector<JobId>{p, r, h, p2}));

  using Key = std::tuple<JobState, std::string, std::string>;
  const std::map<Key, int64_t> want = {
      {{JobState::kPending, "hpc-precision", "cpu-hpc-pool"}, 2},
      {{JobState::kHeld, "hpc-precision", "cpu-hpc-pool"}, 1},
      {{JobState::kRunning, "ai-training", "gpu-train-pool"}, 1},
      {{JobState::kCompleted, "ai-training", "gpu-train-pool"}, 1},
  };
  EXPECT_EQ(store_->CountJobs(), want);
}

TEST_P(StoreTest, EventsInOrderAndOnlyForExistingJobs) {
  const JobId id = Insert(MakeJob("e"));
  const std::vector<JobEvent> events = {{FromUnixMillis(10), "submitted", "queued in hpc-precision"},
                                        {FromUnixMillis(20), "started", "on x86-c64m256-hpc-01"},
                                        {FromUnixMillis(30), "completed", "exit 0"}};
  for (const auto& e : events) {
    ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) { return txn.AppendEvent(id, e); }).ok());
  }
  const auto got = store_->ListEvents(id);
  ASSERT_EQ(got.size(), events.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].time, events[i].time);
    EXPECT_EQ(got[i].kind, events[i].kind);
    EXPECT_EQ(got[i].message, events[i].message);
  }
  Status s = store_->WriteSync([&](Transaction& txn) { return txn.AppendEvent(id + 1, events[0]); });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kNotFound);
}

TEST_P(StoreTest, AuditNewestFirstWithLimit) {
  for (int i = 0; i < 5; ++i) {
    AuditRecord r{FromUnixMillis(i), i == 0 ? "system" : "alice", "POST /v1/jobs", "job/" + std::to_string(i), "201"};
    ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) { return txn.AppendAudit(r); }).ok());
  }
  const auto three = store_->ListAudit(3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].target, "job/4");
  EXPECT_EQ(three[2].target, "job/2");
  EXPECT_EQ(three[0].time, FromUnixMillis(4));
  EXPECT_EQ(three[0].actor, "alice");
  EXPECT_EQ(three[0].action, "POST /v1/jobs");
  EXPECT_EQ(three[0].result, "201");
  const auto all = store_->ListAudit(100);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all.back().actor, "system");
  EXPECT_TRUE(store_->ListAudit(0).empty());
}

TEST_P(StoreTest, UsersUpsertAndList) {
  UserRecord alice{"alice", "user", {"genomics", "vision"}, {}, "alice", false};
  UserRecord admin{"admin", "platform-admin", {}, {}, "root", true};
  UserRecord qa{"quinn", "queue-admin", {"default"}, {"ai-training"}, "", false};
  for (const auto& u : {alice, admin, qa}) {
    ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) { return txn.UpsertUser(u); }).ok());
  }
  auto expect_same = [](const UserRecord& got, const UserRecord& want) {
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.role, want.role);
    EXPECT_EQ(got.projects, want.projects);
    EXPECT_EQ(got.queues, want.queues);
    EXPECT_EQ(got.unix_user, want.unix_user);
    EXPECT_EQ(got.from_config, want.from_config);
  };
  auto got = store_->GetUser("quinn");
  ASSERT_TRUE(got.has_value());
  expect_same(*got, qa);
  EXPECT_FALSE(store_->GetUser("nobody").has_value());

  alice.role = "queue-admin";
  alice.queues = {"hpc-precision"};
  ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) { return txn.UpsertUser(alice); }).ok());
  const auto users = store_->ListUsers();
  ASSERT_EQ(users.size(), 3u);  // by name
  expect_same(users[0], admin);
  expect_same(users[1], alice);
  expect_same(users[2], qa);
}

TEST_P(StoreTest, Tokens) {
  TokenRecord user_token{"ab12", "alice", "user", "", FromUnixMillis(1'700'000'000'123)};
  TokenRecord node_token{"cd34", "node:cpu-hpc-pool", "node", "cpu-hpc-pool", FromUnixMillis(1'700'000'000'456)};
  for (const auto& t : {user_token, node_token}) {
    ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) { return txn.InsertToken(t); }).ok());
  }
  auto got = store_->FindToken("cd34");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->user, node_token.user);
  EXPECT_EQ(got->kind, "node");
  EXPECT_EQ(got->pool, "cpu-hpc-pool");
  EXPECT_EQ(got->created_at, node_token.created_at);
  EXPECT_EQ(store_->FindToken("ab12")->user, "alice");
  EXPECT_FALSE(store_->FindToken("ef56").has_value());

  Status dup = store_->WriteSync([&](Transaction& txn) { return txn.InsertToken(user_token); });
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().kind, ErrorKind::kConflict);
}

TEST_P(StoreTest, UnixIdsAreAllocatedOnceInTheirRangeAndNeverReused) {
  auto allocate = [&](const std::string& kind, const std::string& name) {
    return store_->WriteSync([&](Transaction& t) { return t.AllocateUnixId(kind, name, 5000, 5002); });
  };
  ASSERT_TRUE(allocate("user", "alice").ok());
  ASSERT_TRUE(allocate("user", "bob").ok());
  ASSERT_TRUE(allocate("user", "alice").ok());        // again: the same id
  ASSERT_TRUE(allocate("project", "genomics").ok());  // groups count apart
  EXPECT_EQ(store_->FindUnixId("user", "alice"), 5000);
  EXPECT_EQ(store_->FindUnixId("user", "bob"), 5001);
  EXPECT_EQ(store_->FindUnixId("project", "genomics"), 5000);
  EXPECT_FALSE(store_->FindUnixId("user", "genomics").has_value());
  ASSERT_TRUE(allocate("user", "carol").ok());
  Status full = allocate("user", "dave");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, "id_range_exhausted");
  EXPECT_FALSE(store_->FindUnixId("user", "dave").has_value());
  const auto all = store_->ListUnixIds();
  ASSERT_EQ(all.size(), 4u);  // by kind, then id
  EXPECT_EQ(all[0].kind, "project");
  EXPECT_EQ(all[1].name, "alice");
  EXPECT_EQ(all[3].name, "carol");
  EXPECT_EQ(all[3].id, 5002);
}

TEST_P(StoreTest, NodeStates) {
  const std::vector<NodeStateRecord> nodes = {{"x86-c64m256-hpc-02", model::NodeState::kDraining, "maintenance"},
                                              {"x86-c64m256-hpc-01", model::NodeState::kDown, "no heartbeat"}};
  for (const auto& n : nodes) {
    ASSERT_TRUE(store_->WriteSync([&](Transaction& txn) { return txn.SetNodeState(n); }).ok());
  }
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) {
                    return txn.SetNodeState({"x86-c64m256-hpc-01", model::NodeState::kUp, ""});
                  })
                  .ok());
  const auto got = store_->LoadNodeStates();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "x86-c64m256-hpc-01");
  EXPECT_EQ(got[0].state, model::NodeState::kUp);
  EXPECT_EQ(got[0].reason, "");
  EXPECT_EQ(got[1].name, "x86-c64m256-hpc-02");
  EXPECT_EQ(got[1].state, model::NodeState::kDraining);
  EXPECT_EQ(got[1].reason, "maintenance");
}

TEST_P(StoreTest, NodeIdleSinceIsKeptUntilTheNodeRunsSomething) {
  const Timestamp eight = FromUnixMillis(1'700'000'000'000);
  const Timestamp nine = eight + std::chrono::hours(1);
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) -> Status {
                    if (Status s = txn.SetNodeIdleSince("hpc-01", eight); !s) return s;
                    if (Status s = txn.SetNodeIdleSince("hpc-02", eight); !s) return s;
                    return txn.SetNodeIdleSince("hpc-03", eight);
                  })
                  .ok());
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& txn) -> Status {
                    if (Status s = txn.SetNodeIdleSince("hpc-01", nine); !s) return s;          // idle again, later
                    if (Status s = txn.SetNodeIdleSince("hpc-02", std::nullopt); !s) return s;  // busy
                    return txn.SetNodeIdleSince("hpc-04", std::nullopt);  // busy, never idle: nothing to remove
                  })
                  .ok());
  const std::map<std::string, Timestamp> want = {{"hpc-01", nine}, {"hpc-03", eight}};
  EXPECT_EQ(store_->LoadNodeIdleSince(), want);
  // Node states are another record: an idle time makes no state row.
  EXPECT_TRUE(store_->LoadNodeStates().empty());
}

TEST_P(StoreTest, ReadersRunWhileWritesCommit) {
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {  // more threads than pooled connections
    readers.emplace_back([&] {
      while (!stop) {
        const JobPage page = store_->ListJobs(Filter().Limit(5));
        EXPECT_LE(page.jobs.size(), 5u);
        ++reads;
      }
    });
  }
  for (int i = 0; i < 100; ++i) Insert(MakeJob("w"));
  // On a loaded machine the writes may all land before a reader thread is
  // first scheduled; what matters is that reads complete at all (none is
  // stuck behind the writer), so wait for one, bounded.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reads.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(store_->ListJobs(Filter().Limit(0)).total, 100);
}

}  // namespace
}  // namespace unisched::store

namespace unisched::store {
namespace {

TEST_P(StoreTest, SandboxRowsAreReplacedByIdAndListedActiveFirst) {
  const Timestamp t0 = FromUnixMillis(1'000'000);
  SandboxRow a{1, "running", R"({"user":"ann"})", t0, std::nullopt};
  SandboxRow b{2, "running", R"({"user":"bob"})", t0, std::nullopt};
  ASSERT_TRUE(store_->WriteSync([&](Transaction& t) -> Status {
    if (Status s = t.PutSandbox(a); !s) return s;
    return t.PutSandbox(b);
  }));
  EXPECT_EQ(store_->MaxSandboxId(), 2);
  a.state = "deleted";
  a.ended_at = FromUnixMillis(1'005'000);
  ASSERT_TRUE(store_->WriteSync([&](Transaction& t) { return t.PutSandbox(a); }));
  auto got = store_->GetSandbox(1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, "deleted");
  EXPECT_EQ(got->ended_at, a.ended_at);
  EXPECT_EQ(got->record, R"({"user":"ann"})");
  const auto active = store_->ListSandboxes(/*active_only=*/true, 100);
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].id, 2);
  EXPECT_EQ(store_->ListSandboxes(false, 100).size(), 2u);
  EXPECT_FALSE(store_->GetSandbox(3).has_value());
}

TEST_P(StoreTest, ImageVersionsAreKeptAndTheCurrentStackPops) {
  const Timestamp t0 = FromUnixMillis(2'000'000);
  ASSERT_TRUE(store_->WriteSync([&](Transaction& t) -> Status {
    for (const char* v : {"v1", "v2"}) {
      if (Status s = t.PutImageVersion({"py", v, "{}", "admin", t0}); !s) return s;
      if (Status s = t.PushImageCurrent("py", v, t0); !s) return s;
    }
    // A known version is left as it was.
    return t.PutImageVersion({"py", "v1", R"({"rootfs":"/other"})", "admin", t0});
  }));
  EXPECT_EQ(store_->ImageCurrentStacks().at("py"), (std::vector<std::string>{"v1", "v2"}));
  ASSERT_EQ(store_->ListImageVersions().size(), 2u);
  EXPECT_EQ(store_->ListImageVersions()[0].spec, "{}");
  ASSERT_TRUE(store_->WriteSync([&](Transaction& t) { return t.PopImageCurrent("py"); }));
  EXPECT_EQ(store_->ImageCurrentStacks().at("py"), std::vector<std::string>{"v1"});
}

}  // namespace
}  // namespace unisched::store

// ---- the idempotency each write states (unisched/store/*.h) ----

namespace unisched::store {
namespace {

TEST_P(StoreTest, ASecondInsertOfAnIdFailsAndChangesNothing) {
  Job first = MakeJob("first");
  first.id = *store_->ReserveJobId();
  ASSERT_EQ(Insert(first), first.id);
  Job second = MakeJob("second");
  second.id = first.id;
  Status s = store_->WriteSync([&](Transaction& txn) -> Status {
    auto id = txn.InsertJob(second, "");
    return id.ok() ? Status::Ok() : Status(id.error());
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kConflict);
  EXPECT_EQ(s.error().code, "job_exists");
  EXPECT_EQ(store_->GetJob(first.id)->name, "first");
  EXPECT_EQ(store_->ListJobs(Filter().Limit(0)).total, 1);
}

TEST_P(StoreTest, UpdatingAJobTwiceLeavesTheSecondAndAMissingJobIsNotFound) {
  Job job = MakeJob("u");
  job.id = Insert(job);
  job.state = JobState::kRunning;
  ASSERT_TRUE(Update(job).ok());
  ASSERT_TRUE(Update(job).ok());
  EXPECT_EQ(store_->GetJob(job.id)->state, JobState::kRunning);
  Job missing = job;
  missing.id = job.id + 1000;
  Status s = Update(missing);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kNotFound);
}

TEST_P(StoreTest, ReservedIdsStayUniqueAcrossThreadsAndAboveEveryIdAfterAReopen) {
  std::vector<std::vector<JobId>> ids(4);
  std::vector<std::thread> threads;
  for (auto& mine : ids) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) mine.push_back(*store_->ReserveJobId());
    });
  }
  for (auto& t : threads) t.join();
  std::set<JobId> unique;
  for (const auto& v : ids) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));  // increasing within one caller
    unique.insert(v.begin(), v.end());
  }
  EXPECT_EQ(unique.size(), 2000u);
  const JobId inserted = Insert(MakeJob("plain"));
  EXPECT_EQ(unique.count(inserted), 0u);
  Reopen();
  const JobId after = *store_->ReserveJobId();
  EXPECT_GT(after, *unique.rbegin());
  EXPECT_GT(after, inserted);
}

TEST_P(StoreTest, AlertsFireAndResolveOnceAndResolvingNothingIsFine) {
  AlertRecord down{0, "node-down", "node_down", "node/n1", "critical", "n1 is down", FromUnixMillis(10), {}};
  AlertRecord full{0, "queue-backlog", "queue_backlog", "queue/q", "warning", "q is long", FromUnixMillis(20), {}};
  ASSERT_TRUE(store_->WriteSync([&](Transaction& t) { return t.InsertAlert(down); }).ok());
  ASSERT_TRUE(store_->WriteSync([&](Transaction& t) { return t.InsertAlert(full); }).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        store_
            ->WriteSync([&](Transaction& t) { return t.ResolveAlert("node-down", "node/n1", FromUnixMillis(30 + i)); })
            .ok());
  }
  ASSERT_TRUE(
      store_->WriteSync([&](Transaction& t) { return t.ResolveAlert("never-fired", "node/n9", FromUnixMillis(40)); })
          .ok());
  const auto all = store_->ListAlerts(std::nullopt, 10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "queue-backlog");  // newest first
  EXPECT_GT(all[0].id, all[1].id);
  EXPECT_EQ(all[1].resolved_at, FromUnixMillis(30));  // the first resolution stands
  const auto firing = store_->ListAlerts(true, 10);
  ASSERT_EQ(firing.size(), 1u);
  EXPECT_EQ(firing[0].object, "queue/q");
  EXPECT_EQ(firing[0].severity, "warning");
  EXPECT_EQ(firing[0].message, "q is long");
  EXPECT_EQ(firing[0].fired_at, FromUnixMillis(20));
  const auto resolved = store_->ListAlerts(false, 10);
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].kind, "node_down");
  EXPECT_EQ(store_->ListAlerts(std::nullopt, 1).size(), 1u);
}

TEST_P(StoreTest, PruningTheAuditCutsByTimeAndSizeAndASecondPruneFindsNothing) {
  for (int i = 0; i < 10; ++i) {
    AuditRecord r{FromUnixMillis(i * 1000), "alice", "GET /v1/jobs", "job/" + std::to_string(i), "200"};
    ASSERT_TRUE(store_->WriteSync([&](Transaction& t) { return t.AppendAudit(r); }).ok());
  }
  auto prune = [&](Timestamp cutoff, int64_t max_rows) {
    int64_t removed = -1;
    EXPECT_TRUE(store_
                    ->WriteSync([&](Transaction& t) -> Status {
                      auto n = t.PruneAudit(cutoff, max_rows);
                      if (!n.ok()) return n.error();
                      removed = *n;
                      return Status::Ok();
                    })
                    .ok());
    return removed;
  };
  EXPECT_EQ(prune(FromUnixMillis(3000), 100), 3);  // 0, 1 and 2 are older than the cutoff
  EXPECT_EQ(prune(FromUnixMillis(3000), 5), 2);    // then only the newest five stay
  EXPECT_EQ(prune(FromUnixMillis(3000), 5), 0);
  const auto left = store_->ListAudit(100);
  ASSERT_EQ(left.size(), 5u);
  EXPECT_EQ(left.front().target, "job/9");
  EXPECT_EQ(left.back().target, "job/5");
}

TEST_P(StoreTest, ClusterEventsMergeJobsEventsAndFilterByKindObjectTimeAndVisibility) {
  Job genomics = MakeJob("g", "alice", "genomics", "q1");
  genomics.id = Insert(genomics);
  Job vision = MakeJob("v", "bob", "vision", "q2");
  vision.id = Insert(vision);
  auto job_event = [&](JobId id, int64_t ms, const std::string& kind) {
    ASSERT_TRUE(store_->WriteSync([&](Transaction& t) {
                        return t.AppendEvent(id, {FromUnixMillis(ms), kind, kind});
                      })
                    .ok());
  };
  auto cluster_event = [&](int64_t ms, const std::string& kind, const std::string& object) {
    ClusterEvent e{FromUnixMillis(ms), kind, object, "warning", kind + " " + object};
    ASSERT_TRUE(store_->WriteSync([&](Transaction& t) { return t.AppendClusterEvent(e); }).ok());
  };
  job_event(genomics.id, 100, "submitted");
  cluster_event(100, "drain", "node/n1");  // same time: the cluster's comes after the job's
  job_event(vision.id, 200, "submitted");
  job_event(genomics.id, 300, "ledger_discrepancy");
  cluster_event(400, "down", "node/n2");
  cluster_event(500, "alert_firing", "alert/node-down/node/n2");

  auto objects = [](const std::vector<ClusterEvent>& events) {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.kind + "@" + e.object);
    return out;
  };
  const std::string g = "job/" + std::to_string(genomics.id), v = "job/" + std::to_string(vision.id);
  const auto all = store_->ListClusterEvents({});
  EXPECT_EQ(objects(all),
            (std::vector<std::string>{"submitted@" + g, "drain@node/n1", "submitted@" + v, "ledger_discrepancy@" + g,
                                      "down@node/n2", "alert_firing@alert/node-down/node/n2"}));
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].severity, "info");
  EXPECT_EQ(all[3].severity, "warning");  // a ledger discrepancy
  EXPECT_EQ(all[1].message, "drain node/n1");

  EventFilter f;
  f.object = "node/";
  EXPECT_EQ(objects(store_->ListClusterEvents(f)), (std::vector<std::string>{"drain@node/n1", "down@node/n2"}));
  f.object = "job/";
  EXPECT_EQ(store_->ListClusterEvents(f).size(), 3u);
  f.object = g;
  EXPECT_EQ(objects(store_->ListClusterEvents(f)),
            (std::vector<std::string>{"submitted@" + g, "ledger_discrepancy@" + g}));
  f = {};
  f.kind = "submitted";
  EXPECT_EQ(store_->ListClusterEvents(f).size(), 2u);
  f = {};
  f.since = FromUnixMillis(300);
  EXPECT_EQ(store_->ListClusterEvents(f).size(), 3u);
  f = {};
  f.limit = 2;  // the newest two, oldest first
  EXPECT_EQ(objects(store_->ListClusterEvents(f)),
            (std::vector<std::string>{"down@node/n2", "alert_firing@alert/node-down/node/n2"}));
  f = {};
  f.visible_projects = std::vector<std::string>{"vision"};
  EXPECT_EQ(objects(store_->ListClusterEvents(f)),
            (std::vector<std::string>{"drain@node/n1", "submitted@" + v, "down@node/n2",
                                      "alert_firing@alert/node-down/node/n2"}));
  f.visible_projects = std::vector<std::string>{};
  f.visible_queues = {"q1"};
  EXPECT_EQ(store_->ListClusterEvents(f).size(), 5u);
}

TEST_P(StoreTest, PoppingAnEmptyImageStackChangesNothing) {
  ASSERT_TRUE(store_->WriteSync([](Transaction& t) { return t.PopImageCurrent("none"); }).ok());
  EXPECT_TRUE(store_->ImageCurrentStacks().empty());
}

TEST_P(StoreTest, RetentionTwiceDeletesOnce) {
  Job done = MakeJob("done", "alice", "default", "hpc-precision", "cpu-hpc-pool", JobState::kCompleted);
  done.ended_at = FromUnixMillis(1000);
  done.id = Insert(done, "key");
  for (size_t expected : {1u, 0u}) {
    std::vector<JobId> deleted;
    ASSERT_TRUE(store_
                    ->WriteSync([&](Transaction& t) -> Status {
                      auto ids = t.DeleteJobsEndedBefore(FromUnixMillis(2000));
                      if (!ids.ok()) return ids.error();
                      deleted = *ids;
                      return Status::Ok();
                    })
                    .ok());
    EXPECT_EQ(deleted.size(), expected);
  }
  // The key went with its job.
  ASSERT_TRUE(store_
                  ->WriteSync([&](Transaction& t) {
                    EXPECT_EQ(t.FindIdempotentJob("alice", "key"), std::nullopt);
                    return Status::Ok();
                  })
                  .ok());
}

}  // namespace
}  // namespace unisched::store
