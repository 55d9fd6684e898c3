// Fuzz target: the SWF trace reader of `unisched simulate` (src/sim/trace.cc).
// The input is the text of a trace file as ReadTraceFile returns it. Besides
// crashes and sanitizer reports it checks what trace.h promises of the
// cleaned trace, so a record the cleaning lets through broken is found too.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string_view>

#include "fuzz_check.h"
#include "unisched/sim/trace.h"

namespace {

using unisched::sim::Trace;

void CheckTrace(const Trace& trace, int max_processors) {
  const auto& jobs = trace.jobs;
  FUZZ_CHECK(trace.cleaning.records - trace.cleaning.Dropped() == static_cast<int64_t>(jobs.size()));
  std::set<unisched::model::JobId> ids;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& job = jobs[i];
    FUZZ_CHECK(job.id >= 1 && job.id <= static_cast<unisched::model::JobId>(jobs.size()));
    ids.insert(job.id);
    FUZZ_CHECK(job.size >= 1 && job.size <= max_processors);
    FUZZ_CHECK(job.run_ms > 0);                 // trace.h: "how long it actually runs (> 0)"
    FUZZ_CHECK(job.run_ms <= job.estimate_ms);  // longer runs are cut to the requested time
    FUZZ_CHECK(job.submit_ms >= 0);             // submit time < 0 is dropped
    if (i > 0) {
      // Sorted by (submit_ms, id).
      const auto& prev = jobs[i - 1];
      FUZZ_CHECK(prev.submit_ms < job.submit_ms || (prev.submit_ms == job.submit_ms && prev.id < job.id));
    }
  }
  FUZZ_CHECK(ids.size() == jobs.size());
  (void)trace.cleaning.Summary();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)unisched::sim::DetectFormat(text);
  // `unisched simulate` passes the cluster's capacity, up to INT_MAX; a small
  // cluster exercises the dropping of jobs larger than it.
  for (int max_processors : {std::numeric_limits<int>::max(), 128}) {
    CheckTrace(unisched::sim::ParseSwf(text, max_processors), max_processors);
  }
  return 0;
}
