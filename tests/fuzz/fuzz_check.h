#pragma once
// FUZZ_CHECK: an invariant a target checks on what a decoder returned. A
// broken one aborts, which libFuzzer reports as a crash and saves the input
// (a sanitizer report would not fire: the result is wrong, not undefined).
// Active in every build type, unlike assert().

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                     \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (false)
