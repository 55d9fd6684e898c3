#pragma once
// The files of an attempt directory: the protocol between the executor (in
// the daemon) and unisched-supervisor. Header-only, because the lean
// supervisor links no executor code. docs/execution.md describes the files.
//
// What to run (AttemptSpec, as JSON) is not a file: the executor hands it to
// the supervisor on its stdin, a sealed memfd. The files, all created by the
// supervisor (the daemon creates nothing per attempt, because inode
// creation is what a launch costs most):
//
//   claim           created O_EXCL by the one supervisor that runs the attempt,
//                   which flock()s it until the attempt ends; holds its pid,
//                   and " shared" after it when that is the host
//   cancel          (the executor's) how to stop an attempt of the host
//   state.json      {"phase":"running", supervisor_pid, started_at}, written once
//   stdout, stderr  the job's capped output; created by its first byte
//   result.json     how it ended (RunResult); written once, atomically, durably
//   supervisor.log  the supervisor's own diagnostics; created by the first one

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unisched/codec/json_reader.h"
#include "unisched/containment/file_io.h"
#include "unisched/executor/executor.h"

namespace unisched::executor::files {

inline constexpr const char* kClaim = "claim";
inline constexpr const char* kState = "state.json";
inline constexpr const char* kResult = "result.json";
inline constexpr const char* kStdout = "stdout";
inline constexpr const char* kStderr = "stderr";
inline constexpr const char* kSupervisorLog = "supervisor.log";
// Written by the executor to cancel an attempt of a shared supervisor (the
// host), which is then sent SIGUSR2: "cancel" or "preempt".
inline constexpr const char* kCancel = "cancel";

// The job's account as the executor resolved it (getpwnam_r, getgrouplist).
// Resolved in the long-lived daemon or agent, a supervisor (a fresh process
// per attempt) loads no NSS module: getgrouplist asks every module of
// nsswitch.conf's group line, and loading libnss_systemd for it cost each
// attempt about 1 ms of CPU here (docs/benchmarks.md).
struct ResolvedAccount {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary, as setgroups takes them
};

// The name of an attempt's cgroups: made by its supervisor, found again by
// the executor when that supervisor died (KillLeftovers). The supervisor's
// pid keeps two daemons' (or test runs') job 1 apart.
inline std::string CgroupName(model::JobId job_id, int attempt, int task, long supervisor_pid) {
  return std::to_string(job_id) + "-" + TaskDirName(attempt, task) + "-" + std::to_string(supervisor_pid);
}

// The largest logical CPU id a spec may name: a node's CPUs, as many as
// Linux's cpu_set_t holds (CPU_SETSIZE).
inline constexpr int kMaxCpuId = 1023;

// What the supervisor needs beyond the LaunchSpec.
struct AttemptSpec {
  LaunchSpec launch;
  std::string work_dir;
  bool use_cgroups = true;
  // Absent when the job runs as the supervisor's own (non-root) user or as
  // a leased sandbox uid; a root supervisor refuses any other job without it.
  std::optional<ResolvedAccount> account;
  // Where stdout, stderr and supervisor.log go (<logs_dir>/<job>/<attempt>,
  // made by the first byte written there); empty: the attempt directory.
  // The attempt directory can then live on a tmpfs while output stays on disk.
  std::string log_dir;
  bool pin_cpus = false;  // LocalExecutorOptions::pin_cpus, for launch.cpu_set
};

// A supervisor of one attempt exits with this (EX_TEMPFAIL) when it could
// not make the attempt's directory or claim for a transient cause
// (IsTransientErrno): it claimed nothing and ran nothing, and had no way to
// write a result. The executor reports a transient launch failure.
inline constexpr int kExitTransient = 75;

// The host's notice that it is done with an attempt: the attempt directory,
// followed by "\n" and an errno when it could not make that directory or
// claim it (then nothing ran, and there is no result to read).
inline std::string Notice(const std::string& attempt_dir, int unclaimed_errno = 0) {
  return unclaimed_errno == 0 ? attempt_dir : attempt_dir + "\n" + std::to_string(unclaimed_errno);
}
struct ParsedNotice {
  std::string attempt_dir;
  int unclaimed_errno = 0;
};
inline ParsedNotice ParseNotice(std::string_view notice) {
  const size_t nl = notice.find('\n');
  if (nl == std::string_view::npos) return {std::string(notice), 0};
  return {std::string(notice.substr(0, nl)), std::atoi(std::string(notice.substr(nl + 1)).c_str())};
}

inline std::string_view OutcomeName(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kCompleted:
      return "completed";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kTimeout:
      return "timeout";
    case RunOutcome::kCancelled:
      return "cancelled";
    case RunOutcome::kLaunchFailed:
      return "launch_failed";
    case RunOutcome::kLost:
      return "lost";
  }
  return "lost";
}

