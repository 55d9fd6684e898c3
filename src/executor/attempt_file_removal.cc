// Removing attempts' files once nothing needs them: the control files as
// soon as the caller has recorded the result (Release, and ReleaseAllExcept
// after a restart), everything at retention (Forget). Files a live
// supervisor still holds are never removed. See local_executor.h.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "executor/attempt_claim.h"
#include "executor/local_executor.h"

namespace unisched::executor {

namespace {

// The job id a directory under runs_dir or work_root is named by; nullopt
// for anything else there (".expired-<id>", a stray file). 18 digits stay
// below INT64_MAX, so stoll cannot throw.
std::optional<model::JobId> JobIdOfDirName(const std::string& name) {
  if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(name);
}

}  // namespace

bool LocalExecutor::AnyAttemptTracked(model::JobId job_id) const {
  auto it = attempts_.lower_bound(Key{job_id, 0, 0});
  return it != attempts_.end() && it->first.job_id == job_id;
}

// Every task directory of the job (runs and logs), as (attempt, task).
std::set<std::pair<int, int>> LocalExecutor::TaskDirs(model::JobId job_id) const {
  std::set<std::pair<int, int>> found;
  std::error_code ec;
  for (const std::string& dir : {JobRunsDir(job_id), JobLogsDir(job_id)}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (auto task = ParseTaskDirName(entry.path().filename().string())) found.insert(*task);
    }
  }
  return found;
}

void LocalExecutor::Forget(model::JobId job_id, int attempt) {
  // Every task of the attempt (attempt 0: of every attempt), wherever it left files.
  for (const auto& [a, task] : TaskDirs(job_id)) {
    if (attempt <= 0 || a == attempt) ForgetTask(Key{job_id, a, task});
  }
}

void LocalExecutor::ForgetTask(const Key& key) {
  const std::string dir = AttemptDir(key);
  bool other_attempt_live = false;
  {
    std::lock_guard lock(mu_);
    // Still running: its files are its state. Retention comes back later.
    if (attempts_.count(key) != 0) return;
    if (const LockState lock = ProbeLock(dir); lock == LockState::kHeld || lock == LockState::kUnknown) return;
    finished_.erase(key);
    // Another attempt of the job that is starting may not have made its
    // directory yet: the job's directories stay until it is done too.
    other_attempt_live = AnyAttemptTracked(key.job_id);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // best effort: retention retries on its next pass
  if (SeparateLogs()) std::filesystem::remove_all(LogsDir(key.job_id, key.attempt, key.task), ec);
  if (other_attempt_live) return;
  bool job_gone = true;
  for (const std::string& job_dir : {JobRunsDir(key.job_id), JobLogsDir(key.job_id)}) {
    if (!std::filesystem::exists(job_dir, ec)) continue;
    if (std::filesystem::is_empty(job_dir, ec) && !ec) {
      std::filesystem::remove(job_dir, ec);
    } else {
      job_gone = false;
    }
  }
  if (job_gone) std::filesystem::remove_all(WorkDir(key.job_id), ec);
}

// Only the control files go (and the directories they leave empty):
// where output shares the attempt directory, it stays until Forget. An
// attempt still running, or not yet delivered, is left alone.
void LocalExecutor::Release(model::JobId job_id, int attempt) {
  std::vector<Key> done;
  {
    std::lock_guard lock(mu_);
    for (auto it = finished_.lower_bound(Key{job_id, attempt, 0});
         it != finished_.end() && it->job_id == job_id && it->attempt == attempt; ++it) {
      if (attempts_.count(*it) == 0) done.push_back(*it);
    }
  }
  for (const Key& key : done) RemoveControlFiles(key);
  // An empty work directory goes as well: a job that wrote nothing there
  // leaves nothing (100,000 `true` jobs left 100,000 directories, an inode
  // and a block each, until retention). rmdir removes only an empty one; a
  // next attempt's supervisor makes it again. Under mu_ with no attempt of
  // the job tracked, since Launch tracks an attempt under mu_ before its
  // supervisor makes the directory and enters it.
  // One that is not empty is kept for executor.work_dir_retention_hours
  // from now: its mtime says when (the job's processes are gone, so nothing
  // else changes its entries until a next attempt), and SweepWorkDirs reads it.
  // The job's TMPDIRs (TmpDirPath) go first when empty: rmdir never
  // follows a link the job's account may have put in their place, and
  // leaves one that holds files with the work directory's retention.
  std::lock_guard lock(mu_);
  if (AnyAttemptTracked(job_id)) return;
  const std::string work = WorkDir(job_id);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(work, ec)) {
    if (IsTmpDirName(entry.path().filename().string())) (void)::rmdir(entry.path().c_str());
  }
  if (::rmdir(work.c_str()) != 0 && (errno == ENOTEMPTY || errno == EEXIST)) {
    (void)::utimensat(AT_FDCWD, work.c_str(), nullptr, 0);
  }
}

