// Builds the submission of `unisched sbatch` (sbatch_args.h).

#include "cli/sbatch_args.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <utility>

#include "cli/submit_args.h"
#include "unisched/codec/batch_json.h"

namespace unisched::cli {

using nlohmann::json;

const std::vector<model::ExtraOption>& SbatchClientOptions() {
  static const std::vector<model::ExtraOption> kOptions = [] {
    std::vector<model::ExtraOption> options;
    // -h is --help, as for every command (ParseArgs takes it so).
    for (const FlagSpec& f : CommonFlags()) {
      options.push_back({f.name, f.name == "help" ? 'h' : f.short_name, f.takes_value});
    }
    options.push_back({"kind", 0, true});
    options.push_back({"feature", 0, true});
    options.push_back({"idempotency-key", 0, true});
    return options;
  }();
  return kOptions;
}

Result<SbatchRequest> BuildSbatchRequest(const std::vector<std::string>& words, const SbatchSurroundings& io) {
  SbatchRequest req;
  // The command line first, to find the script (its options are applied
  // after the directives below).
  model::BatchOptions command_line;
  auto read = model::ReadBatchCommandLine(words, SbatchClientOptions(), command_line);
  if (!read.ok()) return UsageError(read.error().message);
  for (auto& [name, values] : read->extras) req.args.flags[name] = std::move(values);
  if (req.args.Has("help")) return req;  // the caller prints the usage; nothing else matters
  for (const char* name : {"url", "token-file", "kind", "idempotency-key"}) {
    if (req.args.All(name).size() > 1) {
      return UsageError("option '--" + std::string(name) + "' given more than once", name);
    }
  }

  // The script: SCRIPT, --wrap's command, or standard input (as sbatch).
  std::string text;
  std::vector<std::string> command;
  const auto wrap = command_line.settings.find("wrap");
  if (wrap != command_line.settings.end()) {
    if (!read->rest.empty()) {
      return UsageError("give either a script or --wrap, not both (--wrap's command is the script)");
    }
    if (wrap->second.value.empty()) return UsageError("--wrap needs the command to run, e.g. --wrap='hostname'");
    // As sbatch writes it.
    text = "#!/bin/sh\n# This script was created by unisched sbatch --wrap.\n\n" + wrap->second.value + "\n";
    req.script_name = "--wrap";
    command = {"wrap"};
  } else if (!read->rest.empty()) {
    req.script_name = read->rest.front();
    auto file = io.read_script(req.script_name);
    if (!file.ok()) return file.error();
    text = std::move(file).value();
    command = read->rest;
  } else {
    auto input = io.read_stdin();
    if (!input.ok()) return input.error();
    text = std::move(input).value();
    req.script_name = "standard input";
    command = {"stdin"};
  }

  // The script's errors name the script, the command line's the option.
  auto named = [&req](Error e) {
    if (e.field == "script") e.message = req.script_name + ": " + e.message;
    return e;
  };
  model::BatchOptions options;
  if (Status s = model::ReadBatchScript(text, options); !s.ok()) return named(s.error());
  // The command line wins over the directives, setting by setting.
  for (auto& [setting, value] : command_line.settings) options.settings[setting] = std::move(value);
  // sbatch's default name: the script's file name, "wrap" or "sbatch" (standard input).
  if (!options.settings.count("job-name")) {
    const std::string name = wrap != command_line.settings.end() ? "wrap"
                             : read->rest.empty()                ? "sbatch"
                                                  : req.script_name.substr(req.script_name.rfind('/') + 1);
    options.settings["job-name"] = {"job-name", name, {0, "the default name (" + name + ")"}};
  }
  options.warnings.insert(options.warnings.end(), command_line.warnings.begin(), command_line.warnings.end());
  auto request = model::ResolveBatchOptions(options, io.context);
  if (!request.ok()) return named(request.error());

  req.body = codec::BatchRequestToBody(*request);
  req.body["script"] = std::move(text);
  req.body["command"] = std::move(command);
  // Without --kind the server gives the job the kind of its queue (-p), as
  // a Slurm partition has no workload kind.
  if (req.args.Has("kind") || req.args.Has("feature")) {
    auto workload = BuildWorkload(req.args.Get("kind"), req.args.All("feature"));
    if (!workload.ok()) return workload.error();
    req.body["workload"] = std::move(workload).value();
  }
  req.idempotency_key = req.args.Get("idempotency-key").value_or("");
  req.parsable = request->parsable;
  req.wait = request->wait;
  req.warnings = std::move(request->warnings);
  return req;
}

std::string CurrentDirectory() {
  std::string dir(4096, '\0');
  return ::getcwd(dir.data(), dir.size()) != nullptr ? std::string(dir.c_str()) : std::string();
}

namespace {

// At most model::kMaxScriptBytes of `in` (one byte more, so that a larger
// script is refused by the parser with its size, not cut short).
std::string ReadScriptText(std::istream& in) {
  std::string text(model::kMaxScriptBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace

SbatchSurroundings LocalSbatchSurroundings() {
  SbatchSurroundings io;
  io.read_script = [](const std::string& path) -> Result<std::string> {
    std::ifstream in(path, std::ios::binary);
    struct stat st {};
    if (!in || ::stat(path.c_str(), &st) != 0) {
      return Error::BadRequest("unreadable_script", "cannot read the script " + path + ": " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) return Error::BadRequest("unreadable_script", path + " is a directory, not a script");
    return ReadScriptText(in);
  };
  io.read_stdin = []() -> Result<std::string> { return ReadScriptText(std::cin); };
  std::map<std::string, std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) environment.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  io.context.environment = std::move(environment);
  io.context.directory = CurrentDirectory();
  io.context.now = std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now());
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) io.context.host = host;
  return io;
}

std::vector<std::string> SbatchWarningLines(const std::string& script_name,
                                            const std::vector<model::BatchWarning>& warnings) {
  std::vector<std::string> lines;
  for (const auto& w : warnings) {
    // The script's lines name the script; the command line's options stand alone.
    lines.push_back("unisched sbatch: warning: " + (w.source.line > 0 ? script_name + ": " : std::string()) + w.Text());
  }
  return lines;
}

}  // namespace unisched::cli
