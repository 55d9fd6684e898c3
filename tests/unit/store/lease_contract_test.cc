// The leader lease and the fencing of writes (unisched/store/lease.h): what
// every implementation of Store must do, so that replicas sharing one
// database never both write.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

using std::chrono::milliseconds;
using testing::MakeJob;

class LeaseTest : public testing::StoreContract {
 protected:
  LeaseState Take(Store& store, const std::string& replica, milliseconds ttl = milliseconds(60'000)) {
    auto state = store.AcquireOrRenewLease(replica, ttl);
    EXPECT_TRUE(state.ok()) << state.error().message;
    return state.ok() ? *state : LeaseState{};
  }

  Status InsertJob(Store& store, const std::string& name) {
    return store.WriteSync([&](Transaction& t) -> Status {
      auto id = t.InsertJob(MakeJob(name), "");
      return id.ok() ? Status::Ok() : Status(id.error());
    });
  }
};

INSTANTIATE_TEST_SUITE_P(Implementations, LeaseTest, ::testing::ValuesIn(testing::StoreImplementations()),
                         [](const auto& info) { return info.param; });

TEST_P(LeaseTest, TheFirstReplicaTakesEpochOneItsRenewalsKeepItAndOthersWait) {
  LeaseState a = Take(*store_, "replica-a");
  EXPECT_TRUE(a.ours);
  EXPECT_EQ(a.epoch, 1);
  EXPECT_EQ(a.holder, "replica-a");
  EXPECT_GT(a.expires_in_ms, 50'000);
  EXPECT_EQ(Take(*store_, "replica-a").epoch, 1) << "a renewal keeps the epoch";
  LeaseState b = Take(*store_, "replica-b");
  EXPECT_FALSE(b.ours);
  EXPECT_EQ(b.holder, "replica-a");
  EXPECT_EQ(b.epoch, 1);
  EXPECT_GT(b.expires_in_ms, 0);
}

TEST_P(LeaseTest, ALapsedLeaseGoesToTheNextReplicaWithTheNextEpoch) {
  ASSERT_TRUE(Take(*store_, "replica-a", milliseconds(100)).ours);
  std::this_thread::sleep_for(milliseconds(300));
  LeaseState b = Take(*store_, "replica-b");
  EXPECT_TRUE(b.ours);
  EXPECT_EQ(b.epoch, 2);
  LeaseState a = Take(*store_, "replica-a");
  EXPECT_FALSE(a.ours) << "the deposed replica cannot renew";
  EXPECT_EQ(a.holder, "replica-b");
  // Released by its holder, the lease is free at once, for a new epoch.
  ASSERT_TRUE(store_->ReleaseLease("replica-b").ok());
  ASSERT_TRUE(store_->ReleaseLease("replica-a").ok()) << "releasing a lease one does not hold changes nothing";
  LeaseState again = Take(*store_, "replica-a");
  EXPECT_TRUE(again.ours);
  EXPECT_EQ(again.epoch, 3);
}

TEST_P(LeaseTest, ALeaderStaysFencedInUntilDeposedThenWritesNothing) {
  LeaseState a = Take(*store_, "replica-a", milliseconds(100));
  std::atomic<int> fenced_calls{0};
  store_->FenceWrites(a.epoch, "replica-a", [&] { ++fenced_calls; });
  ASSERT_TRUE(InsertJob(*store_, "while-leading").ok());
  // Lapsed but not taken: no one else wrote, so writing is still safe.
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(InsertJob(*store_, "lapsed-not-taken").ok());
  ASSERT_TRUE(Take(*store_, "replica-b").ours);
  for (const char* name : {"after-takeover-1", "after-takeover-2"}) {
    Status refused = InsertJob(*store_, name);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().kind, ErrorKind::kUnavailable);
    EXPECT_EQ(refused.error().code, "not_leader") << refused.error().message;
  }
  EXPECT_EQ(fenced_calls.load(), 1);
  EXPECT_EQ(store_->ListJobs(testing::Filter().Limit(0)).total, 2) << "nothing written after the takeover";
}

TEST_P(LeaseTest, TheLeaseOutlivesARestart) {
  ASSERT_TRUE(Take(*store_, "replica-a").ours);
  Reopen();
  if (GetParam() == "postgresql") {
    // Kept, but the session its holder renewed it from ended with the
    // restart: the next try of any replica takes it (the next test).
    LeaseState b = Take(*store_, "replica-b");
    EXPECT_TRUE(b.ours);
    EXPECT_EQ(b.epoch, 2) << "the epoch outlived the restart";
    return;
  }
  LeaseState b = Take(*store_, "replica-b");
  EXPECT_FALSE(b.ours);
  EXPECT_EQ(b.holder, "replica-a");
  EXPECT_EQ(Take(*store_, "replica-a").epoch, 1);
}

// Two stores on one database, as two replicas have: the deposed one's
// writes are refused while the new leader's land.
TEST_P(LeaseTest, TwoReplicasOnOneDatabaseNeverBothWrite) {
  if (GetParam() == "memory") GTEST_SKIP() << "one MemoryStore writer at a time (Reopen)";
  StoreOptions options = testing::Options(dir_.File("unisched.db"));
  if (GetParam() == "postgresql") {
    options.backend = StoreBackend::kPostgresql;
    options.conninfo = conninfo_;
  }
  auto second = Store::Open(options);
  ASSERT_TRUE(second.ok()) << second.error().message;
  Store& a = *store_;
  Store& b = **second;

  LeaseState lease_a = Take(a, "replica-a", milliseconds(200));
  ASSERT_TRUE(lease_a.ours);
  a.FenceWrites(lease_a.epoch, "replica-a", [] {});
  ASSERT_TRUE(InsertJob(a, "a-leading").ok());
  EXPECT_FALSE(Take(b, "replica-b").ours);
  std::this_thread::sleep_for(milliseconds(400));
  LeaseState lease_b = Take(b, "replica-b");
  ASSERT_TRUE(lease_b.ours);
  EXPECT_EQ(lease_b.epoch, lease_a.epoch + 1);
  b.FenceWrites(lease_b.epoch, "replica-b", [] {});
  EXPECT_EQ(InsertJob(a, "a-deposed").error().code, "not_leader");
  EXPECT_FALSE(Take(a, "replica-a").ours) << "the deposed replica, its session alive, cannot take the lease back";
  ASSERT_TRUE(InsertJob(b, "b-leading").ok());
  EXPECT_TRUE(Take(b, "replica-b").ours);
  EXPECT_EQ(b.ListJobs(testing::Filter().Limit(0)).total, 2);
  b.Close();
}

// A leader killed with -9 loses its database session at once; on
// PostgreSQL the lease then goes to the next replica without waiting for it
// to lapse (the holder's session is recorded with the lease, sql_store.cc).
TEST_P(LeaseTest, OnPostgresALeaseWhoseHoldersSessionEndedIsTakenAtOnce) {
  if (GetParam() != "postgresql") GTEST_SKIP() << "SQLite has no sessions; the memory store, no database";
  StoreOptions options = testing::Options(dir_.File("unisched.db"));
  options.backend = StoreBackend::kPostgresql;
  options.conninfo = conninfo_;
  auto holder = Store::Open(options);
  ASSERT_TRUE(holder.ok()) << holder.error().message;
  ASSERT_TRUE(Take(**holder, "replica-a").ours);
  EXPECT_FALSE(Take(*store_, "replica-b").ours) << "its holder's session is alive and the lease has not lapsed";
  EXPECT_TRUE(Take(**holder, "replica-a").ours) << "a standby's try takes nothing from a live holder";
  EXPECT_FALSE(Take(*store_, "replica-b").ours);
  (*holder)->Close();
  holder->reset();
  // The server ends a closed session's backend a moment after the client
  // goes (pg_stat_activity shows it until then): a few tries, seconds at
  // most, well inside the 60 s the lease would take to lapse.
  LeaseState b = Take(*store_, "replica-b");
  for (int i = 0; i < 100 && !b.ours; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    b = Take(*store_, "replica-b");
  }
  EXPECT_TRUE(b.ours) << "taken although the 60 s lease has not lapsed";
  EXPECT_EQ(b.epoch, 2);
}

TEST_P(LeaseTest, ReplicasAnnounceWhereTheyAreReachedAndTheLatestUrlWins) {
  EXPECT_EQ(*store_->ReplicaUrl("replica-a"), "") << "never announced";
  ASSERT_TRUE(store_->AnnounceReplica("replica-a", "http://10.0.0.1:8642").ok());
  ASSERT_TRUE(store_->AnnounceReplica("replica-b", "http://10.0.0.2:8642").ok());
  ASSERT_TRUE(store_->AnnounceReplica("replica-a", "https://10.0.0.9:8642").ok());
  EXPECT_EQ(*store_->ReplicaUrl("replica-a"), "https://10.0.0.9:8642");
  EXPECT_EQ(*store_->ReplicaUrl("replica-b"), "http://10.0.0.2:8642");
  Reopen();
  EXPECT_EQ(*store_->ReplicaUrl("replica-a"), "https://10.0.0.9:8642") << "kept in the store";
}

TEST_P(LeaseTest, TheFirstProposedClusterSecretIsEveryonesAndOutlivesARestart) {
  EXPECT_EQ(*store_->ClusterSecret("admin_token", "first"), "first");
  EXPECT_EQ(*store_->ClusterSecret("admin_token", "second"), "first") << "a later proposal does not replace it";
  EXPECT_EQ(*store_->ClusterSecret("other", "x"), "x");
  Reopen();
  EXPECT_EQ(*store_->ClusterSecret("admin_token", "third"), "first");
}

}  // namespace
}  // namespace unisched::store
