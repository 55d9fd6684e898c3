// Slurm batch scripts and sbatch's options read (model/batch_script.h); what
// they resolve to is batch_resolve.cc.

#include "unisched/model/batch_script.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <tuple>
#include <utility>

#include "model/batch_errors.h"
#include "unisched/model/words.h"

namespace unisched::model {
namespace {

// ---- the options -----------------------------------------------------------

enum class Arg { kNone, kRequired, kOptional };

struct OptionSpec {
  std::string_view name;  // the long name
  char short_name;
  Arg arg;
  // Options of one setting replace each other; "": the option's own name.
  std::string_view setting = {};
  // Not empty: a Slurm option unisched does not follow, and why (the
  // warning's text).
  std::string_view ignored = {};
};

constexpr std::string_view kPlacement =
    "not supported: ignored; unisched places a job's tasks on CPUs itself (docs/execution.md, \"CPU sets\")";
constexpr std::string_view kNotSupported = "not supported by unisched: ignored";

// Every option sbatch has that a script or command line is likely to hold.
// Those with an `ignored` reason are read (so that their values are not
// taken for other words) and warned about.
constexpr OptionSpec kOptions[] = {
    // What unisched follows (docs/slurm-users.md has the table).
    {"job-name", 'J', Arg::kRequired},
    {"partition", 'p', Arg::kRequired},
    {"account", 'A', Arg::kRequired},
    {"nodes", 'N', Arg::kRequired},
    {"ntasks", 'n', Arg::kRequired},
    {"ntasks-per-node", 0, Arg::kRequired},
    {"cpus-per-task", 'c', Arg::kRequired},
    {"mem", 0, Arg::kRequired, "memory"},
    {"mem-per-cpu", 0, Arg::kRequired, "memory"},
    {"gres", 0, Arg::kRequired, "gpus"},
    {"gpus", 'G', Arg::kRequired, "gpus"},
    {"gpus-per-node", 0, Arg::kRequired, "gpus"},
    {"gpus-per-task", 0, Arg::kRequired, "gpus"},
    {"time", 't', Arg::kRequired},
    {"output", 'o', Arg::kRequired},
    {"error", 'e', Arg::kRequired},
    {"array", 'a', Arg::kRequired},
    {"dependency", 'd', Arg::kRequired},
    {"chdir", 'D', Arg::kRequired},
    {"export", 0, Arg::kRequired},
    {"requeue", 0, Arg::kNone, "requeue"},
    {"no-requeue", 0, Arg::kNone, "requeue"},
    {"constraint", 'C', Arg::kRequired},
    {"parsable", 0, Arg::kNone},
    {"wait", 'W', Arg::kNone},
    {"hold", 'H', Arg::kNone},
    {"begin", 'b', Arg::kRequired},
    {"wrap", 0, Arg::kRequired},
    // Read and warned about.
    {"mail-type",
     0,
     Arg::kRequired,
     {},
     "unisched sends no mail: ignored; follow the job with `unisched logs -f ID` or the alerts webhook"},
    {"mail-user",
     0,
     Arg::kRequired,
     {},
     "unisched sends no mail: ignored; follow the job with `unisched logs -f ID` or the alerts webhook"},
    {"qos",
     'q',
     Arg::kRequired,
     {},
     "unisched has no QOS: ignored; priority, limits and preemption come from the queue (-p)"},
    {"nodelist",
     'w',
     Arg::kRequired,
     {},
     "not supported: ignored; to pin a one-node job to a node use --constraint=unisched.node=NAME"},
    {"exclude", 'x', Arg::kRequired, {}, "unisched cannot exclude nodes: ignored"},
    {"exclusive",
     0,
     Arg::kOptional,
     {},
     "not supported: ignored; a job gets exactly the CPUs, memory and GPUs it asks for: ask for all of a "
     "node's to have it alone"},
    {"open-mode", 0, Arg::kRequired, {}, "not supported: ignored; -o and -e files are always appended to"},
    {"signal",
     0,
     Arg::kRequired,
     {},
     "not supported: ignored; at its wall time a job gets SIGTERM, then SIGKILL after the grace the cluster "
     "configures (executor.kill_grace_seconds)"},
    {"mem-per-gpu", 0, Arg::kRequired, {}, "not supported: ignored; give --mem (per node) or --mem-per-cpu"},
    {"cpus-per-gpu", 0, Arg::kRequired, {}, "not supported: ignored; give -c (CPUs per task) and the tasks"},
    {"nice", 0, Arg::kOptional, {}, "not supported: ignored; the job is ordered by its queue's priority policy"},
    {"priority",
     0,
     Arg::kRequired,
     {},
     "not supported: ignored; the job is ordered by its queue's priority policy (admins: `unisched submit "
     "--priority`)"},
    {"reservation", 0, Arg::kRequired, {}, "unisched has no advance reservations: ignored"},
    {"licenses", 'L', Arg::kRequired, {}, "unisched has no licenses: ignored"},
    {"comment", 0, Arg::kRequired, {}, "not supported: ignored; unisched keeps no comment with a job"},
    {"time-min", 0, Arg::kRequired, {}, "not supported: ignored; the job's wall time is -t"},
    {"deadline", 0, Arg::kRequired, {}, kNotSupported},
    {"distribution", 'm', Arg::kRequired, {}, kPlacement},
    {"hint", 0, Arg::kRequired, {}, kPlacement},
    {"mem-bind", 0, Arg::kRequired, {}, kPlacement},
    {"cpu-bind", 0, Arg::kRequired, {}, kPlacement},
    {"gpu-bind", 0, Arg::kRequired, {}, kPlacement},
    {"cpu-freq", 0, Arg::kRequired, {}, kPlacement},
    {"gpu-freq", 0, Arg::kRequired, {}, kPlacement},
    {"sockets-per-node", 0, Arg::kRequired, {}, kPlacement},
    {"cores-per-socket", 0, Arg::kRequired, {}, kPlacement},
    {"threads-per-core", 0, Arg::kRequired, {}, kPlacement},
    {"ntasks-per-core", 0, Arg::kRequired, {}, kPlacement},
    {"ntasks-per-socket", 0, Arg::kRequired, {}, kPlacement},
    {"ntasks-per-gpu", 0, Arg::kRequired, {}, kPlacement},
    {"gpus-per-socket", 0, Arg::kRequired, {}, kPlacement},
    {"extra-node-info", 'B', Arg::kRequired, {}, kPlacement},
    {"core-spec", 'S', Arg::kRequired, {}, kPlacement},
    {"thread-spec", 0, Arg::kRequired, {}, kPlacement},
    {"mincpus", 0, Arg::kRequired, {}, "not supported: ignored; give -c and the tasks, or --ntasks-per-node"},
    {"switches", 0, Arg::kRequired, {}, kNotSupported},
    {"network", 0, Arg::kRequired, {}, kNotSupported},
    {"clusters", 'M', Arg::kRequired, {}, "not supported: ignored; unisched is one cluster"},
    {"cluster-constraint", 0, Arg::kRequired, {}, "not supported: ignored; unisched is one cluster"},
    {"wckey", 0, Arg::kRequired, {}, kNotSupported},
    {"profile", 0, Arg::kRequired, {}, kNotSupported},
    {"acctg-freq", 0, Arg::kRequired, {}, "not supported: ignored; the ledger meters every job (docs/ledger.md)"},
    {"mcs-label", 0, Arg::kRequired, {}, kNotSupported},
    {"power", 0, Arg::kRequired, {}, kNotSupported},
    {"bb", 0, Arg::kRequired, {}, kNotSupported},
    {"bbf", 0, Arg::kRequired, {}, kNotSupported},
    {"container", 0, Arg::kRequired, {}, kNotSupported},
    {"container-id", 0, Arg::kRequired, {}, kNotSupported},
    {"delay-boot", 0, Arg::kRequired, {}, kNotSupported},
    {"prefer", 0, Arg::kRequired, {}, kNotSupported},
    {"extra", 0, Arg::kRequired, {}, kNotSupported},
    {"batch", 0, Arg::kRequired, {}, kNotSupported},
    {"tres-per-task", 0, Arg::kRequired, {}, kNotSupported},
    {"tres-bind", 0, Arg::kRequired, {}, kNotSupported},
    {"uid", 0, Arg::kRequired, {}, "not supported: ignored; a job runs as its submitter's account"},
    {"gid", 0, Arg::kRequired, {}, "not supported: ignored; a job runs with its project's group"},
    {"propagate", 0, Arg::kOptional, {}, kNotSupported},
    {"get-user-env", 0, Arg::kOptional, {}, "not supported: ignored; use --export"},
    {"export-file", 0, Arg::kRequired, {}, "not supported: ignored; use --export"},
    {"input", 'i', Arg::kRequired, {}, "not supported: ignored; a job's standard input is /dev/null"},
    {"kill-on-invalid-dep", 0, Arg::kRequired, {}, kNotSupported},
    {"no-kill", 'k', Arg::kOptional, {}, kNotSupported},
    {"overcommit", 'O', Arg::kNone, {}, kNotSupported},
    {"oversubscribe", 's', Arg::kNone, {}, kNotSupported},
    {"contiguous", 0, Arg::kNone, {}, kNotSupported},
    {"reboot", 0, Arg::kNone, {}, kNotSupported},
    {"spread-job", 0, Arg::kNone, {}, kNotSupported},
    {"use-min-nodes", 0, Arg::kNone, {}, kNotSupported},
    {"test-only", 0, Arg::kNone, {}, kNotSupported},
    {"ignore-pbs", 0, Arg::kNone, {}, kNotSupported},
    {"quiet", 'Q', Arg::kNone, {}, kNotSupported},
    {"verbose", 'v', Arg::kNone, {}, kNotSupported},
};

// Old names Slurm still takes.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {{"workdir", "chdir"}};

const OptionSpec* FindLong(std::string_view name) {
  for (const auto& [alias, canonical] : kAliases) {
    if (name == alias) name = canonical;
  }
  for (const OptionSpec& o : kOptions) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

const OptionSpec* FindShort(char c) {
  for (const OptionSpec& o : kOptions) {
    if (o.short_name == c) return &o;
  }
  return nullptr;
}

std::string_view SettingOf(const OptionSpec& o) {
  return o.setting.empty() ? o.name : o.setting;
}

// The lines of a text, without their '\n'.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t from = 0;
  while (from < text.size()) {
    const size_t end = std::min(text.find('\n', from), text.size());
    lines.push_back(text.substr(from, end - from));
    from = end + 1;
  }
  return lines;
}

bool StartsWithWord(std::string_view line, std::string_view word) {
  return line.substr(0, word.size()) == word &&
         (line.size() == word.size() || std::isspace(static_cast<unsigned char>(line[word.size()])));
}

// The words of a directive line as sbatch splits them (its _get_argument):
// blanks separate words; single and double quotes group, a backslash takes
// the next character as it is, and an unquoted '#' ends the line.
Result<std::vector<std::string>> SplitDirective(std::string_view text, int line) {
  std::vector<std::string> words;
  size_t i = 0;
  const size_t n = text.size();
  bool comment = false;
  while (!comment) {
    while (i < n && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == n) break;
    std::string word;
    bool quoted = false, escaped = false, any_quote = false;
    char quote = 0;
    while (i < n && (quoted || !std::isspace(static_cast<unsigned char>(text[i])))) {
      const char c = text[i];
      if (escaped) {
        word += c;
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (quoted) {
        if (c == quote) {
          quoted = false;
        } else {
          word += c;
        }
      } else if (c == '"' || c == '\'') {
        quoted = any_quote = true;
        quote = c;
      } else if (c == '#') {
        comment = true;
        break;
      } else {
        word += c;
      }
      ++i;
    }
    if (quoted) {
      return Invalid("line " + std::to_string(line) + ": unmatched " + std::string(1, quote) +
                     " in the #SBATCH line; close the quote");
    }
    if (!word.empty() || any_quote) words.push_back(std::move(word));
  }
  return words;
}

// Reads option words (of one #SBATCH line, or the command line) into
// `options`. `command_line`: the first word that is not an option ends them
// (it and the rest go to cl->rest), and unknown options are errors; in a
// script they are warnings.
Status ReadWords(const std::vector<std::string>& words, int line, bool command_line,
                 const std::vector<ExtraOption>& extra, BatchOptions& options, BatchCommandLine* cl) {
  auto warn = [&](std::string text, std::string message) {
    options.warnings.push_back({{line, std::move(text)}, std::move(message)});
  };
  auto apply = [&](const OptionSpec& spec, std::string value, std::string text) {
    if (!spec.ignored.empty()) return warn(std::move(text), std::string(spec.ignored));
    if (!command_line && spec.name == "wrap") {
      return warn(std::move(text), "only sbatch's command line takes --wrap: ignored");
    }
    auto& slot = options.settings[std::string(SettingOf(spec))];
    if (!command_line && slot.source.line > 0 && slot.option != spec.name) {
      warn(text, "replaces " + slot.source.Where() + " (the two are one setting)");
    }
    slot = {std::string(spec.name), std::move(value), {line, std::move(text)}};
  };
  auto find_extra = [&](std::string_view name, char c) -> const ExtraOption* {
    for (const ExtraOption& e : extra) {
      if ((!name.empty() && e.name == name) || (c != 0 && e.short_name == c)) return &e;
    }
    return nullptr;
  };
  auto where = [&](const std::string& text) { return line > 0 ? "line " + std::to_string(line) + ": " + text : text; };
  auto missing_value = [&](const std::string& written) {
    return Invalid(where(written) + " needs a value, e.g. " + written + "=VALUE");
  };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--") {
      if (command_line) {
        cl->rest.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
        return Status::Ok();
      }
      warn(word, "'--' in a directive: the rest of the line is ignored");
      return Status::Ok();
    }
    if (word.size() < 2 || word[0] != '-') {
      if (command_line) {
        cl->rest.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
        return Status::Ok();
      }
      warn(word, "not an option: ignored");
      continue;
    }
    // Takes the next word as the value of the option just read (an unknown
    // one's too, when it looks like one, so that it is not warned about twice).
    auto next_value = [&](std::string& text) -> std::optional<std::string> {
      if (i + 1 >= words.size()) return std::nullopt;
      text += " " + words[i + 1];
      return words[++i];
    };
    if (word.rfind("--", 0) == 0) {
      std::string name = word.substr(2);
      std::optional<std::string> inline_value;
      if (const size_t eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
      }
      std::string text = word;
      if (const ExtraOption* e = find_extra(name, 0)) {
        std::string value;
        if (e->takes_value) {
          auto v = inline_value ? inline_value : next_value(text);
          if (!v) return missing_value("--" + name);
          value = *v;
        } else if (inline_value) {
          return Invalid("--" + name + " takes no value");
        }
        cl->extras[e->name].push_back(std::move(value));
        continue;
      }
      const OptionSpec* spec = FindLong(name);
      if (spec == nullptr) {
        if (command_line) {
          return Invalid("unknown option '--" + name + "'; `unisched help sbatch` lists the options");
        }
        if (!inline_value && i + 1 < words.size() && words[i + 1].rfind('-', 0) != 0) next_value(text);
        warn(text, "unknown option: ignored");
        continue;
      }
      std::string value;
      if (spec->arg == Arg::kRequired) {
        auto v = inline_value ? inline_value : next_value(text);
        if (!v) return missing_value("--" + name);
        value = *v;
      } else if (spec->arg == Arg::kNone && inline_value) {
        return Invalid(where(word) + ": --" + name + " takes no value; write --" + name + " alone");
      } else if (inline_value) {
        value = *inline_value;
      }
      apply(*spec, std::move(value), std::move(text));
      continue;
    }
    // Short options: "-J name", "-Jname", and switches together ("-HW").
    for (size_t j = 1; j < word.size(); ++j) {
      const char c = word[j];
      const std::string rest = word.substr(j + 1);
      std::string text = "-" + std::string(1, c) + rest;
      if (const ExtraOption* e = find_extra({}, c)) {
        std::string value;
        if (e->takes_value) {
          auto v = !rest.empty() ? std::optional<std::string>(rest) : next_value(text);
          if (!v) return missing_value("-" + std::string(1, c));
          value = *v;
          j = word.size();
        }
        cl->extras[e->name].push_back(std::move(value));
        continue;
      }
      const OptionSpec* spec = FindShort(c);
      if (spec == nullptr) {
        if (command_line) {
          return Invalid("unknown option '-" + std::string(1, c) + "'; `unisched help sbatch` lists the options");
        }
        text = word;
        if (word.size() == 2 && i + 1 < words.size() && words[i + 1].rfind('-', 0) != 0) next_value(text);
        warn(text, "unknown option: ignored");
        break;
      }
      if (spec->arg == Arg::kNone) {
        apply(*spec, "", "-" + std::string(1, c));
        continue;
      }
      std::optional<std::string> value;
      if (!rest.empty()) {
        value = rest;
      } else if (spec->arg == Arg::kRequired) {
        value = next_value(text);
        if (!value) return missing_value("--" + std::string(spec->name));
      }
      apply(*spec, value.value_or(""), std::move(text));
      break;
    }
  }
  return Status::Ok();
}

}  // namespace

