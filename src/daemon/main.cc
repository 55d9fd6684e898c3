// unisched: one binary for the daemon, the config check and the CLI client.

#include <string>

#include "daemon/server.h"
#include "daemon/store_command.h"
#include "unisched/agent/agent.h"
#include "unisched/cli/cli.h"

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "server") return unisched::daemon::RunServer(argc, argv);
  if (command == "validate-config") return unisched::daemon::RunValidateConfig(argc, argv);
  if (command == "agent") return unisched::agent::RunAgent(argc, argv);
  if (command == "store") return unisched::daemon::RunStoreCommand(argc, argv);
  return unisched::cli::RunCli(argc, argv);
}
