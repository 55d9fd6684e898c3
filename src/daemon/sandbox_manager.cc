// SandboxManager: see sandbox_manager.h and docs/sandboxes.md.

#include "daemon/sandbox_manager.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>

#include "unisched/containment/containment.h"
#include "unisched/isolation/protocol.h"
#include "unisched/service/admission.h"

namespace unisched::daemon {
namespace {

using nlohmann::json;

constexpr char kHostImage[] = "host";

std::string SandboxName(int64_t id) {
  return "sb-" + std::to_string(id);
}

std::string ImageKey(const std::string& name, const std::string& version) {
  return name + ":" + version;
}

json ImageSpecJson(const std::string& rootfs, const std::vector<std::pair<std::string, std::string>>& binds) {
  json b = json::array();
  for (const auto& [from, to] : binds) b.push_back(from + ":" + to);
  return {{"rootfs", rootfs}, {"binds", b}};
}

std::vector<std::pair<std::string, std::string>> SplitBinds(const std::vector<std::string>& binds) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& b : binds) {
    const size_t colon = b.find(':');
    out.emplace_back(b.substr(0, colon), b.substr(colon + 1));
  }
  return out;
}

// What the init answered, as an API error: its codes map to statuses.
Error InitError(const json& answer) {
  const std::string code = answer.value("code", "io");
  const std::string message = answer.value("error", "the sandbox failed");
  if (code == "not_found") return Error::NotFound(message);
  if (code == "too_large") return Error{ErrorKind::kTooLarge, "too_large", message, {}};
  if (code == "bad_path" || code == "bad_request") return Error::Unprocessable("invalid_value", message, "path");
  return Error::Unprocessable("sandbox_error", message);
}

}  // namespace

SandboxManager::SandboxManager(const config::Config& config, store::Store& store, metrics::Metrics& metrics,
                               const Clock& clock, service::ControlPlane& control, std::string state_dir,
                               std::string init_path)
    : config_(config),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      control_(control),
      sandboxes_dir_(state_dir + "/sandboxes"),
      init_path_(std::move(init_path)),
      name_prefix_("sb" + std::to_string(::getpid()) + "-") {}

SandboxManager::~SandboxManager() {
  Stop();
}

Status SandboxManager::Start() {
  isolation_available_ = ::geteuid() == 0;
  if (!isolation_available_) {
    spdlog::warn("sandboxes need root (namespaces, cgroups, a uid per instance): POST /v1/sandboxes answers 503");
  }
  std::error_code ec;
  std::filesystem::create_directories(sandboxes_dir_, ec);
  ::chmod(sandboxes_dir_.c_str(), 0711);

  // Images: the host profile, then the config's; a version new to the store
  // becomes its image's current one (an API rollback survives a restart).
  std::vector<config::ImageSpec> configured = config_.images;
  const bool host_configured = std::any_of(configured.begin(), configured.end(),
                                           [](const config::ImageSpec& i) { return i.name == kHostImage; });
  if (!host_configured) {
    config::ImageSpec host;
    host.name = kHostImage;
    configured.insert(configured.begin(), host);
  }
  std::set<std::string> known;
  for (const auto& row : store_.ListImageVersions()) known.insert(ImageKey(row.name, row.version));
  const Timestamp now = clock_.Now();
  Status written = store_.WriteSync([&](store::Transaction& t) -> Status {
    for (const auto& image : configured) {
      if (known.count(ImageKey(image.name, image.version))) continue;
      store::ImageVersionRow row{image.name, image.version, ImageSpecJson(image.rootfs, SplitBinds(image.binds)).dump(),
                                 "config", now};
      if (Status s = t.PutImageVersion(row); !s) return s;
      if (Status s = t.PushImageCurrent(image.name, image.version, now); !s) return s;
    }
    return Status::Ok();
  });
  if (!written) return written;
  {
    std::lock_guard lock(mu_);
    for (const auto& row : store_.ListImageVersions()) {
      ImageVersion v;
      v.name = row.name;
      v.version = row.version;
      v.created_by = row.created_by;
      v.created_at = row.created_at;
      const json spec = json::parse(row.spec, nullptr, false);
      if (spec.is_object()) {
        v.rootfs = spec.value("rootfs", "");
        v.binds = SplitBinds(spec.value("binds", std::vector<std::string>{}));
      }
      images_[row.name][row.version] = std::move(v);
    }
    image_stack_ = store_.ImageCurrentStacks();
    for (const auto& image : configured) warm_target_[image.name] = std::max(warm_target_[image.name], image.warm);
    next_id_ = store_.MaxSandboxId() + 1;
  }

  // Sandboxes of a previous run: their inits ended with that daemon (the
  // control socket closed); what may remain is killed and removed, and each
  // is charged up to now, an upper bound (docs/sandboxes.md).
  for (const auto& row : store_.ListSandboxes(/*active_only=*/true, 1'000'000)) {
    json record = json::parse(row.record, nullptr, false);
    if (!record.is_object()) continue;
    auto s = std::make_shared<Sandbox>();
    s->id = row.id;
    s->user = record.value("user", "");
    s->project = record.value("project", "");
    s->queue = record.value("queue", "");
    s->pool = record.value("pool", "");
    s->node = record.value("node", "");
    s->image = record.value("image", "");
    s->image_version = record.value("image_version", "");
    s->created_at = row.created_at;
    // Charged up to its last interim entry; the final one takes the rest.
    s->charged_until = store_.LoadLedgerCharged(0, static_cast<int>(row.id)).until.value_or(row.created_at);
    s->execs = record.value("execs", int64_t{0});
    s->uid = record.value("uid", int64_t{0});
    const json limits = record.value("limits", json::object());
    s->limits = {limits.value("cpus", int64_t{1}), limits.value("memory_mb", int64_t{0}),
                 limits.value("timeout_seconds", int64_t{0})};
    s->instance_name = record.value("instance", "");
    const std::string& cgroup = s->instance_name;
    if (!cgroup.empty() && isolation_available_) {
      if (auto leftover = containment::Containment::Find(cgroup)) (void)leftover->KillAllAndDestroy();
    }
    sandbox::RemoveTree(record.value("work_dir", ""));
    EndSandbox(s, "lost", "the daemon that ran it stopped", "system", nullptr);
  }
  RemoveLeftovers();
  reaper_ = std::thread([this] { ReaperLoop(); });
  return Status::Ok();
}

