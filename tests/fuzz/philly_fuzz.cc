// Fuzz target: the Philly GPU trace reader of `unisched simulate`
// (src/sim/trace.cc). The input is the text of a trace file (CSV with the
// header timestamp,duration,num_gpus,gpu_time,cluster). Besides crashes and
// sanitizer reports it checks what trace.h promises of the cleaned trace.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "fuzz_check.h"
#include "unisched/sim/trace.h"

namespace {

using unisched::sim::Trace;

void CheckTrace(const Trace& trace, int max_gpus) {
  const auto& jobs = trace.jobs;
  FUZZ_CHECK(trace.cleaning.records - trace.cleaning.Dropped() == static_cast<int64_t>(jobs.size()));
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& job = jobs[i];
    FUZZ_CHECK(job.id == static_cast<unisched::model::JobId>(i) + 1);  // numbered in submit order
    FUZZ_CHECK(job.size >= 1 && job.size <= max_gpus);
    FUZZ_CHECK(job.run_ms > 0);
    FUZZ_CHECK(job.estimate_ms == job.run_ms);  // no estimate in the trace: a perfect one
    FUZZ_CHECK(i == 0 || jobs[i - 1].submit_ms <= job.submit_ms);
  }
  (void)trace.cleaning.Summary();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)unisched::sim::DetectFormat(text);
  // `unisched simulate` passes the cluster's GPU count, up to INT_MAX; a
  // small cluster exercises the dropping of jobs larger than it.
  for (int max_gpus : {std::numeric_limits<int>::max(), 8}) {
    auto trace = unisched::sim::ParsePhilly(text, max_gpus);
    if (trace.ok()) CheckTrace(*trace, max_gpus);
  }
  return 0;
}