inline std::optional<RunOutcome> ParseOutcome(std::string_view text) {
  for (RunOutcome o : {RunOutcome::kCompleted, RunOutcome::kFailed, RunOutcome::kTimeout, RunOutcome::kCancelled,
                       RunOutcome::kLaunchFailed, RunOutcome::kLost}) {
    if (OutcomeName(o) == text) return o;
  }
  return std::nullopt;
}

inline nlohmann::json SpecToJson(const AttemptSpec& spec) {
  const LaunchSpec& l = spec.launch;
  nlohmann::json j{
      {"job_id", l.job_id},
      {"attempt", l.attempt},
      {"task", l.task},
      {"argv", l.argv},
      {"env", l.env},
      {"unix_user", l.unix_user},
      {"work_dir", spec.work_dir},
      {"walltime_seconds", l.walltime_seconds},
      {"kill_grace_seconds", l.kill_grace_seconds},
      {"preempt_grace_seconds", l.preempt_grace_seconds},
      {"limits",
       {{"memory_bytes", l.limits.memory_bytes}, {"cpu_millis", l.limits.cpu_millis}, {"pids", l.limits.pids}}},
      {"log_cap_bytes", l.log_cap_bytes},
      {"use_cgroups", spec.use_cgroups},
      {"isolate", l.isolate},
      {"sandbox_uids",
       {{"base", l.sandbox_uid_base}, {"count", l.sandbox_uid_count}, {"lock_dir", l.sandbox_uid_lock_dir}}},
  };
  if (!spec.log_dir.empty()) j["log_dir"] = spec.log_dir;
  if (!l.cpu_set.empty()) j["cpu_set"] = l.cpu_set;
  if (spec.pin_cpus) j["pin_cpus"] = true;
  if (!l.script.empty()) j["script"] = l.script;
  if (!l.chdir.empty()) j["chdir"] = l.chdir;
  if (!l.node.empty()) j["node"] = l.node;
  if (!l.output_file.empty()) j["output_file"] = l.output_file;
  if (!l.error_file.empty()) j["error_file"] = l.error_file;
  if (l.ids) j["ids"] = {{"uid", l.ids->uid}, {"gid", l.ids->gid}, {"groups", l.ids->groups}};
  if (!l.shared.empty()) {
    nlohmann::json shared = nlohmann::json::array();
    for (const auto& m : l.shared) {
      shared.push_back({{"path", m.path},
                        {"mount", m.mount},
                        {"read_only", m.read_only},
                        {"project", m.project},
                        {"variable", m.variable}});
    }
    j["shared"] = std::move(shared);
  }
  if (!l.secrets.empty()) {
    nlohmann::json secrets = nlohmann::json::array();
    for (const auto& s : l.secrets) secrets.push_back({{"name", s.name}, {"value", s.value}, {"env", s.env}});
    j["secrets"] = std::move(secrets);
  }
  if (!l.data.empty()) {
    nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array(), stores = nlohmann::json::array();
    for (const auto& stage : l.data.stage_in) in.push_back({{"from", stage.from}, {"to", stage.to}});
    for (const auto& stage : l.data.stage_out) {
      out.push_back({{"from", stage.from}, {"to", stage.to}, {"when", std::string(model::ToString(stage.when))}});
    }
    for (const auto& store : l.stores) {
      stores.push_back({{"name", store.name},
                        {"endpoint", store.endpoint},
                        {"region", store.region},
                        {"path_style", store.path_style},
                        {"access_key", store.access_key},
                        {"secret_key", store.secret_key}});
    }
    j["data"] = {{"stage_in", std::move(in)}, {"stage_out", std::move(out)}, {"stores", std::move(stores)}};
  }
  if (spec.account) {
    j["account"] = {{"uid", spec.account->uid}, {"gid", spec.account->gid}, {"groups", spec.account->groups}};
  }
  return j;
}