void SandboxManager::RemoveLeftovers() {
  // Every active sandbox of the store was ended above: what is left in our
  // sandboxes directory is a dead run's (warm instances, a start that never
  // committed).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sandboxes_dir_, ec)) {
    sandbox::RemoveTree(entry.path().string());
  }
  if (!isolation_available_) return;
  // Their cgroups, named sb<daemon pid>-<n>, when that daemon is gone (the
  // groups of a live daemon on the same host are its own).
  std::set<std::string> dead;
  for (const auto& hierarchy : std::filesystem::directory_iterator("/sys/fs/cgroup", ec)) {
    for (const auto& group : std::filesystem::directory_iterator(hierarchy.path() / "unisched", ec)) {
      const std::string name = group.path().filename().string();
      const size_t dash = name.find('-');
      if (name.rfind("sb", 0) != 0 || dash == std::string::npos || dash == 2) continue;
      const std::string pid = name.substr(2, dash - 2);
      if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
      if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) dead.insert(name);
    }
  }
  for (const std::string& name : dead) {
    auto leftover = containment::Containment::Find(name);
    if (!leftover) continue;
    if (Status removed = leftover->KillAllAndDestroy(); !removed) {
      spdlog::warn("sandbox leftovers: {}", removed.error().message);
    }
  }
  if (!dead.empty()) spdlog::info("removed the cgroups of {} sandbox instances of a stopped daemon", dead.size());
}

void SandboxManager::Stop() {
  std::vector<std::shared_ptr<Sandbox>> ending;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, s] : active_) ending.push_back(s);
    active_.clear();
  }
  stop_cv_.notify_all();
  slots_cv_.notify_all();
  // Killed first, so calls in progress end now instead of at their caps.
  for (auto& s : ending) s->instance->Destroy();
  if (reaper_.joinable()) reaper_.join();
  {
    std::unique_lock lock(threads_mu_);
    threads_cv_.wait(lock, [this] { return threads_running_ == 0; });
  }
  for (auto& s : ending) EndSandbox(s, "stopped", "the daemon stopped", "system", nullptr);
  std::lock_guard lock(mu_);
  for (auto& [key, instances] : warm_) {
    for (auto& w : instances) w.instance->Destroy();
  }
  warm_.clear();
}

void SandboxManager::Spawn(std::function<void()> fn) {
  {
    std::lock_guard lock(threads_mu_);
    ++threads_running_;
  }
  std::thread([this, fn = std::move(fn)] {
    fn();
    std::lock_guard lock(threads_mu_);
    if (--threads_running_ == 0) threads_cv_.notify_all();
  }).detach();
}

containment::Limits SandboxManager::ContainmentLimits(const Limits& limits) const {
  return {limits.memory_mb << 20, static_cast<int>(limits.cpus * 1000), config_.sandboxes.pids_max};
}

Result<SandboxManager::ImageVersion> SandboxManager::ResolveImage(const std::string& reference) const {
  const size_t colon = reference.find(':');
  const std::string name = reference.substr(0, colon);
  auto it = images_.find(name);
  if (it == images_.end()) {
    std::string names;
    for (const auto& [n, v] : images_) names += (names.empty() ? "" : ", ") + n;
    return Error::Unprocessable("invalid_value", "unknown image '" + name + "'; images: " + names, "image");
  }
  std::string version;
  if (colon != std::string::npos) {
    version = reference.substr(colon + 1);
  } else {
    auto stack = image_stack_.find(name);
    if (stack == image_stack_.end() || stack->second.empty()) {
      return Error::Unprocessable("invalid_value", "image '" + name + "' has no current version", "image");
    }
    version = stack->second.back();
  }
  auto v = it->second.find(version);
  if (v == it->second.end()) {
    std::string versions;
    for (const auto& [ver, image] : it->second) versions += (versions.empty() ? "" : ", ") + ver;
    return Error::Unprocessable(
        "invalid_value", "image '" + name + "' has no version '" + version + "'; versions: " + versions, "image");
  }
  return v->second;
}