bool LocalExecutor::AnyClaim(model::JobId job_id) const {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(JobRunsDir(job_id), ec)) {
    if (ParseTaskDirName(entry.path().filename().string()) && Exists(entry.path().string() + "/" + files::kClaim)) {
      return true;
    }
  }
  return false;
}

// Work directories past their retention are looked for a few times per
// retention period, at most every ten minutes (a sweep reads one directory
// entry per job directory kept). On a thread of its own: removing a large
// tree takes seconds that the watcher would otherwise not spend delivering
// results.
void LocalExecutor::SweepLoop() {
  const auto every = std::clamp<std::chrono::steady_clock::duration>(options_.work_dir_retention / 4,
                                                                     std::chrono::seconds(1), std::chrono::minutes(10));
  std::unique_lock lock(mu_);
  while (!sweep_cv_.wait_for(lock, every, [this] { return stopping_; })) {
    lock.unlock();
    SweepWorkDirs();
    lock.lock();
  }
}

void LocalExecutor::SweepWorkDirs() {
  if (options_.work_dir_retention.count() <= 0) return;
  const auto cutoff = std::filesystem::file_time_type::clock::now() - options_.work_dir_retention;
  std::vector<std::string> expired;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.work_root, ec)) {
    const std::string name = entry.path().filename().string();
    const auto job_id = JobIdOfDirName(name);
    if (!job_id) continue;
    std::error_code time_ec;
    const auto modified = std::filesystem::last_write_time(entry.path(), time_ec);
    if (time_ec || modified > cutoff) continue;
    const std::string trash = options_.work_root + "/.expired-" + name;
    {
      // Under mu_ with no attempt of the job tracked (Launch tracks one
      // before its supervisor makes the directory) and none claimed (one
      // recovered after a restart, or ended but not recorded): renamed
      // away, so a next attempt makes a fresh one while this is removed.
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (AnyAttemptTracked(*job_id) || AnyClaim(*job_id)) continue;
      if (::rename(entry.path().c_str(), trash.c_str()) != 0) continue;
    }
    expired.push_back(trash);
  }
  // Also what a sweep stopped by a crash left renamed.
  for (const auto& entry : std::filesystem::directory_iterator(options_.work_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".expired-", 0) == 0 &&
        std::find(expired.begin(), expired.end(), entry.path().string()) == expired.end()) {
      expired.push_back(entry.path().string());
    }
  }
  for (const std::string& dir : expired) {
    std::error_code remove_ec;
    std::filesystem::remove_all(dir, remove_ec);  // best effort: the next sweep tries again
  }
}

void LocalExecutor::RemoveControlFiles(const Key& key) {
  const std::string dir = AttemptDir(key);
  for (const char* name : {files::kResult, files::kState, files::kClaim, files::kCancel}) {
    (void)::unlink((dir + "/" + name).c_str());  // absent (never written, or released before): fine
  }
  bool gone = ::rmdir(dir.c_str()) == 0 || errno == ENOENT;
  if (!gone && errno == ENOTEMPTY && SeparateLogs()) {
    // Only control files live here, so what is left is the temporary of an
    // atomic write whose writer was killed before its rename (a daemon's
    // cancel file, a supervisor's state): ".<name>.<pid>.<n>.tmp".
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 5 && name.front() == '.' && name.ends_with(".tmp")) (void)::unlink(entry.path().c_str());
    }
    gone = ::rmdir(dir.c_str()) == 0;
  }
  // The job's directory goes with its last attempt (the rmdir fails while
  // another is there); also when this attempt never made its own.
  if (gone) (void)::rmdir(JobRunsDir(key.job_id).c_str());
}

// After a restart: whatever is in runs_dir that the store does not record
// as running had its end committed (or its job is gone), as a Release of
// it would have, had the daemon lived to call it.
void LocalExecutor::ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) {
  std::error_code ec;
  for (const auto& job_entry : std::filesystem::directory_iterator(options_.runs_dir, ec)) {
    const auto job_id = JobIdOfDirName(job_entry.path().filename().string());
    if (!job_id) continue;
    std::vector<Key> found;
    std::error_code job_ec;
    for (const auto& entry : std::filesystem::directory_iterator(job_entry.path(), job_ec)) {
      if (auto task = ParseTaskDirName(entry.path().filename().string())) {
        found.push_back(Key{*job_id, task->first, task->second});
      }
    }
    for (const Key& key : found) {
      if (running.count({key.job_id, key.attempt}) != 0) continue;
      {
        std::lock_guard lock(mu_);
        if (stopping_ || attempts_.count(key) != 0) continue;  // launched by us since: not a leftover
      }
      // A supervisor that still runs it owns the files (and only its end
      // would make them safe to remove): nothing here expects that.
      if (const LockState lock = ProbeLock(AttemptDir(key)); lock == LockState::kHeld || lock == LockState::kUnknown) {
        continue;
      }
      RemoveControlFiles(key);
    }
    if (found.empty()) (void)::rmdir(job_entry.path().c_str());  // a job directory left empty
  }
}

}  // namespace unisched::executor
