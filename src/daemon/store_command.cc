// `unisched store restore [--config FILE] [--state-dir DIR] [--from FILE]`.

#include "daemon/store_command.h"

#include <filesystem>
#include <iostream>
#include <string>

#include "daemon/state_lock.h"
#include "unisched/config/config.h"
#include "unisched/store/backup.h"

namespace unisched::daemon {

namespace {
constexpr const char* kUsage =
    "usage: unisched store restore [--config FILE] [--state-dir DIR] [--from BACKUP]\n"
    "  Puts back the database as it was before the last schema migration (the copy a newer\n"
    "  unisched keeps as unisched.db.schema-N.backup), or BACKUP. The daemon must be stopped;\n"
    "  the replaced database is kept beside it. See docs/store.md.";
}  // namespace

int RunStoreCommand(int argc, char** argv) {
  if (argc < 3 || std::string(argv[2]) != "restore") {
    std::cerr << kUsage << "\n";
    return 2;
  }
  std::string config_path, state_dir, from;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    std::string* slot = a == "--config"      ? &config_path
                        : a == "--state-dir" ? &state_dir
                        : a == "--from"      ? &from
                                             : nullptr;
    if (!slot || i + 1 >= argc) {
      std::cerr << "error: unexpected argument '" << a << "'\n" << kUsage << "\n";
      return 2;
    }
    *slot = argv[++i];
  }
  if (state_dir.empty()) {
    auto loaded = config::LoadConfigFileOrDefault(config_path);
    if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
      std::cerr << "error: invalid config " << (config_path.empty() ? "<embedded>" : config_path) << ":\n";
      for (const auto& e : *errors) std::cerr << e.ToString() << "\n";
      return 2;
    }
    state_dir = std::get<config::Config>(loaded).server.state_dir;
  }
  state_dir = std::filesystem::absolute(state_dir).string();
  if (!std::filesystem::is_directory(state_dir)) {
    std::cerr << "error: no state directory " << state_dir << " (use --state-dir or --config)\n";
    return 1;
  }
  auto lock = StateLock::Acquire(state_dir);
  if (!lock.ok()) {
    std::cerr << "error: " << lock.error().message << "\n";
    return 1;
  }
  auto report = store::RestoreBackup(state_dir + "/unisched.db", from);
  if (!report.ok()) {
    std::cerr << "error: " << report.error().message << "\n";
    return 1;
  }
  std::cout << "restored schema version " << report->restored_version << " from " << report->backup << "\n"
            << "the database of schema version " << report->replaced_version << " is kept at "
            << report->replaced_kept_at << "\n"
            << "start the unisched that knows schema version " << report->restored_version
            << "; a newer one migrates it again (and keeps a new backup first)\n";
  return 0;
}

}  // namespace unisched::daemon