Result<SandboxManager::Started> SandboxManager::StartInstance(const ImageVersion& image, const std::string& queue,
                                                              const Limits& limits) {
  int64_t number;
  {
    std::lock_guard lock(mu_);
    number = next_instance_++;
  }
  sandbox::InstanceSpec spec;
  spec.name = name_prefix_ + std::to_string(number);
  spec.init_path = init_path_;
  spec.work_dir = sandboxes_dir_ + "/" + spec.name;
  spec.rootfs = image.rootfs;
  spec.binds = image.binds;
  spec.limits = ContainmentLimits(limits);
  spec.uid =
      isolation::UidLease::Acquire(config_.sandboxes.uid_lock_dir, static_cast<uid_t>(config_.sandboxes.uid_base),
                                   static_cast<uid_t>(config_.sandboxes.uid_count),
                                   static_cast<uint64_t>(::getpid()) * 7919 + static_cast<uint64_t>(number));
  if (!spec.uid.held()) {
    return Error::Unavailable("no free sandbox uid in [" + std::to_string(config_.sandboxes.uid_base) + ", +" +
                              std::to_string(config_.sandboxes.uid_count) + ") (" + std::strerror(errno) + ")");
  }
  auto instance = sandbox::Instance::Start(std::move(spec));
  if (!instance.ok()) return instance.error();
  Started started;
  started.instance = std::shared_ptr<sandbox::Instance>(std::move(instance).value());
  started.queue = queue;
  started.limits = limits;
  return started;
}

service::SandboxHolds SandboxManager::OwnHolds() const {
  service::SandboxHolds holds;
  auto add = [&holds](const Sandbox& s) { holds[{s.queue, s.project, s.user}] += service::SandboxAmount(s.limits); };
  for (const auto& [id, s] : active_) add(*s);
  for (const auto& s : admitted_) add(*s);
  return holds;
}

service::SandboxHolds SandboxManager::Holds() const {
  std::lock_guard lock(mu_);
  return OwnHolds();
}