std::string OptionSource::Where() const {
  return line > 0 ? "line " + std::to_string(line) + ": " + text : text;
}

std::string BatchWarning::Text() const {
  return source.Where() + ": " + message;
}

Status ReadBatchScript(std::string_view script, BatchOptions& options) {
  const std::string example = "e.g. #!/bin/bash";
  if (script.empty()) return Invalid("the script is empty; its first line must be #! and an interpreter, " + example);
  if (script.size() > kMaxScriptBytes) {
    return Invalid("the script is " + std::to_string(script.size()) + " bytes; at most " +
                   std::to_string(kMaxScriptBytes) + " are taken: read large data from a file instead");
  }
  const std::vector<std::string_view> lines = Lines(script);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = "line " + std::to_string(i + 1) + ": ";
    if (lines[i].find('\0') != std::string_view::npos) return Invalid(where + "the script holds a NUL byte");
    if (!IsUtf8(lines[i])) {
      return Invalid(where + "the script is not UTF-8 text; convert it, e.g. iconv -f latin1 -t utf-8");
    }
    if (!lines[i].empty() && lines[i].back() == '\r') {
      return Invalid(where +
                     "the script has DOS line breaks (\\r\\n) instead of Unix ones (\\n); convert it, e.g. "
                     "with dos2unix");
    }
  }
  if (script.rfind("#!", 0) != 0) {
    return Invalid("line 1: a batch script starts with #! and its interpreter, " + example);
  }
  int first_command = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const int number = static_cast<int>(i) + 1;
    if (first_command > 0) {
      if (StartsWithWord(line, "#SBATCH")) {
        options.warnings.push_back({{number, std::string(line)},
                                    "not read: it comes after the first command (line " +
                                        std::to_string(first_command) +
                                        "), and as in Slurm directives must come before any command; move it up"});
      }
      continue;
    }
    if (StartsWithWord(line, "#SBATCH")) {
      auto words = SplitDirective(line.substr(7), number);
      if (!words.ok()) return words.error();
      if (Status s = ReadWords(*words, number, /*command_line=*/false, {}, options, nullptr); !s.ok()) return s;
      continue;
    }
    if (StartsWithWord(line, "#PBS")) {
      options.warnings.push_back({{number, std::string(line)}, "PBS directives are not read; write them as #SBATCH"});
      continue;
    }
    const size_t first = line.find_first_not_of(" \t\v\f");
    if (first == std::string_view::npos || line[first] == '#') continue;  // blank or a comment
    first_command = number;
  }
  return Status::Ok();
}

