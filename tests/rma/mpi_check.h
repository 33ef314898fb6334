// SPDX-License-Identifier: Apache-2.0
// CHECK for the MPI test programs, which run under mpirun without a test framework: a failed
// condition prints the rank, the place, the condition and a printf-style message, and counts
// one failure. The including file defines `int g_rank` and `int g_failures` (the program's exit
// status and closing line come from g_failures).
#pragma once

#include <cstdio>

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed: ", g_rank, __FILE__, __LINE__, \
                   #cond);                                                                   \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fprintf(stderr, "\n");                                                            \
      ++g_failures;                                                                          \
    }                                                                                        \
  } while (0)