void SandboxManager::Create(CreateRequest request, std::string actor, std::function<void(Result<json>)> done) {
  if (!isolation_available_) {
    done(Error::Unavailable("sandboxes need the daemon to run as root (namespaces, cgroups, a uid per instance)"));
    return;
  }
  // The job service admitted the queue, pool and limits (router, quotas,
  // budgets); what is left to check is the manager's own: the image and the
  // idle timeout. A bad request changes nothing.
  const model::QueueSpec* queue = config_.cluster.FindQueue(request.queue);
  const model::PoolSpec* pool = config_.cluster.FindPool(request.pool);
  if (!queue || !pool || pool->nodes.empty()) {
    done(Error::Internal("sandbox admitted to queue '" + request.queue + "' on pool '" + request.pool +
                         "', which this config does not have"));
    return;
  }
  const int64_t queue_idle = queue->policy.scale_in_idle_seconds.value_or(config_.sandboxes.default_idle_seconds);
  if (request.idle_timeout_seconds && *request.idle_timeout_seconds > queue_idle) {
    done(Error::Unprocessable("invalid_value",
                              "idle_timeout_seconds may shorten, never lengthen, queue " + queue->name +
                                  "'s scale_in_idle_seconds (" + std::to_string(queue_idle) + ")",
                              "idle_timeout_seconds"));
    return;
  }
  ImageVersion image;
  {
    std::lock_guard lock(mu_);
    auto resolved = ResolveImage(request.image.empty() ? config_.sandboxes.default_image : request.image);
    if (!resolved.ok()) {
      done(resolved.error());
      return;
    }
    image = std::move(resolved).value();
  }
  auto s = std::make_shared<Sandbox>();
  s->user = request.user;
  s->project = request.project;
  s->queue = queue->name;
  s->pool = pool->name;
  s->node = pool->nodes.front();
  s->image = image.name;
  s->image_version = image.version;
  s->limits = request.limits;
  s->idle_timeout_seconds = request.idle_timeout_seconds.value_or(queue_idle);
  const bool may_wait = queue->policy.quota_action == model::QuotaAction::kWait;

  Spawn([this, s, image, may_wait, actor = std::move(actor), done = std::move(done)] {
    const auto started_at = std::chrono::steady_clock::now();
    // The slot: running jobs, running sandboxes and creates under way
    // together stay within max_concurrency and every quota of the queue and
    // the project. A queue whose quota_action is wait holds the create up to
    // sandboxes.create_wait_seconds (a sandbox cannot be left pending).
    {
      std::unique_lock lock(mu_);
      const auto deadline = started_at + std::chrono::seconds(may_wait ? config_.sandboxes.create_wait_seconds : 0);
      while (true) {
        if (stopping_) {
          done(Error::Unavailable("the daemon is stopping"));
          return;
        }
        const policy::JobScope scope{s->queue, s->project, s->user};
        auto limit = service::SandboxSlotLimit(config_.cluster, service::HeldFor(*control_.View(), OwnHolds(), scope),
                                               scope, s->limits);
        if (!limit) break;
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
          if (limit->code == "ConcurrencyLimit") {
            done(Error{ErrorKind::kRateLimited,
                       "max_concurrency",
                       limit->message + " (sandboxes and agent jobs, max_concurrency); retry later",
                       {}});
          } else if (may_wait) {
            done(Error{ErrorKind::kRateLimited,
                       "quota_exceeded",
                       limit->message + "; no slot freed within sandboxes.create_wait_seconds: retry later",
                       {}});
          } else {
            done(Error::Forbidden(
                limit->message + "; queue " + s->queue + " refuses work over quota (quota_action: reject): retry later",
                "quota_exceeded"));
          }
          return;
        }
        // Sandboxes that end wake this at once; running jobs that end are
        // seen at the next look.
        slots_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(250)));
      }
      admitted_.insert(s);
    }
    auto unreserve = [this, s] {
      std::lock_guard lock(mu_);
      admitted_.erase(s);
      slots_cv_.notify_all();
    };
    // A warm instance of the image started for this queue, its caps set to
    // these limits; else a cold start.
    std::optional<Started> instance;
    {
      std::lock_guard lock(mu_);
      auto& pool = warm_[ImageKey(image.name, image.version)];
      for (auto it = pool.begin(); it != pool.end(); ++it) {
        if (it->queue == s->queue) {
          instance = std::move(*it);
          pool.erase(it);
          break;
        }
      }
    }
    if (instance && !(instance->limits == s->limits)) {
      if (Status set = instance->instance->SetLimits(ContainmentLimits(s->limits)); !set.ok()) {
        spdlog::info("warm sandbox not reusable with other limits ({}): a cold start", set.error().message);
        instance->instance->Destroy();
        instance.reset();
      } else {
        instance->limits = s->limits;
      }
    }
    s->warm_start = instance.has_value();
    if (s->warm_start) stop_cv_.notify_all();  // the reaper refills the warm pool now
    if (!instance) {
      auto started = StartInstance(image, s->queue, s->limits);
      if (!started.ok()) {
        unreserve();
        spdlog::error("sandbox start failed: {}", started.error().message);
        done(started.error());
        return;
      }
      instance = std::move(started).value();
    }
    s->instance = instance->instance;
    s->uid = s->instance->uid();
    s->instance_name = s->instance->name();
    s->created_at = clock_.Now();
    s->charged_until = s->created_at;
    s->last_active = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mu_);
      s->id = next_id_++;
    }
    const store::SandboxRow row = RowOf(*s);
    const store::ClusterEvent event{s->created_at, "sandbox_created", "sandbox/" + SandboxName(s->id), "info",
                                    "image " + s->image + ":" + s->image_version +
                                        (s->warm_start ? " (warm)" : " (cold)") + " for " + s->user + " in " +
                                        s->project};
    const store::AuditRecord audit{s->created_at, actor, "POST /v1/sandboxes", "sandbox/" + SandboxName(s->id), "201"};
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count();
    store_.Write(
        [row, event, audit](store::Transaction& t) -> Status {
          if (Status st = t.PutSandbox(row); !st) return st;
          if (Status st = t.AppendClusterEvent(event); !st) return st;
          return t.AppendAudit(audit);
        },
        [this, s, unreserve, seconds, done](Status st) {
          if (!st.ok()) {
            unreserve();
            s->instance->Destroy();
            done(st.error());
            return;
          }
          {
            std::lock_guard lock(mu_);
            admitted_.erase(s);
            active_[s->id] = s;
            PublishMetrics();
          }
          control_.CountSandbox(s->queue, s->project, s->user, service::SandboxAmount(s->limits), +1);
          metrics_.ObserveSandboxCreate(s->warm_start ? "warm" : "cold", seconds);
          done(ViewOf(*s));
        });
  });
}

json SandboxManager::ViewOf(const Sandbox& s) const {
  json view = {
      {"id", SandboxName(s.id)},
      {"state", s.state},
      {"image", s.image + ":" + s.image_version},
      {"image_version", s.image_version},
      {"queue", s.queue},
      {"pool", s.pool},
      {"node", s.node},
      {"project", s.project},
      {"user", s.user},
      {"limits",
       {{"cpus", s.limits.cpus}, {"memory_mb", s.limits.memory_mb}, {"timeout_seconds", s.limits.timeout_seconds}}},
      {"idle_timeout_seconds", s.idle_timeout_seconds},
      {"created_at", FormatRfc3339(s.created_at)},
      {"ended_at", s.ended_at ? json(FormatRfc3339(*s.ended_at)) : json(nullptr)},
      {"execs", s.execs},
      {"warm_start", s.warm_start}};
  if (!s.end_reason.empty()) view["end_reason"] = s.end_reason;
  view["uid"] = s.uid;
  view["instance"] = s.instance_name;  // its cgroups and work directory are named after it
  return view;
}

store::SandboxRow SandboxManager::RowOf(const Sandbox& s) const {
  json record = ViewOf(s);
  if (s.instance) {
    record["work_dir"] = s.instance->work_dir();
  }
  return {s.id, s.state, record.dump(), s.created_at, s.ended_at};
}

Result<json> SandboxManager::Get(int64_t id) const {
  {
    std::lock_guard lock(mu_);
    if (auto it = active_.find(id); it != active_.end()) return ViewOf(*it->second);
  }
  auto row = store_.GetSandbox(id);
  if (!row) return Error::NotFound("no sandbox " + SandboxName(id));
  return StoredView(*row);
}

