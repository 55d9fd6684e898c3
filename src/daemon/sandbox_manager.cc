// SandboxManager: see sandbox_manager.h and docs/sandboxes.md. Here: start
// and stop, and the verbs that create, show and end sandboxes and register
// and roll back images, coordinating the parts.

#include "daemon/sandbox_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "daemon/sandbox_metering.h"
#include "daemon/sandbox_views.h"
#include "unisched/service/admission.h"

namespace unisched::daemon {

using nlohmann::json;

SandboxManager::SandboxManager(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics,
                               const Clock& clock, service::ControlPlane& control, std::string state_dir,
                               std::string init_path)
    : live_(live),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      control_(control),
      instances_(live.Current(), state_dir + "/sandboxes", std::move(init_path)) {}

SandboxManager::~SandboxManager() {
  Stop();
}

Status SandboxManager::Start() {
  instances_.Prepare();

  // Images: the host profile, then the config's; a version new to the store
  // becomes its image's current one (an API rollback survives a restart).
  const std::vector<config::ImageSpec> configured = ConfiguredImages(current_config());
  if (Status written = ImageCatalog::RegisterConfigured(store_, configured, clock_.Now()); !written) return written;
  {
    std::lock_guard lock(mu_);
    images_.Load(store_);
    for (const auto& image : configured) warm_.RaiseTarget(image.name, image.warm);
    sandboxes_.ResumeIds(store_.MaxSandboxId());
    PublishMetrics();  // every image's series from the start, at 0
  }

  // Sandboxes of a previous run: their inits ended with that daemon (the
  // control socket closed); what may remain is killed and removed, and each
  // is charged up to now, an upper bound (docs/sandboxes.md).
  for (const auto& row : store_.ListSandboxes(/*active_only=*/true, 1'000'000)) {
    std::optional<StoredSandbox> lost = SandboxOfRecord(row);
    if (!lost) continue;
    std::shared_ptr<Sandbox> s = lost->sandbox;
    // Charged up to its last interim entry; the final one takes the rest.
    s->charged_until = store_.LoadLedgerCharged(0, static_cast<int>(row.id)).until.value_or(row.created_at);
    instances_.RemoveLost(s->instance_name, lost->work_dir);
    EndSandbox(s, "lost", "the daemon that ran it stopped", "system", nullptr);
  }
  instances_.RemoveLeftovers();
  reaper_ = std::thread([this] { ReaperLoop(); });
  return Status::Ok();
}

void SandboxManager::Stop() {
  std::vector<std::shared_ptr<Sandbox>> ending;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    ending = sandboxes_.TakeAll();
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
  for (auto& w : warm_.TakeAll()) w.instance->Destroy();
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

void SandboxManager::Create(CreateRequest request, std::string actor, std::function<void(Result<json>)> done) {
  if (!instances_.available()) {
    done(Error::Unavailable("sandboxes need the daemon to run as root (namespaces, cgroups, a uid per instance)"));
    return;
  }
  // The job service admitted the queue, pool and limits (router, quotas,
  // budgets); what is left to check is the manager's own: the image and the
  // idle timeout. A bad request changes nothing.
  const model::QueueSpec* queue = current_config().cluster.FindQueue(request.queue);
  const model::PoolSpec* pool = current_config().cluster.FindPool(request.pool);
  if (!queue || !pool || pool->nodes.empty()) {
    done(Error::Internal("sandbox admitted to queue '" + request.queue + "' on pool '" + request.pool +
                         "', which this config does not have"));
    return;
  }
  const int64_t queue_idle =
      queue->policy.scale_in_idle_seconds.value_or(current_config().sandboxes.default_idle_seconds);
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
    auto resolved = images_.Resolve(request.image.empty() ? current_config().sandboxes.default_image : request.image);
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
    if (Status slot = AwaitSlot(s, may_wait, started_at); !slot.ok()) {
      done(slot.error());
      return;
    }
    auto unreserve = [this, s] {
      std::lock_guard lock(mu_);
      sandboxes_.Unadmit(s);
      slots_cv_.notify_all();
    };
    // A warm instance of the image started for this queue, its caps set to
    // these limits; else a cold start.
    std::optional<StartedInstance> instance;
    {
      std::lock_guard lock(mu_);
      instance = warm_.Take(image, s->queue);
    }
    if (instance && !(instance->limits == s->limits)) {
      if (Status set = instance->instance->SetLimits(instances_.Caps(s->limits)); !set.ok()) {
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
      auto started = instances_.Start(image, s->queue, s->limits);
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
      s->id = sandboxes_.NewId();
    }
    const store::SandboxRow row = SandboxRecord(*s);
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
          bool stopped = false;
          {
            std::lock_guard lock(mu_);
            stopped = stopping_;
            if (!stopped) {
              sandboxes_.Activate(s);
              PublishMetrics();
            }
          }
          control_.CountSandbox(s->queue, s->project, s->user, service::SandboxAmount(s->limits), +1);
          if (stopped) {
            // Stop took the running sandboxes before this one's record was
            // committed: it ends as they did, and its caller learns so.
            unreserve();
            EndSandbox(s, "stopped", "the daemon stopped", "system", done);
            return;
          }
          metrics_.ObserveSandboxCreate(s->warm_start ? "warm" : "cold", seconds);
          done(SandboxView(*s));
        });
  });
}