// Required: what every writer of a spec sets. Optional: limits (none),
// preempt_grace_seconds (the kill grace), and what specs written before a
// field existed lack (isolate, sandbox_uids, log_dir), account and ids.
// The parsed document (the agent's wire messages arrive parsed already).
inline Result<AttemptSpec> SpecFromDocument(const nlohmann::json& j) {
  codec::JsonReader r("bad_spec");
  AttemptSpec spec;
  LaunchSpec& l = spec.launch;
  if (!j.is_object()) return Error::BadRequest("bad_spec", "malformed spec: not a JSON object");
  for (const char* key : {"job_id", "attempt", "argv", "env", "unix_user", "work_dir", "walltime_seconds",
                          "kill_grace_seconds", "log_cap_bytes", "use_cgroups"}) {
    r.Require(j, key, key);
  }
  r.Integer(j, "job_id", "job_id", l.job_id);
  r.Integer(j, "attempt", "attempt", l.attempt);
  r.Integer(j, "task", "task", l.task);  // absent (written before gangs): 0
  r.StringList(j, "argv", "argv", l.argv);
  r.StringMap(j, "env", "env", l.env);
  r.String(j, "unix_user", "unix_user", l.unix_user);
  r.String(j, "work_dir", "work_dir", spec.work_dir);
  r.Integer(j, "walltime_seconds", "walltime_seconds", l.walltime_seconds);
  r.Integer(j, "kill_grace_seconds", "kill_grace_seconds", l.kill_grace_seconds);
  l.preempt_grace_seconds = l.kill_grace_seconds;
  r.Integer(j, "preempt_grace_seconds", "preempt_grace_seconds", l.preempt_grace_seconds);
  if (const nlohmann::json* lim = r.Object(j, "limits", "limits")) {
    r.Integer(*lim, "memory_bytes", "limits.memory_bytes", l.limits.memory_bytes);
    r.Integer(*lim, "cpu_millis", "limits.cpu_millis", l.limits.cpu_millis);
    r.Integer(*lim, "pids", "limits.pids", l.limits.pids);
  }
  r.Integer(j, "log_cap_bytes", "log_cap_bytes", l.log_cap_bytes);
  r.Bool(j, "isolate", "isolate", l.isolate);
  if (const nlohmann::json* u = r.Object(j, "sandbox_uids", "sandbox_uids")) {
    r.Integer(*u, "base", "sandbox_uids.base", l.sandbox_uid_base);
    r.Integer(*u, "count", "sandbox_uids.count", l.sandbox_uid_count);
    r.String(*u, "lock_dir", "sandbox_uids.lock_dir", l.sandbox_uid_lock_dir);
  }
  r.Bool(j, "use_cgroups", "use_cgroups", spec.use_cgroups);
  r.String(j, "log_dir", "log_dir", spec.log_dir);  // absent: output beside the control files
  r.IntList(j, "cpu_set", "cpu_set", l.cpu_set);    // absent: no set
  for (size_t i = 0; i < l.cpu_set.size() && !r.failed(); ++i) {
    if (l.cpu_set[i] < 0 || l.cpu_set[i] > kMaxCpuId) {
      r.Fail("cpu_set[" + std::to_string(i) + "]", "must be a logical CPU id, 0 to " + std::to_string(kMaxCpuId));
    }
  }
  r.Bool(j, "pin_cpus", "pin_cpus", spec.pin_cpus);
  r.String(j, "script", "script", l.script);                 // absent: argv runs
  r.String(j, "chdir", "chdir", l.chdir);                    // absent: the work directory
  r.String(j, "node", "node", l.node);                       // absent (written before TMPDIRs): none
  r.String(j, "output_file", "output_file", l.output_file);  // absent: no copy
  r.String(j, "error_file", "error_file", l.error_file);
  // {"uid", "gid", "groups"} under `key`: an account as numbers.
  auto read_ids = [&r, &j](const char* key, uint32_t& uid, uint32_t& gid, std::vector<uint32_t>& groups) {
    const nlohmann::json* a = r.Object(j, key, key);
    if (a == nullptr) return false;
    const std::string prefix = std::string(key) + ".";
    for (const char* field : {"uid", "gid", "groups"}) r.Require(*a, field, prefix + field);
    r.Integer(*a, "uid", prefix + "uid", uid);
    r.Integer(*a, "gid", prefix + "gid", gid);
    if (const nlohmann::json* list = r.Array(*a, "groups", prefix + "groups")) {
      for (size_t i = 0; i < list->size() && !r.failed(); ++i) {
        uint32_t group = 0;
        r.IntegerValue((*list)[i], prefix + "groups[" + std::to_string(i) + "]", group);
        groups.push_back(group);
      }
    }
    return true;
  };
  if (ResolvedAccount account; read_ids("account", account.uid, account.gid, account.groups)) {
    spec.account = std::move(account);
  }
  if (UnixIds ids; read_ids("ids", ids.uid, ids.gid, ids.groups)) l.ids = std::move(ids);
  if (const nlohmann::json* shared = r.Array(j, "shared", "shared")) {  // absent: none
    for (size_t i = 0; i < shared->size() && !r.failed(); ++i) {
      const std::string field = "shared[" + std::to_string(i) + "]";
      const nlohmann::json& item = (*shared)[i];
      SharedMount m;
      for (const char* key : {"path", "mount", "variable"}) r.Require(item, key, field + "." + key);
      r.String(item, "path", field + ".path", m.path);
      r.String(item, "mount", field + ".mount", m.mount);
      r.Bool(item, "read_only", field + ".read_only", m.read_only);
      r.String(item, "project", field + ".project", m.project);
      r.String(item, "variable", field + ".variable", m.variable);
      l.shared.push_back(std::move(m));
    }
  }
  if (const nlohmann::json* secrets = r.Array(j, "secrets", "secrets")) {  // absent: none
    for (size_t i = 0; i < secrets->size() && !r.failed(); ++i) {
      const std::string field = "secrets[" + std::to_string(i) + "]";
      SecretValue secret;
      for (const char* key : {"name", "value"}) r.Require((*secrets)[i], key, field + "." + key);
      r.String((*secrets)[i], "name", field + ".name", secret.name);
      r.String((*secrets)[i], "value", field + ".value", secret.value);
      r.String((*secrets)[i], "env", field + ".env", secret.env);
      l.secrets.push_back(std::move(secret));
    }
  }
  if (const nlohmann::json* data = r.Object(j, "data", "data")) {  // absent: no staging
    auto read_list = [&](const char* key, auto&& each) {
      if (const nlohmann::json* list = r.Array(*data, key, std::string("data.") + key)) {
        for (size_t i = 0; i < list->size() && !r.failed(); ++i) {
          const std::string field = std::string("data.") + key + "[" + std::to_string(i) + "]";
          if (!(*list)[i].is_object()) {
            r.Fail(field, "must be an object");
            break;
          }
          each((*list)[i], field);
        }
      }
    };
    read_list("stage_in", [&](const nlohmann::json& item, const std::string& field) {
      model::StageIn stage;
      r.String(item, "from", field + ".from", stage.from);
      r.String(item, "to", field + ".to", stage.to);
      l.data.stage_in.push_back(std::move(stage));
    });
    read_list("stage_out", [&](const nlohmann::json& item, const std::string& field) {
      model::StageOut stage;
      std::string when = "success";
      r.String(item, "from", field + ".from", stage.from);
      r.String(item, "to", field + ".to", stage.to);
      r.String(item, "when", field + ".when", when);
      stage.when = model::ParseStageWhen(when).value_or(model::StageWhen::kSuccess);
      l.data.stage_out.push_back(std::move(stage));
    });
    read_list("stores", [&](const nlohmann::json& item, const std::string& field) {
      StoreEndpoint store;
      r.String(item, "name", field + ".name", store.name);
      r.String(item, "endpoint", field + ".endpoint", store.endpoint);
      r.String(item, "region", field + ".region", store.region);
      r.Bool(item, "path_style", field + ".path_style", store.path_style);
      r.String(item, "access_key", field + ".access_key", store.access_key);
      r.String(item, "secret_key", field + ".secret_key", store.secret_key);
      l.stores.push_back(std::move(store));
    });
  }
  if (r.failed()) return Error::BadRequest("bad_spec", "malformed spec: " + r.TakeError().message);
  if (l.task < 0) return Error::BadRequest("bad_spec", "task must not be negative");
  if (l.argv.empty()) return Error::BadRequest("bad_spec", "argv is empty");
  return spec;
}
inline Result<AttemptSpec> SpecFromJson(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error::BadRequest("bad_spec", "malformed spec: not JSON");
  return SpecFromDocument(doc);
}

