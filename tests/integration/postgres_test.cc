// The daemon on PostgreSQL (store.backend: postgresql): a real server (the
// ctest fixture's throw-away cluster, tests/pg/cluster.sh), one schema per
// test; the password from a file or the environment, never the config.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "testing/config_text.h"
#include "testing/daemon.h"
#include "testing/pg_cluster.h"
#include "testing/submission_stream.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

// The default config on PostgreSQL with `conninfo` and the extra lines of
// the postgresql section.
std::string PostgresConfig(const std::string& conninfo, const std::string& extra = "") {
  return ReplaceOnce(DefaultConfigText(), "store:\n",
                     "store:\n  backend: postgresql\n  postgresql:\n    conninfo: \"" + conninfo + "\"\n" + extra);
}

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { conninfo_ = CreatePgSchema(); }
  void TearDown() override { DropPgSchema(conninfo_); }
  std::string conninfo_;
};

TEST_F(PostgresStoreTest, Kill9UnderSubmissionsLosesNothingAndEveryJobRuns) {
  TestDaemon d;
  d.UseConfigText(PostgresConfig(conninfo_));
  d.Start();

  SubmissionStream stream(d.port(), d.admin_token(), {{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  stream.WaitForAcknowledged(20);
  d.Kill9();
  const std::vector<std::string> acknowledged = stream.Stop();
  ASSERT_GE(acknowledged.size(), 20u);

  d.Start();  // the same schema: the jobs are in PostgreSQL, not the state directory
  for (const auto& id : acknowledged) {
    Reply r = d.Call("GET", "/v1/jobs/" + id);
    ASSERT_EQ(r.status, 200) << "acknowledged job " << id << " lost";
  }
  for (const auto& id : acknowledged) {
    json job = d.WaitTerminal(id);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
  }
  // Lists, events and the ledger's usage come from PostgreSQL too.
  Reply list = d.Call("GET", "/v1/jobs?limit=1&state=COMPLETED");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_GE(list.json["total"].get<int64_t>(), static_cast<int64_t>(acknowledged.size()));
  Reply events = d.Call("GET", "/v1/events?object=job/" + acknowledged.front());
  ASSERT_EQ(events.status, 200) << events.body;
  EXPECT_FALSE(events.json["events"].empty()) << events.body;
}

TEST_F(PostgresStoreTest, ThePasswordComesFromAFileOrTheEnvironmentAndAWrongOneStopsTheStart) {
  // A role that must give its password (tests/pg/cluster.sh), owning this test's schema.
  PgAdmin(
      "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'unisched_pw') THEN "
      "CREATE ROLE unisched_pw LOGIN PASSWORD 'right-horse-battery'; END IF; END $$");
  const std::string schema = conninfo_.substr(conninfo_.find("search_path=") + 12,
                                              conninfo_.rfind('\'') - conninfo_.find("search_path=") - 12);
  PgAdmin("ALTER SCHEMA " + schema + " OWNER TO unisched_pw");
  std::string as_pw = conninfo_;
  as_pw.replace(as_pw.find("user=unisched"), 13, "user=unisched_pw");

  {
    TestDaemon d;
    const std::string file = d.state_dir() + "/pg-password";
    std::ofstream(file) << "right-horse-battery\n";
    ::chmod(file.c_str(), 0600);
    d.UseConfigText(PostgresConfig(as_pw, "    password_file: " + file + "\n"));
    d.Start();
    const std::string id = d.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
    EXPECT_EQ(d.WaitTerminal(id)["state"], "COMPLETED");
  }
  {
    TestDaemon d;
    d.SetEnv("UNISCHED_TEST_PG_PASSWORD", "right-horse-battery");
    d.UseConfigText(PostgresConfig(as_pw, "    password_env: UNISCHED_TEST_PG_PASSWORD\n"));
    d.Start();
    EXPECT_EQ(d.Call("GET", "/v1/jobs").json["total"], 1) << "the first daemon's job, read back";
  }
  {
    TestDaemon d;
    const std::string config = d.state_dir() + "/wrong.yaml";
    std::ofstream(config) << PostgresConfig(as_pw, "    password_env: UNISCHED_TEST_PG_WRONG\n");
    auto run = d.RunCli({"server", "--config", config, "--listen", "127.0.0.1:0", "--state-dir", d.state_dir()},
                        {{"UNISCHED_TEST_PG_WRONG", "wrong"}}, std::chrono::seconds(60));
    EXPECT_NE(run.exit_code, 0);
    EXPECT_NE((run.out + run.err).find("password authentication failed"), std::string::npos) << run.out << run.err;
    auto missing = d.RunCli({"server", "--config", config, "--listen", "127.0.0.1:0", "--state-dir", d.state_dir()}, {},
                            std::chrono::seconds(60));
    EXPECT_NE(missing.exit_code, 0);
    EXPECT_NE((missing.out + missing.err).find("the environment has no UNISCHED_TEST_PG_WRONG"), std::string::npos)
        << missing.out << missing.err;
  }
}

// PostgreSQL stopped for 30 s (a cluster of this test's own: the shared one
// serves other tests) under a stream of submissions: the daemon answers 503
// with a clear error meanwhile, keeps running, and connects again by
// itself; every 201 is in the database afterwards, and jobs that ended
// during the outage are stored as ended after it.
TEST(PostgresOutageTest, SubmissionsGet503WhileTheServerIsDownAndEverythingResumesByItself) {
  constexpr auto kOutage = std::chrono::seconds(30);
  char tmpl[] = "/tmp/unisched-pg-outage-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  PgCluster cluster(tmpl);
  TestDaemon d;
  d.UseConfigText(PostgresConfig(cluster.Conninfo()));
  d.Start();
  const json job = {{"workload", {{"kind", "agent"}}}, {"command", {"true"}}};

  SubmissionStream stream(d.port(), d.admin_token(), job);
  ASSERT_GE(stream.WaitForAcknowledged(10), 10u);
  // Jobs that run into the outage and end during it.
  std::vector<std::string> across;
  for (int i = 0; i < 3; ++i) {
    across.push_back(d.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"/bin/sh", "-c", "sleep 2"}}}));
  }
  const auto running_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const auto& id : across) {
    while (d.Call("GET", "/v1/jobs/" + id).json.value("state", "") != "RUNNING" &&
           std::chrono::steady_clock::now() < running_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  cluster.Stop();
  const size_t before_outage = stream.WaitForAcknowledged(0);
  Reply refused = d.Call("POST", "/v1/jobs", job.dump(), {{"Idempotency-Key", "during-the-outage"}});
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("Idempotency-Key"), std::string::npos) << "says a retry is safe: " << refused.body;
  EXPECT_EQ(d.Call("GET", "/healthz").status, 200) << "the daemon itself is alive";
  std::this_thread::sleep_for(kOutage);
  EXPECT_LE(stream.WaitForAcknowledged(0), before_outage + 1) << "no 201 while the database is down";
  cluster.Start();
  const auto restarted = std::chrono::steady_clock::now();

  // Resumes by itself: the stream's submissions are accepted again, and the
  // refused one, retried with its key, is accepted once.
  ASSERT_GE(stream.WaitForAcknowledged(before_outage + 1, std::chrono::seconds(120)), before_outage + 1);
  std::cout
      << "[ outage ] PostgreSQL back to the next 201: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - restarted).count()
      << " ms\n";
  ASSERT_GE(stream.WaitForAcknowledged(before_outage + 20, std::chrono::seconds(120)), before_outage + 20);
  const std::vector<std::string> acknowledged = stream.Stop();
  Reply retried = d.Call("POST", "/v1/jobs", job.dump(), {{"Idempotency-Key", "during-the-outage"}});
  ASSERT_EQ(retried.status, 201) << retried.body;
  EXPECT_EQ(d.WaitTerminal(retried.json["id"].get<std::string>())["state"], "COMPLETED");
  for (const auto& id : across) EXPECT_EQ(d.WaitTerminal(id)["state"], "COMPLETED") << "ended during the outage";
  for (const auto& id : acknowledged) {
    const json done = d.WaitTerminal(id);
    EXPECT_EQ(done["state"], "COMPLETED") << done.dump();
  }
  d.Stop();
}