Result<json> SandboxManager::StoredView(const store::SandboxRow& row) {
  json record = json::parse(row.record, nullptr, false);
  if (!record.is_object()) return Error::Internal("sandbox record unreadable");
  record.erase("work_dir");  // the host path is the daemon's business
  return record;
}

json SandboxManager::List(bool active_only) const {
  json out = json::array();
  if (active_only) {
    std::lock_guard lock(mu_);
    for (auto it = active_.rbegin(); it != active_.rend(); ++it) out.push_back(ViewOf(*it->second));
    return out;
  }
  // Newest 1000 as stored; a running one's row is as of its creation, so
  // its live view (execs so far) replaces it.
  std::lock_guard lock(mu_);
  for (const auto& row : store_.ListSandboxes(false, 1000)) {
    if (auto it = active_.find(row.id); it != active_.end()) {
      out.push_back(ViewOf(*it->second));
    } else if (auto view = StoredView(row); view.ok()) {
      out.push_back(*view);
    }
  }
  return out;
}

void SandboxManager::Exec(int64_t id, ExecRequest request, std::string actor, std::function<void(Result<json>)> done) {
  auto acquired = Acquire(id);
  if (!acquired.ok()) {
    done(acquired.error());
    return;
  }
  std::shared_ptr<Sandbox> s = std::move(acquired).value();
  int64_t timeout = s->limits.timeout_seconds;
  if (request.timeout_seconds) timeout = std::min(timeout, *request.timeout_seconds);
  Spawn([this, s, timeout, request = std::move(request), actor = std::move(actor), done = std::move(done)] {
    json env = json::object();
    for (const auto& [k, v] : request.env) env[k] = v;
    const json call = {{"op", "exec"},
                       {"argv", request.argv},
                       {"env", env},
                       {"stdin", isolation::Bytes(request.stdin_data)},
                       {"timeout_ms", timeout * 1000},
                       {"output_cap", config_.sandboxes.output_cap_bytes}};
    auto answer = CallInstance(s, call, static_cast<int>(timeout * 1000 + 10'000), /*exec=*/true);
    if (!answer.ok()) {
      done(answer.error());
      return;
    }
    json result = {{"exit_code", answer->value("exit_code", -1)},
                   {"stdout", isolation::BytesOf((*answer)["stdout"])},
                   {"stderr", isolation::BytesOf((*answer)["stderr"])},
                   {"duration_ms", answer->value("duration_ms", 0.0)},
                   {"timed_out", answer->value("timed_out", false)},
                   {"stdout_truncated", answer->value("stdout_truncated", false)},
                   {"stderr_truncated", answer->value("stderr_truncated", false)}};
    metrics_.CountSandboxExec(s->queue);
    const Timestamp now = clock_.Now();
    std::string command = request.argv[0];
    for (size_t i = 1; i < request.argv.size() && command.size() < 200; ++i) command += " " + request.argv[i];
    if (command.size() > 200) command = command.substr(0, 200) + "...";
    const store::ClusterEvent event{now, "sandbox_exec", "sandbox/" + SandboxName(s->id), "info",
                                    command + " -> exit " + std::to_string(result["exit_code"].get<int>()) +
                                        (result["timed_out"].get<bool>() ? " (timed out)" : "") + " in " +
                                        std::to_string(std::llround(result["duration_ms"].get<double>())) + " ms"};
    const store::AuditRecord audit{now, actor, "POST /v1/sandboxes/{id}/exec", "sandbox/" + SandboxName(s->id), "200"};
    store_.Write(
        [event, audit](store::Transaction& t) -> Status {
          if (Status st = t.AppendClusterEvent(event); !st) return st;
          return t.AppendAudit(audit);
        },
        [result = std::move(result), done](Status st) {
          if (!st.ok()) spdlog::warn("sandbox exec event not recorded: {}", st.error().message);
          done(result);
        });
  });
}

void SandboxManager::PutFile(int64_t id, std::string path, std::string data, std::string actor,
                             std::function<void(Result<json>)> done) {
  if (static_cast<int64_t>(data.size()) > config_.sandboxes.max_file_bytes) {
    done(Error{ErrorKind::kTooLarge, "too_large",
               "the file holds " + std::to_string(data.size()) + " bytes; sandboxes.max_file_bytes is " +
                   std::to_string(config_.sandboxes.max_file_bytes),
               "body"});
    return;
  }
  auto acquired = Acquire(id);
  if (!acquired.ok()) {
    done(acquired.error());
    return;
  }
  std::shared_ptr<Sandbox> s = std::move(acquired).value();
  Spawn([this, s, path = std::move(path), data = std::move(data), actor = std::move(actor), done = std::move(done)] {
    auto answer = CallInstance(s, {{"op", "put"}, {"path", path}, {"data", isolation::Bytes(data)}}, 30'000, false);
    if (!answer.ok()) {
      done(answer.error());
      return;
    }
    const store::AuditRecord audit{clock_.Now(), actor, "PUT /v1/sandboxes/{id}/files/{path}",
                                   "sandbox/" + SandboxName(s->id) + "/" + path, "200"};
    json result = {{"path", path}, {"size", answer->value("size", int64_t{0})}};
    store_.Write([audit](store::Transaction& t) { return t.AppendAudit(audit); },
                 [result, done](Status) { done(result); });
  });
}

void SandboxManager::GetFile(int64_t id, std::string path, std::function<void(Result<std::string>)> done) {
  auto acquired = Acquire(id);
  if (!acquired.ok()) {
    done(acquired.error());
    return;
  }
  std::shared_ptr<Sandbox> s = std::move(acquired).value();
  Spawn([this, s, path = std::move(path), done = std::move(done)] {
    auto answer =
        CallInstance(s, {{"op", "get"}, {"path", path}, {"max", config_.sandboxes.max_file_bytes}}, 30'000, false);
    if (!answer.ok()) {
      done(answer.error());
      return;
    }
    done(isolation::BytesOf((*answer)["data"]));
  });
}

void SandboxManager::Delete(int64_t id, std::string actor, std::function<void(Result<json>)> done) {
  std::shared_ptr<Sandbox> s;
  {
    std::lock_guard lock(mu_);
    auto it = active_.find(id);
    if (it != active_.end() && !it->second->ending) {
      s = it->second;
      s->ending = true;
      active_.erase(it);
    }
  }
  if (!s) {
    auto ended = Get(id);
    if (!ended.ok()) {
      done(ended.error());
      return;
    }
    done(Error::Conflict("not_running",
                         "sandbox " + SandboxName(id) + " has ended already (" + ended->value("state", "") + ")"));
    return;
  }
  Spawn([this, s, actor = std::move(actor), done = std::move(done)] {
    EndSandbox(s, "deleted", "deleted by " + actor, actor, done);
  });
}

Result<std::shared_ptr<SandboxManager::Sandbox>> SandboxManager::Acquire(int64_t id) {
  std::lock_guard lock(mu_);
  auto it = active_.find(id);
  if (it == active_.end() || it->second->ending) {
    return Error::Conflict("not_running", "sandbox " + SandboxName(id) + " is not running");
  }
  ++it->second->busy;
  return it->second;
}

Result<json> SandboxManager::CallInstance(const std::shared_ptr<Sandbox>& s, const json& request, int timeout_ms,
                                          bool exec) {
  auto answer = s->instance->Call(request, timeout_ms);
  {
    std::lock_guard lock(mu_);
    --s->busy;
    if (exec) ++s->execs;
    s->last_active = std::chrono::steady_clock::now();
  }
  if (!answer.ok()) {
    EndBroken(s, answer.error().message);
    return answer.error();
  }
  if (answer->contains("error")) return InitError(*answer);
  return answer;
}

void SandboxManager::EndBroken(const std::shared_ptr<Sandbox>& s, const std::string& reason) {
  // The instance is gone (killed from outside, or it stopped answering); a
  // DELETE that killed it ends the sandbox itself.
  {
    std::lock_guard lock(mu_);
    auto it = active_.find(s->id);
    if (it == active_.end() || it->second->ending) return;
    it->second->ending = true;
    active_.erase(it);
  }
  EndSandbox(s, "failed", reason, "system", nullptr);
}

void SandboxManager::EndSandbox(std::shared_ptr<Sandbox> s, std::string state, std::string reason, std::string actor,
                                std::function<void(Result<json>)> done) {
  const bool was_counted = s->instance != nullptr;
  if (s->instance) s->instance->Destroy();
  const Timestamp now = clock_.Now();
  s->state = std::move(state);
  s->end_reason = std::move(reason);
  s->ended_at = std::max(now, s->created_at);
  const double seconds = std::chrono::duration<double>(*s->ended_at - s->created_at).count();
  Timestamp charged_until;
  {
    std::lock_guard lock(mu_);
    charged_until = std::min(s->charged_until, *s->ended_at);
  }
  // The rest of its life after the interim entries (ChargeRunning).
  const store::LedgerEntry entry = ChargeEntry(*s, charged_until, *s->ended_at, /*final=*/true, now);
  const store::SandboxRow row = RowOf(*s);
  const store::ClusterEvent event{
      now, "sandbox_" + s->state, "sandbox/" + SandboxName(s->id), "info",
      s->end_reason + " after " + std::to_string(std::llround(seconds)) + " s, " + std::to_string(s->execs) + " execs"};
  const bool audited = actor != "system";
  const store::AuditRecord audit{now, actor, "DELETE /v1/sandboxes/{id}", "sandbox/" + SandboxName(s->id), "200"};
  auto work = [row, entry, event, audit, audited](store::Transaction& t) -> Status {
    if (Status st = t.PutSandbox(row); !st) return st;
    if (Status st = t.AppendLedger(entry); !st) return st;
    if (Status st = t.AppendClusterEvent(event); !st) return st;
    return audited ? t.AppendAudit(audit) : Status::Ok();
  };
  auto finish = [this, s, quantity = entry.quantity, was_counted, done](Status st) {
    if (!st.ok()) spdlog::error("sandbox {} end not recorded: {}", SandboxName(s->id), st.error().message);
    if (st.ok()) metrics_.CountLedgerEntry("final", ledger::kInstanceSeconds, quantity);
    if (was_counted) control_.CountSandbox(s->queue, s->project, s->user, service::SandboxAmount(s->limits), -1);
    {
      std::lock_guard lock(mu_);
      PublishMetrics();
    }
    slots_cv_.notify_all();
    if (done) done(st.ok() ? Result<json>(ViewOf(*s)) : Result<json>(st.error()));
  };
  if (done) {
    store_.Write(work, finish);
  } else {
    finish(store_.WriteSync(work));
  }
}

store::LedgerEntry SandboxManager::ChargeEntry(const Sandbox& s, Timestamp from, Timestamp to, bool final,
                                               Timestamp now) const {
  // Of no job: `attempt` holds the sandbox's number. Interim intervals
  // begin where the last ended, so their start names them.
  const ledger::Subject subject{"sandbox/" + std::to_string(s.id),
                                0,
                                static_cast<int>(s.id),
                                s.user,
                                s.project,
                                s.queue,
                                s.pool,
                                std::string(model::ToString(model::WorkloadKind::kAgent))};
  const ledger::Charge charge{ledger::kInstanceSeconds, s.image + ":" + s.image_version, s.node,
                              std::chrono::duration<double>(to - from).count()};
  return ledger::MakeEntry(subject, charge, from, to, final, now);
}

void SandboxManager::ChargeRunning() {
  // Interim entries, as for running jobs (docs/ledger.md): usage shows a
  // long-lived sandbox while it lives, and a crash loses at most one
  // interval. REQUIRES: mu_ not held.
  const Timestamp now = clock_.Now();
  std::vector<store::LedgerEntry> entries;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : active_) {
      if (s->ending || now <= s->charged_until) continue;
      entries.push_back(ChargeEntry(*s, s->charged_until, now, /*final=*/false, now));
      s->charged_until = now;  // before the write: an end meanwhile charges only the rest
    }
  }
  if (entries.empty()) return;
  store_.Write(
      [entries](store::Transaction& t) -> Status {
        for (const auto& e : entries) {
          if (Status st = t.AppendLedger(e); !st) return st;
        }
        return Status::Ok();
      },
      [this, entries](Status st) {
        if (!st.ok()) {
          spdlog::error("sandbox interim charges not recorded: {}", st.error().message);
          return;
        }
        for (const auto& e : entries) metrics_.CountLedgerEntry("interim", e.metric, e.quantity);
      });
}

void SandboxManager::ReaperLoop() {
  std::unique_lock lock(mu_);
  auto last_charge = std::chrono::steady_clock::now();
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_charge >= std::chrono::seconds(config_.store.accounting_interval_seconds)) {
      last_charge = now;
      lock.unlock();
      ChargeRunning();
      lock.lock();
    }
    std::vector<std::shared_ptr<Sandbox>> idle;
    for (auto it = active_.begin(); it != active_.end();) {
      Sandbox& s = *it->second;
      if (!s.ending && s.busy == 0 && now - s.last_active >= std::chrono::seconds(s.idle_timeout_seconds)) {
        s.ending = true;
        idle.push_back(it->second);
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    for (auto& s : idle) {
      EndSandbox(s, "reclaimed", "idle for " + std::to_string(s->idle_timeout_seconds) + " s (scale_in_idle_seconds)",
                 "system", nullptr);
    }
    RefillWarm();
    lock.lock();
  }
}

void SandboxManager::RefillWarm() {
  if (!isolation_available_) return;
  // Warm instances serve the default create: the default queue's defaults.
  const model::QueueSpec* queue = config_.cluster.FindQueue(service::DefaultSandboxQueue(config_));
  if (!queue) return;
  const Limits limits = service::SandboxDefaults(config_, *queue);
  std::vector<ImageVersion> to_start;
  std::vector<Started> stale;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, pool] : warm_) {
      // Instances of a version that is no longer current are let go.
      const std::string name = key.substr(0, key.find(':'));
      auto stack = image_stack_.find(name);
      const bool current =
          stack != image_stack_.end() && !stack->second.empty() && ImageKey(name, stack->second.back()) == key;
      const int target = current ? warm_target_[name] : 0;
      while (static_cast<int>(pool.size()) > target) {
        stale.push_back(std::move(pool.back()));
        pool.pop_back();
      }
    }
    for (const auto& [name, target] : warm_target_) {
      if (target <= 0) continue;
      auto resolved = ResolveImage(name);
      if (!resolved.ok()) continue;
      const std::string key = ImageKey(name, resolved->version);
      const int missing = target - static_cast<int>(warm_[key].size()) - warm_starting_[key];
      // A few per pass: a large pool fills over a few seconds without
      // holding up the reaper.
      for (int i = 0; i < std::min(missing, 16); ++i) to_start.push_back(*resolved);
      warm_starting_[key] += std::min(std::max(missing, 0), 16);
    }
  }
  for (auto& w : stale) w.instance->Destroy();
  for (const ImageVersion& image : to_start) {
    auto started = StartInstance(image, queue->name, limits);
    std::lock_guard lock(mu_);
    const std::string key = ImageKey(image.name, image.version);
    --warm_starting_[key];
    if (!started.ok()) {
      spdlog::warn("warm sandbox of {} failed to start: {}", key, started.error().message);
      continue;
    }
    warm_[key].push_back(std::move(started).value());
    // With each instance, not after the loop: GET /v1/images counts it
    // now, and /metrics must not lag behind it.
    PublishMetrics();
  }
  std::lock_guard lock(mu_);
  PublishMetrics();  // the stale ones destroyed, and when nothing started
}

