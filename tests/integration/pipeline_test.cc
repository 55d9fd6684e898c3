// The seed's sequencing pipeline (S19; issue 21 point 4) as a workflow of
// Debian's real tools, config/examples/variant-pipeline.json run as it is
// shipped: a synthetic 100 kb reference, reads with known mutations
// simulated from it for two samples (dwgsim, which writes the truth),
// alignment (bwa; minimap2 as the alternative tool), sorting and indexing
// (samtools), joint calling and filtering to candidates (bcftools), the
// files passed between tasks in the workflow's directory on shared storage.
// The known mutations must be found; a second run whose aligner fails once
// must switch that sample to minimap2 and still find them.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "testing/daemon.h"
#include "testing/workflow_json.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The positions of a VCF's records (chromosome:position).
std::set<std::string> Positions(const std::string& vcf) {
  std::set<std::string> out;
  std::istringstream in(vcf);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string chromosome, position;
    fields >> chromosome >> position;
    out.insert(chromosome + ":" + position);
  }
  return out;
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "project directories and accounts need root";
    for (const char* tool :
         {"/usr/bin/dwgsim", "/usr/bin/bwa", "/usr/bin/minimap2", "/usr/bin/samtools", "/usr/bin/bcftools"}) {
      ASSERT_TRUE(fs::exists(tool)) << tool << " is missing: scripts/install-deps.sh installs it";
    }
    // Under /tmp, reachable by the jobs' accounts (the state directory is not).
    root_ = "/tmp/unisched-pipeline-" + std::to_string(::getpid());
    fs::remove_all(root_);
    for (const std::string dir : {"", "/data", "/bin"}) {
      fs::create_directories(root_ + dir);
      fs::permissions(root_ + dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);
    }
    fs::create_directories(root_ + "/flags");
    fs::permissions(root_ + "/flags", fs::perms::all | fs::perms::sticky_bit);
    std::string config = ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
    config += "\nstorage:\n  shared:\n    - {name: data, path: " + root_ + "/data}\n  workflow_dirs: data\n";
    daemon_.UseConfigText(config);
    daemon_.Start();
    alice_ = daemon_.CreateUser("alice", "user", {"default"});
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  json Pipeline() {
    return json::parse(ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/examples/variant-pipeline.json"));
  }
  // Submits as alice and waits for the end; returns the workflow.
  json Run(const json& body) {
    const Reply r = daemon_.Call("POST", "/v1/workflows", body.dump(), {}, &alice_);
    EXPECT_EQ(r.status, 201) << r.body;
    const std::string id = r.json.value("id", "");
    json w;
    for (int i = 0; i < 1800; ++i) {
      w = daemon_.Call("GET", "/v1/workflows/" + id, "", {}, &alice_).json;
      if (w.value("state", "") != "RUNNING") break;
      std::this_thread::sleep_for(100ms);
    }
    return w;
  }
  // Every known mutation of both samples is among the candidates.
  void ExpectMutationsFound(const json& w) {
    const std::string dir = w.value("workflow_dir", "");
    ASSERT_EQ(dir, root_ + "/data/default/workflows/" + w["id"].get<std::string>());
    const std::set<std::string> candidates = Positions(ReadFile(dir + "/candidates.vcf"));
    for (const std::string sample : {"sample1", "sample2"}) {
      const std::set<std::string> truth = Positions(ReadFile(dir + "/" + sample + ".mutations.vcf"));
      ASSERT_GE(truth.size(), 50u) << sample << ": dwgsim made too few mutations to tell";
      size_t found = 0;
      for (const auto& p : truth) found += candidates.count(p);
      // Each sample's own mutations, called jointly at 40x with 0.1% errors:
      // all found here; 95% leaves room for a site the caller merges.
      EXPECT_GE(found * 100, truth.size() * 95) << sample << ": " << found << " of " << truth.size() << " found";
    }
  }

  TestDaemon daemon_;
  std::string root_, alice_;
};

TEST_F(PipelineTest, TheKnownMutationsAreFoundAndAFailingAlignerIsReplacedByMinimap2) {
  const json first = Run(Pipeline());
  ASSERT_EQ(first["state"], "SUCCEEDED") << first.dump(2);
  ExpectMutationsFound(first);
  for (const auto& instance : WorkflowTask(first, "align")["instances"]) EXPECT_TRUE(instance["tool"].is_null());

  // The aligner fails on its first call: that sample's alignment switches
  // to minimap2, the other's stays with bwa, and what follows runs.
  const std::string wrapper = root_ + "/bin/bwa";
  std::ofstream(wrapper) << "#!/bin/sh\n"
                         << "if mkdir " << root_ << "/flags/bwa-failed 2>/dev/null; then\n"
                         << "  echo 'bwa: failing once, as the test asks' >&2; exit 1\n"
                         << "fi\n"
                         << "exec /usr/bin/bwa \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  json body = Pipeline();
  for (auto& task : body["tasks"]) {
    if (task["name"] == "align") task["job"]["env"] = {{"PATH", root_ + "/bin:/usr/bin:/bin"}};
  }
  const json second = Run(body);
  ASSERT_EQ(second["state"], "SUCCEEDED") << second.dump(2);
  ExpectMutationsFound(second);
  int switched = 0;
  for (const auto& instance : WorkflowTask(second, "align")["instances"]) {
    if (instance["tool"] == "align_minimap2") {
      ++switched;
      EXPECT_EQ(instance["jobs"].size(), 2u) << "bwa's job, then minimap2's";
    }
  }
  EXPECT_EQ(switched, 1) << WorkflowTask(second, "align").dump(2);
  bool event = false;
  for (const auto& e : second["events"]) event = event || e["kind"] == "workflow_alternative";
  EXPECT_TRUE(event);
}

}  // namespace
}  // namespace unisched::testing
