// Entry point of unisched-supervisor: `unisched-supervisor ATTEMPT_DIR`
// runs one attempt; `unisched-supervisor --zygote` (fd 3: the executor's
// socket) forks supervisors on request (supervisor/zygote.h).

#include <cstdio>
#include <cstring>

#include "supervisor/supervisor.h"
#include "supervisor/zygote.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--zygote") == 0) return unisched::supervisor::RunZygote(3);
  if (argc != 2) {
    std::fprintf(stderr, "usage: unisched-supervisor ATTEMPT_DIR | --zygote\n");
    return 2;
  }
  return unisched::supervisor::RunSupervisor(argv[1]);
}
