// SPDX-License-Identifier: Apache-2.0
// Loads and stores of a user thread that modifies cache entries while an engine may be copying
// them (a write-back of the same entry): allowed by the cache's contract, as a device's DMA
// may read memory a thread is writing; the entry stays dirty until marked again. Under
// ThreadSanitizer these accesses are left out of race detection (its dynamic annotations),
// so that the engines' own accesses stay checked against everything else.
#pragma once

#include <atomic>
#include <cstdint>

extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line) __attribute__((weak));
void AnnotateIgnoreReadsEnd(const char* file, int line) __attribute__((weak));
void AnnotateIgnoreWritesBegin(const char* file, int line) __attribute__((weak));
void AnnotateIgnoreWritesEnd(const char* file, int line) __attribute__((weak));
}

namespace tierflow::testkit {

inline std::uint64_t ConcurrentLoad(const void* p) {
  if (AnnotateIgnoreReadsBegin != nullptr) AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  const std::uint64_t v =
      std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(const_cast<void*>(p)))
          .load(std::memory_order_relaxed);
  if (AnnotateIgnoreReadsEnd != nullptr) AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  return v;
}

inline void ConcurrentStore(void* p, std::uint64_t v) {
  if (AnnotateIgnoreWritesBegin != nullptr) AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(p))
      .store(v, std::memory_order_relaxed);
  if (AnnotateIgnoreWritesEnd != nullptr) AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
}

}  // namespace tierflow::testkit
