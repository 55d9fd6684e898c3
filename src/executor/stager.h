#pragma once
// Moving a job's data (docs/data.md; ADR 0011): its stage-in from object
// stores into its work directory before it starts, its stage-out from
// there after it ends. Runs as the executor (root on a real node), so every
// path in the work directory, which the job's own account controls, is
// walked one name at a time without following a symbolic link: a link the
// job left there cannot send a write or a read anywhere else.
//
// Objects come through a node-local cache (StageCache): a data set that
// several jobs on the node stage is fetched once.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "unisched/common/status.h"
#include "unisched/executor/executor.h"

namespace unisched::executor {

// Who gets what a stage-in writes (chown; none when the executor is not
// root or the job runs as the executor's own account).
struct StageOwner {
  bool chown = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Bytes of an attempt's staging, updated by transfer threads, read by
// Executor::Staging.
struct StageCounters {
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> total{0};
  // Set by a cancel: the transfers under way stop, no new one starts, and
  // the stage fails with code s3_cancelled.
  std::atomic<bool> cancelled{false};
};

// Objects fetched on this node, by (endpoint, bucket, key, ETag), in a
// directory only root reads, least recently used removed above `cap_bytes`.
// A hit is a hard link into the job's work directory (a copy across file
// systems), so the job reads it but cannot change the cached copy.
class StageCache {
 public:
  // `dir` is made 0700 at first use (its parent must exist); cap 0 keeps
  // nothing after each stage.
  StageCache(std::string dir, int64_t cap_bytes);
  const std::string& dir() const { return dir_; }
  // The file holding that object ("" when the cache is unusable).
  std::string PathOf(const std::string& endpoint, const std::string& bucket, const std::string& key,
                     const std::string& etag) const;
  // Whether `path` holds the object (its mtime then refreshed: recently used).
  bool Hit(const std::string& path, int64_t size) const;
  // Removes the least recently used files until the cache is under its cap.
  void Trim();

 private:
  // Whether the directory exists (made now when missing; at its first use
  // by this process rid of the partial downloads of processes that are gone).
  bool Ready() const;
  std::string dir_;
  int64_t cap_bytes_;
  mutable std::atomic<bool> ready_{false};
  mutable std::mutex trim_mu_;  // Trim, and Ready's first use
};

struct StageTotals {
  int64_t network_bytes = 0;  // fetched or sent over the network (cache hits excluded)
  int64_t files = 0;
};

// Stage-in of `spec` into `work_dir` (made when missing, 0700, for `owner`).
// Errors name the object or path: "s3://STORE/bucket/key: <why>".
Result<StageTotals> StageIn(const LaunchSpec& spec, const std::string& work_dir, const StageOwner& owner,
                            StageCache& cache, StageCounters& counters);

// The regular file `relative` below the directory `root`, opened for
// reading with every name walked without following a symbolic link (the
// lifecycle's archiving reads users' trees as root this way too); its
// directory's descriptor too, for an unlinkat of `name` afterwards.
struct OpenedBeneath {
  int dir_fd = -1;
  int file_fd = -1;
  std::string name;
  void Close();
};
Result<OpenedBeneath> OpenFileBeneath(const std::string& root, const std::string& relative);

// Stage-out of `spec`'s stage_out entries whose `when` matches `succeeded`.
Result<StageTotals> StageOut(const LaunchSpec& spec, const std::string& work_dir, bool succeeded,
                             StageCounters& counters);

}  // namespace unisched::executor
