// unisched-agents-bench: many simulated node agents against a real daemon
// (issue 5, point 7). The daemon's config declares the agent nodes (pool
// "sim", scripts/bench.sh writes it). Simulated agents are light: each is a
// name, a list of attempts it "runs" and a heartbeat; T threads each drive
// N/T of them over one keep-alive connection, heartbeating without the long
// poll (wait_ms 0), so the figure is what the daemon absorbs.
//
//  1. heartbeats/s over --seconds with every agent registered;
//  2. failover: --jobs long jobs are started (one per node), then one agent
//     with a job stops heartbeating (its machine "died"): the time until
//     its node is down and until its job runs on another node.
//
// usage: unisched-agents-bench --url URL --token-file ADMIN_TOKEN_FILE [--agents N] [--threads T]
//                              [--seconds S] [--jobs K] [--timeout-seconds S]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "unisched/client/http_client.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using unisched::client::HttpClient;

struct Options {
  std::string url;
  std::string token_file;
  int agents = 1000;
  int threads = 8;
  int seconds = 10;
  int jobs = 10;
};

std::string NodeName(int i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "x86-c8m16-sim-%04d", i + 1);
  return buf;
}

struct SimAgent {
  std::string node;
  std::mutex mu;
  std::set<std::pair<int64_t, int>> running;
  std::atomic<bool> dead{false};
};

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--url")
      o.url = value;
    else if (flag == "--token-file")
      o.token_file = value;
    else if (flag == "--agents")
      o.agents = std::stoi(value);
    else if (flag == "--threads")
      o.threads = std::stoi(value);
    else if (flag == "--seconds")
      o.seconds = std::stoi(value);
    else if (flag == "--jobs")
      o.jobs = std::stoi(value);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (o.url.empty() || o.token_file.empty()) {
    std::cerr << "usage: unisched-agents-bench --url URL --token-file ADMIN_TOKEN_FILE [--agents N] [--threads T] "
                 "[--seconds S] [--jobs K]\n";
    return 2;
  }
  auto base = unisched::client::ParseBaseUrl(o.url);
  if (!base.ok()) {
    std::cerr << base.error().message << "\n";
    return 2;
  }
  std::string admin;
  std::ifstream(o.token_file) >> admin;
  HttpClient control(base->first, base->second);
  control.SetBearerToken(admin);
  auto created = control.Request("POST", "/v1/node-tokens", json{{"pool", "sim"}}.dump());
  if (!created.ok() || created->status != 201) {
    std::cerr << "cannot create a node token: " << (created.ok() ? created->body : created.error().message) << "\n";
    return 1;
  }
  const std::string node_token = json::parse(created->body)["token"];

  std::vector<std::unique_ptr<SimAgent>> agents;
  for (int i = 0; i < o.agents; ++i) {
    agents.push_back(std::make_unique<SimAgent>());
    agents.back()->node = NodeName(i);
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> heartbeats{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      HttpClient http(base->first, base->second);
      http.SetBearerToken(node_token);
      while (!stop) {
        for (size_t i = static_cast<size_t>(t); i < agents.size() && !stop; i += static_cast<size_t>(o.threads)) {
          SimAgent& a = *agents[i];
          if (a.dead) continue;
          json running = json::array();
          {
            std::lock_guard lock(a.mu);
            for (const auto& [job, attempt] : a.running) running.push_back({{"job", job}, {"attempt", attempt}});
          }
          const json body = {{"node", a.node},
                             {"pool", "sim"},
                             {"resources", {{"cpus", 8}, {"memory_mb", 16384}, {"gpus", json::array()}}},
                             {"running", running},
                             {"healthy", true},
                             {"wait_ms", 0}};
          auto r = http.Request("POST", "/v1/agents/heartbeat", body.dump());
          if (!r.ok() || r->status != 200) {
            ++failures;
            continue;
          }
          ++heartbeats;
          const json commands = json::parse(r->body, nullptr, false);
          if (!commands.is_object()) continue;
          std::lock_guard lock(a.mu);
          for (const auto& spec : commands.value("launch", json::array())) {
            a.running.insert({spec.value("job_id", int64_t{0}), spec.value("attempt", 0)});
          }
          for (const auto& c : commands.value("cancel", json::array())) {
            a.running.erase({c.value("job", int64_t{0}), c.value("attempt", 0)});
          }
        }
      }
    });
  }

  // Registration: every node up.
  const auto reg_start = Clock::now();
  while (Seconds(Clock::now() - reg_start) < 120) {
    auto nodes = control.Request("GET", "/v1/nodes");
    int up = 0;
    if (nodes.ok() && nodes->status == 200) {
      const json doc = json::parse(nodes->body);  // named: a temporary's ["nodes"] would dangle in the loop
      for (const auto& n : doc["nodes"]) up += n["state"] == "up";
    }
    if (up >= o.agents) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double registration_s = Seconds(Clock::now() - reg_start);

  // 1. Heartbeats absorbed.
  const int64_t before = heartbeats;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(o.seconds));
  const double rate = static_cast<double>(heartbeats - before) / Seconds(Clock::now() - t0);

  // 2. Failover.
  std::vector<std::string> ids;
  for (int k = 0; k < o.jobs; ++k) {
    const json job = {{"queue", "sim"},
                      {"workload", {{"kind", "hpc"}}},
                      {"resources", {{"cpus", 8}, {"memory_mb", 1024}}},
                      {"command", {"sleep", "3600"}}};
    auto r = control.Request("POST", "/v1/jobs", job.dump());
    if (r.ok() && r->status == 201) ids.push_back(json::parse(r->body)["id"]);
  }
  std::string victim_job, victim_node;
  for (int i = 0; i < 600 && victim_job.empty(); ++i) {
    auto r = control.Request("GET", "/v1/jobs/" + ids.front());
    if (r.ok() && r->status == 200) {
      const json job = json::parse(r->body);
      if (job["state"] == "RUNNING") {
        victim_job = ids.front();
        victim_node = job["nodes"][0];
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  double to_down = -1, to_elsewhere = -1;
  if (!victim_job.empty()) {
    for (auto& a : agents) {
      if (a->node == victim_node) a->dead = true;
    }
    const auto died = Clock::now();
    while (Seconds(Clock::now() - died) < 300 && (to_elsewhere < 0 || to_down < 0)) {
      if (to_down < 0) {
        auto n = control.Request("GET", "/v1/nodes");
        if (n.ok() && n->status == 200) {
          const json doc = json::parse(n->body);
          for (const auto& node : doc["nodes"]) {
            if (node["name"] == victim_node && node["state"] == "down") to_down = Seconds(Clock::now() - died);
          }
        }
      }
      auto r = control.Request("GET", "/v1/jobs/" + victim_job);
      if (r.ok() && r->status == 200) {
        const json job = json::parse(r->body);
        if (to_elsewhere < 0 && job["state"] == "RUNNING" && job["attempts"].size() >= 2) {
          to_elsewhere = Seconds(Clock::now() - died);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  stop = true;
  for (auto& th : threads) th.join();
  for (const auto& id : ids) control.Request("DELETE", "/v1/jobs/" + id);

  std::printf(
      "{\"bench\":\"agents\",\"agents\":%d,\"threads\":%d,\"registration_s\":%.2f,\"heartbeats_per_second\":%.0f,"
      "\"heartbeat_failures\":%lld,\"failover_node_down_s\":%.2f,\"failover_job_running_elsewhere_s\":%.2f}\n",
      o.agents, o.threads, registration_s, rate, static_cast<long long>(failures.load()), to_down, to_elsewhere);
  return to_elsewhere < 0 ? 1 : 0;
}
