// Entry point of unisched-supervisor: `unisched-supervisor ATTEMPT_DIR`.

#include <cstdio>

#include "supervisor/supervisor.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: unisched-supervisor ATTEMPT_DIR\n");
    return 2;
  }
  return unisched::supervisor::RunSupervisor(argv[1]);
}
