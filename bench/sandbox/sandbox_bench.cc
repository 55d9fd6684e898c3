// unisched-sandbox-bench: agent sandboxes against a real daemon (issue 6,
// point 7; docs/benchmarks.md "Sandboxes"). The daemon's config keeps
// --warm instances of image host warm (scripts/bench.sh writes it).
//
//  1. cold create + first exec of `true`: an image registered by the bench
//     with no warm instances (the host profile); p50/p99 over --iterations;
//  2. warm create + first exec of `true`: the defaults, served from the warm
//     pool; before each, the pool is refilled (the figure is the warm path,
//     not the refill rate);
//  3. exec round trip of `true` in one sandbox, over --execs;
//  4. --idle concurrent idle sandboxes: created, then the host's memory
//     (MemAvailable), the daemon's RSS and the instances' PSS are read.
// Every sandbox is deleted at the end.
//
// usage: unisched-sandbox-bench --url URL --token-file ADMIN_TOKEN_FILE --daemon-pid PID
//                               [--iterations N] [--execs N] [--idle N]

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "unisched/client/http_client.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using unisched::client::HttpClient;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Nearest-rank percentile of sorted samples.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

int64_t MemAvailableKb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value;
  }
  return 0;
}

// A /proc/PID/<file> field in kB ("VmRSS:", "Pss:").
int64_t ProcFieldKb(const std::string& path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size()));
  }
  return 0;
}

// PSS of every process whose uid is in the sandbox range, and how many.
std::pair<int64_t, int> SandboxPssKb(int64_t uid_base, int64_t uid_count) {
  int64_t pss = 0;
  int count = 0;
  DIR* proc = ::opendir("/proc");
  while (dirent* e = ::readdir(proc)) {
    const std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int64_t uid = ProcFieldKb("/proc/" + name + "/status", "Uid:");
    if (uid < uid_base || uid >= uid_base + uid_count) continue;
    pss += ProcFieldKb("/proc/" + name + "/smaps_rollup", "Pss:");
    ++count;
  }
  ::closedir(proc);
  return {pss, count};
}

class Api {
 public:
  Api(const std::string& host, uint16_t port, const std::string& token) : http_(host, port) {
    http_.SetBearerToken(token);
  }
  json Call(const std::string& method, const std::string& target, const json& body, int expect) {
    auto r = http_.Request(method, target, body.is_null() ? "" : body.dump());
    if (!r.ok() || r->status != expect) {
      throw std::runtime_error(method + " " + target + ": " +
                               (r.ok() ? std::to_string(r->status) + " " + r->body : r.error().message));
    }
    return json::parse(r->body, nullptr, false);
  }

