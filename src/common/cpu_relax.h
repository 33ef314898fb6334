// SPDX-License-Identifier: Apache-2.0
// A polite spin-wait hint: PAUSE on x86, YIELD on arm64.
#pragma once

namespace tierflow {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace tierflow