inline nlohmann::json ResultToJson(const RunResult& r, std::string_view containment = {}) {
  nlohmann::json j{
      {"job_id", r.job_id},
      {"attempt", r.attempt},
      {"outcome", OutcomeName(r.outcome)},
      {"exit_code", nullptr},
      {"reason", r.reason},
      {"started_at", nullptr},
      {"ended_at", nullptr},
      {"usage",
       {{"wall_seconds", r.usage.wall_seconds},
        {"user_cpu_seconds", r.usage.user_cpu_seconds},
        {"system_cpu_seconds", r.usage.system_cpu_seconds},
        {"max_rss_kb", r.usage.max_rss_kb}}},
  };
  if (r.usage.network_bytes_in != 0) j["usage"]["network_bytes_in"] = r.usage.network_bytes_in;
  if (r.usage.network_bytes_out != 0) j["usage"]["network_bytes_out"] = r.usage.network_bytes_out;
  if (r.exit_code) j["exit_code"] = *r.exit_code;
  if (r.started_at) j["started_at"] = ToUnixMillis(*r.started_at);
  if (r.ended_at) j["ended_at"] = ToUnixMillis(*r.ended_at);
  // Only when set: a result without it is permanent, as every result
  // written before the field existed (and readers that predate it skip it).
  if (r.transient && r.outcome == RunOutcome::kLaunchFailed) j["transient"] = true;
  if (r.task != 0) j["task"] = r.task;
  if (!r.tasks.empty()) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const TaskEnd& t : r.tasks) {
      tasks.push_back({{"rank", t.rank},
                       {"node", t.node},
                       {"outcome", OutcomeName(t.outcome)},
                       {"exit_code", t.exit_code ? nlohmann::json(*t.exit_code) : nlohmann::json()},
                       {"reason", t.reason}});
    }
    j["tasks"] = std::move(tasks);
  }
  if (!containment.empty()) j["containment"] = containment;
  return j;
}

