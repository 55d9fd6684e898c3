// Runs the YAML scenarios of tests/scenario/: each file is a cluster (a
// config document under `config:`, loaded with the real config loader), an
// instant, running and pending jobs, and what one scheduling cycle must do.
// tests/scenario/README.md describes the format.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "testing/builders.h"
#include "unisched/config/config.h"
#include "unisched/scheduler/scheduler.h"

namespace unisched::scheduler {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  const fs::path dir = fs::path(UNISCHED_SOURCE_DIR) / "tests" / "scenario";
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

[[noreturn]] void Bad(const std::string& what) {
  throw std::runtime_error(what);
}

// "90m", "-2h", "+45s", "1.5h", "2d", "0", or a number of seconds.
milliseconds ParseDuration(const YAML::Node& node, const std::string& where) {
  const std::string text = node.as<std::string>();
  if (text.empty()) Bad(where + ": empty duration");
  size_t pos = 0;
  double sign = 1;
  if (text[0] == '-' || text[0] == '+') {
    sign = text[0] == '-' ? -1 : 1;
    pos = 1;
  }
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text.substr(pos), &used);
  } catch (const std::exception&) {
    Bad(where + ": not a duration: '" + text + "'");
  }
  const std::string unit = text.substr(pos + used);
  double seconds_per_unit = 1;
  if (unit == "" || unit == "s") {
    seconds_per_unit = 1;
  } else if (unit == "m") {
    seconds_per_unit = 60;
  } else if (unit == "h") {
    seconds_per_unit = 3600;
  } else if (unit == "d") {
    seconds_per_unit = 86400;
  } else {
    Bad(where + ": unknown unit in '" + text + "' (s, m, h, d)");
  }
  return milliseconds(static_cast<int64_t>(sign * value * seconds_per_unit * 1000));
}

// A time relative to the scenario's now ("-1h", "+30m"), or "forever".
Timestamp ParseTime(const YAML::Node& node, Timestamp now, const std::string& where) {
  if (node.as<std::string>() == "forever") return Timestamp::max();
  return now + ParseDuration(node, where);
}

template <typename T>
T Get(const YAML::Node& map, const std::string& key, T fallback) {
  return map[key] ? map[key].as<T>() : fallback;
}

struct Scenario {
  std::string description;
  config::Config config;
  Timestamp now;
  Snapshot snapshot;
  YAML::Node expect;
};

model::ResourceRequest ParseResources(const YAML::Node& job, const model::QueueSpec& queue, const std::string& where) {
  model::ResourceRequest r;
  const YAML::Node res = job["resources"];
  if (res) {
    r.nodes = Get(res, "nodes", 1);
    r.cpus = Get(res, "cpus", 1);
    r.gpus = Get(res, "gpus", 0);
    r.gpu_model = Get<std::string>(res, "gpu_model", "");
  }
  if (res && res["memory_mb"]) {
    r.memory_mb = res["memory_mb"].as<int64_t>();
  } else {
    r.memory_mb = r.cpus * queue.policy.default_memory_mb_per_cpu.value_or(1024);
  }
  if (res && res["walltime"]) {
    r.walltime_seconds = ParseDuration(res["walltime"], where + ".walltime").count() / 1000;
  } else if (queue.policy.default_walltime_hours) {
    r.walltime_seconds = static_cast<int64_t>(*queue.policy.default_walltime_hours * 3600);
  }
  return r;
}

const model::QueueSpec& QueueOf(const config::Config& c, const YAML::Node& job, const std::string& where) {
  if (!job["queue"]) Bad(where + ": needs a queue");
  const model::QueueSpec* q = c.cluster.FindQueue(job["queue"].as<std::string>());
  if (!q) Bad(where + ": unknown queue " + job["queue"].as<std::string>());
  return *q;
}

