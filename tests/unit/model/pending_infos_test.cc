// PendingInfos: appended in any order, found by id after Seal (radix sort
// for ids within 2^32 of each other, std::sort beyond), and before it.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "unisched/model/job.h"

namespace unisched::model {
namespace {

PendingInfo WithAhead(int n) {
  PendingInfo info;
  info.jobs_ahead = n;
  return info;
}

TEST(PendingInfosTest, FindsEveryIdBeforeAndAfterSealing) {
  struct Case {
    const char* name;
    JobId base;
    JobId stride;
  };
  for (const Case& c : {Case{"dense ids (radix sort)", 1, 1}, Case{"sparse ids (radix sort)", 1000, 65537},
                        Case{"ids wider than 2^32 apart (std::sort)", 5, JobId{1} << 40}}) {
    SCOPED_TRACE(c.name);
    std::vector<JobId> ids;
    for (int i = 0; i < 5000; ++i) ids.push_back(c.base + c.stride * i);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    PendingInfos infos;
    for (size_t i = 0; i < ids.size(); ++i) infos.emplace(ids[i], WithAhead(static_cast<int>(ids[i] % 1000)));
    EXPECT_EQ(infos.at(ids[17]).jobs_ahead, ids[17] % 1000);  // unsealed: linear scan
    infos.Seal();
    ASSERT_EQ(infos.size(), ids.size());
    EXPECT_TRUE(
        std::is_sorted(infos.begin(), infos.end(), [](const auto& a, const auto& b) { return a.first < b.first; }));
    for (JobId id : ids) {
      ASSERT_EQ(infos.count(id), 1u) << id;
      EXPECT_EQ(infos.at(id).jobs_ahead, id % 1000);
    }
    EXPECT_EQ(infos.count(c.base - 1), 0u);
    EXPECT_THROW(infos.at(c.base - 1), std::out_of_range);
  }
}

TEST(PendingInfosTest, ReasonsPutThePositionLast) {
  PendingInfo info;
  info.own = std::make_shared<const std::vector<PendingReason>>(
      std::vector<PendingReason>{{"Resources", "needs 4 GPUs, 2 free in gpu-train-pool"}});
  info.pool = std::make_shared<const std::string>("gpu-train-pool");
  EXPECT_EQ(info.Reasons(), (std::vector<PendingReason>{{"Resources", "needs 4 GPUs, 2 free in gpu-train-pool"}}));
  info.jobs_ahead = 1;
  EXPECT_EQ(info.Reasons().back(), (PendingReason{"Priority", "1 job ahead in gpu-train-pool"}));
  info.jobs_ahead = 3;
  EXPECT_EQ(info.Reasons().back(), (PendingReason{"Priority", "3 jobs ahead in gpu-train-pool"}));
}

}  // namespace
}  // namespace unisched::model