Result<BatchCommandLine> ReadBatchCommandLine(const std::vector<std::string>& words,
                                              const std::vector<ExtraOption>& extra, BatchOptions& options) {
  BatchCommandLine out;
  if (Status s = ReadWords(words, 0, /*command_line=*/true, extra, options, &out); !s.ok()) return s.error();
  return out;
}

void DropSettingsGiven(BatchOptions& options, const std::function<bool(std::string_view path)>& given) {
  // The fields each setting gives (BatchRequest::sources' paths). -n gives
  // the tasks per node and the CPUs (and the nodes only with
  // --ntasks-per-node and no -N, which then give them too).
  static const std::map<std::string_view, std::vector<std::string_view>> kFields = {
      {"job-name", {"name"}},
      {"partition", {"queue"}},
      {"account", {"project"}},
      {"nodes", {"resources.nodes"}},
      {"ntasks", {"resources.tasks_per_node", "resources.cpus"}},
      {"ntasks-per-node", {"resources.tasks_per_node", "resources.cpus"}},
      {"cpus-per-task", {"resources.cpus"}},
      {"memory", {"resources.memory_mb"}},
      {"gpus", {"resources.gpus"}},
      {"time", {"resources.walltime_seconds"}},
      {"output", {"output_file"}},
      {"error", {"error_file"}},
      {"chdir", {"workdir"}},
      {"export", {"env"}},
      {"array", {"array"}},
      {"dependency", {"dependency"}},
      {"requeue", {"max_retries"}},
      {"hold", {"hold"}},
      {"begin", {"begin_at"}},
      {"constraint", {"constraints"}},
  };
  for (auto it = options.settings.begin(); it != options.settings.end();) {
    auto fields = kFields.find(it->first);
    const bool overridden = fields != kFields.end() && std::all_of(fields->second.begin(), fields->second.end(), given);
    it = overridden ? options.settings.erase(it) : std::next(it);
  }
}

}  // namespace unisched::model
