// unisched-bench: a load generator for a running daemon, over the public API.
//   submit   C keep-alive connections submit trivial jobs for S seconds
//   e2e      N trivial jobs from submission until every one has ended
//   latency  one job at a time, submit to COMPLETED as a client sees it
//   flood    one token floods at a fixed rate; another user's latency, idle
//            and under the flood (the rate limits of docs/access.md)
// Human lines go to stdout; with --json they go to stderr and stdout holds
// exactly one JSON object.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "closed_loop.h"
#include "unisched/client/http_client.h"
#include "unisched/common/time.h"

namespace {

using nlohmann::json;
using unisched::client::ClientResponse;
using unisched::client::HttpClient;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kTerminalStates[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"};

const char* const kUsage =
    "usage: unisched-bench submit  --url URL --token T --connections C --duration S [--threads N] [--kind K] [--json]\n"
    "       unisched-bench e2e     --url URL --token T --jobs N --connections C [--kind K] [--timeout S] [--json]\n"
    "       unisched-bench latency --url URL --token T --runs N [--kind K] [--json]\n"
    "       unisched-bench flood   --url URL --token T --flood-token F --rate R --duration S [--probe-rate P]\n"
    "                              [--threads N] [--json]\n"
    "  --url defaults to $UNISCHED_URL, else http://127.0.0.1:8642; --token to $UNISCHED_TOKEN\n"
    "  (or --token-file FILE). Jobs are [\"true\"] with cpus 1 and memory_mb 64; --kind defaults to agent.\n";

struct Options {
  std::string mode;
  std::string url;
  std::string token;
  std::string kind = "agent";
  int connections = 1;
  int threads = 1;  // submit: load generator threads
  double duration_seconds = 10;
  int jobs = 1000;
  int runs = 100;
  double timeout_seconds = 600;
  bool json_output = false;
  std::string flood_token;  // flood: the token that floods
  double rate = 1000;       // flood: its requests a second
  double probe_rate = 50;   // flood: the other user's requests a second
};

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string token;
};

double MillisSince(SteadyClock::time_point start, SteadyClock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Nearest-rank percentile of sorted values; 0 when there are none.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[index];
}

double Round3(double v) {
  return std::round(v * 1000.0) / 1000.0;
}

std::string Fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Where human-readable lines go: stdout, or stderr when stdout is for JSON.
std::ostream& Human(const Options& o) {
  return o.json_output ? std::cerr : std::cout;
}

std::string JobBody(const std::string& kind) {
  return json({{"name", "bench"},
               {"workload", {{"kind", kind}}},
               {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
               {"command", {"true"}}})
      .dump();
}

HttpClient MakeClient(const Endpoint& e) {
  HttpClient client(e.host, e.port);
  client.SetBearerToken(e.token);
  return client;
}

std::string ErrorDetail(const unisched::Result<ClientResponse>& r) {
  if (!r.ok()) return r.error().message;
  return "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300);
}

// GET a JSON body; nullopt (with a message on stderr) on any failure.
std::optional<json> GetJson(HttpClient& client, const std::string& target) {
  auto r = client.Request("GET", target);
  if (!r.ok() || r->status != 200) {
    std::cerr << "unisched-bench: GET " << target << " failed: " << ErrorDetail(r) << "\n";
    return std::nullopt;
  }
  json body = json::parse(r->body, nullptr, false);
  if (body.is_discarded()) {
    std::cerr << "unisched-bench: GET " << target << " returned a body that is not JSON\n";
    return std::nullopt;
  }
  return body;
}

std::optional<int64_t> CountJobs(HttpClient& client, const std::string& state) {
  auto body = GetJson(client, "/v1/jobs?state=" + state + "&limit=0");
  if (!body || !body->contains("total") || !(*body)["total"].is_number_integer()) return std::nullopt;
  return (*body)["total"].get<int64_t>();
}

// Jobs queued or running in all queues, from the controller's counts.
std::optional<int64_t> ActiveJobs(HttpClient& client) {
  auto body = GetJson(client, "/v1/queues");
  if (!body) return std::nullopt;
  const json& queues = body->is_object() && body->contains("queues") ? (*body)["queues"] : *body;
  if (!queues.is_array()) {
    std::cerr << "unisched-bench: GET /v1/queues did not return a list of queues\n";
    return std::nullopt;
  }
  int64_t active = 0;
  for (const auto& q : queues) active += q.value("pending", int64_t{0}) + q.value("running", int64_t{0});
  return active;
}

// Fails early, with a readable message, when the daemon is not there or the
// token is not accepted; also opens the connection before any timing.
bool CheckDaemon(HttpClient& client, const Options& o) {
  auto r = client.Request("GET", "/v1/whoami");
  if (!r.ok()) {
    std::cerr << "unisched-bench: cannot reach the daemon at " << o.url << " (" << r.error().message
              << "); start it or pass --url\n";
    return false;
  }
  if (r->status != 200) {
    std::cerr << "unisched-bench: GET /v1/whoami: " << ErrorDetail(r) << "\n";
    return false;
  }
  return true;
}

// Notes jobs that were already queued: they compete with ours.
void NoteBacklog(HttpClient& client, const Options& o) {
  auto pending = CountJobs(client, "PENDING");
  auto running = CountJobs(client, "RUNNING");
  if (pending && running && *pending + *running > 0) {
    Human(o) << "note: " << *pending << " jobs pending and " << *running
             << " running before the start; the figures include their load\n";
  }
}

json LatencyJson(const std::vector<double>& sorted) {
  return {{"p50", Round3(Percentile(sorted, 50))},
          {"p90", Round3(Percentile(sorted, 90))},
          {"p99", Round3(Percentile(sorted, 99))},
          {"max", Round3(sorted.empty() ? 0 : sorted.back())}};
}

// The host's CPU time (/proc/stat, in clock ticks), to say how much of the
// run the machine was idle and how much its hypervisor took (steal): on a
// shared VM the figures are only comparable between runs with little steal.
struct HostCpu {
  int64_t total = 0;
  int64_t idle = 0;
  int64_t steal = 0;

  static HostCpu Now() {
    HostCpu c;
    std::ifstream in("/proc/stat");
    std::string label;
    in >> label;
    if (label != "cpu") return c;
    // user nice system idle iowait irq softirq steal (guest time is in user)
    int64_t v[8] = {};
    for (auto& x : v) in >> x;
    for (auto x : v) c.total += x;
    c.idle = v[3] + v[4];
    c.steal = v[7];
    return c;
  }
};

json HostCpuJson(const HostCpu& before, const HostCpu& after) {
  const double total = static_cast<double>(std::max<int64_t>(after.total - before.total, 1));
  return {{"idle_percent", Round3(100.0 * static_cast<double>(after.idle - before.idle) / total)},
          {"steal_percent", Round3(100.0 * static_cast<double>(after.steal - before.steal) / total)}};
}

std::string HostCpuLine(const HostCpu& before, const HostCpu& after) {
  const json j = HostCpuJson(before, after);
  return "  host CPU meanwhile: idle " + Fixed(j["idle_percent"].get<double>(), 1) + "%, stolen by the hypervisor " +
         Fixed(j["steal_percent"].get<double>(), 1) + "%\n";
}

// ---- submit: sustained submissions per second ----

int RunSubmit(const Endpoint& endpoint, const Options& o) {
  {
    HttpClient probe = MakeClient(endpoint);
    if (!CheckDaemon(probe, o)) return 1;
  }
  // The closed-loop generator: --threads epoll threads share the
  // connections (one thread is enough for a daemon on the same two cores).
  const std::string request =
      unisched::bench::JsonPost(endpoint.host, endpoint.port, "/v1/jobs", endpoint.token, JobBody(o.kind));
  const int threads_n = std::min(o.threads, o.connections);
  std::vector<unisched::bench::ClosedLoopResult> results(static_cast<size_t>(threads_n));
  const auto start = SteadyClock::now();
  const auto deadline =
      start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o.duration_seconds));
  const HostCpu cpu_before = HostCpu::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    const int share = o.connections / threads_n + (t < o.connections % threads_n ? 1 : 0);
    threads.emplace_back([&, t, share] {
      results[static_cast<size_t>(t)] =
          unisched::bench::RunClosedLoop(endpoint.host, endpoint.port, request, share, 201, deadline);
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed_s = MillisSince(start, SteadyClock::now()) / 1000.0;
  const HostCpu cpu_after = HostCpu::Now();

  std::vector<double> all;
  std::map<std::string, int64_t> errors;
  int64_t error_total = 0;
  std::string first_error;
  for (const auto& r : results) {
    all.insert(all.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    for (const auto& [k, n] : r.errors) {
      errors[k] += n;
      error_total += n;
    }
    if (first_error.empty()) first_error = r.first_error;
  }
  std::sort(all.begin(), all.end());
  const double rate = elapsed_s > 0 ? static_cast<double>(all.size()) / elapsed_s : 0;

  auto& out = Human(o);
  out << "submit: " << o.connections << " connections, " << Fixed(elapsed_s, 1) << " s, kind " << o.kind << "\n";
  out << "  accepted (201): " << all.size() << "  = " << Fixed(rate, 1) << " submissions/s\n";
  out << "  errors: " << error_total;
  for (const auto& [k, n] : errors) out << "  " << k << "=" << n;
  out << "\n";
  if (!first_error.empty()) out << "  first error: " << first_error << "\n";
  out << "  latency ms (201s): p50 " << Fixed(Percentile(all, 50)) << "  p90 " << Fixed(Percentile(all, 90)) << "  p99 "
      << Fixed(Percentile(all, 99)) << "  max " << Fixed(all.empty() ? 0 : all.back()) << "\n";
  out << HostCpuLine(cpu_before, cpu_after);
  if (o.json_output) {
    std::cout << json({{"mode", "submit"},
                       {"host_cpu", HostCpuJson(cpu_before, cpu_after)},
                       {"connections", o.connections},
                       {"duration_seconds", Round3(elapsed_s)},
                       {"kind", o.kind},
                       {"accepted", all.size()},
                       {"submissions_per_second", Round3(rate)},
                       {"errors", error_total},
                       {"errors_by_kind", errors},
                       {"latency_ms", LatencyJson(all)}})
                     .dump()
              << "\n";
  }
  return all.empty() ? 1 : 0;
}

// ---- e2e: N jobs from first submission to last end ----

struct JobTimes {
  std::string state;
  std::optional<unisched::Timestamp> submitted_at;
  std::optional<unisched::Timestamp> ended_at;
};

std::optional<unisched::Timestamp> TimeField(const json& job, const char* key) {
  auto it = job.find(key);
  if (it == job.end() || !it->is_string()) return std::nullopt;
  return unisched::ParseRfc3339(it->get<std::string>());
}

// Pages through GET /v1/jobs and keeps the jobs named in `ids`.
std::optional<std::map<std::string, JobTimes>> FetchJobTimes(HttpClient& client, const std::set<std::string>& ids) {
  std::map<std::string, JobTimes> found;
  std::string cursor;
  for (;;) {
    std::string target = "/v1/jobs?limit=1000";
    if (!cursor.empty()) target += "&cursor=" + cursor;
    auto page = GetJson(client, target);
    if (!page) return std::nullopt;
    const json& jobs = (*page)["jobs"];
    if (!jobs.is_array()) {
      std::cerr << "unisched-bench: GET /v1/jobs has no \"jobs\" list\n";
      return std::nullopt;
    }
    for (const auto& job : jobs) {
      const json& id = job["id"];
      const std::string key = id.is_string() ? id.get<std::string>() : id.dump();
      if (!ids.count(key)) continue;
      found[key] = {job.value("state", ""), TimeField(job, "submitted_at"), TimeField(job, "ended_at")};
    }
    if (found.size() == ids.size()) break;
    const json& next = (*page)["next_cursor"];
    if (next.is_string() && !next.get<std::string>().empty()) {
      cursor = next.get<std::string>();
    } else if (next.is_number_integer()) {
      cursor = next.dump();
    } else {
      break;
    }
  }
  return found;
}

int RunEndToEnd(const Endpoint& endpoint, const Options& o) {
  HttpClient monitor = MakeClient(endpoint);
  if (!CheckDaemon(monitor, o)) return 1;
  NoteBacklog(monitor, o);
  // Terminal counts include jobs from before this run; count from here.
  std::map<std::string, int64_t> baseline;
  for (const char* s : kTerminalStates) {
    auto n = CountJobs(monitor, s);
    if (!n) return 1;
    baseline[s] = *n;
  }

  auto backlog_before = ActiveJobs(monitor);
  if (!backlog_before) return 1;
  const int64_t backlog = *backlog_before;
  const std::string body = JobBody(o.kind);
  std::atomic<int> next{0};
  std::atomic<bool> abort{false};
  std::atomic<int64_t> submit_errors{0};
  std::mutex ids_mu;
  std::set<std::string> ids;
  std::string first_error;
  std::vector<std::thread> threads;
  const HostCpu cpu_before = HostCpu::Now();
  const auto start = SteadyClock::now();
  for (int c = 0; c < o.connections; ++c) {
    threads.emplace_back([&] {
      HttpClient client = MakeClient(endpoint);
      int consecutive_failures = 0;
      while (!abort.load() && next.fetch_add(1) < o.jobs) {
        for (;;) {  // retry this job until accepted: the run needs all N
          auto r = client.Request("POST", "/v1/jobs", body);
          if (r.ok() && r->status == 201) {
            json job = json::parse(r->body, nullptr, false);
            std::string id;
            if (job.is_object() && job.contains("id"))
              id = job["id"].is_string() ? job["id"].get<std::string>() : job["id"].dump();
            std::lock_guard lock(ids_mu);
            ids.insert(id);
            consecutive_failures = 0;
            break;
          }
          submit_errors.fetch_add(1);
          {
            std::lock_guard lock(ids_mu);
            if (first_error.empty()) first_error = ErrorDetail(r);
          }
          if (++consecutive_failures >= 50) {
            abort.store(true);
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10 * consecutive_failures));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto submitted = SteadyClock::now();
  if (abort.load()) {
    std::cerr << "unisched-bench: submissions keep failing (" << first_error << "); giving up\n";
    return 1;
  }

  // Wait until the terminal counts have grown by N. Counting jobs by state
  // is a query over the store; polled every 10 ms it took a noticeable share
  // of the CPU the jobs need. So first wait on the controller's queue
  // counts (GET /v1/queues, answered from memory) until no more jobs are
  // queued or running than before the run, then count exactly.
  const auto deadline =
      submitted + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o.timeout_seconds));
  while (SteadyClock::now() < deadline) {
    auto active = ActiveJobs(monitor);
    if (!active) return 1;
    if (*active <= backlog) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::map<std::string, int64_t> ended_by_state;
  SteadyClock::time_point done;
  for (;;) {
    int64_t ended = 0;
    for (const char* s : kTerminalStates) {
      auto n = CountJobs(monitor, s);
      if (!n) return 1;
      ended_by_state[s] = *n - baseline[s];
      ended += *n - baseline[s];
    }
    if (ended >= o.jobs) {
      done = SteadyClock::now();
      break;
    }
    if (SteadyClock::now() > deadline) {
      std::cerr << "unisched-bench: only " << ended << " of " << o.jobs << " jobs ended within " << o.timeout_seconds
                << " s after the last submission\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double total_s = MillisSince(start, done) / 1000.0;
  const HostCpu cpu_after = HostCpu::Now();
  const double submit_s = MillisSince(start, submitted) / 1000.0;

  auto times = FetchJobTimes(monitor, ids);
  if (!times) return 1;
  std::vector<double> latencies;
  std::map<std::string, int64_t> our_states;
  std::optional<unisched::Timestamp> first_submit, last_end;
  for (const auto& [id, t] : *times) {
    ++our_states[t.state];
    if (t.submitted_at) first_submit = first_submit ? std::min(*first_submit, *t.submitted_at) : *t.submitted_at;
    if (t.ended_at) last_end = last_end ? std::max(*last_end, *t.ended_at) : *t.ended_at;
    if (t.state == "COMPLETED" && t.submitted_at && t.ended_at) {
      latencies.push_back(static_cast<double>((*t.ended_at - *t.submitted_at).count()));
    }
  }
  std::sort(latencies.begin(), latencies.end());
  const double rate = total_s > 0 ? o.jobs / total_s : 0;
  const double server_span_s =
      first_submit && last_end ? static_cast<double>((*last_end - *first_submit).count()) / 1000.0 : 0;
  const int64_t completed = our_states["COMPLETED"];

  auto& out = Human(o);
  out << "e2e: " << o.jobs << " jobs over " << o.connections << " connections, kind " << o.kind << "\n";
  out << "  submitted in " << Fixed(submit_s, 2) << " s (" << Fixed(submit_s > 0 ? o.jobs / submit_s : 0, 1)
      << " jobs/s), submit errors " << submit_errors.load() << "\n";
  if (!first_error.empty()) out << "  first submit error: " << first_error << "\n";
  out << "  all ended after " << Fixed(total_s, 2) << " s = " << Fixed(rate, 1) << " jobs/s end to end";
  if (server_span_s > 0) out << " (server timestamps: " << Fixed(o.jobs / server_span_s, 1) << " jobs/s)";
  out << "\n  states:";
  for (const auto& [state, n] : our_states) out << " " << state << "=" << n;
  if (times->size() < ids.size()) out << " not-found=" << ids.size() - times->size();
  out << "\n  submit-to-COMPLETED ms (server timestamps): p50 " << Fixed(Percentile(latencies, 50), 0) << "  p99 "
      << Fixed(Percentile(latencies, 99), 0) << "  max " << Fixed(latencies.empty() ? 0 : latencies.back(), 0) << "\n";
  if (completed < o.jobs) out << "  warning: " << o.jobs - completed << " jobs did not complete\n";
  out << HostCpuLine(cpu_before, cpu_after);
  if (o.json_output) {
    std::cout << json({{"mode", "e2e"},
                       {"host_cpu", HostCpuJson(cpu_before, cpu_after)},
                       {"jobs", o.jobs},
                       {"connections", o.connections},
                       {"kind", o.kind},
                       {"submit_seconds", Round3(submit_s)},
                       {"submit_errors", submit_errors.load()},
                       {"total_seconds", Round3(total_s)},
                       {"jobs_per_second", Round3(rate)},
                       {"server_span_seconds", Round3(server_span_s)},
                       {"states", our_states},
                       {"latency_ms",
                        {{"p50", Percentile(latencies, 50)},
                         {"p99", Percentile(latencies, 99)},
                         {"max", latencies.empty() ? 0.0 : latencies.back()}}}})
                     .dump()
              << "\n";
  }
  return 0;
}

// ---- latency: one job at a time ----

int RunLatency(const Endpoint& endpoint, const Options& o) {
  HttpClient client = MakeClient(endpoint);
  if (!CheckDaemon(client, o)) return 1;
  NoteBacklog(client, o);
  const std::string body = JobBody(o.kind);
  std::vector<double> latencies;
  std::map<std::string, int64_t> failures;
  for (int run = 0; run < o.runs; ++run) {
    const auto t0 = SteadyClock::now();
    auto r = client.Request("POST", "/v1/jobs", body);
    if (!r.ok() || r->status != 201) {
      std::cerr << "unisched-bench: submission failed: " << ErrorDetail(r) << "\n";
      return 1;
    }
    json job = json::parse(r->body, nullptr, false);
    const std::string id =
        job.is_object() && job.contains("id") && job["id"].is_string() ? job["id"].get<std::string>() : "";
    if (id.empty()) {
      std::cerr << "unisched-bench: the submission answer has no job id\n";
      return 1;
    }
    const auto deadline = t0 + std::chrono::seconds(60);
    for (;;) {
      auto state_body = GetJson(client, "/v1/jobs/" + id);
      if (!state_body) return 1;
      const std::string state = state_body->value("state", "");
      if (state == "COMPLETED") {
        latencies.push_back(MillisSince(t0, SteadyClock::now()));
        break;
      }
      if (std::find(std::begin(kTerminalStates), std::end(kTerminalStates), state) != std::end(kTerminalStates)) {
        ++failures[state];
        break;
      }
      if (SteadyClock::now() > deadline) {
        ++failures["not_ended_in_60s"];
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::sort(latencies.begin(), latencies.end());
  int64_t failed = 0;
  for (const auto& [k, n] : failures) failed += n;

  auto& out = Human(o);
  out << "latency: " << o.runs << " runs, one job at a time, kind " << o.kind << "\n";
  out << "  submit-to-COMPLETED ms (client): median " << Fixed(Percentile(latencies, 50)) << "  p99 "
      << Fixed(Percentile(latencies, 99)) << "  max " << Fixed(latencies.empty() ? 0 : latencies.back()) << "\n";
  if (failed > 0) {
    out << "  not completed: " << failed;
    for (const auto& [k, n] : failures) out << "  " << k << "=" << n;
    out << "\n";
  }
  if (o.json_output) {
    std::cout << json({{"mode", "latency"},
                       {"runs", o.runs},
                       {"kind", o.kind},
                       {"completed", latencies.size()},
                       {"not_completed", failures},
                       {"latency_ms",
                        {{"p50", Round3(Percentile(latencies, 50))},
                         {"p99", Round3(Percentile(latencies, 99))},
                         {"max", Round3(latencies.empty() ? 0 : latencies.back())}}}})
                     .dump()
              << "\n";
  }
  return latencies.empty() ? 1 : 0;
}

// ---- flood: one token floods, another user's latency ----

struct PacedResult {
  std::vector<double> latencies_ms;  // of 200 answers
  std::map<int, int64_t> statuses;   // answers by status
  int64_t failures = 0;              // no answer (connection errors)
};

// GET `target` `rate` times a second over `threads` keep-alive connections
// until `deadline`, each connection on its own schedule (open loop: a slow
// answer does not lower the rate asked for; a late send goes at once).
PacedResult RunPaced(const Endpoint& endpoint, const std::string& target, double rate, int threads,
                     SteadyClock::time_point deadline) {
  std::vector<PacedResult> parts(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  const auto interval = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(static_cast<double>(threads) / rate));
  const auto start = SteadyClock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      HttpClient client = MakeClient(endpoint);
      PacedResult& out = parts[static_cast<size_t>(t)];
      auto next = start + interval * t / threads;
      while (next < deadline) {
        std::this_thread::sleep_until(next);
        const auto sent = SteadyClock::now();
        auto r = client.Request("GET", target);
        const auto answered = SteadyClock::now();
        if (!r.ok()) {
          ++out.failures;
        } else {
          ++out.statuses[r->status];
          if (r->status == 200) out.latencies_ms.push_back(MillisSince(sent, answered));
        }
        next += interval;
      }
    });
  }
  for (auto& w : workers) w.join();
  PacedResult all;
  for (auto& part : parts) {
    all.latencies_ms.insert(all.latencies_ms.end(), part.latencies_ms.begin(), part.latencies_ms.end());
    for (const auto& [status, count] : part.statuses) all.statuses[status] += count;
    all.failures += part.failures;
  }
  std::sort(all.latencies_ms.begin(), all.latencies_ms.end());
  return all;
}

json StatusesJson(const PacedResult& r) {
  json out = json::object();
  for (const auto& [status, count] : r.statuses) out[std::to_string(status)] = count;
  if (r.failures > 0) out["no_answer"] = r.failures;
  return out;
}

int RunFlood(const Endpoint& endpoint, const Options& o) {
  if (o.flood_token.empty()) {
    std::cerr << "unisched-bench: flood needs --flood-token (the token that floods)\n";
    return 2;
  }
  {
    HttpClient probe = MakeClient(endpoint);
    if (!CheckDaemon(probe, o)) return 1;
  }
  // A read every portal makes, small and answered from the store.
  const std::string target = "/v1/jobs?limit=20";
  const auto seconds =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o.duration_seconds));
  Human(o) << "flood: the other user's GET " << target << " at " << o.probe_rate << "/s for " << o.duration_seconds
           << " s idle, then again while one token sends " << o.rate << " requests/s\n";
  const PacedResult idle = RunPaced(endpoint, target, o.probe_rate, 1, SteadyClock::now() + seconds);

  Endpoint flooder = endpoint;
  flooder.token = o.flood_token;
  const HostCpu cpu_before = HostCpu::Now();
  const auto deadline = SteadyClock::now() + seconds;
  PacedResult flood;
  std::thread flood_thread([&] { flood = RunPaced(flooder, target, o.rate, o.threads, deadline); });
  const PacedResult busy = RunPaced(endpoint, target, o.probe_rate, 1, deadline);
  flood_thread.join();
  const HostCpu cpu_after = HostCpu::Now();

  const double idle_p99 = Percentile(idle.latencies_ms, 99);
  const double busy_p99 = Percentile(busy.latencies_ms, 99);
  const double ratio = idle_p99 > 0 ? busy_p99 / idle_p99 : 0;
  int64_t flood_sent = flood.failures;
  for (const auto& [status, count] : flood.statuses) flood_sent += count;
  Human(o) << "  idle:  " << idle.latencies_ms.size() << " answers, p50 " << Fixed(Percentile(idle.latencies_ms, 50), 3)
           << " ms, p99 " << Fixed(idle_p99, 3) << " ms\n"
           << "  flood: " << busy.latencies_ms.size() << " answers, p50 " << Fixed(Percentile(busy.latencies_ms, 50), 3)
           << " ms, p99 " << Fixed(busy_p99, 3) << " ms (" << Fixed(ratio, 2) << "x idle)\n"
           << "  the flood: " << Fixed(static_cast<double>(flood_sent) / o.duration_seconds, 0)
           << " requests/s answered " << StatusesJson(flood).dump() << "\n"
           << HostCpuLine(cpu_before, cpu_after);
  if (o.json_output) {
    std::cout << json({{"mode", "flood"},
                       {"rate", o.rate},
                       {"probe_rate", o.probe_rate},
                       {"duration_seconds", o.duration_seconds},
                       {"idle_ms", LatencyJson(idle.latencies_ms)},
                       {"flood_ms", LatencyJson(busy.latencies_ms)},
                       {"p99_ratio", Round3(ratio)},
                       {"probe_statuses_idle", StatusesJson(idle)},
                       {"probe_statuses_flood", StatusesJson(busy)},
                       {"flood_statuses", StatusesJson(flood)},
                       {"flood_requests_per_second", Round3(static_cast<double>(flood_sent) / o.duration_seconds)},
                       {"host_cpu", HostCpuJson(cpu_before, cpu_after)}})
              << "\n";
  }
  return busy.statuses.size() == 1 && busy.statuses.count(200) ? 0 : 1;
}

// ---- arguments ----

std::optional<Options> ParseOptions(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  Options o;
  o.mode = argv[1];
  if (o.mode != "submit" && o.mode != "e2e" && o.mode != "latency" && o.mode != "flood") return std::nullopt;
  std::optional<std::string> token_file;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      o.json_output = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "unisched-bench: " << flag << " needs a value\n";
      return std::nullopt;
    }
    const std::string value = argv[++i];
    auto number = [&](double min) -> std::optional<double> {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(v >= min)) {
        std::cerr << "unisched-bench: " << flag << " must be a number >= " << min << ", got '" << value << "'\n";
        return std::nullopt;
      }
      return v;
    };
    std::optional<double> n;
    if (flag == "--url") {
      o.url = value;
    } else if (flag == "--token") {
      o.token = value;
    } else if (flag == "--token-file") {
      token_file = value;
    } else if (flag == "--kind") {
      o.kind = value;
    } else if (flag == "--flood-token") {
      o.flood_token = value;
    } else if (flag == "--rate" && (n = number(0.1))) {
      o.rate = *n;
    } else if (flag == "--probe-rate" && (n = number(0.1))) {
      o.probe_rate = *n;
    } else if (flag == "--connections" && (n = number(1))) {
      o.connections = static_cast<int>(*n);
    } else if (flag == "--threads" && (n = number(1))) {
      o.threads = static_cast<int>(*n);
    } else if (flag == "--duration" && (n = number(0.1))) {
      o.duration_seconds = *n;
    } else if (flag == "--jobs" && (n = number(1))) {
      o.jobs = static_cast<int>(*n);
    } else if (flag == "--runs" && (n = number(1))) {
      o.runs = static_cast<int>(*n);
    } else if (flag == "--timeout" && (n = number(1))) {
      o.timeout_seconds = *n;
    } else {
      if (flag != "--connections" && flag != "--threads" && flag != "--duration" && flag != "--jobs" &&
          flag != "--runs" && flag != "--timeout" && flag != "--rate" && flag != "--probe-rate") {
        std::cerr << "unisched-bench: unknown option " << flag << "\n";
      }
      return std::nullopt;
    }
  }
  if (o.url.empty()) {
    const char* env = std::getenv("UNISCHED_URL");
    o.url = env && *env ? env : "http://127.0.0.1:8642";
  }
  if (token_file) {
    std::ifstream in(*token_file);
    if (!in) {
      std::cerr << "unisched-bench: cannot read token file " << *token_file << "\n";
      return std::nullopt;
    }
    std::getline(in, o.token);
  }
  if (o.token.empty()) {
    const char* env = std::getenv("UNISCHED_TOKEN");
    if (env) o.token = env;
  }
  if (o.token.empty()) {
    std::cerr << "unisched-bench: no token: pass --token T or --token-file FILE, or set UNISCHED_TOKEN\n";
    return std::nullopt;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  auto options = ParseOptions(argc, argv);
  if (!options) {
    std::cerr << kUsage;
    return 2;
  }
  auto base = unisched::client::ParseBaseUrl(options->url);
  if (!base.ok()) {
    std::cerr << "unisched-bench: --url " << options->url << ": " << base.error().message << "\n";
    return 2;
  }
  const Endpoint endpoint{base->first, base->second, options->token};
  if (options->mode == "submit") return RunSubmit(endpoint, *options);
  if (options->mode == "e2e") return RunEndToEnd(endpoint, *options);
  if (options->mode == "flood") return RunFlood(endpoint, *options);
  return RunLatency(endpoint, *options);
}
