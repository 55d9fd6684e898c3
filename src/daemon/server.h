#pragma once
// `unisched server` and `unisched validate-config` (the composition root is daemon.h).

namespace unisched::daemon {

int RunServer(int argc, char** argv);
int RunValidateConfig(int argc, char** argv);

}  // namespace unisched::daemon
