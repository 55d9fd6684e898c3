// Sandbox metering (sandbox_metering.h): the instance_seconds ledger entries of sandboxes.
// Apart from the manager, which decides when to charge.

#include "daemon/sandbox_metering.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "unisched/ledger/ledger.h"
#include "unisched/model/job.h"

namespace unisched::daemon {

store::LedgerEntry SandboxChargeEntry(const Sandbox& s, Timestamp from, Timestamp to, bool final, Timestamp now) {
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

std::vector<store::LedgerEntry> InterimCharges(const SandboxRegistry::Running& running, Timestamp now) {
  // As for running jobs (docs/ledger.md): usage shows a long-lived sandbox
  // while it lives, and a crash loses at most one interval.
  std::vector<store::LedgerEntry> entries;
  for (const auto& [id, s] : running) {
    if (s->ending || now <= s->charged_until) continue;
    entries.push_back(SandboxChargeEntry(*s, s->charged_until, now, /*final=*/false, now));
    s->charged_until = now;
  }
  return entries;
}

void RecordInterimCharges(store::Store& store, metrics::Metrics& metrics, std::vector<store::LedgerEntry> entries) {
  if (entries.empty()) return;
  store.Write(
      [entries](store::Transaction& t) -> Status {
        for (const auto& e : entries) {
          if (Status st = t.AppendLedger(e); !st) return st;
        }
        return Status::Ok();
      },
      [&metrics, entries](Status st) {
        if (!st.ok()) {
          spdlog::error("sandbox interim charges not recorded: {}", st.error().message);
          return;
        }
        for (const auto& e : entries) metrics.CountLedgerEntry("interim", e.metric, e.quantity);
      });
}

}  // namespace unisched::daemon
