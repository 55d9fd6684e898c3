#include "daemon/housekeeper.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "unisched/api/reconcile.h"
#include "unisched/ledger/ledger.h"

namespace unisched::daemon {

std::optional<uint64_t> DiskUsageBytes(const std::string& dir) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  uint64_t bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  std::set<std::pair<dev_t, ino_t>> linked;  // files with several names, counted once
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) return std::nullopt;
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;  // a directory vanished under us: what was counted stands
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !linked.insert({st.st_dev, st.st_ino}).second) continue;
    bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

Housekeeper::Housekeeper(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics,
                         const Clock& clock, std::string work_root)
    : live_(live), store_(store), metrics_(metrics), clock_(clock), work_root_(std::move(work_root)) {}

Housekeeper::~Housekeeper() {
  Stop();
}

void Housekeeper::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Housekeeper::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

namespace {

// The first multiple of `every` after `now` (sampling on a fixed grid makes a
// sample's key the same whenever it is taken, so one taken twice, e.g. just
// before and after a restart, is charged once).
Timestamp NextGridPoint(Timestamp now, std::chrono::seconds every) {
  const int64_t step = every.count() * 1000;
  return FromUnixMillis((ToUnixMillis(now) / step + 1) * step);
}

}  // namespace

void Housekeeper::Loop() {
  const auto sample_every = std::chrono::seconds(current_config().store.storage_sample_interval_seconds);
  const auto reconcile_every = std::chrono::seconds(current_config().store.reconcile_interval_seconds);
  const Timestamp start = clock_.Now();
  constexpr std::chrono::seconds kMinute{60};
  std::optional<Timestamp> next_sample, next_reconcile;
  if (sample_every.count() > 0) next_sample = NextGridPoint(start, sample_every);
  // The first reconciliation at start: the gauges it sets then say
  // something from the first scrape on, not only an hour later.
  if (reconcile_every.count() > 0) next_reconcile = start;
  Timestamp next_minute = NextGridPoint(start, kMinute);
  while (true) {
    Timestamp due = next_minute;
    if (next_sample) due = std::min(due, *next_sample);
    if (next_reconcile) due = std::min(due, *next_reconcile);
    {
      std::unique_lock lock(mu_);
      // The wait is on the system clock: the daemon's Clock is that clock
      // in production, and tests call SampleStorage/Reconcile directly.
      wake_.wait_until(lock, std::chrono::system_clock::time_point(due.time_since_epoch()),
                       [this] { return stopping_; });
      if (stopping_) return;
    }
    const Timestamp now = clock_.Now();
    try {
      if (next_sample && now >= *next_sample) {
        SampleStorage(now);
        next_sample = NextGridPoint(now, sample_every);
      }
      if (next_reconcile && now >= *next_reconcile) {
        Reconcile(now);
        next_reconcile = now + reconcile_every;
      }
      if (now >= next_minute) {
        next_minute = NextGridPoint(now, kMinute);
        if (on_minute_) on_minute_(now);
        PruneAudit(now);
      }
    } catch (const std::exception& e) {
      // A failed read of the store: try again at the next due time.
      spdlog::error("housekeeping: {}", e.what());
      if (next_sample && now >= *next_sample) next_sample = NextGridPoint(now, sample_every);
      if (next_reconcile && now >= *next_reconcile) next_reconcile = now + reconcile_every;
      if (now >= next_minute) next_minute = NextGridPoint(now, kMinute);
    }
  }
}

int64_t Housekeeper::PruneAudit(Timestamp now) {
  const Timestamp cutoff = now - std::chrono::hours(24) * current_config().store.audit_retention_days;
  const int64_t max_rows = current_config().store.audit_max_rows;
  int64_t pruned = 0;
  const Status s = store_.WriteSync([&](store::Transaction& t) -> Status {
    auto n = t.PruneAudit(cutoff, max_rows);
    if (!n.ok()) return n.error();
    pruned = *n;
    return Status::Ok();
  });
  if (!s.ok()) {
    spdlog::warn("audit pruning failed: {}", s.error().message);
    return 0;
  }
  if (pruned > 0) spdlog::info("audit: removed {} records past retention or the size bound", pruned);
  return pruned;
}

