// SPDX-License-Identifier: Apache-2.0
// The copy and fill loops, written once over a vector type V and instantiated per instruction
// set in kernels_<isa>.cc (each compiled with that ISA enabled).
//
// V provides: kWidth, Vec, LoadU, Store (aligned), StoreU, Stream (aligned, non-temporal),
// Broadcast64, Fence (after streaming stores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kernels.h"

namespace tierflow::kernels::internal {

// How far ahead of its loads a streaming copy asks for the source (bytes), in the kernels with
// software prefetch. Streaming copies are the ones larger than the caches, so the source comes
// from memory, where on some cores (AMD Zen) the hardware prefetchers alone kept the copy
// behind glibc's memcpy, and on others (Intel Xeon) these prefetches slow it to 0.7x: which
// kernel streams is measured (calibrate.cc; docs/architecture.md, CPU engine).
inline constexpr std::size_t kStreamPrefetchAhead = 512;

// Aligned stores (streaming when kNt) from possibly unaligned loads; advances d, s and n and
// leaves fewer than V::kWidth bytes.
template <class V, bool kNt, bool kSoftwarePrefetch>
inline void CopyAlignedBody(char*& d, const char*& s, std::size_t& n) {
  constexpr std::size_t W = V::kWidth;
  auto put = [](void* p, typename V::Vec v) {
    if constexpr (kNt) {
      V::Stream(p, v);
    } else {
      V::Store(p, v);
    }
  };
  for (; n >= 4 * W; n -= 4 * W, d += 4 * W, s += 4 * W) {
    if constexpr (kNt && kSoftwarePrefetch) {
      // Non-temporal (locality 0): into the core's nearest cache only, as the line is read
      // once. A prefetch past the source's end is harmless: prefetches never fault.
      for (std::size_t k = 0; k < 4 * W; k += 64) {
        __builtin_prefetch(s + kStreamPrefetchAhead + k, 0, 0);
      }
    }
    auto a = V::LoadU(s), b = V::LoadU(s + W), c = V::LoadU(s + 2 * W), e = V::LoadU(s + 3 * W);
    put(d, a);
    put(d + W, b);
    put(d + 2 * W, c);
    put(d + 3 * W, e);
  }
  for (; n >= W; n -= W, d += W, s += W) put(d, V::LoadU(s));
}

template <class V, bool kSoftwarePrefetch>
void CopyImpl(void* dst, const void* src, std::size_t n, bool nt) {
  constexpr std::size_t W = V::kWidth;
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  if (n < 4 * W) {
    std::memcpy(d, s, n);
    return;
  }
  // Unaligned first and last vectors cover the ragged edges; the loop runs on aligned stores.
  const typename V::Vec first = V::LoadU(s);
  const typename V::Vec last = V::LoadU(s + n - W);
  char* const end = d + n;
  std::size_t head = (W - (reinterpret_cast<std::uintptr_t>(d) & (W - 1))) & (W - 1);
  V::StoreU(d, first);
  d += head;
  s += head;
  n -= head;
  if (nt) {
    CopyAlignedBody<V, true, kSoftwarePrefetch>(d, s, n);
    V::Fence();
  } else {
    CopyAlignedBody<V, false, false>(d, s, n);
  }
  if (n != 0) V::StoreU(end - W, last);
}

template <class V>
void FillImpl(void* dst, std::uint64_t pattern, std::size_t phase, std::size_t n, bool nt) {
  constexpr std::size_t W = V::kWidth;
  auto* d = static_cast<unsigned char*>(dst);
  if (n < 4 * W) {
    for (std::size_t i = 0; i < n; ++i) {
      d[i] = static_cast<unsigned char>(pattern >> (8 * ((phase + i) % 8)));
    }
    return;
  }
  unsigned char* const end = d + n;
  const std::size_t end_phase = phase + n - W;
  V::StoreU(d, V::Broadcast64(RotatePattern(pattern, phase)));
  std::size_t head = (W - (reinterpret_cast<std::uintptr_t>(d) & (W - 1))) & (W - 1);
  d += head;
  n -= head;
  const typename V::Vec body = V::Broadcast64(RotatePattern(pattern, phase + head));
  if (nt) {
    for (; n >= W; n -= W, d += W) V::Stream(d, body);
    V::Fence();
  } else {
    for (; n >= W; n -= W, d += W) V::Store(d, body);
  }
  if (n != 0) V::StoreU(end - W, V::Broadcast64(RotatePattern(pattern, end_phase)));
}

}  // namespace tierflow::kernels::internal
