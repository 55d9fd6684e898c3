#pragma once
// `unisched sbatch [OPTIONS] [SCRIPT [ARGS...]]` -> the POST /v1/jobs
// request (docs/slurm-users.md). The script's #SBATCH directives and the
// command line are read by the parser the server uses
// (model/batch_script.h), the command line after the directives, so that
// it wins as in Slurm. Pure: the script file, standard input, the
// environment and the directory come in, so the tests need no files.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "unisched/common/status.h"
#include "unisched/model/batch_script.h"

namespace unisched::cli {

// What sbatch reads from around it.
struct SbatchSurroundings {
  FileReader read_script;                           // SCRIPT's text (at most model::kMaxScriptBytes)
  std::function<Result<std::string>()> read_stdin;  // the script when neither SCRIPT nor --wrap is given
  model::SubmitContext context;                     // --export=ALL's environment, the directory, the host
};

struct SbatchRequest {
  ParsedArgs args;      // the client's own options: --url, --token-file, --json, --help, --kind, ...
  nlohmann::json body;  // the job to POST: the options' fields, `script`, `command` (SCRIPT and ARGS)
  std::string idempotency_key;
  bool parsable = false;    // print the job id alone
  bool wait = false;        // wait for the job's end (-W)
  std::string script_name;  // SCRIPT as given, "--wrap" or "standard input": for messages
  // The directives' and options' (the server's answer repeats those of the
  // directives it read: print each once).
  std::vector<model::BatchWarning> warnings;
};

// The options sbatch takes beside Slurm's: CommonFlags(), --kind and
// --feature (the workload; without them the server gives the job its
// queue's kind) and --idempotency-key.
const std::vector<model::ExtraOption>& SbatchClientOptions();

// Reads `words` (after "sbatch"), the script and its directives. Errors:
// usage errors (unknown options, a script and --wrap together) and the
// parser's (naming the script's line or the option). With --help, only
// `args` is filled.
Result<SbatchRequest> BuildSbatchRequest(const std::vector<std::string>& words, const SbatchSurroundings& io);

// This process's surroundings: the script file, standard input, the
// environment (--export=ALL), the directory, the host and the time.
SbatchSurroundings LocalSbatchSurroundings();
// The directory the client runs in ("" if unknown): SLURM_SUBMIT_DIR.
std::string CurrentDirectory();

// The lines sbatch prints for `warnings` on stderr, "unisched sbatch:
// warning: job.sh: line 7: --mail-type=END: ...".
std::vector<std::string> SbatchWarningLines(const std::string& script_name,
                                            const std::vector<model::BatchWarning>& warnings);

}  // namespace unisched::cli
