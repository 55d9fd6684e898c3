#pragma once
// `unisched submit ...` -> the POST /v1/jobs request body. Pure: the tests
// check argv against the JSON it produces.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "unisched/common/status.h"

namespace unisched::cli {

struct SubmitRequest {
  nlohmann::json body;          // the job object to POST
  std::string idempotency_key;  // sent as the Idempotency-Key header when non-empty
  bool wait = false;            // poll until the job ends
};

// {"kind": KIND, features...} from --kind (default hpc) and --feature K=V
// items: numeric values become JSON numbers ("gpu_memory_gb=80" -> 80).
Result<nlohmann::json> BuildWorkload(const std::optional<std::string>& kind, const std::vector<std::string>& features);

// The flags of `submit` (CommonFlags() come on top).
const std::vector<FlagSpec>& SubmitFlags();

// Builds the request from parsed arguments. The command is `args.rest`
// (after "--", or from the first word that is not an option). Defaults are
// left to the server except workload.kind, which is "hpc". Numeric --feature
// values become JSON numbers ("gpu_memory_gb=80" -> 80), others strings.
// `submit_dir` (the caller's directory, "" if unknown) goes to the job as
// SLURM_SUBMIT_DIR unless --env sets it, as sbatch sends it: a relative -o
// lands there when the cluster has no output directory.
Result<SubmitRequest> BuildSubmitRequest(const ParsedArgs& args, const std::string& submit_dir = "");

// ParseArgs(args, SubmitFlags(), true) followed by BuildSubmitRequest.
Result<SubmitRequest> ParseSubmit(const std::vector<std::string>& args);

}  // namespace unisched::cli
