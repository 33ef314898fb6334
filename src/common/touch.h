// SPDX-License-Identifier: Apache-2.0
// Touching memory to fault its pages in, as the device's (or a copy's) access would, without
// changing it.
#pragma once

namespace tierflow {

// Makes the page holding `p` present and writable in this process, as a write would (breaking
// copy-on-write, faulting where the page is read-only), without changing the byte or losing a
// concurrent write to it: an atomic OR of 0. Written so that no compiler can drop the write:
// LLVM turns an idempotent atomic read-modify-write (__atomic_fetch_or(p, 0)) into a fenced
// load, which faults nothing in for writing.
inline void TouchForWrite(void* p) {
  auto* b = static_cast<unsigned char*>(p);
#if defined(__x86_64__)
  asm volatile("lock orb $0, %0" : "+m"(*b) : : "memory");
#else
  unsigned char v = __atomic_load_n(b, __ATOMIC_RELAXED);
  while (
      !__atomic_compare_exchange_n(b, &v, v, /*weak=*/true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
}

// Makes the page holding `p` present for reading, as a read would.
inline void TouchForRead(const void* p) { (void)*static_cast<const volatile unsigned char*>(p); }

}  // namespace tierflow