inline Result<RunResult> ResultFromDocument(const nlohmann::json& j) {
  codec::JsonReader r("bad_result");
  RunResult result;
  if (!j.is_object()) return Error::BadRequest("bad_result", "malformed result.json: not a JSON object");
  for (const char* key : {"job_id", "attempt", "outcome"}) r.Require(j, key, key);
  r.Integer(j, "job_id", "job_id", result.job_id);
  r.Integer(j, "attempt", "attempt", result.attempt);
  r.Enum(j, "outcome", "outcome", &ParseOutcome, result.outcome);
  r.OptionalInt(j, "exit_code", "exit_code", result.exit_code);
  r.String(j, "reason", "reason", result.reason);
  r.Bool(j, "transient", "transient", result.transient);
  r.Integer(j, "task", "task", result.task);
  if (const nlohmann::json* tasks = r.Array(j, "tasks", "tasks")) {
    for (size_t i = 0; i < tasks->size() && !r.failed(); ++i) {
      const nlohmann::json& t = (*tasks)[i];
      const std::string at = "tasks[" + std::to_string(i) + "]";
      TaskEnd end;
      if (!t.is_object()) {
        r.Fail(at, "must be an object");
        break;
      }
      r.Require(t, "rank", at + ".rank");
      r.Integer(t, "rank", at + ".rank", end.rank);
      r.String(t, "node", at + ".node", end.node);
      r.Enum(t, "outcome", at + ".outcome", &ParseOutcome, end.outcome);
      r.OptionalInt(t, "exit_code", at + ".exit_code", end.exit_code);
      r.String(t, "reason", at + ".reason", end.reason);
      result.tasks.push_back(std::move(end));
    }
  }
  result.transient = result.transient && result.outcome == RunOutcome::kLaunchFailed;
  std::optional<int64_t> started_ms, ended_ms;
  if (const nlohmann::json* t = r.Field(j, "started_at")) {
    started_ms.emplace();
    r.IntegerValue(*t, "started_at", *started_ms);
  }
  if (const nlohmann::json* t = r.Field(j, "ended_at")) {
    ended_ms.emplace();
    r.IntegerValue(*t, "ended_at", *ended_ms);
  }
  if (const nlohmann::json* u = r.Object(j, "usage", "usage")) {
    r.Double(*u, "wall_seconds", "usage.wall_seconds", result.usage.wall_seconds);
    r.Double(*u, "user_cpu_seconds", "usage.user_cpu_seconds", result.usage.user_cpu_seconds);
    r.Double(*u, "system_cpu_seconds", "usage.system_cpu_seconds", result.usage.system_cpu_seconds);
    r.Integer(*u, "max_rss_kb", "usage.max_rss_kb", result.usage.max_rss_kb);
    r.Integer(*u, "network_bytes_in", "usage.network_bytes_in", result.usage.network_bytes_in);
    r.Integer(*u, "network_bytes_out", "usage.network_bytes_out", result.usage.network_bytes_out);
  }
  if (r.failed()) return Error::BadRequest("bad_result", "malformed result.json: " + r.TakeError().message);
  if (started_ms) result.started_at = FromUnixMillis(*started_ms);
  if (ended_ms) result.ended_at = FromUnixMillis(*ended_ms);
  return result;
}
inline Result<RunResult> ResultFromJson(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error::BadRequest("bad_result", "malformed result.json: not JSON");
  return ResultFromDocument(doc);
}

