#pragma once
// Helpers of the store tests: a temporary directory and job builders.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "testing/memory_store.h"
#include "testing/pg_cluster.h"
#include "unisched/model/job.h"
#include "unisched/store/store.h"

namespace unisched::store::testing {

// A fresh directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/unisched-store-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline StoreOptions Options(const std::string& path, const std::string& synchronous = "full") {
  StoreOptions options;
  options.path = path;
  options.synchronous = synchronous;
  return options;
}

// The base of the store contract suites: every test runs against each
// implementation of Store (ADR 0005), named by the parameter.
class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Reopen(); }

  // Opens the store, or closes it and opens it again over the same data,
  // as a restart does.
  void Reopen() {
    if (GetParam() == "memory") {
      std::unique_ptr<::unisched::testing::MemoryStore> next =
          memory_ ? memory_->Reopen() : std::make_unique<::unisched::testing::MemoryStore>();
      if (store_) store_->Close();
      memory_ = next.get();
      store_ = std::move(next);
      return;
    }
    store_.reset();
    StoreOptions options = Options(dir_.File("unisched.db"));
    if (GetParam() == "postgresql") {
      if (conninfo_.empty()) conninfo_ = ::unisched::testing::CreatePgSchema();
      options.backend = StoreBackend::kPostgresql;
      options.conninfo = conninfo_;
    }
    auto store = Store::Open(options);
    ASSERT_TRUE(store.ok()) << store.error().message;
    store_ = std::move(*store);
  }

  void TearDown() override {
    store_.reset();
    if (!conninfo_.empty()) ::unisched::testing::DropPgSchema(conninfo_);
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::string conninfo_;  // postgresql: this test's schema

 private:
  ::unisched::testing::MemoryStore* memory_ = nullptr;
};

inline const std::vector<std::string>& StoreImplementations() {
  static const std::vector<std::string> kinds = {"sqlite", "postgresql", "memory"};
  return kinds;
}

// JobFilter by chained setters (GCC 12 warns on partial designated initializers).
class Filter {
 public:
  Filter& State(model::JobState state) {
    f_.state = state;
    return *this;
  }
  Filter& Queue(const std::string& queue) {
    f_.queue = queue;
    return *this;
  }
  Filter& Pool(const std::string& pool) {
    f_.pool = pool;
    return *this;
  }
  Filter& Project(const std::string& project) {
    f_.project = project;
    return *this;
  }
  Filter& User(const std::string& user) {
    f_.user = user;
    return *this;
  }
  Filter& Visible(std::vector<std::string> projects, std::vector<std::string> queues = {}) {
    f_.visible_projects = std::move(projects);
    f_.visible_queues = std::move(queues);
    return *this;
  }
  Filter& Limit(int limit) {
    f_.limit = limit;
    return *this;
  }
  operator JobFilter() const { return f_; }  // NOLINT: implicit by design

 private:
  JobFilter f_;
};

inline model::Job MakeJob(const std::string& name, const std::string& user = "alice",
                          const std::string& project = "default", const std::string& queue = "hpc-precision",
                          const std::string& pool = "cpu-hpc-pool", model::JobState state = model::JobState::kPending) {
  model::Job job;
  job.name = name;
  job.user = user;
  job.project = project;
  job.queue = queue;
  job.pool = pool;
  job.state = state;
  job.workload.features = {{"precision", "fp64"}};
  job.resources.cpus = 4;
  job.resources.memory_mb = 4096;
  job.resources.walltime_seconds = 3600;
  job.command = {"/bin/sh", "-c", "echo " + name};
  job.routing = {pool, queue, "explicit queue"};
  job.submitted_at = FromUnixMillis(1'700'000'000'000);
  job.config_version = "v1";
  return job;
}

}  // namespace unisched::store::testing
