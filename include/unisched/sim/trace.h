#pragma once
// Workload traces for `unisched simulate` (docs/simulate.md): the Standard
// Workload Format of the Parallel Workloads Archive (.swf, .swf.gz) and the
// Philly GPU job CSV (shared/traces/gpu-philly). Parsing is pure (text in,
// jobs out); only ReadTraceFile touches the file system.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/model/job.h"

namespace unisched::sim {

enum class TraceFormat { kSwf, kPhilly };
std::string_view ToString(TraceFormat format);  // "SWF", "Philly CSV"

// One job of a cleaned trace. Times are milliseconds; SWF has whole seconds.
struct TraceJob {
  model::JobId id = 0;    // 1-based position in the cleaned trace (file order; Philly: submit order)
  int64_t source_id = 0;  // SWF field 1; Philly: the 1-based data row
  int64_t submit_ms = 0;
  int64_t run_ms = 0;       // how long it actually runs (> 0)
  int64_t estimate_ms = 0;  // its wall-time limit: SWF requested time; Philly has none, so its run time
  int size = 0;             // SWF: processors; Philly: GPUs
  std::string user;         // SWF: "u<field 12>"; Philly: empty (the file has no users)
  std::string group;        // SWF: "g<field 13>"; Philly: the virtual cluster
};

// What cleaning did, for the log. Each dropped record counts once, under the
// first rule it breaks (in the order of the fields below).
struct CleaningReport {
  int64_t records = 0;                 // job lines read
  int64_t malformed = 0;               // too few fields, or not numbers (SWF: or beyond 2^53)
  int64_t dropped_no_size = 0;         // neither requested nor allocated size
  int64_t dropped_too_large = 0;       // larger than the cluster
  int64_t dropped_run_time = 0;        // run time <= 0
  int64_t dropped_requested_time = 0;  // requested time <= 0 (SWF)
  int64_t dropped_submit = 0;          // submit time < 0 (SWF)
  int64_t filled_size = 0;             // requested size missing, allocated used (or the reverse)
  int64_t capped_run_time = 0;         // run time above the requested time, cut to it
  int64_t Dropped() const {
    return malformed + dropped_no_size + dropped_too_large + dropped_run_time + dropped_requested_time + dropped_submit;
  }
  // "28481 of 28489 records kept; dropped: 8 with run time <= 0; 475 run times capped..."
  std::string Summary() const;
};

struct Trace {
  TraceFormat format = TraceFormat::kSwf;
  std::vector<TraceJob> jobs;  // ids 1..n; sorted by (submit_ms, id)
  CleaningReport cleaning;
};

// The whole file as text; gzip-compressed files (.gz) are inflated, plain
// files read as they are.
Result<std::string> ReadTraceFile(const std::string& path);

// Philly when the first line is the Philly CSV header, else SWF.
TraceFormat DetectFormat(std::string_view text);

// SWF, cleaned as shared/traces/hpc-kth-sp2/README.md describes (the
// "strong filter" of the published EASY figures): a job's size is its
// requested processors (field 8), or its allocated ones (field 5) when field 8
// is missing (<= 0), rounded up to whole processors, and is dropped when both
// are missing or it is above max_processors; run time (field 4) <= 0,
// requested time (field 9) <= 0 (both in whole milliseconds) and submit time
// (field 2) < 0 are dropped; a run time above the requested time is cut to
// it. Lines starting with ';' are the header.
Trace ParseSwf(std::string_view text, int max_processors);

// The Philly CSV (timestamp,duration,num_gpus,gpu_time,cluster). Timestamps
// are read as UTC. Jobs asking for more than max_gpus GPUs, or with a
// duration <= 0, are dropped. The file is not in submit order: jobs are
// sorted by submit time (file order among equal times) and numbered so.
// Fails only when the header is not Philly's.
Result<Trace> ParsePhilly(std::string_view text, int max_gpus);

}  // namespace unisched::sim