using containment::ReadWholeFile;

// Replaces dir/name with `content` so that readers see the old or the new
// file whole, never a part: write a temporary, rename. With `durable`, also
// fsync the file before and the directory after the rename, so the file
// survives a host crash, not only a crash of the daemon; only the result
// needs that (a state file lost with the host is rebuilt by recovery).
// Returns 0 or the errno of the step that failed.
inline int WriteFileAtomic(const std::string& dir, const std::string& name, std::string_view content,
                           bool durable = true) {
  // Unique per writer, so that two writers never share a temporary.
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      dir + "/." + name + "." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + ".tmp";
  const std::string path = dir + "/" + name;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return err;
    }
    done += static_cast<size_t>(n);
  }
  const int sync_err = durable && ::fsync(fd) != 0 ? errno : 0;
  const int close_err = ::close(fd) != 0 ? errno : 0;
  if (sync_err != 0 || close_err != 0) {
    ::unlink(tmp.c_str());
    return sync_err != 0 ? sync_err : close_err;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return err;
  }
  const int dfd = durable ? ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (dfd >= 0) {
    (void)::fsync(dfd);  // the rename is what matters; a failed dir fsync only weakens crash safety
    ::close(dfd);
  }
  return 0;
}

}  // namespace unisched::executor::files
