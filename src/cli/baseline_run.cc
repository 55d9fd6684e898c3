// The measuring part of `unisched baseline` (baseline_run.h). Each
// measurement is an ordinary job through the API, one at a time: a node's
// figure is then not shared with another measurement on the same host (the
// default config's nodes are slices of one machine) or the same switch.

#include "cli/baseline_run.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "unisched/baseline/baseline.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"

namespace unisched::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Text(const json& obj, const char* key) {
  auto it = obj.is_object() ? obj.find(key) : obj.end();
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int Int(const json& obj, const char* key) {
  auto it = obj.is_object() ? obj.find(key) : obj.end();
  return it != obj.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// An API refusal as a reason: its message, with the field at fault.
std::string Refusal(const client::ClientResponse& response) {
  std::string text = FormatApiError(response.status, response.body);
  if (text.rfind("error: ", 0) == 0) text.erase(0, 7);
  return text + " (HTTP " + std::to_string(response.status) + ")";
}

// Milliseconds from RFC 3339 `from` to `to` in `obj`; nullopt without both.
std::optional<double> MillisBetween(const json& from_obj, const char* from, const json& to_obj, const char* to) {
  auto start = ParseRfc3339(Text(from_obj, from));
  auto end = ParseRfc3339(Text(to_obj, to));
  if (!start || !end) return std::nullopt;
  return static_cast<double>(ToUnixMillis(*end) - ToUnixMillis(*start));
}

// The attempt's run as its node measured it starts at process_started_at
// (the supervisor's record); an attempt that has not reported has only the
// daemon's started_at.
const char* RunStartKey(const json& attempt) {
  return attempt.value("process_started_at", json()).is_null() ? "started_at" : "process_started_at";
}

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Node {
  std::string name;
  int cpus = 0;
  int64_t memory_mb = 0;
  int gpus = 0;
  std::string state;
};

struct Pool {
  std::string name;
  std::string queue;     // a queue on it: where its jobs are submitted
  std::string kind;      // the workload kind that queue takes
  bool sandbox = false;  // its jobs run isolated, with no network but loopback
  std::vector<Node> nodes;
};

// A job that ran to its end, or why it did not.
// What OpenMPI's mpirun prints when a node's daemon did not start.
constexpr std::string_view kMpiDaemonsFailed = "ORTE was unable to reliably start one or more daemons";

struct JobRun {
  json job;             // the job as it ended
  std::string failure;  // empty: COMPLETED
};

class BaselineRun {
 public:
  BaselineRun(Session& session, const BaselineOptions& options, std::ostream& log)
      : session_(session), options_(options), log_(log) {}

  std::optional<json> Measure() {
    if (!ReadCluster()) return std::nullopt;
    for (const Pool& pool : pools_) {
      if (pool.queue.empty()) {
        Skip("dgemm_gflops", pool.name, "", "no queue serves pool " + pool.name);
        continue;
      }
      MeasureNodes(pool);
      MeasureAcrossNodes(pool);
      MeasureWithMpi(pool);
      MeasureJobStart(pool);
      MeasureGpuSpeedup(pool);
    }
    MeasureSandboxes();
    json pools = json::array();
    for (const Pool& pool : pools_) pools.push_back(pool.name);
    return json{{"pools", pools},
                {"parameters", {{"size", options_.size}, {"repeats", options_.repeats}, {"samples", options_.samples}}},
                {"figures", figures_},
                {"skipped", skipped_},
                {"nodes", nodes_},
                {"jobs", jobs_}};
  }

 private:
  // ---- what the run records ----

  void Add(const std::string& name, const std::string& pool, const std::string& node, double value,
           const std::string& unit, baseline::Better better, json detail = json::object()) {
    baseline::Figure f{name, pool, node, value, unit, better, std::move(detail)};
    log_ << "  " << f.Key() << ": " << value << " " << unit << "\n";
    figures_.push_back(baseline::ToJson(f));
  }

  void Skip(const std::string& name, const std::string& pool, const std::string& node, const std::string& reason) {
    json item = {{"name", name}, {"reason", reason}};
    if (!pool.empty()) item["pool"] = pool;
    if (!node.empty()) item["node"] = node;
    log_ << "  " << name << (pool.empty() ? "" : " " + pool) << (node.empty() ? "" : "/" + node)
         << " skipped: " << reason << "\n";
    skipped_.push_back(std::move(item));
  }

  // p50 and p99 of `samples` as two figures `<name>_p50` and `<name>_p99`.
  void AddLatency(const std::string& name, const std::string& pool, const std::vector<double>& samples, json detail) {
    detail["samples"] = samples.size();
    for (double p : {50.0, 99.0}) {
      const std::string suffix = p == 50.0 ? "_p50" : "_p99";
      Add(name + suffix, pool, "", *baseline::Percentile(samples, p), "ms", baseline::Better::kLower, detail);
    }
  }

  // ---- the cluster ----

  bool ReadCluster() {
    auto pools = session_.CallJson("GET", "/v1/pools");
    auto queues = pools ? session_.CallJson("GET", "/v1/queues") : std::nullopt;
    auto nodes = queues ? session_.CallJson("GET", "/v1/nodes") : std::nullopt;
    if (!nodes) return false;
    const std::set<std::string> asked(options_.pools.begin(), options_.pools.end());
    std::set<std::string> known;
    for (const auto& p : pools->value("pools", json::array())) {
      Pool pool;
      pool.name = Text(p, "name");
      pool.sandbox = p.value("sandbox", false);
      known.insert(pool.name);
      if (asked.empty() ? p.value("nodes", json::array()).empty() : !asked.count(pool.name)) continue;
      for (const auto& q : queues->value("queues", json::array())) {
        if (Text(q, "pool") != pool.name) continue;
        pool.queue = Text(q, "name");
        const json kinds = q.value("workload_kinds", json::array());
        // A queue for any kind takes the kind its pool is for.
        const std::string by_pool = Text(p, "kind") == "gpu"       ? "ai-training"
                                    : Text(p, "kind") == "elastic" ? "agent"
                                                                   : "hpc";
        pool.kind = !kinds.empty() && kinds[0].is_string() ? kinds[0].get<std::string>() : by_pool;
        break;
      }
      for (const auto& n : nodes->value("nodes", json::array())) {
        if (Text(n, "pool") != pool.name) continue;
        const json resources = n.value("resources", json::object());
        pool.nodes.push_back({Text(n, "name"), Int(resources, "cpus"), resources.value("memory_mb", int64_t{0}),
                              static_cast<int>(resources.value("gpus", json::array()).size()), Text(n, "state")});
      }
      pools_.push_back(std::move(pool));
    }
    for (const auto& name : options_.pools) {
      if (!known.count(name)) {
        std::cerr << "error: no pool named " << name << "; `unisched pools` lists them\n";
        return false;
      }
    }
    ReadGpuCommand();
    return true;
  }

  // baseline.gpu_command of the config in force (platform-admins may read it).
  void ReadGpuCommand() {
    auto response = session_.Exchange("GET", "/v1/config");
    if (!response) {
      gpu_command_error_ = "the daemon could not be reached for its config";
      return;
    }
    if (response->status != 200) {
      gpu_command_error_ = "cannot read baseline.gpu_command from GET /v1/config: " + Refusal(*response);
      return;
    }
    const json body = json::parse(response->body, nullptr, false);
    auto loaded = config::LoadConfigText(Text(body, "text"), "the config in force");
    if (const auto* config = std::get_if<config::Config>(&loaded)) {
      gpu_command_ = config->baseline.gpu_command;
      gpu_device_ = config->baseline.gpu_device;
    } else {
      gpu_command_error_ = "the config in force does not load in this unisched (an older version?)";
    }
  }

  // ---- jobs ----

  json JobRequest(const Pool& pool, const std::string& name, std::vector<std::string> command, json resources,
                  const std::string& node = "") const {
    json request = {{"name", name},
                    {"queue", pool.queue},
                    {"workload", {{"kind", pool.kind}}},
                    {"resources", std::move(resources)},
                    {"command", std::move(command)}};
    if (!node.empty()) request["constraints"] = {{"unisched.node", node}};
#if defined(__SANITIZE_ADDRESS__)
    // The kernels run this very binary; built with ASan, its leak check at
    // exit stops the process with ptrace, which a sandboxed pool's system
    // call filter refuses, so the check could only fail the measurement.
    request["env"] = {{"ASAN_OPTIONS", "detect_leaks=0"}};
#endif
    return request;
  }

  std::vector<std::string> Kernel(const std::string& what) const {
    if (what == "gpu-check") return {options_.binary, "baseline", "gpu-check", "--device", gpu_device_};
    return {options_.binary,
            "baseline",
            "dgemm",
            "--size",
            std::to_string(options_.size),
            "--repeat",
            std::to_string(options_.repeats)};
  }

  // Submits the job and waits for its end (at most job_timeout_seconds,
  // then it is cancelled).
  JobRun RunJob(const json& request) {
    JobRun run;
    auto submitted = session_.Exchange("POST", "/v1/jobs", request.dump());
    if (!submitted) {
      run.failure = "the daemon could not be reached";
      return run;
    }
    if (submitted->status != 201) {
      run.failure = "the job was refused: " + Refusal(*submitted);
      return run;
    }
    run.job = json::parse(submitted->body, nullptr, false);
    const std::string id = Text(run.job, "id");
    jobs_.push_back(id);
    const auto deadline = Clock::now() + std::chrono::seconds(options_.job_timeout_seconds);
    auto pause = std::chrono::milliseconds(10);
    for (;;) {
      const std::string state = Text(run.job, "state");
      if (state == "COMPLETED") return run;
      if (state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" || state == "NODE_FAIL") {
        run.failure = "job " + id + " ended " + state + ": " + Text(run.job, "state_reason") + LastLine(id, "stderr");
        return run;
      }
      if (Clock::now() > deadline) {
        session_.Exchange("DELETE", "/v1/jobs/" + id);
        const json reasons = run.job.value("pending_reasons", json::array());
        run.failure = "job " + id + " did not end within " + std::to_string(options_.job_timeout_seconds) +
                      " s (--timeout) and was cancelled; it was " + state +
                      (reasons.empty() ? std::string() : ": " + Text(reasons[0], "message"));
        return run;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(250));
      auto now = session_.CallJson("GET", "/v1/jobs/" + id);
      if (!now) {
        run.failure = "job " + id + " could not be read";
        return run;
      }
      run.job = std::move(*now);
    }
  }

  std::string Log(const std::string& id, const std::string& query) {
    auto response = session_.Exchange("GET", "/v1/jobs/" + id + "/log" + query);
    return response && response->status == 200 ? response->body : std::string();
  }

  // "; stderr: <its last line>", or "" when it wrote nothing. A line of
  // dashes alone is skipped: Open MPI frames its messages in them, and the
  // frame's last line says nothing.
  std::string LastLine(const std::string& id, const std::string& stream) {
    std::string text = Log(id, "?stream=" + stream);
    for (;;) {
      text.erase(text.find_last_not_of(" \r\n\t") + 1);
      if (text.empty()) return "";
      const size_t start = text.find_last_of('\n') + 1;  // npos + 1: the whole text
      if (text.find_first_not_of('-', start) != std::string::npos || start == 0) {
        text = text.substr(start);
        break;
      }
      text.erase(start);
    }
    return "; " + stream + ": " + (text.size() > 300 ? text.substr(0, 300) + "..." : text);
  }

  // ---- fp64: DGEMM ----

  // One DGEMM job on each node of the pool that is up, then the pool's
  // figure: the sum of its nodes' (each measured alone).
  void MeasureNodes(const Pool& pool) {
    double total = 0;
    int measured = 0;
    for (const Node& node : pool.nodes) {
      if (node.state != "up") {
        Skip("dgemm_gflops", pool.name, node.name, "node " + node.name + " is " + node.state);
        continue;
      }
      const int64_t need = KernelMemoryMb(options_.size, node.cpus);
      const int64_t matrices = MatricesMb(options_.size);
      if (matrices > node.memory_mb) {
        Skip("dgemm_gflops", pool.name, node.name,
             "node " + node.name + " has " + std::to_string(node.memory_mb) + " MB, the matrices of --size " +
                 std::to_string(options_.size) + " need " + std::to_string(matrices) + " MB; choose a smaller --size");
        continue;
      }
      log_ << "dgemm on " << node.name << " (" << pool.name << ")\n";
      JobRun run = RunJob(JobRequest(pool, "baseline-dgemm", Kernel("dgemm"),
                                     {{"cpus", node.cpus}, {"memory_mb", std::min(need, node.memory_mb)}}, node.name));
      const std::string id = Text(run.job, "id");
      auto report = run.failure.empty() ? baseline::KernelReport(Log(id, "")) : std::nullopt;
      if (!report) {
        Skip("dgemm_gflops", pool.name, node.name,
             run.failure.empty() ? "job " + id + " printed no DGEMM report" + LastLine(id, "stderr") : run.failure);
        continue;
      }
      const double gflops = (*report)["gflops"].get<double>();
      total += gflops;
      ++measured;
      json facts = report->value("machine", json::object());
      facts["blas"] = report->value("blas", json::object());
      nodes_[node.name] = std::move(facts);
      Add("dgemm_gflops", pool.name, node.name, gflops, "GFLOP/s", baseline::Better::kHigher,
          {{"threads", report->value("threads", 0)}, {"seconds", report->value("seconds", 0.0)}, {"job", id}});
    }
    if (measured > 0) {
      Add("dgemm_gflops_pool", pool.name, "", total, "GFLOP/s", baseline::Better::kHigher, {{"nodes", measured}});
    }
  }

  // The nodes of the pool that are up, and what each of them can give a
  // job spread over all of them; nullopt (the figure skipped) for fewer
  // than two.
  struct Spread {
    std::vector<const Node*> up;
    int cpus = 0;
    int64_t memory_mb = 0;
  };
  std::optional<Spread> AllNodesUp(const Pool& pool, const std::string& figure) {
    Spread spread;
    for (const Node& node : pool.nodes) {
      if (node.state == "up") spread.up.push_back(&node);
    }
    if (spread.up.size() < 2) {
      Skip(figure, pool.name, "",
           "pool " + pool.name + " has " + std::to_string(spread.up.size()) +
               " node(s) up; the per-node figure is the pool's");
      return std::nullopt;
    }
    spread.cpus = spread.up[0]->cpus;
    spread.memory_mb = spread.up[0]->memory_mb;
    for (const Node* node : spread.up) {
      spread.cpus = std::min(spread.cpus, node->cpus);
      spread.memory_mb = std::min(spread.memory_mb, node->memory_mb);
    }
    return spread;
  }

  // One multi-node job on every node of the pool that is up, each node
  // running the kernel at the same time (launch per_node): the sum of the
  // ranks' GFLOP/s. Nodes that share a host or memory bandwidth show it here.
  void MeasureAcrossNodes(const Pool& pool) {
    auto spread = AllNodesUp(pool, "dgemm_gflops_all_nodes");
    if (!spread) return;
    const auto& up = spread->up;
    const int cpus = spread->cpus;
    const int64_t memory = spread->memory_mb;
    log_ << "dgemm on all " << up.size() << " nodes of " << pool.name << " at once\n";
    json request = JobRequest(
        pool, "baseline-dgemm-all", Kernel("dgemm"),
        {{"nodes", up.size()}, {"cpus", cpus}, {"memory_mb", std::min(KernelMemoryMb(options_.size, cpus), memory)}});
    request["launch"] = "per_node";
    JobRun run = RunJob(request);
    const std::string id = Text(run.job, "id");
    if (!run.failure.empty()) {
      Skip("dgemm_gflops_all_nodes", pool.name, "", run.failure);
      return;
    }
    double total = 0;
    json ranks = json::array();
    for (size_t rank = 0; rank < up.size(); ++rank) {
      auto report = baseline::KernelReport(Log(id, "?rank=" + std::to_string(rank)));
      if (!report) {
        Skip("dgemm_gflops_all_nodes", pool.name, "",
             "rank " + std::to_string(rank) + " of job " + id + " printed no DGEMM report");
        return;
      }
      total += (*report)["gflops"].get<double>();
      ranks.push_back({{"node", report->value("node", "")}, {"gflops", (*report)["gflops"]}});
    }
    Add("dgemm_gflops_all_nodes", pool.name, "", total, "GFLOP/s", baseline::Better::kHigher,
        {{"nodes", up.size()}, {"ranks", ranks}, {"job", id}});
  }

  // One DGEMM shared by every node of the pool that is up, over MPI
  // (dgemm.h, "Across nodes"): a batch job on all of them runs mpirun, which
  // reaches the other nodes through `unisched step --rsh`, the job's own
  // launcher, with one rank per node, each with all of the node's CPUs the
  // job has (--bind-to none: mpirun would otherwise bind a rank to one
  // core and OpenBLAS's threads with it).
  void MeasureWithMpi(const Pool& pool) {
    if (pool.sandbox) {
      Skip("dgemm_gflops_mpi", pool.name, "",
           "pool " + pool.name +
               " runs its jobs in sandboxes with no network but loopback, so no rank can reach "
               "another node");
      return;
    }
    auto spread = AllNodesUp(pool, "dgemm_gflops_mpi");
    if (!spread) return;
    std::string hosts;
    for (const Node* node : spread->up) hosts += (hosts.empty() ? "" : ",") + node->name + ":1";
    std::vector<std::string> command = {options_.mpirun, "-np", std::to_string(spread->up.size()), "--host", hosts,
                                        "--bind-to", "none", "--mca", "plm", "rsh", "--mca", "plm_rsh_agent",
                                        options_.binary + " step --rsh",
                                        // OpenMPI 4.1's orted maps the node's topology into a
                                        // "hole" of its address space it picks; next to the stack
                                        // that write crashed it (SIGSEGV in
                                        // hwloc_shmem_topology_write, about one run in five
                                        // here). Without the shared copy each rank reads it.
                                        "--mca", "rtc_hwloc_vmhole", "none"};
    for (auto& word : Kernel("dgemm")) command.push_back(std::move(word));
    command.push_back("--mpi");
    log_ << "dgemm over MPI across all " << spread->up.size() << " nodes of " << pool.name << "\n";
    // OpenMPI's node daemons on nodes that share one machine (local nodes)
    // raced to make their shared session directory under /tmp ("mkdir ...
    // File exists", then "ORTE was unable to reliably start one or more
    // daemons"; about one run in ten here, both tries of a CI run once).
    // Each node of a job now has a TMPDIR of its own (executor::TmpDirPath),
    // so they no longer meet; a run whose daemons still did not start
    // started no rank, and is run once more.
    JobRun run;
    for (int run_number = 1; run_number <= 2; ++run_number) {
      run =
          RunJob(JobRequest(pool, "baseline-dgemm-mpi", command,
                            {{"nodes", spread->up.size()},
                             {"cpus", spread->cpus},
                             {"memory_mb", std::min(KernelMemoryMb(options_.size, spread->cpus), spread->memory_mb)}}));
      if (run.failure.empty() ||
          Log(Text(run.job, "id"), "?stream=stderr").find(kMpiDaemonsFailed) == std::string::npos) {
        break;
      }
      log_ << "  job " << Text(run.job, "id") << ": its MPI daemons did not all start"
           << (run_number == 1 ? "; once more" : "") << "\n";
    }
    const std::string id = Text(run.job, "id");
    auto report = run.failure.empty() ? baseline::KernelReport(Log(id, "")) : std::nullopt;
    if (!report) {
      Skip("dgemm_gflops_mpi", pool.name, "",
           run.failure.empty() ? "job " + id + " printed no DGEMM report" + LastLine(id, "stderr") : run.failure);
      return;
    }
    Add("dgemm_gflops_mpi", pool.name, "", (*report)["gflops"].get<double>(), "GFLOP/s", baseline::Better::kHigher,
        {{"ranks", report->value("ranks", 0)},
         {"nodes", report->value("nodes", json::array())},
         {"seconds", report->value("seconds", 0.0)},
         {"rank_multiply_seconds", report->value("rank_multiply_seconds", json::array())},
         {"threads", report->value("threads", 0)},
         {"mpi", report->value("mpi", "")},
         {"job", id}});
  }

  // ---- latencies ----

  // Trivial jobs one after another: from each one's submission to its
  // process's start, as the job records them.
  void MeasureJobStart(const Pool& pool) {
    log_ << "job start latency on " << pool.name << "\n";
    std::vector<double> samples;
    json jobs = json::array();
    for (int i = 0; i < options_.samples; ++i) {
      JobRun run = RunJob(JobRequest(pool, "baseline-start", {"/bin/true"}, {{"cpus", 1}, {"memory_mb", 64}}));
      // A refused job has no body.
      const json attempts = run.job.is_object() ? run.job.value("attempts", json::array()) : json::array();
      // Submit to the process running on its node. -1: no start recorded.
      const double ms =
          attempts.empty() ? -1
                           : MillisBetween(run.job, "submitted_at", attempts[0], RunStartKey(attempts[0])).value_or(-1);
      if (!run.failure.empty() || ms < 0) {
        Skip("job_start_ms", pool.name, "", run.failure.empty() ? "the job recorded no start" : run.failure);
        return;
      }
      samples.push_back(ms);
      jobs.push_back(Text(run.job, "id"));
    }
    AddLatency("job_start_ms", pool.name, samples, {{"jobs", jobs}});
  }

  // Sandboxes one after another: create, the first exec, delete; each
  // call's round trip as the client sees it.
  void MeasureSandboxes() {
    log_ << "sandbox create and first exec latency\n";
    std::vector<double> create_ms, exec_ms;
    std::string pool;
    for (int i = 0; i < options_.samples; ++i) {
      const auto start = Clock::now();
      auto created = session_.Exchange("POST", "/v1/sandboxes", "{}");
      const double create = MillisSince(start);
      if (!created || created->status != 201) {
        Skip("sandbox_create_ms", pool, "",
             created ? "no sandbox could be created: " + Refusal(*created) : "the daemon could not be reached");
        return;
      }
      const json sandbox = json::parse(created->body, nullptr, false);
      const std::string path = "/v1/sandboxes/" + Text(sandbox, "id");
      pool = Text(sandbox, "pool");
      if (std::none_of(pools_.begin(), pools_.end(), [&](const Pool& p) { return p.name == pool; })) {
        session_.Exchange("DELETE", path);
        Skip("sandbox_create_ms", "", "", "sandboxes run in pool " + pool + ", which is not among the chosen pools");
        return;
      }
      const auto exec_start = Clock::now();
      auto ran = session_.Exchange("POST", path + "/exec", R"({"argv": ["true"]})");
      const double exec = MillisSince(exec_start);
      session_.Exchange("DELETE", path);
      if (!ran || ran->status != 200 || json::parse(ran->body, nullptr, false).value("exit_code", -1) != 0) {
        Skip("sandbox_first_exec_ms", pool, "",
             ran ? "the first exec in " + Text(sandbox, "id") + " failed: " + ran->body.substr(0, 300)
                 : "the daemon could not be reached");
        return;
      }
      create_ms.push_back(create);
      exec_ms.push_back(exec);
    }
    AddLatency("sandbox_create_ms", pool, create_ms, json::object());
    AddLatency("sandbox_first_exec_ms", pool, exec_ms, json::object());
  }

  // ---- multi-GPU training ----

  // On the pool's node with the most GPUs: whether they are real (a job
  // looks for their /dev/nvidia<i>), then baseline.gpu_command with 1 GPU
  // and with all of them.
  void MeasureGpuSpeedup(const Pool& pool) {
    const Node* node = nullptr;
    for (const Node& n : pool.nodes) {
      if (n.state == "up" && n.gpus > 0 && (!node || n.gpus > node->gpus)) node = &n;
    }
    if (!node) return;  // no GPUs here: nothing to skip
    if (node->gpus < 2) {
      Skip("gpu_speedup", pool.name, node->name,
           "the largest GPU node of " + pool.name + " has 1 GPU; a speed-up needs 2 or more");
      return;
    }
    log_ << "GPUs of " << node->name << "\n";
    JobRun probe = RunJob(JobRequest(pool, "baseline-gpu-check", Kernel("gpu-check"),
                                     {{"cpus", 1}, {"memory_mb", 256}, {"gpus", node->gpus}}, node->name));
    const json devices = json::parse(Log(Text(probe.job, "id"), ""), nullptr, false);
    if (!probe.failure.empty() || !devices.is_object()) {
      Skip("gpu_speedup", pool.name, node->name,
           probe.failure.empty() ? "the GPU check printed nothing" : probe.failure);
      return;
    }
    if (const json missing = devices.value("missing", json::array()); !missing.empty()) {
      Skip("gpu_speedup", pool.name, node->name,
           "pool " + pool.name + " declares " + std::to_string(node->gpus) + " GPUs on " + node->name +
               " but they are declared devices only (no " + missing[0].get<std::string>() + ")");
      return;
    }
    if (gpu_command_.empty()) {
      Skip("gpu_speedup", pool.name, node->name,
           gpu_command_error_.empty() ? "baseline.gpu_command is not configured (docs/baseline.md)"
                                      : gpu_command_error_);
      return;
    }
    std::map<int, double> seconds;
    json jobs = json::array();
    for (int gpus : {1, node->gpus}) {
      log_ << "baseline.gpu_command with " << gpus << " GPU(s) on " << node->name << "\n";
      // UNISCHED_* names are the scheduler's: a job's `env` may not set
      // them (422), so the variable is set by env(1) in the command.
      json request =
          JobRequest(pool, "baseline-gpu-" + std::to_string(gpus),
                     {"/usr/bin/env", "UNISCHED_BASELINE_GPUS=" + std::to_string(gpus), "/bin/sh", "-c", gpu_command_},
                     {{"cpus", std::max(1, node->cpus * gpus / node->gpus)}, {"gpus", gpus}}, node->name);
      JobRun run = RunJob(request);
      // A refused job has no body.
      const json attempts = run.job.is_object() ? run.job.value("attempts", json::array()) : json::array();
      const double ms = attempts.empty()
                            ? 0
                            : MillisBetween(attempts[0], RunStartKey(attempts[0]), attempts[0], "ended_at").value_or(0);
      if (!run.failure.empty() || ms <= 0) {
        Skip("gpu_speedup", pool.name, node->name,
             "the run with " + std::to_string(gpus) +
                 " GPU(s) failed: " + (run.failure.empty() ? "it recorded no run time" : run.failure));
        return;
      }
      seconds[gpus] = ms / 1000.0;
      jobs.push_back(Text(run.job, "id"));
    }
    Add("gpu_speedup", pool.name, node->name, seconds[1] / seconds[node->gpus], "x", baseline::Better::kHigher,
        {{"gpus", node->gpus},
         {"seconds_1_gpu", seconds[1]},
         {"seconds_all_gpus", seconds[node->gpus]},
         {"jobs", jobs}});
  }

  Session& session_;
  const BaselineOptions& options_;
  std::ostream& log_;
  std::vector<Pool> pools_;
  std::string gpu_command_, gpu_command_error_;
  std::string gpu_device_ = config::BaselineSettings{}.gpu_device;
  json figures_ = json::array(), skipped_ = json::array(), nodes_ = json::object(), jobs_ = json::array();
};

}  // namespace

int64_t MatricesMb(int n) {
  return (int64_t{3} * 8 * n * n + (1 << 20) - 1) >> 20;
}

int64_t KernelMemoryMb(int n, int cpus) {
  return MatricesMb(n) + 256 + 4 * int64_t{cpus};
}

std::optional<json> MeasureBaseline(Session& session, const BaselineOptions& options, std::ostream& log) {
  return BaselineRun(session, options, log).Measure();
}

}  // namespace unisched::cli