Scenario LoadScenario(const std::string& file) {
  const fs::path path = fs::path(UNISCHED_SOURCE_DIR) / "tests" / "scenario" / file;
  const YAML::Node doc = YAML::LoadFile(path.string());
  Scenario s;
  s.description = Get<std::string>(doc, "description", file);
  if (!doc["config"]) Bad("needs a config: document");
  YAML::Emitter out;
  out << doc["config"];
  auto loaded = config::LoadConfigText(out.c_str(), file);
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    std::string text = "config does not load:";
    for (const auto& e : *errors) text += "\n  " + e.ToString();
    Bad(text);
  }
  s.config = std::get<config::Config>(std::move(loaded));
  s.now = testing::TestEpoch();
  if (doc["now"]) {
    auto parsed = ParseRfc3339(doc["now"].as<std::string>());
    if (!parsed) Bad("now: not an RFC 3339 time");
    s.now = *parsed;
  }

  Snapshot& snap = s.snapshot;
  snap.nodes = testing::EmptyUsage(s.config.cluster);
  for (const auto& [key, state] : std::map<std::string, model::NodeState>{{"draining", model::NodeState::kDraining},
                                                                          {"drained", model::NodeState::kDrained},
                                                                          {"down", model::NodeState::kDown}}) {
    for (const auto& name : doc[key] ? doc[key].as<std::vector<std::string>>() : std::vector<std::string>{}) {
      auto it = std::find_if(snap.nodes.begin(), snap.nodes.end(),
                             [&](const model::NodeUsage& n) { return n.spec.name == name; });
      if (it == snap.nodes.end()) Bad(key + ": unknown node " + name);
      it->state = state;
    }
  }
  if (doc["fairshare"]) {
    for (const auto& entry : doc["fairshare"]) {
      const std::string key = entry.first.as<std::string>();
      const size_t slash = key.find('/');
      if (slash == std::string::npos) Bad("fairshare: keys are project/user, got " + key);
      snap.fairshare[{key.substr(0, slash), key.substr(slash + 1)}] = entry.second.as<double>();
    }
  }

  int index = 0;
  for (const auto& job : doc["running"]) {
    const std::string where = "running[" + std::to_string(index++) + "]";
    const model::QueueSpec& queue = QueueOf(s.config, job, where);
    RunningJob r;
    r.id = job["id"].as<model::JobId>();
    r.queue = queue.name;
    r.pool = queue.pool;
    r.project = Get<std::string>(job, "project", "default");
    r.user = Get<std::string>(job, "user", "alice");
    r.adjustment = Get(job, "priority", 0);
    r.resources = ParseResources(job, queue, where);
    r.started_at =
        job["started"] ? ParseTime(job["started"], s.now, where + ".started") : s.now - std::chrono::hours(1);
    r.submitted_at = job["submitted"] ? ParseTime(job["submitted"], s.now, where + ".submitted") : r.started_at;
    if (job["end"]) {
      r.expected_end = ParseTime(job["end"], s.now, where + ".end");
    } else {
      r.expected_end = r.resources.walltime_seconds > 0
                           ? r.started_at + std::chrono::seconds(r.resources.walltime_seconds)
                           : Timestamp::max();
    }
    if (job["preempting_for"]) r.preempting_for = job["preempting_for"].as<model::JobId>();
    if (!job["on"]) Bad(where + ": needs on: [nodes]");
    const auto on = job["on"].as<std::vector<std::string>>();
    r.resources.nodes = static_cast<int>(on.size());
    for (const auto& name : on) {
      auto node = std::find_if(snap.nodes.begin(), snap.nodes.end(),
                               [&](const model::NodeUsage& n) { return n.spec.name == name; });
      if (node == snap.nodes.end()) Bad(where + ": unknown node " + name);
      // The lowest free devices of the requested model.
      model::NodeAllocation share{name, r.resources.cpus, r.resources.memory_mb, {}};
      for (size_t i = 0; i < node->spec.gpus.size() && static_cast<int>(share.gpu_indices.size()) < r.resources.gpus;
           ++i) {
        const auto& d = node->spec.gpus[i];
        if (!node->gpu_busy.Busy(i) && (r.resources.gpu_model.empty() || d.model == r.resources.gpu_model)) {
          share.gpu_indices.push_back(d.index);
        }
      }
      if (static_cast<int>(share.gpu_indices.size()) < r.resources.gpus)
        Bad(where + ": not enough free GPUs on " + name);
      node->Apply(share, +1);
      if (node->cpus_used > node->spec.cpus || node->memory_used_mb > node->spec.memory_mb) {
        Bad(where + ": over-commits " + name);
      }
      r.allocation.push_back(std::move(share));
    }
    snap.running.push_back(std::move(r));
  }

  index = 0;
  for (const auto& job : doc["pending"]) {
    const std::string where = "pending[" + std::to_string(index++) + "]";
    const model::QueueSpec& queue = QueueOf(s.config, job, where);
    PendingJob p;
    p.id = job["id"].as<model::JobId>();
    p.queue = queue.name;
    p.pool = queue.pool;
    p.project = Get<std::string>(job, "project", "default");
    p.user = Get<std::string>(job, "user", "alice");
    p.adjustment = Get(job, "priority", 0);
    // Default: submitted in id order, a second apart, an hour ago.
    p.submitted_at = job["submitted"] ? ParseTime(job["submitted"], s.now, where + ".submitted")
                                      : s.now - std::chrono::hours(1) + std::chrono::seconds(p.id);
    p.resources = ParseResources(job, queue, where);
    if (job["constraints"]) p.constraints = job["constraints"].as<std::map<std::string, std::string>>();
    if (job["preempted_by"]) p.preempted_by = job["preempted_by"].as<std::vector<model::JobId>>();
    snap.pending.push_back(std::move(p));
  }
  s.expect = doc["expect"];
  if (!s.expect) Bad("needs an expect: section");
  return s;
}

