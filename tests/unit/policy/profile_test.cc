// Availability over time (policy/profile.h): one node's free capacity as a
// step function of time, built from running jobs' releases, with
// reservations taken out of it.

#include "unisched/policy/profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "testing/builders.h"

namespace unisched::policy {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using testing::TestEpoch;

const Timestamp kNow = TestEpoch();
Timestamp At(std::chrono::minutes m) {
  return kNow + m;
}

Capacity Cpus(int64_t n) {
  return {n, 0, 0};
}

TEST(CapacityTest, ArithmeticAndCovers) {
  Capacity a{8, 1024, 2};
  a += Capacity{2, 1000, 1};
  EXPECT_EQ(a, (Capacity{10, 2024, 3}));
  a -= Capacity{10, 24, 0};
  EXPECT_EQ(a, (Capacity{0, 2000, 3}));
  EXPECT_EQ(Capacity::Min({4, 100, 1}, {2, 200, 0}), (Capacity{2, 100, 0}));
  EXPECT_TRUE((Capacity{4, 100, 1}).Covers({4, 100, 1}));
  EXPECT_FALSE((Capacity{4, 100, 1}).Covers({4, 101, 0}));
  EXPECT_FALSE((Capacity{4, 100, 1}).Covers({0, 0, 2}));
  EXPECT_EQ(PerNode(testing::MakeRequest().Nodes(3).Cpus(4).MemoryMb(512).Gpus(2)), (Capacity{4, 512, 2}));
}

TEST(WindowEndTest, ZeroDurationMeansForever) {
  EXPECT_EQ(WindowEnd(kNow, hours(1)), kNow + hours(1));
  EXPECT_EQ(WindowEnd(kNow, milliseconds(0)), kForever);
  EXPECT_EQ(WindowEnd(kNow, milliseconds(-5)), kForever);
  EXPECT_EQ(WindowEnd(kForever - milliseconds(10), hours(1)), kForever);  // saturates, no overflow
}

// 6 cpus free now (4 plus 2 released before now), 4 more at +60 min; a
// reservation of 8 over [+120, +180): free is 6 | 10 | 2 | 10.
NodeTimeline Example() {
  NodeTimeline t(kNow, Cpus(4), {{At(minutes(60)), Cpus(4)}, {kNow - minutes(5), Cpus(2)}, {kForever, Cpus(100)}});
  t.Reserve(At(minutes(120)), At(minutes(180)), Cpus(8));
  return t;
}

TEST(NodeTimelineTest, ReleasesAtOrBeforeTheOriginAreFreeAtOnce) {
  NodeTimeline t(kNow, Cpus(4), {{kNow, Cpus(1)}, {kNow - hours(1), Cpus(2)}, {At(minutes(10)), Cpus(3)}});
  EXPECT_EQ(t.Origin(), kNow);
  EXPECT_EQ(t.MinFree(kNow, At(minutes(1))), Cpus(7));
  EXPECT_EQ(t.MinFree(At(minutes(10)), At(minutes(11))), Cpus(10));
  EXPECT_EQ(t.NextChangeAfter(kNow), At(minutes(10)));
}

TEST(NodeTimelineTest, ReleasesAtTheSameTimeAddUpAndForeverIsNever) {
  NodeTimeline t(kNow, Cpus(0), {{At(minutes(30)), Cpus(2)}, {At(minutes(30)), Cpus(3)}, {kForever, Cpus(9)}});
  EXPECT_EQ(t.MinFree(At(minutes(30)), kForever), Cpus(5));
  EXPECT_EQ(t.NextChangeAfter(At(minutes(30))), kForever);
}

TEST(NodeTimelineTest, MinFree) {
  const NodeTimeline t = Example();
  struct Case {
    std::string name;
    Timestamp from, to;
    Capacity want;
  };
  const std::vector<Case> cases = {
      {"now only", kNow, At(minutes(30)), Cpus(6)},
      {"up to the release", kNow, At(minutes(60)), Cpus(6)},
      {"after the release", At(minutes(60)), At(minutes(120)), Cpus(10)},
      {"across the release", At(minutes(30)), At(minutes(90)), Cpus(6)},
      {"inside the reservation", At(minutes(130)), At(minutes(140)), Cpus(2)},
      {"touching the reservation", At(minutes(60)), At(minutes(121)), Cpus(2)},
      {"ending where the reservation starts", At(minutes(60)), At(minutes(120)), Cpus(10)},
      {"after the reservation", At(minutes(180)), kForever, Cpus(10)},
      {"forever from now", kNow, kForever, Cpus(2)},
      {"from before the origin counts from the origin", kNow - hours(5), At(minutes(10)), Cpus(6)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(t.MinFree(c.from, c.to), c.want);
  }
}

TEST(NodeTimelineTest, EarliestFit) {
  const NodeTimeline t = Example();  // 6 | 10 @60 | 2 @120 | 10 @180
  struct Case {
    std::string name;
    Timestamp from;
    std::chrono::milliseconds duration;
    Capacity need;
    std::optional<Timestamp> want;
  };
  const std::vector<Case> cases = {
      {"fits now", kNow, minutes(30), Cpus(6), kNow},
      {"fits now for as long as it likes", kNow, minutes(0), Cpus(2), kNow},
      {"waits for the release", kNow, minutes(30), Cpus(8), At(minutes(60))},
      {"the hole before a reservation, exactly", kNow, minutes(60), Cpus(8), At(minutes(60))},
      {"too long for the hole: after the reservation", kNow, minutes(61), Cpus(8), At(minutes(180))},
      {"forever: after the reservation", kNow, minutes(0), Cpus(8), At(minutes(180))},
      {"small enough to share the reservation's node", kNow, hours(10), Cpus(2), kNow},
      {"from a later time", At(minutes(70)), minutes(30), Cpus(8), At(minutes(70))},
      {"from a later time, hole too short", At(minutes(100)), minutes(30), Cpus(8), At(minutes(180))},
      {"from inside the reservation", At(minutes(150)), minutes(10), Cpus(3), At(minutes(180))},
      {"more than the node ever has", kNow, minutes(1), Cpus(11), std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(t.EarliestFit(c.from, c.duration, c.need), c.want);
  }
}

TEST(NodeTimelineTest, EarliestFitNeverWhenTheLastStepIsTooSmall) {
  NodeTimeline t(kNow, Cpus(8));
  t.Reserve(At(minutes(60)), kForever, Cpus(6));  // 8 | 2 forever
  EXPECT_EQ(t.EarliestFit(kNow, minutes(60), Cpus(8)), kNow);
  EXPECT_EQ(t.EarliestFit(kNow, minutes(61), Cpus(8)), std::nullopt);
  EXPECT_EQ(t.EarliestFit(kNow, minutes(0), Cpus(3)), std::nullopt);
  EXPECT_EQ(t.EarliestFit(kNow, minutes(0), Cpus(2)), kNow);
}

TEST(NodeTimelineTest, ReserveTakesRoomOnlyInItsWindow) {
  NodeTimeline t(kNow, Cpus(8));
  t.Reserve(At(minutes(10)), At(minutes(20)), Cpus(3));
  t.Reserve(At(minutes(15)), At(minutes(30)), Cpus(2));
  EXPECT_EQ(t.MinFree(kNow, At(minutes(10))), Cpus(8));
  EXPECT_EQ(t.MinFree(At(minutes(10)), At(minutes(15))), Cpus(5));
  EXPECT_EQ(t.MinFree(At(minutes(15)), At(minutes(20))), Cpus(3));
  EXPECT_EQ(t.MinFree(At(minutes(20)), At(minutes(30))), Cpus(6));
  EXPECT_EQ(t.MinFree(At(minutes(30)), kForever), Cpus(8));
  // Empty and reversed windows hold nothing.
  t.Reserve(At(minutes(40)), At(minutes(40)), Cpus(8));
  t.Reserve(At(minutes(50)), At(minutes(45)), Cpus(8));
  EXPECT_EQ(t.MinFree(At(minutes(30)), kForever), Cpus(8));
}

TEST(NodeTimelineTest, ReserveFromBeforeTheOriginStartsAtTheOrigin) {
  NodeTimeline t(kNow, Cpus(8));
  t.Reserve(kNow - hours(1), At(minutes(10)), Cpus(5));
  EXPECT_EQ(t.Origin(), kNow);
  EXPECT_EQ(t.MinFree(kNow, At(minutes(10))), Cpus(3));
  EXPECT_EQ(t.MinFree(At(minutes(10)), kForever), Cpus(8));
  // Entirely before the origin: nothing.
  t.Reserve(kNow - hours(2), kNow - hours(1), Cpus(8));
  EXPECT_EQ(t.MinFree(kNow, At(minutes(10))), Cpus(3));
}

// From(t) is the timeline a pass at t would build: releases up to t are free
// at t, the rest and every hold after t are as they were.
TEST(NodeTimelineTest, FromALaterTimeIsTheTimelineBuiltThen) {
  NodeTimeline t(kNow, Cpus(2), {{At(minutes(10)), Cpus(3)}, {At(minutes(30)), Cpus(3)}});
  t.Reserve(At(minutes(20)), At(minutes(40)), Cpus(4));
  struct Case {
    std::string name;
    Timestamp from;
    Timestamp origin;                                  // of the result
    std::vector<std::pair<Timestamp, Capacity>> free;  // MinFree over [time, next time) of each
  };
  const std::vector<Case> cases = {
      {"before the origin: the same",
       kNow - hours(1),
       kNow,
       {{kNow, Cpus(2)},
        {At(minutes(10)), Cpus(5)},
        {At(minutes(20)), Cpus(1)},
        {At(minutes(30)), Cpus(4)},
        {At(minutes(40)), Cpus(8)}}},
      {"at the origin",
       kNow,
       kNow,
       {{kNow, Cpus(2)}, {At(minutes(10)), Cpus(5)}, {At(minutes(20)), Cpus(1)}, {At(minutes(40)), Cpus(8)}}},
      {"inside a step",
       At(minutes(15)),
       At(minutes(15)),
       {{At(minutes(15)), Cpus(5)}, {At(minutes(20)), Cpus(1)}, {At(minutes(40)), Cpus(8)}}},
      {"at a step", At(minutes(30)), At(minutes(30)), {{At(minutes(30)), Cpus(4)}, {At(minutes(40)), Cpus(8)}}},
      {"past the last step", At(minutes(90)), At(minutes(90)), {{At(minutes(90)), Cpus(8)}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const NodeTimeline later = t.From(c.from);
    EXPECT_EQ(later.Origin(), c.origin);
    for (size_t i = 0; i < c.free.size(); ++i) {
      const Timestamp to = i + 1 < c.free.size() ? c.free[i + 1].first : kForever;
      EXPECT_EQ(later.MinFree(c.free[i].first, to), c.free[i].second) << i;
    }
  }
  // A hold given back leaves seams (steps equal to the one before them); the
  // copy has none: its next change is the next real one.
  NodeTimeline seamed(kNow, Cpus(8), {{At(minutes(60)), Cpus(2)}});
  seamed.Reserve(At(minutes(10)), At(minutes(20)), Cpus(3));
  seamed.Release(At(minutes(10)), At(minutes(20)), Cpus(3));
  EXPECT_EQ(seamed.NextChangeAfter(kNow), At(minutes(10)));
  EXPECT_EQ(seamed.From(kNow).NextChangeAfter(kNow), At(minutes(60)));
  EXPECT_EQ(seamed.From(kNow).MinFree(At(minutes(60)), kForever), Cpus(10));

  // The copy is its own: holding room in it leaves the original as it was.
  NodeTimeline later = t.From(At(minutes(15)));
  later.Reserve(At(minutes(15)), At(minutes(20)), Cpus(5));
  EXPECT_EQ(later.MinFree(At(minutes(15)), At(minutes(20))), Cpus(0));
  EXPECT_EQ(t.MinFree(At(minutes(15)), At(minutes(20))), Cpus(5));
}

TEST(NodeTimelineTest, ReserveForever) {
  NodeTimeline t(kNow, Cpus(8), {{At(minutes(60)), Cpus(8)}});
  t.Reserve(At(minutes(30)), kForever, Cpus(4));
  EXPECT_EQ(t.MinFree(kNow, At(minutes(30))), Cpus(8));
  EXPECT_EQ(t.MinFree(At(minutes(30)), At(minutes(60))), Cpus(4));
  EXPECT_EQ(t.MinFree(At(minutes(60)), kForever), Cpus(12));
}

// WithHolds merges a batch of holds at once: the same steps as Reserve for
// each in turn, checked at every step time of either; nothing when a step
// would be short of room.
TEST(NodeTimelineTest, WithHoldsIsReserveForEachInOneMerge) {
  struct Case {
    const char* name;
    std::vector<NodeTimeline::Hold> holds;
    bool fits;
  };
  const std::vector<Case> cases = {
      {"none", {}, true},
      {"one inside a step", {{At(minutes(10)), At(minutes(20)), Cpus(3)}}, true},
      {"overlapping and crossing release times",
       {{At(minutes(30)), At(minutes(90)), Cpus(2)}, {At(minutes(50)), At(minutes(110)), Cpus(4)}},
       true},
      {"from before the origin, and forever",
       {{kNow - hours(1), At(minutes(10)), Cpus(2)}, {At(minutes(200)), kForever, Cpus(5)}},
       true},
      {"empty and reversed windows hold nothing",
       {{At(minutes(40)), At(minutes(40)), Cpus(99)}, {At(minutes(50)), At(minutes(45)), Cpus(99)}},
       true},
      {"ends exactly where the next starts",
       {{kNow, At(minutes(60)), Cpus(4)}, {At(minutes(60)), At(minutes(70)), Cpus(6)}},
       true},
      {"together short of room",
       {{kNow, At(minutes(30)), Cpus(4)}, {At(minutes(20)), At(minutes(40)), Cpus(3)}},
       false},
      {"alone too large", {{At(minutes(150)), At(minutes(160)), Cpus(13)}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const NodeTimeline base = Example();  // 6 free now, 10 from 60, 2 from 120, 10 from 180
    std::optional<NodeTimeline> merged = base.WithHolds(c.holds);
    ASSERT_EQ(merged.has_value(), c.fits);
    if (!merged) continue;
    NodeTimeline one_by_one = base;
    for (const auto& hold : c.holds) one_by_one.Reserve(hold.from, hold.to, hold.amount);
    for (int minute = -10; minute <= 240; minute += 5) {
      const Timestamp from = At(minutes(minute));
      EXPECT_EQ(merged->MinFree(from, from + minutes(5)), one_by_one.MinFree(from, from + minutes(5))) << minute;
      EXPECT_EQ(merged->NextChangeAfter(from), one_by_one.NextChangeAfter(from)) << minute;
    }
    EXPECT_EQ(merged->MinFree(At(minutes(240)), kForever), one_by_one.MinFree(At(minutes(240)), kForever));
  }
}

TEST(NodeTimelineTest, NextChangeAfter) {
  const NodeTimeline t = Example();  // steps at now, 60, 120, 180
  EXPECT_EQ(t.NextChangeAfter(kNow - hours(1)), kNow);
  EXPECT_EQ(t.NextChangeAfter(kNow), At(minutes(60)));
  EXPECT_EQ(t.NextChangeAfter(At(minutes(30))), At(minutes(60)));
  EXPECT_EQ(t.NextChangeAfter(At(minutes(60))), At(minutes(120)));
  EXPECT_EQ(t.NextChangeAfter(At(minutes(150))), At(minutes(180)));
  EXPECT_EQ(t.NextChangeAfter(At(minutes(180))), kForever);
  EXPECT_EQ(t.NextChangeAfter(At(minutes(999))), kForever);
}

TEST(NodeTimelineTest, MemoryAndGpusCountLikeCpus) {
  NodeTimeline t(kNow, {32, 65536, 2}, {{At(minutes(60)), {0, 0, 6}}});
  EXPECT_EQ(t.EarliestFit(kNow, minutes(10), {1, 1024, 4}), At(minutes(60)));
  EXPECT_EQ(t.EarliestFit(kNow, minutes(10), {1, 70000, 0}), std::nullopt);
  t.Reserve(At(minutes(60)), At(minutes(120)), {0, 60000, 8});
  EXPECT_EQ(t.EarliestFit(kNow, minutes(90), {1, 8192, 0}), At(minutes(120)));
  EXPECT_EQ(t.EarliestFit(kNow, minutes(60), {1, 8192, 0}), kNow);
}

}  // namespace
}  // namespace unisched::policy