Result<json> SandboxManager::Get(int64_t id) const {
  {
    std::lock_guard lock(mu_);
    if (auto s = sandboxes_.Find(id)) return SandboxView(*s);
  }
  auto row = store_.GetSandbox(id);
  if (!row) return Error::NotFound("no sandbox " + SandboxName(id));
  return StoredSandboxView(*row);
}

json SandboxManager::List(bool active_only) const {
  json out = json::array();
  if (active_only) {
    std::lock_guard lock(mu_);
    const SandboxRegistry::Running& running = sandboxes_.running();
    for (auto it = running.rbegin(); it != running.rend(); ++it) out.push_back(SandboxView(*it->second));
    return out;
  }
  // Newest 1000 as stored; a running one's row is as of its creation, so
  // its live view (execs so far) replaces it.
  std::lock_guard lock(mu_);
  for (const auto& row : store_.ListSandboxes(false, 1000)) {
    if (auto s = sandboxes_.Find(row.id)) {
      out.push_back(SandboxView(*s));
    } else if (auto view = StoredSandboxView(row); view.ok()) {
      out.push_back(*view);
    }
  }
  return out;
}

void SandboxManager::Delete(int64_t id, std::string actor, std::function<void(Result<json>)> done) {
  std::shared_ptr<Sandbox> s;
  {
    std::lock_guard lock(mu_);
    s = sandboxes_.TakeToEnd(id);
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
  const store::LedgerEntry entry = SandboxChargeEntry(*s, charged_until, *s->ended_at, /*final=*/true, now);
  const store::SandboxRow row = SandboxRecord(*s);
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
    if (done) done(st.ok() ? Result<json>(SandboxView(*s)) : Result<json>(st.error()));
  };
  if (done) {
    store_.Write(work, finish);
  } else {
    finish(store_.WriteSync(work));
  }
}

void SandboxManager::PublishMetrics() {
  std::map<std::string, int> active, warm;
  for (const std::string& name : images_.Names()) {
    active[name] = 0;
    warm[name] = warm_.Ready(name);
  }
  for (const auto& [id, s] : sandboxes_.running()) ++active[s->image];
  for (const auto& [image, n] : active) metrics_.SetSandboxes("active", image, n);
  for (const auto& [image, n] : warm) metrics_.SetSandboxes("warm", image, n);
}

json SandboxManager::ListImages() const {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (const std::string& name : images_.Names()) out.push_back(ImageView(name, images_, warm_));
  return out;
}

void SandboxManager::AddImage(config::ImageSpec image, std::string actor, std::function<void(Result<json>)> done) {
  {
    std::lock_guard lock(mu_);
    if (Status fresh = images_.CheckNew(image.name, image.version); !fresh) {
      done(fresh.error());
      return;
    }
  }
  if (Status rootfs = CheckRootfs(image.rootfs); !rootfs) {
    done(rootfs.error());
    return;
  }
  const Timestamp now = clock_.Now();
  const ImageVersion v = ImageCatalog::VersionOf(image, actor, now);
  const store::ImageVersionRow row = ImageCatalog::RowOf(v);
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
        images_.Push(v);
        warm_.SetTarget(v.name, warm);
        done(ImageView(v.name, images_, warm_));
      });
}

void SandboxManager::RollbackImage(std::string name, std::string actor, std::function<void(Result<json>)> done) {
  {
    std::lock_guard lock(mu_);
    if (Status possible = images_.CheckRollback(name); !possible) {
      done(possible.error());
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
        images_.Pop(name);
        done(ImageView(name, images_, warm_));
      });
}

}  // namespace unisched::daemon
