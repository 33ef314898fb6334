// SPDX-License-Identifier: Apache-2.0
// Asking for a cache line before it is needed: for writing, the line arrives owned, so a
// read-modify-write that follows does not first fetch a shared copy and then ask again.
#pragma once

namespace tierflow {

inline void PrefetchForWrite(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" ::"m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pstl1keep, %0" ::"Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

inline void PrefetchForRead(const void* p) { __builtin_prefetch(p, 0); }

}  // namespace tierflow