 private:
  HttpClient http_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string url, token_file;
  int daemon_pid = 0, iterations = 200, execs = 1000, idle = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--url")
      url = value;
    else if (flag == "--token-file")
      token_file = value;
    else if (flag == "--daemon-pid")
      daemon_pid = std::stoi(value);
    else if (flag == "--iterations")
      iterations = std::stoi(value);
    else if (flag == "--execs")
      execs = std::stoi(value);
    else if (flag == "--idle")
      idle = std::stoi(value);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (url.empty() || token_file.empty() || daemon_pid <= 0) {
    std::cerr << "usage: unisched-sandbox-bench --url URL --token-file FILE --daemon-pid PID [--iterations N] "
                 "[--execs N] [--idle N]\n";
    return 2;
  }
  auto base = unisched::client::ParseBaseUrl(url);
  if (!base.ok()) return 2;
  std::string token;
  std::ifstream(token_file) >> token;
  Api api(base->first, base->second, token);
  const json true_exec = {{"argv", {"true"}}};
  try {
    auto create_exec = [&](const json& body, std::vector<double>& samples, bool expect_warm) {
      const auto start = Clock::now();
      json created = api.Call("POST", "/v1/sandboxes", body, 201);
      const std::string id = created["id"];
      json r = api.Call("POST", "/v1/sandboxes/" + id + "/exec", true_exec, 200);
      samples.push_back(Ms(Clock::now() - start));
      if (r["exit_code"] != 0 || created["warm_start"].get<bool>() != expect_warm) {
        throw std::runtime_error("unexpected: " + created.dump() + " " + r.dump());
      }
      api.Call("DELETE", "/v1/sandboxes/" + id, json(), 200);
    };
    auto warm_ready = [&] {
      const json listed = api.Call("GET", "/v1/images", json(), 200);  // named: a temporary's ["images"] dangles
      for (const json& image : listed["images"]) {
        if (image["name"] == "host") return std::make_pair(image["warm_ready"].get<int>(), image["warm"].get<int>());
      }
      return std::make_pair(0, 0);
    };

    std::vector<double> cold, warm, rtt;
    const auto phase_start = Clock::now();
    auto phase = [&](const char* name) {
      std::cerr << "sandbox bench: " << name << " done at " << Ms(Clock::now() - phase_start) / 1000 << " s\n";
    };
    // Cold: an image with no warm instances (the host profile again).
    api.Call("POST", "/v1/images", {{"name", "cold"}, {"version", "1"}}, 201);
    for (int i = 0; i < iterations; ++i) create_exec({{"image", "cold"}}, cold, false);
    phase("cold");
    for (int i = 0; i < iterations; ++i) {
      for (int wait = 0; wait < 400; ++wait) {
        auto [ready, target] = warm_ready();
        if (target > 0 && ready >= target) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      create_exec(json::object(), warm, true);
    }
    phase("warm");
    {
      const std::string id = api.Call("POST", "/v1/sandboxes", json::object(), 201)["id"];
      for (int i = 0; i < execs; ++i) {
        const auto start = Clock::now();
        api.Call("POST", "/v1/sandboxes/" + id + "/exec", true_exec, 200);
        rtt.push_back(Ms(Clock::now() - start));
      }
      api.Call("DELETE", "/v1/sandboxes/" + id, json(), 200);
    }
    phase("exec");

    // Idle instances: memory before and after.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int64_t avail_before = MemAvailableKb();
    const int64_t rss_before = ProcFieldKb("/proc/" + std::to_string(daemon_pid) + "/status", "VmRSS:");
    const auto [pss_before, procs_before] = SandboxPssKb(3'000'000, 100'000);
    std::vector<std::string> ids;
    const auto fill_start = Clock::now();
    for (int i = 0; i < idle; ++i) {
      ids.push_back(
          api.Call("POST", "/v1/sandboxes", {{"image", "cold"}, {"limits", {{"memory_mb", 128}}}}, 201)["id"]);
    }
    const double fill_seconds = Ms(Clock::now() - fill_start) / 1000;
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const int64_t avail_after = MemAvailableKb();
    const int64_t rss_after = ProcFieldKb("/proc/" + std::to_string(daemon_pid) + "/status", "VmRSS:");
    const auto [pss_after, procs_after] = SandboxPssKb(3'000'000, 100'000);
    // Still usable: one exec in the last one.
    api.Call("POST", "/v1/sandboxes/" + ids.back() + "/exec", true_exec, 200);
    const auto drain_start = Clock::now();
    for (const auto& id : ids) api.Call("DELETE", "/v1/sandboxes/" + id, json(), 200);
    const double drain_seconds = Ms(Clock::now() - drain_start) / 1000;

    const json out = {
        {"cold_create_exec_ms", {{"p50", Percentile(cold, 50)}, {"p99", Percentile(cold, 99)}, {"n", cold.size()}}},
        {"warm_create_exec_ms", {{"p50", Percentile(warm, 50)}, {"p99", Percentile(warm, 99)}, {"n", warm.size()}}},
        {"exec_rtt_ms", {{"p50", Percentile(rtt, 50)}, {"p99", Percentile(rtt, 99)}, {"n", rtt.size()}}},
        {"idle",
         {{"instances", idle},
          {"created_in_seconds", fill_seconds},
          {"deleted_in_seconds", drain_seconds},
          {"host_memory_used_mib", (avail_before - avail_after) / 1024.0},
          {"per_instance_kib", static_cast<double>(avail_before - avail_after) / idle},
          {"daemon_rss_mib_before", rss_before / 1024.0},
          {"daemon_rss_mib_after", rss_after / 1024.0},
          {"instance_processes", procs_after - procs_before},
          {"instance_pss_mib", (pss_after - pss_before) / 1024.0}}}};
    std::cout << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "sandbox bench failed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
