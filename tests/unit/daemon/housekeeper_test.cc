// The housekeeper's chores on a real store in a temporary directory with a
// fake clock: disk usage as du counts it, storage samples charged once per
// interval, and reconciliation raising each discrepancy once.

#include "daemon/housekeeper.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "unisched/ledger/ledger.h"
#include "unit/store/store_test_util.h"

namespace unisched::daemon {
namespace {

namespace fs = std::filesystem;

using store::testing::TempDir;

void WriteFile(const std::string& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out << std::string(bytes, 'x');
}

TEST(DiskUsageTest, CountsAllocatedBlocksHardLinksOnceAndNoSymlinkTargets) {
  TempDir dir;
  WriteFile(dir.path() + "/a", 100 * 1024);
  fs::create_directory(dir.path() + "/sub");
  WriteFile(dir.path() + "/sub/b", 50 * 1024);
  const auto before = DiskUsageBytes(dir.path());
  ASSERT_TRUE(before.has_value());
  EXPECT_GE(*before, 150u * 1024);
  EXPECT_LE(*before, 150u * 1024 + 64 * 1024) << "data plus a few blocks of directories";
  fs::create_hard_link(dir.path() + "/a", dir.path() + "/a-again");
  fs::create_directory_symlink("/usr", dir.path() + "/usr-link");
  const auto after = DiskUsageBytes(dir.path());
  ASSERT_TRUE(after.has_value());
  EXPECT_LE(*after, *before + 8 * 1024) << "a second name and a symlink add no data";
  EXPECT_FALSE(DiskUsageBytes(dir.path() + "/missing").has_value()) << "absent, not zero";
}

TEST(DiskUsageTest, GbHoursAreBytesOverTenToTheNineTimesHours) {
  EXPECT_DOUBLE_EQ(GbHours(2'000'000'000, 1800), 1.0);
  EXPECT_DOUBLE_EQ(GbHours(0, 3600), 0.0);
}

class HousekeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store::StoreOptions options;
    options.path = state_.path() + "/unisched.db";
    auto opened = store::Store::Open(options);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    store_ = std::move(*opened);
    config_.store.storage_sample_interval_seconds = 60;
    config::ProjectSpec project;
    project.name = "genomics";
    project.storage_paths = {data_.path()};
    config_.projects = {project};
    model::NodeSpec node;
    node.name = "x86-c8m16-hpc-01";
    node.pool = "p";
    node.cpus = 8;
    node.memory_mb = 16384;
    config_.cluster.nodes = {node};
    fs::create_directory(work_root());
  }
  std::string work_root() const { return state_.path() + "/work"; }
  double StorageOf(const std::string& project) {
    store::UsageQuery q;
    q.group_by = {"project"};
    for (const auto& row : store_->QueryUsage(q)) {
      auto it = row.metrics.find(ledger::kStorageGbHours);
      if (row.group.at("project") == project) return it == row.metrics.end() ? -1 : it->second;
    }
    return -1;
  }
  model::Job RunningJob(model::JobId id) {
    model::Job job;
    job.id = id;
    job.user = "alice";
    job.project = "genomics";
    job.queue = "q";
    job.pool = "p";
    job.state = model::JobState::kRunning;
    job.command = {"sleep", "60"};
    job.resources.cpus = 2;
    job.resources.memory_mb = 512;
    model::Attempt attempt;
    attempt.allocation = {{"x86-c8m16-hpc-01", 2, 512, {}}};
    attempt.started_at = clock_.Now() - std::chrono::seconds(30);
    job.attempts = {attempt};
    return job;
  }
  void Insert(const model::Job& job) {
    Status s = store_->WriteSync([&](store::Transaction& t) -> Status {
      auto inserted = t.InsertJob(job, "");
      return inserted.ok() ? Status::Ok() : Status(inserted.error());
    });
    ASSERT_TRUE(s.ok()) << s.error().message;
  }

  TempDir state_, data_;
  std::unique_ptr<store::Store> store_;
  config::Config config_;
  metrics::Metrics metrics_;
  FakeClock clock_{FromUnixMillis(1'700'000'010'000)};  // 30 s into a minute
};

TEST_F(HousekeeperTest, SamplesEachIntervalOnceForProjectsAndRunningJobs) {
  WriteFile(data_.path() + "/data", 1'000'000);
  Insert(RunningJob(7));
  fs::create_directory(work_root() + "/7");
  WriteFile(work_root() + "/7/out", 400'000);
  const config::LiveConfig live(config_);
  Housekeeper keeper(live, *store_, metrics_, clock_, work_root());

  EXPECT_EQ(keeper.SampleStorage(clock_.Now()), 2);  // the project's path and job 7's work directory
  const double project_once = StorageOf("genomics");
  const double data_bytes = static_cast<double>(*DiskUsageBytes(data_.path()));
  const double work_bytes = static_cast<double>(*DiskUsageBytes(work_root() + "/7"));
  EXPECT_NEAR(project_once, GbHours(data_bytes + work_bytes, 60), 1e-15);
  // The same interval again (e.g. after a restart): the keys exist, nothing is added.
  keeper.SampleStorage(clock_.Now() + std::chrono::seconds(20));
  EXPECT_DOUBLE_EQ(StorageOf("genomics"), project_once);
  // The next interval adds another sample.
  keeper.SampleStorage(clock_.Now() + std::chrono::seconds(60));
  EXPECT_NEAR(StorageOf("genomics"), 2 * project_once, 1e-15);

  // Job 7's share is on its attempt, with its user and queue.
  const store::LedgerCharged job7 = store_->LoadLedgerCharged(7, 1);
  EXPECT_NEAR(job7.sums.at({ledger::kStorageGbHours, "workdir", "x86-c8m16-hpc-01"}), 2 * GbHours(work_bytes, 60),
              1e-15);
}

// A project's directory on a shared file system with project directories is
// the project's storage too; a project without one yet is not charged.
TEST_F(HousekeeperTest, ProjectDirectoriesOnSharedStorageAreChargedToTheirProject) {
  config_.projects[0].storage_paths.clear();
  config::ProjectSpec physics;
  physics.name = "physics";
  config_.projects.push_back(physics);
  config_.storage.shared = {{"data", data_.path(), "", false, {}, true}};
  fs::create_directory(data_.path() + "/genomics");
  std::ofstream(data_.path() + "/genomics/reads.fq") << std::string(100000, 'A');
  const config::LiveConfig live(config_);
  Housekeeper keeper(live, *store_, metrics_, clock_, work_root());
  EXPECT_EQ(keeper.SampleStorage(clock_.Now()), 1);
  EXPECT_GT(StorageOf("genomics"), 0);
  EXPECT_EQ(StorageOf("physics"), -1);
  // A file system too large to walk is left out when asked.
  config_.storage.shared[0].charge_storage = false;
  const config::LiveConfig off(config_);
  Housekeeper quiet(off, *store_, metrics_, clock_, work_root());
  EXPECT_EQ(quiet.SampleStorage(clock_.Now() + std::chrono::seconds(60)), 0);
}

TEST_F(HousekeeperTest, AnUnreadablePathIsNotChargedAtAll) {
  config_.projects[0].storage_paths = {data_.path() + "/does-not-exist"};
  const config::LiveConfig live(config_);
  Housekeeper keeper(live, *store_, metrics_, clock_, work_root());
  EXPECT_EQ(keeper.SampleStorage(clock_.Now()), 0);
  EXPECT_EQ(StorageOf("genomics"), -1) << "absent, not zero";
}

TEST_F(HousekeeperTest, ReconciliationRaisesEachDiscrepancyOnceAsAnEvent) {
  // A finished job with no ledger entries at all: everything is missing.
  model::Job job = RunningJob(9);
  job.state = model::JobState::kCompleted;
  job.attempts[0].state = model::JobState::kCompleted;
  job.attempts[0].ended_at = clock_.Now();
  Insert(job);
  const config::LiveConfig live(config_);
  Housekeeper keeper(live, *store_, metrics_, clock_, work_root());
  keeper.Reconcile(clock_.Now());
  auto count_events = [&] {
    int n = 0;
    for (const auto& e : store_->ListEvents(9)) n += e.kind == "ledger_discrepancy";
    return n;
  };
  EXPECT_EQ(count_events(), 2);  // cpu_core_seconds and memory_mb_seconds
  keeper.Reconcile(clock_.Now() + std::chrono::seconds(60));
  EXPECT_EQ(count_events(), 2) << "found again, raised once";
  const std::string text = metrics_.Serialize();
  EXPECT_NE(text.find("unisched_ledger_discrepancies{kind=\"missing\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("unisched_ledger_reconciled_timestamp_seconds 1700000070"), std::string::npos) << text;
}

}  // namespace
}  // namespace unisched::daemon

namespace unisched::daemon {
namespace {

// The audit trail is cut to its retention and its size bound, oldest first.
TEST_F(HousekeeperTest, AuditRecordsPastRetentionOrTheSizeBoundArePruned) {
  config_.store.audit_retention_days = 2;
  config_.store.audit_max_rows = 5;
  const config::LiveConfig live(config_);
  Housekeeper keeper(live, *store_, metrics_, clock_, work_root());
  const Timestamp now = clock_.Now();
  auto append = [&](Timestamp at, const std::string& target) {
    ASSERT_TRUE(store_
                    ->WriteSync([&](store::Transaction& t) {
                      return t.AppendAudit({at, "admin", "POST /v1/users", target, "201"});
                    })
                    .ok());
  };
  append(now - std::chrono::hours(72), "old-1");
  append(now - std::chrono::hours(49), "old-2");
  for (int i = 0; i < 3; ++i) append(now - std::chrono::hours(1), "recent-" + std::to_string(i));
  EXPECT_EQ(keeper.PruneAudit(now), 2) << "the two older than 2 days";
  EXPECT_EQ(store_->ListAudit(100).size(), 3u);
  for (int i = 3; i < 8; ++i) append(now, "recent-" + std::to_string(i));
  EXPECT_EQ(keeper.PruneAudit(now), 3) << "eight recent ones, five kept";
  const auto kept = store_->ListAudit(100);
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_EQ(kept.front().target, "recent-7");
  EXPECT_EQ(kept.back().target, "recent-3");
  EXPECT_EQ(keeper.PruneAudit(now), 0);
}

}  // namespace
}  // namespace unisched::daemon

namespace unisched::daemon {
namespace {

// Each source of storage in its tier: a project's storage_paths hot, a shared
// file system in the tier it names, a work directory scratch, and what
// lifecycle rules archived in the object store's tier (measured by the
// lifecycle; here a table of what it found).
TEST_F(HousekeeperTest, EachKindOfStorageIsChargedInItsTier) {
  WriteFile(data_.path() + "/data", 1'000'000);
  TempDir shared;
  config_.storage.shared = {{"lustre", shared.path(), "", false, {}, true}};
  config_.storage.shared[0].tier = "fast";
  config_.storage.tiers = {{"fast", 0.5}};
  fs::create_directory(shared.path() + "/genomics");
  WriteFile(shared.path() + "/genomics/reads.fq", 200'000);
  Insert(RunningJob(7));
  fs::create_directory(work_root() + "/7");
  WriteFile(work_root() + "/7/out", 400'000);
  const config::LiveConfig live(config_);
  Housekeeper keeper(live, *store_, metrics_, clock_, work_root());
  std::vector<Timestamp> measured_at;
  keeper.MeasureArchivesWith([&](Timestamp now) {
    measured_at.push_back(now);
    return std::vector<ArchivedBytes>{{"genomics", "s3://rgw/cold/archive/genomics/", "cold", 3'600'000'000}};
  });
  EXPECT_EQ(keeper.SampleStorage(clock_.Now()), 4);
  ASSERT_EQ(measured_at.size(), 1u);

  store::UsageQuery q;
  q.group_by = {"project", "tier"};
  std::map<std::string, double> by_tier;
  for (const auto& row : store_->QueryUsage(q)) {
    EXPECT_EQ(row.group.at("project"), "genomics");
    by_tier[row.group.at("tier")] = row.metrics.at(ledger::kStorageGbHours);
  }
  EXPECT_NEAR(by_tier["hot"], GbHours(*DiskUsageBytes(data_.path()), 60), 1e-15);
  EXPECT_NEAR(by_tier["fast"], GbHours(*DiskUsageBytes(shared.path() + "/genomics"), 60), 1e-15);
  EXPECT_NEAR(by_tier["scratch"], GbHours(*DiskUsageBytes(work_root() + "/7"), 60), 1e-15);
  EXPECT_DOUBLE_EQ(by_tier["cold"], 0.06);  // 3.6 GB for a minute
  EXPECT_EQ(by_tier.size(), 4u);
  // Sampled again within the interval (a restart): the archive is charged once.
  keeper.SampleStorage(clock_.Now() + std::chrono::seconds(20));
  for (const auto& row : store_->QueryUsage(q)) {
    if (row.group.at("tier") == "cold") {
      EXPECT_DOUBLE_EQ(row.metrics.at(ledger::kStorageGbHours), 0.06);
    }
  }
}

}  // namespace
}  // namespace unisched::daemon