void SandboxManager::PublishMetrics() {
  std::map<std::string, int> active, warm;
  for (const auto& [name, versions] : images_) active[name] = warm[name] = 0;
  for (const auto& [id, s] : active_) ++active[s->image];
  for (const auto& [key, pool] : warm_) warm[key.substr(0, key.find(':'))] += static_cast<int>(pool.size());
  for (const auto& [image, n] : active) metrics_.SetSandboxes("active", image, n);
  for (const auto& [image, n] : warm) metrics_.SetSandboxes("warm", image, n);
}

json SandboxManager::ImageView(const std::string& name) const {
  json versions = json::array();
  auto it = images_.find(name);
  if (it != images_.end()) {
    for (const auto& [version, v] : it->second) {
      json entry = ImageSpecJson(v.rootfs, v.binds);
      entry["version"] = version;
      entry["created_at"] = FormatRfc3339(v.created_at);
      entry["created_by"] = v.created_by;
      versions.push_back(entry);
    }
  }
  auto stack = image_stack_.find(name);
  const std::string current = stack != image_stack_.end() && !stack->second.empty() ? stack->second.back() : "";
  int ready = 0;
  for (const auto& [key, pool] : warm_) {
    if (key.substr(0, key.find(':')) == name) ready += static_cast<int>(pool.size());
  }
  auto target = warm_target_.find(name);
  return {{"name", name},
          {"current_version", current},
          {"previous_versions", stack != image_stack_.end() && stack->second.size() > 1
                                    ? json(std::vector<std::string>(stack->second.begin(), stack->second.end() - 1))
                                    : json::array()},
          {"versions", versions},
          {"warm", target == warm_target_.end() ? 0 : target->second},
          {"warm_ready", ready}};
}

