#pragma once
// Slurm batch scripts (`unisched sbatch`, POST /v1/jobs with `script`;
// docs/slurm-users.md): a script's #SBATCH directives and sbatch's command
// line, read by one parser with one table of options, and what they ask of
// a job in the terms of unisched's job body. Pure: the submitting
// environment and directory come in as arguments, so that the client and
// the server share every rule and every message.
//
// The three steps: ReadBatchScript (the directives, in order) and
// ReadBatchCommandLine (the options, after them: they win) collect Slurm's
// options as written into BatchOptions; ResolveBatchOptions turns those
// into a BatchRequest (nodes, cpus per node, memory per node, ...).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/model/cluster.h"

namespace unisched::model {

// The largest script taken, in bytes. A script is kept with its job (in the
// store and, while the job is active, in the daemon's memory) and sent to
// its node with each launch; it must also fit, escaped as JSON, in a
// request body of at most 1 MiB. Slurm's own default is 4 MB; scripts that
// carry data should read it from a file instead.
inline constexpr size_t kMaxScriptBytes = 512 * 1024;

// Slurm's time formats as seconds: "minutes", "minutes:seconds",
// "hours:minutes:seconds", "days-hours", "days-hours:minutes" and
// "days-hours:minutes:seconds"; "INFINITE", "UNLIMITED" and "-1" give
// kUnlimitedTime. nullopt when malformed. As in Slurm, no field is bounded
// ("90:00" is 90 minutes, "1:90:00" two and a half hours); unlike Slurm,
// which rounds a limit up to whole minutes, the seconds are kept.
inline constexpr int64_t kUnlimitedTime = -1;
std::optional<int64_t> ParseSlurmTime(std::string_view text);

// Slurm's points in time (sacct -S/-E, sbatch --begin), as of `now`:
// YYYY-MM-DD[THH:MM[:SS]] (UTC) or RFC 3339 with its zone, HH:MM[:SS]
// (today), MMDD[YY], MM/DD[/YY], now, now+N or now-N with a unit (seconds,
// minutes, hours, days, weeks; none: seconds), today, midnight, noon,
// tomorrow. nullopt when malformed.
std::optional<Timestamp> ParseSlurmWhen(std::string_view text, Timestamp now);

// Slurm's memory sizes: a whole number and an optional unit K, M, G or T
// (either case; powers of 1024; none: M), as megabytes, rounded up
// ("512K" is 1). nullopt when malformed or above 2^40 MB.
std::optional<int64_t> ParseSlurmMemoryMb(std::string_view text);

// A name a job's environment may hold: letters, digits and '_', not
// starting with a digit (what POST /v1/jobs takes in `env`).
bool IsEnvName(std::string_view name);

// Why --export=ALL copies a variable of the submitting environment into the
// job, or does not (docs/slurm-users.md, "--export"). Explicitly named
// variables (--export=NAME) are passed on whatever this says, except
// unisched's own.
enum class ExportRule {
  kCopied,
  kNotAName,    // not an environment name the job may hold (bash's exported functions, ...)
  kUnisched,    // UNISCHED_*: the client's URL and token, and what the scheduler sets
  kScheduler,   // SLURM_*, SBATCH_*, SRUN_*, SALLOC_*: the scheduler sets its own
  kSession,     // USER, LOGNAME, PWD, OLDPWD, SHLVL, _: the submitting shell's, wrong in the job
  kCredential,  // looks like a secret: *TOKEN*, *SECRET*, *PASSWORD*, *_KEY, SSH_AUTH_SOCK, ...
  kNotText,     // a value that is not UTF-8 text (a job body is JSON)
};
ExportRule ExportRuleFor(std::string_view name, std::string_view value);

// Where an option was given: a line of the script (the first is 1) or the
// command line (0), and the option as written there ("--mem=4G", "-J sim").
struct OptionSource {
  int line = 0;
  std::string text;
  // "line 4: --mem=4G", or "--mem=4G" for the command line.
  std::string Where() const;
  bool operator==(const OptionSource&) const = default;
};

// A directive or option that was read but is not followed (or not fully);
// the job is submitted all the same.
struct BatchWarning {
  OptionSource source;
  std::string message;  // what unisched does instead, and how to get closer
  // "line 7: --mail-type=END: not supported: ignored (...)".
  std::string Text() const;
  bool operator==(const BatchWarning&) const = default;
};

// Slurm's options as given, the directives first and the command line
// after them, so that a later option replaces an earlier one of the same
// setting. --mem and --mem-per-cpu are one setting, as are --gres, --gpus,
// --gpus-per-node and --gpus-per-task, and --requeue and --no-requeue.
struct BatchOptions {
  struct Setting {
    std::string option;  // its long name, e.g. "mem-per-cpu"
    std::string value;   // "" for a switch
    OptionSource source;
  };
  std::map<std::string, Setting> settings;  // by setting
  std::vector<BatchWarning> warnings;       // unknown and unsupported options, replaced settings, ...
};

// Reads the directives of a batch script into `options`, as sbatch does:
// the first line must be "#!" and an interpreter; "#SBATCH" lines (at the
// start of the line) are read until the first line that is neither blank
// nor a comment, each word by word (quotes and backslashes as in a shell,
// an unquoted '#' ends it), in both --opt=value, --opt value and -J name
// forms. Unknown options, #PBS lines and #SBATCH lines after the first
// command are warnings. Errors name the line: an empty script, one over
// kMaxScriptBytes, with a NUL, not UTF-8, with DOS line ends, without "#!";
// an unmatched quote, a missing value.
Status ReadBatchScript(std::string_view script, BatchOptions& options);

// An option of the command line that the caller takes itself (the
// client's --url, --json, ...), not one of sbatch's.
struct ExtraOption {
  std::string name;
  char short_name = 0;
  bool takes_value = false;
};

// sbatch's command line: its options into `options` (after the script's:
// they win), `extra` ones into `extras` (name -> values, "" for a switch),
// and from the first word that is not an option (or after "--") on, the
// script and its arguments into `rest`. An unknown option is an error here:
// a typo typed now should stop the submission, not warn.
struct BatchCommandLine {
  std::map<std::string, std::vector<std::string>> extras;
  std::vector<std::string> rest;
};
Result<BatchCommandLine> ReadBatchCommandLine(const std::vector<std::string>& words,
                                              const std::vector<ExtraOption>& extra, BatchOptions& options);

// What the submitting side knows: the environment --export copies and the
// directory relative -D paths start from (and SLURM_SUBMIT_DIR). The API
// has neither.
struct SubmitContext {
  std::optional<std::map<std::string, std::string>> environment;
  std::string directory;  // absolute; "": unknown
  std::string host;       // SLURM_SUBMIT_HOST; "": unknown
  // The CPUs per node a job body gives itself (the server's case): what
  // --mem-per-cpu multiplies then, as the body's value wins over -n and -c.
  std::optional<int64_t> cpus;
  // What --begin's relative times (now+1hour, 16:00) count from.
  Timestamp now{};
};

// Slurm's --array, "1-1000:2%50": the indices and the cap on tasks running at once.
struct BatchArray {
  std::string indices;                 // "1-1000:2"
  std::optional<int64_t> max_running;  // 50
  bool operator==(const BatchArray&) const = default;
};

// What the options ask of the job, in the job body's terms (POST /v1/jobs);
// unset: not asked, the server's or the queue's default applies.
struct BatchRequest {
  std::optional<std::string> name, queue, project;
  // Per node, as in the job body.
  std::optional<int64_t> nodes, cpus, memory_mb, gpus, tasks_per_node, walltime_seconds;
  std::optional<std::string> gpu_model;
  std::optional<Labels> constraints;
  std::optional<std::string> output_file, error_file;
  std::optional<std::string> workdir;     // -D: absolute
  std::optional<std::string> dependency;  // --dependency as written (Slurm's syntax)
  std::optional<BatchArray> array;
  // --export, resolved against the submitting environment (always set
  // when there is one: sbatch's default is ALL), plus SLURM_SUBMIT_DIR
  // and SLURM_SUBMIT_HOST where known.
  std::optional<std::map<std::string, std::string>> env;
  std::optional<int> max_retries;       // --no-requeue: 0
  std::optional<bool> hold;             // -H: submitted HELD
  std::optional<std::string> begin_at;  // --begin: RFC 3339, not started before it
  // What only the client acts on.
  bool parsable = false;            // print the job id alone
  bool wait = false;                // wait for the job's end (-W)
  std::optional<std::string> wrap;  // --wrap: the command to wrap in a script
  // The option each field came from, by the field's path in the body
  // ("resources.memory_mb"), so that a refusal of a value can name the
  // directive that gave it.
  std::map<std::string, OptionSource> sources;
  std::vector<BatchWarning> warnings;  // BatchOptions' and the mapping's own
};

// Removes from `options` each setting all of whose body fields `given`
// says the body has ("resources.memory_mb" for --mem), before the server
// resolves a body's script: a body's own fields win over the directives, as
// sbatch's command line does, and a setting it overrides is neither
// checked nor warned about again (`unisched sbatch` sends the fields it
// resolved, a relative -D made absolute, the environment --export=ALL
// copied, with the script).
void DropSettingsGiven(BatchOptions& options, const std::function<bool(std::string_view path)>& given);

// The job `options` ask for (docs/slurm-users.md has the table). Nodes,
// tasks and CPUs: -N nodes; tasks per node from --ntasks-per-node, else -n
// divided by the nodes (it must divide evenly: every node runs as many);
// CPUs per node = tasks per node x -c. Memory per node from --mem, or
// --mem-per-cpu x CPUs per node (context.cpus where given). GPUs per node from --gres=gpu[:model]:N,
// --gpus-per-node, --gpus-per-task x tasks per node, or --gpus divided by
// the nodes. An error names the option (and line) and how to fix it; its
// field is "script" for a directive's value, the option for the command
// line's ("mem").
Result<BatchRequest> ResolveBatchOptions(const BatchOptions& options, const SubmitContext& context);

}  // namespace unisched::model
