// Entry point of unisched-supervisor: `unisched-supervisor ATTEMPT_DIR`
// runs one attempt; `unisched-supervisor --host` (fd 3: the executor's
// socket) runs every attempt the executor sends (supervisor/supervisor.h).

#include <cstdio>
#include <cstring>

#include "supervisor/supervisor.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--host") == 0) return unisched::supervisor::RunHost(3);
  if (argc != 2) {
    std::fprintf(stderr, "usage: unisched-supervisor ATTEMPT_DIR | --host\n");
    return 2;
  }
  return unisched::supervisor::RunSupervisor(argv[1]);
}