// PostgreSQL itself replicated: a primary and a streaming-replication
// standby (synchronous commit), both throw-away clusters. The primary
// stops, the standby is promoted, and the daemon follows through its
// multi-host connection string (target_session_attrs=read-write); no
// acknowledged job is lost.
TEST(PostgresFailoverTest, ThePromotedStandbyIsFollowedAndNoAcknowledgedJobIsLost) {
  char tmpl[] = "/tmp/unisched-pg-failover-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  ::chmod(tmpl, 0755);  // the servers run as nobody
  const std::string base = tmpl;
  {
    PgCluster primary(base + "/primary");
    auto standby = PgCluster::StandbyOf(primary, base + "/standby");
    const std::string conninfo = "host=" + primary.dir() + "," + standby->dir() +
                                 " port=5432,5432 user=unisched dbname=postgres target_session_attrs=read-write";
    TestDaemon d;
    d.UseConfigText(PostgresConfig(conninfo));
    d.Start();
    SubmissionStream stream(d.port(), d.admin_token(), {{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
    ASSERT_GE(stream.WaitForAcknowledged(20), 20u);
    primary.Stop();
    standby->Promote();
    const size_t before = stream.WaitForAcknowledged(0);
    ASSERT_GE(stream.WaitForAcknowledged(before + 20, std::chrono::seconds(120)), before + 20)
        << "no submission accepted after the promotion";
    const std::vector<std::string> acknowledged = stream.Stop();
    for (const auto& id : acknowledged) {
      ASSERT_EQ(d.Call("GET", "/v1/jobs/" + id).status, 200) << "acknowledged job " << id << " lost in the failover";
    }
    for (const auto& id : acknowledged) EXPECT_EQ(d.WaitTerminal(id)["state"], "COMPLETED") << id;
    d.Stop();
  }
  std::error_code ignored;
  std::filesystem::remove_all(base, ignored);
}

TEST(PostgresConfigTest, APasswordInTheConfigOrAMissingConnectionStringIsRefused) {
  TestDaemon d;  // not started
  const std::string inline_password = d.state_dir() + "/inline.yaml";
  std::ofstream(inline_password) << PostgresConfig("host=db1 dbname=unisched password=hunter2");
  auto refused = d.RunCli({"validate-config", inline_password});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.out.find("store.postgresql.conninfo: holds a password"), std::string::npos) << refused.out;
  const std::string uri_password = d.state_dir() + "/uri.yaml";
  std::ofstream(uri_password) << PostgresConfig("postgresql://unisched:hunter2@db1/unisched");
  EXPECT_NE(d.RunCli({"validate-config", uri_password}).out.find("holds a password"), std::string::npos);
  const std::string missing = d.state_dir() + "/missing.yaml";
  std::ofstream(missing) << ReplaceOnce(DefaultConfigText(), "store:\n", "store:\n  backend: postgres\n");
  auto typo = d.RunCli({"validate-config", missing});
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_NE(typo.out.find("store.backend: unknown value 'postgres'"), std::string::npos) << typo.out;
}

}  // namespace
}  // namespace unisched::testing