json SandboxManager::ListImages() const {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (const auto& [name, versions] : images_) out.push_back(ImageView(name));
  return out;
}

void SandboxManager::AddImage(config::ImageSpec image, std::string actor, std::function<void(Result<json>)> done) {
  {
    std::lock_guard lock(mu_);
    auto it = images_.find(image.name);
    if (it != images_.end() && it->second.count(image.version)) {
      done(Error::Conflict("image_exists", "image " + ImageKey(image.name, image.version) +
                                               " exists; versions are immutable: register a new version"));
      return;
    }
  }
  if (!image.rootfs.empty()) {
    struct stat st {};
    if (::stat(image.rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      done(Error::Unprocessable("invalid_value",
                                "rootfs '" + image.rootfs + "' is not a directory on the daemon's host", "rootfs"));
      return;
    }
  }
  const Timestamp now = clock_.Now();
  ImageVersion v;
  v.name = image.name;
  v.version = image.version;
  v.rootfs = image.rootfs;
  v.binds = SplitBinds(image.binds);
  v.created_at = now;
  v.created_by = actor;
  const store::ImageVersionRow row{v.name, v.version, ImageSpecJson(v.rootfs, v.binds).dump(), actor, now};
  const store::AuditRecord audit{now, actor, "POST /v1/images", "image/" + ImageKey(v.name, v.version), "201"};
  const int warm = image.warm;
  store_.Write(
      [row, audit](store::Transaction& t) -> Status {
        if (Status st = t.PutImageVersion(row); !st) return st;
        if (Status st = t.PushImageCurrent(row.name, row.version, row.created_at); !st) return st;
        return t.AppendAudit(audit);
      },
      [this, v, warm, done](Status st) {
        if (!st.ok()) {
          done(st.error());
          return;
        }
        std::lock_guard lock(mu_);
        images_[v.name][v.version] = v;
        image_stack_[v.name].push_back(v.version);
        warm_target_[v.name] = warm;
        done(ImageView(v.name));
      });
}

void SandboxManager::RollbackImage(std::string name, std::string actor, std::function<void(Result<json>)> done) {
  {
    std::lock_guard lock(mu_);
    auto stack = image_stack_.find(name);
    if (!images_.count(name)) {
      done(Error::NotFound("no image '" + name + "'"));
      return;
    }
    if (stack == image_stack_.end() || stack->second.size() < 2) {
      done(Error::Conflict("no_previous_version", "image '" + name + "' has no earlier version to roll back to"));
      return;
    }
  }
  const store::AuditRecord audit{clock_.Now(), actor, "POST /v1/images/{name}/rollback", "image/" + name, "200"};
  store_.Write(
      [name, audit](store::Transaction& t) -> Status {
        if (Status st = t.PopImageCurrent(name); !st) return st;
        return t.AppendAudit(audit);
      },
      [this, name, done](Status st) {
        if (!st.ok()) {
          done(st.error());
          return;
        }
        std::lock_guard lock(mu_);
        auto& stack = image_stack_[name];
        if (stack.size() > 1) stack.pop_back();
        done(ImageView(name));
      });
}

}  // namespace unisched::daemon