int Housekeeper::SampleStorage(Timestamp now) {
  const int64_t every_ms = int64_t{current_config().store.storage_sample_interval_seconds} * 1000;
  if (every_ms <= 0) return 0;
  // The interval that ended last: [start, end). What is on disk now stands
  // for the whole of it.
  const Timestamp end = FromUnixMillis(ToUnixMillis(now) / every_ms * every_ms);
  const Timestamp start = end - std::chrono::milliseconds(every_ms);
  const std::string start_ms = std::to_string(ToUnixMillis(start));
  const double seconds = static_cast<double>(every_ms) / 1000.0;
  std::vector<store::LedgerEntry> entries;
  auto charge = [&](const ledger::Subject& subject, const std::string& detail, const std::string& node,
                    const std::string& tier, uint64_t bytes) -> store::LedgerEntry& {
    store::LedgerEntry& e = entries.emplace_back(ledger::MakeEntry(
        subject, {ledger::kStorageGbHours, detail, node, GbHours(bytes, seconds)}, start, end, false, now));
    e.tier = tier;
    return e;
  };
  auto measure = [this](const std::string& dir) -> std::optional<uint64_t> {
    auto bytes = DiskUsageBytes(dir);
    if (!bytes && unreadable_paths_.insert(dir).second) {
      spdlog::warn("storage sampling: cannot read {}; it is not charged (absent, not zero)", dir);
    }
    return bytes;
  };

  // Projects' configured storage: charged to the project, no job (job 0).
  for (const auto& project : current_config().projects) {
    for (const auto& dir : project.storage_paths) {
      auto bytes = measure(dir);
      if (!bytes) continue;
      ledger::Subject subject;
      subject.project = project.name;
      store::LedgerEntry& e = charge(subject, dir, "", config::kHotTier, *bytes);
      // The key of before MakeEntry, kept: a daemon upgraded within an
      // interval must not charge that interval's sample twice.
      e.key = "storage/" + project.name + "/" + dir + "/" + start_ms;
    }
  }
  // Projects' directories on shared file systems (storage.shared with
  // project_dirs), where this machine sees them: charged to the project.
  for (const auto& fs : current_config().storage.shared) {
    if (!fs.project_dirs || !fs.charge_storage) continue;
    for (const auto& project : current_config().projects) {
      const std::string dir = fs.path + "/" + project.name;
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec)) continue;  // none made yet, or not mounted here
      auto bytes = measure(dir);
      if (!bytes) continue;
      ledger::Subject subject;
      subject.project = project.name;
      store::LedgerEntry& e = charge(subject, "shared:" + fs.name, "", fs.tier, *bytes);
      e.key = "storage/" + project.name + "/shared:" + fs.name + "/" + start_ms;
    }
  }
  // What lifecycle rules archived to object stores, in the stores' tiers
  // (cold by default): charged to the project, as its shared directory was.
  if (measure_archives_) {
    for (const ArchivedBytes& archived : measure_archives_(now)) {
      ledger::Subject subject;
      subject.project = archived.project;
      store::LedgerEntry& e = charge(subject, archived.where, "", archived.tier, archived.bytes);
      e.key = "storage/" + archived.project + "/" + archived.where + "/" + start_ms;
    }
  }
  // Running jobs' work directories: charged to the job's current attempt.
  store::JobFilter filter;
  filter.state = model::JobState::kRunning;
  filter.limit = 1000;
  while (true) {
    store::JobPage page = store_.ListJobs(filter);
    for (const auto& job : page.jobs) {
      const model::Attempt* attempt = job.CurrentAttempt();
      if (!attempt) continue;
      // A work directory that does not exist (yet) holds nothing to charge.
      std::error_code ec;
      const std::string dir = work_root_ + "/" + std::to_string(job.id);
      if (!std::filesystem::exists(dir, ec)) continue;
      auto bytes = measure(dir);
      if (!bytes) continue;
      const std::string node = attempt->allocation.empty() ? std::string() : attempt->allocation.front().node;
      charge(ledger::JobSubject(job, attempt->number), "workdir", node, config::kScratchTier, *bytes);
    }
    if (!page.next_cursor) break;
    filter.cursor = page.next_cursor;
  }
  if (entries.empty()) return 0;
  const Status s = store_.WriteSync([&entries](store::Transaction& t) {
    for (const auto& e : entries) {
      if (Status appended = t.AppendLedger(e); !appended) return appended;
    }
    return Status::Ok();
  });
  if (!s) {
    spdlog::error("storage sampling: cannot write {} ledger entries: {}", entries.size(), s.error().message);
    return 0;
  }
  for (const auto& e : entries) metrics_.CountLedgerEntry("sample", e.metric, e.quantity);
  return static_cast<int>(entries.size());
}

void Housekeeper::Reconcile(Timestamp now) {
  const ledger::Reconciliation report = api::ReconcileLedger(store_, current_config().cluster);
  metrics_.SetLedgerReconciliation(report.missing, report.duplicated, report.mismatched, report.unverifiable_attempts,
                                   static_cast<double>(ToUnixMillis(now)) / 1000.0);
  const int64_t total = report.missing + report.duplicated + report.mismatched;
  if (on_reconciled_) on_reconciled_(total);
  if (total == 0) return;
  // Each discrepancy is raised once as a warning event on its job; a run
  // that finds it again adds nothing, so the events say when it appeared.
  std::vector<std::pair<model::JobId, store::JobEvent>> events;
  for (const auto& d : report.details) {
    if (!reported_.insert({d.job, d.attempt, d.kind, d.metric, d.detail, d.node}).second) continue;
    std::string message = "ledger reconciliation: ";
    message += d.kind;
    if (d.kind == "duplicated") {
      message += " entries of attempt " + std::to_string(d.attempt) + ": " +
                 std::to_string(static_cast<int64_t>(d.recorded)) + " rows repeat another";
    } else {
      message += " " + d.metric;
      if (!d.detail.empty()) message += " (" + d.detail + ")";
      message += " of attempt " + std::to_string(d.attempt) + " on " + d.node + ": expected " +
                 std::to_string(d.expected) + ", recorded " + std::to_string(d.recorded);
    }
    events.push_back({d.job, store::JobEvent{now, "ledger_discrepancy", std::move(message)}});
  }
  spdlog::warn(
      "ledger reconciliation: {} missing, {} duplicated, {} mismatched over {} attempts ({} new); "
      "GET /v1/usage/reconcile lists them",
      report.missing, report.duplicated, report.mismatched, report.attempts_checked, events.size());
  if (events.empty()) return;
  const Status s = store_.WriteSync([&events](store::Transaction& t) {
    for (const auto& [job, event] : events) {
      if (Status appended = t.AppendEvent(job, event); !appended) return appended;
    }
    return Status::Ok();
  });
  if (!s) spdlog::error("ledger reconciliation: cannot record events: {}", s.error().message);
}

}  // namespace unisched::daemon
