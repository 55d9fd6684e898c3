#pragma once
// `unisched store restore`: offline commands on the daemon's database
// (docs/store.md).

namespace unisched::daemon {

int RunStoreCommand(int argc, char** argv);

}  // namespace unisched::daemon
