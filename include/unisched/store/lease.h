#pragma once
// The store's leader lease: daemon replicas sharing one database
// (PostgreSQL) agree through it which one leads (docs/replicas.md). The lease
// is one row: an epoch, its holder, and when it lapses by the database's
// own clock, so the replicas' clocks need not agree. A replica that takes a
// free or lapsed lease raises the epoch; its renewals keep it.
//
// Fencing: once a replica leads at epoch E it fences its writes
// (FenceWrites): each write batch first reads the lease row in its own
// transaction, locked against change until the batch commits, and runs
// only while the lease is still at E and held by it. A takeover must change
// that row, so it waits for a batch in flight, and every batch after it
// fails: a deposed leader (paused past its lease, then resumed) changes
// nothing. A lapsed lease nobody took is no danger: no other replica wrote
// under a newer epoch, and the leader's next renewal keeps its epoch.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "unisched/common/status.h"

namespace unisched::store {

struct LeaseState {
  int64_t epoch = 0;          // raised by one at each change of holder; 0: never held
  std::string holder;         // the replica that holds or last held it
  bool ours = false;          // the caller holds it now
  int64_t expires_in_ms = 0;  // by the database's clock; <= 0: lapsed
};

class LeaderLease {
 public:
  virtual ~LeaderLease() = default;
  // Takes the lease for `replica` if it is free or lapsed (a new epoch), or
  // renews it if `replica` holds it (the same epoch), for `ttl` from now by
  // the database's clock; otherwise changes nothing. Returns the lease as it
  // is afterwards. Committed before it returns; not through the write queue,
  // so a backlog of writes does not delay a renewal.
  virtual Result<LeaseState> AcquireOrRenewLease(const std::string& replica, std::chrono::milliseconds ttl) = 0;
  // Gives the lease up if `replica` holds it (a clean stop): a standby
  // takes it at its next try instead of waiting for it to lapse.
  virtual Status ReleaseLease(const std::string& replica) = 0;
  // Fences every later write batch by (epoch, replica), as above. A batch
  // that finds the lease changed fails with kUnavailable, code not_leader,
  // and `on_fenced` is called (once, on the writer thread).
  virtual void FenceWrites(int64_t epoch, const std::string& replica, std::function<void()> on_fenced) = 0;

  // The replicas' directory: where `replica` is reached (its advertise
  // URL), so a standby can forward calls to the lease's holder. Like the
  // lease, neither goes through the write queue.
  virtual Status AnnounceReplica(const std::string& replica, const std::string& url) = 0;
  // The URL `replica` announced; "" if it never did.
  virtual Result<std::string> ReplicaUrl(const std::string& replica) = 0;
  // A cluster-wide secret by name (the bootstrap admin token, the replicas'
  // forwarding secret): the stored value, or `proposed` stored now when
  // there is none, so every replica gets the first one's.
  virtual Result<std::string> ClusterSecret(const std::string& name, const std::string& proposed) = 0;
};

}  // namespace unisched::store