std::string Show(const std::vector<model::PendingReason>& reasons) {
  std::string out = "[";
  for (const auto& r : reasons) {
    if (out.size() > 1) out += ", ";
    out.append(r.code).append(": ").append(r.message);
  }
  out += "]";
  return out;
}

void Check(const Scenario& s, const Plan& plan) {
  const YAML::Node& expect = s.expect;
  // starts: every started job, optionally with its nodes.
  if (expect["starts"]) {
    std::map<model::JobId, std::vector<std::string>> got;
    for (const auto& start : plan.starts) {
      std::vector<std::string> nodes;
      for (const auto& share : start.allocation) nodes.push_back(share.node);
      std::sort(nodes.begin(), nodes.end());
      got[start.job] = nodes;
    }
    std::set<model::JobId> want_ids;
    if (expect["starts"].IsSequence()) {
      for (const auto& id : expect["starts"]) want_ids.insert(id.as<model::JobId>());
    } else {
      for (const auto& entry : expect["starts"]) {
        const auto id = entry.first.as<model::JobId>();
        want_ids.insert(id);
        if (entry.second.IsSequence() && got.count(id)) {
          auto want_nodes = entry.second.as<std::vector<std::string>>();
          std::sort(want_nodes.begin(), want_nodes.end());
          EXPECT_EQ(got.at(id), want_nodes) << "nodes of job " << id;
        }
      }
    }
    std::set<model::JobId> got_ids;
    for (const auto& [id, _] : got) got_ids.insert(id);
    EXPECT_EQ(got_ids, want_ids) << "started jobs";
  }
  // preemptions: every (victim, preemptor), optionally grace and requeue.
  if (expect["preemptions"]) {
    std::map<model::JobId, Preemption> got;
    for (const auto& p : plan.preemptions) got[p.victim] = p;
    std::set<model::JobId> want_victims;
    for (const auto& p : expect["preemptions"]) {
      const auto victim = p["victim"].as<model::JobId>();
      want_victims.insert(victim);
      auto it = got.find(victim);
      if (it == got.end()) continue;
      EXPECT_EQ(it->second.preemptor, p["preemptor"].as<model::JobId>()) << "preemptor of " << victim;
      if (p["grace_seconds"]) {
        EXPECT_EQ(it->second.grace_seconds, p["grace_seconds"].as<int>()) << victim;
      }
      if (p["requeue"]) {
        EXPECT_EQ(it->second.requeue, p["requeue"].as<bool>()) << victim;
      }
    }
    std::set<model::JobId> got_victims;
    for (const auto& [id, _] : got) got_victims.insert(id);
    EXPECT_EQ(got_victims, want_victims) << "preempted jobs";
  }
  // reasons: a pending job's reasons in order; each a code, or
  // {code, message} (exact) or {code, contains}.
  if (expect["reasons"]) {
    for (const auto& entry : expect["reasons"]) {
      const auto id = entry.first.as<model::JobId>();
      auto it = plan.pending.find(id);
      if (it == plan.pending.end()) {
        ADD_FAILURE() << "job " << id << " is not pending";
        continue;
      }
      const auto& got = it->second.Reasons();
      const YAML::Node& want = entry.second;
      EXPECT_EQ(got.size(), want.size()) << "reasons of job " << id << ": " << Show(got);
      for (size_t i = 0; i < std::min<size_t>(got.size(), want.size()); ++i) {
        const YAML::Node& w = want[i];
        if (w.IsScalar()) {
          EXPECT_EQ(got[i].code, w.as<std::string>()) << "reason " << i << " of job " << id << ": " << Show(got);
          continue;
        }
        EXPECT_EQ(got[i].code, w["code"].as<std::string>()) << "reason " << i << " of job " << id << ": " << Show(got);
        if (w["message"]) {
          EXPECT_EQ(got[i].message, w["message"].as<std::string>()) << "job " << id;
        }
        if (w["contains"]) {
          EXPECT_NE(got[i].message.find(w["contains"].as<std::string>()), std::string::npos)
              << "reason " << i << " of job " << id << ": " << got[i].message;
        }
      }
    }
  }
  // estimated_start: relative to now, or none.
  if (expect["estimated_start"]) {
    for (const auto& entry : expect["estimated_start"]) {
      const auto id = entry.first.as<model::JobId>();
      auto it = plan.pending.find(id);
      if (it == plan.pending.end()) {
        ADD_FAILURE() << "job " << id << " is not pending";
        continue;
      }
      const auto& got = it->second.estimated_start;
      if (entry.second.as<std::string>() == "none") {
        EXPECT_FALSE(got.has_value()) << "job " << id << " has an estimated start";
      } else {
        const Timestamp want = ParseTime(entry.second, s.now, "estimated_start");
        ASSERT_TRUE(got.has_value()) << "job " << id << " has no estimated start";
        EXPECT_EQ(ToUnixMillis(*got) - ToUnixMillis(s.now), ToUnixMillis(want) - ToUnixMillis(s.now))
            << "estimated start of job " << id << " (ms after now)";
      }
    }
  }
  // priority: the total a pending job is ordered by.
  if (expect["priority"]) {
    for (const auto& entry : expect["priority"]) {
      const auto id = entry.first.as<model::JobId>();
      ASSERT_TRUE(plan.pending.count(id)) << "job " << id << " is not pending";
      EXPECT_EQ(plan.pending.at(id).priority.Total(), entry.second.as<int64_t>()) << "priority of job " << id;
    }
  }
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, OneCycleDoesWhatTheScenarioSays) {
  Scenario s;
  try {
    s = LoadScenario(GetParam());
  } catch (const std::exception& e) {
    FAIL() << GetParam() << ": " << e.what();
  }
  SCOPED_TRACE(s.description);
  const Scheduler scheduler(SchedulerConfig::From(s.config.cluster));
  const Plan plan = scheduler.Decide(s.snapshot, s.now);
  try {
    Check(s, plan);
  } catch (const std::exception& e) {
    FAIL() << GetParam() << ": bad expect: section: " << e.what();
  }
  // Without explanations the decisions are the same.
  Snapshot quiet = s.snapshot;
  quiet.explain = false;
  const Plan quiet_plan = scheduler.Decide(quiet, s.now);
  ASSERT_EQ(quiet_plan.starts.size(), plan.starts.size());
  for (size_t i = 0; i < plan.starts.size(); ++i) EXPECT_EQ(quiet_plan.starts[i].allocation, plan.starts[i].allocation);
  EXPECT_EQ(quiet_plan.preemptions.size(), plan.preemptions.size());
}

TEST(ScenarioFilesTest, ThereAreScenarios) {
  EXPECT_GE(ScenarioFiles().size(), 6u);
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (char c : info.param.substr(0, info.param.size() - 5))
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest, ::testing::ValuesIn(ScenarioFiles()), TestName);

}  // namespace
}  // namespace unisched::scheduler
