#pragma once
// The API's handlers without a socket: a real store in a temp dir, the
// default config (AdjustConfig may change it), a fake control plane and a
// fake clock. Users: admin (platform-admin, token "admin-token") and alice
// (user of project default, token "alice-token").

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/api/api.h"

namespace unisched::api {

class FakeControl final : public ControlPlane {
 public:
  void JobCommitted(model::Job job) override { committed.push_back(std::move(job)); }
  void ControlJob(model::JobId, JobAction, std::string, std::function<void(Result<model::Job>)> done) override {
    done(Error::Conflict("job_finished", "fake"));
  }
  void SetNodeState(std::string, bool, std::string, std::string,
                    std::function<void(Result<ClusterView::Node>)> done) override {
    done(Error::NotFound("fake"));
  }
  std::shared_ptr<const ClusterView> View() const override { return std::make_shared<ClusterView>(); }
  std::vector<model::Job> committed;
};

class ApiFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/unisched-api-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto loaded = config::LoadConfigFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
    ASSERT_TRUE(std::holds_alternative<config::Config>(loaded));
    config_ = std::get<config::Config>(loaded);
    AdjustConfig(config_);
    live_config_ = std::make_unique<config::LiveConfig>(config_);
    auto store = store::Store::Open({dir_ + "/db", "normal", 64});
    ASSERT_TRUE(store.ok()) << store.error().message;
    store_ = std::move(store.value());
    ASSERT_TRUE(store_
                    ->WriteSync([](store::Transaction& t) -> Status {
                      if (auto s = t.UpsertUser({"admin", "platform-admin", {"default"}, {}, "", true}); !s.ok()) {
                        return s;
                      }
                      if (auto s = t.UpsertUser({"alice", "user", {"default"}, {}, "", false}); !s.ok()) return s;
                      if (auto s = t.InsertToken({auth::HashToken("admin-token"), "admin", "user", "", {}}); !s.ok()) {
                        return s;
                      }
                      return t.InsertToken({auth::HashToken("alice-token"), "alice", "user", "", {}});
                    })
                    .ok());
    ApiContext ctx;
    ctx.config = live_config_.get();
    ctx.store = store_.get();
    ctx.control = &control_;
    jobs_ = std::make_unique<service::JobService>(*live_config_, *store_, control_, nullptr, metrics_, clock_);
    ctx.jobs = jobs_.get();
    ctx.metrics = &metrics_;
    ctx.clock = &clock_;
    ctx.read_log = [](const model::Job&, int, int, std::string_view, LogRange) { return std::string(); };
    api_ = std::make_unique<Api>(ctx);
  }
  void TearDown() override {
    api_.reset();
    if (store_) store_->Close();
    std::filesystem::remove_all(dir_);
  }
  // Changes to the default config before the Api is made.
  virtual void AdjustConfig(config::Config&) {}

  HttpResponse Do(const std::string& method, const std::string& path, const std::string& body = {},
                  const std::string& token = "admin-token", const std::string& remote = "127.0.0.1:40000") {
    HttpRequest r;
    r.remote = remote;
    r.method = method;
    r.path = path;
    r.target = path;
    r.body = body;
    if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
    return api_->HandleSync(r);
  }

  std::string dir_;
  config::Config config_;
  std::unique_ptr<config::LiveConfig> live_config_;  // config_ as the API and job service see it
  std::unique_ptr<store::Store> store_;
  FakeControl control_;
  metrics::Metrics metrics_;
  FakeClock clock_;
  std::unique_ptr<service::JobService> jobs_;
  std::unique_ptr<Api> api_;
};

}  // namespace unisched::api
