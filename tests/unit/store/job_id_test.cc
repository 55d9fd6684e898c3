// SQLite's job ids in blocks (src/store/job_id_pool.h): small blocks so the
// tests cross many block boundaries, from callers and from the writer.

#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "store/job_id_pool.h"
#include "store_test_util.h"

namespace unisched::store {
namespace {

using testing::MakeJob;
using testing::Options;
using testing::TempDir;

TEST(JobIdPoolTest, HandsOutGrantedRangesInOrderAndAsksForMoreAtHalf) {
  JobIdPool pool(4);
  EXPECT_EQ(pool.TryTake(), std::nullopt);
  EXPECT_TRUE(pool.StartReservation());
  EXPECT_FALSE(pool.StartReservation());  // one in flight at a time
  pool.Grant(10, 14);
  pool.EndReservation();
  EXPECT_EQ(pool.TryTake(), 10);
  EXPECT_FALSE(pool.StartReservation());  // three left: more than half a block
  EXPECT_EQ(pool.TryTake(), 11);
  EXPECT_FALSE(pool.StartReservation());  // two left: half
  EXPECT_EQ(pool.TryTake(), 12);
  EXPECT_TRUE(pool.StartReservation());  // one left
  pool.Grant(20, 24);
  pool.EndReservation();
  EXPECT_EQ(pool.TryTake(), 13);
  EXPECT_EQ(pool.TryTake(), 20);
}

class SqliteJobIdTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> Open(int block) {
    StoreOptions options = Options(dir_.File("unisched.db"), "normal");
    options.job_id_block = block;
    auto store = Store::Open(options);
    EXPECT_TRUE(store.ok()) << store.error().message;
    return store.ok() ? std::move(*store) : nullptr;
  }
  TempDir dir_;
};

TEST_F(SqliteJobIdTest, ManyBlocksFromCallersAndTheWriterNeverCollide) {
  auto store = Open(8);
  ASSERT_NE(store, nullptr);
  std::vector<std::vector<model::JobId>> reserved(3);
  std::vector<std::thread> threads;
  for (auto& mine : reserved) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        // Every other job without a reserved id: the writer takes one.
        model::Job job = MakeJob("j");
        if (i % 2 == 0) job.id = *store->ReserveJobId();
        model::JobId id = 0;
        Status s = store->WriteSync([&](Transaction& t) -> Status {
          auto inserted = t.InsertJob(job, "");
          if (!inserted.ok()) return inserted.error();
          id = *inserted;
          return Status::Ok();
        });
        ASSERT_TRUE(s.ok()) << s.error().message;
        mine.push_back(id);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<model::JobId> unique;
  for (const auto& v : reserved) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), 600u);
  EXPECT_EQ(store->ListJobs({}).total, 600);

  // A restart skips what was left of the last block, never reuses it.
  const model::JobId highest = *unique.rbegin();
  store.reset();
  store = Open(8);
  ASSERT_NE(store, nullptr);
  EXPECT_GT(*store->ReserveJobId(), highest);
}

TEST_F(SqliteJobIdTest, AnIdReservedFromAWritersCallbackWorksWithAnEmptyPool) {
  auto store = Open(1);  // every reservation empties the pool
  ASSERT_NE(store, nullptr);
  std::promise<Result<model::JobId>> from_writer;
  const model::JobId before = *store->ReserveJobId();
  store->Write([](Transaction&) { return Status::Ok(); },
               [&](Status) { from_writer.set_value(store->ReserveJobId()); });
  auto id = from_writer.get_future().get();
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_GT(*id, before);
}

TEST_F(SqliteJobIdTest, AfterCloseNoIdIsHandedOut) {
  auto store = Open(1);
  ASSERT_NE(store, nullptr);
  while (true) {  // use up the pool, then close before a new block lands
    store->Close();
    auto id = store->ReserveJobId();
    if (!id.ok()) {
      EXPECT_EQ(id.error().kind, ErrorKind::kUnavailable);
      break;
    }
  }
}

}  // namespace
}  // namespace unisched::store
