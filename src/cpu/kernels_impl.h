// The copy and fill loops, written once over a vector type V and instantiated per instruction
// set in kernels_<isa>.cc (each compiled with that ISA enabled).
//
// V provides: kWidth, Vec, LoadU, Store (aligned), StoreU, Stream (aligned, non-temporal),
// Broadcast64, Fence (after streaming stores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels.h"

namespace tierflow::cpu::internal {

template <class V>
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
    for (; n >= 4 * W; n -= 4 * W, d += 4 * W, s += 4 * W) {
      auto a = V::LoadU(s), b = V::LoadU(s + W), c = V::LoadU(s + 2 * W), e = V::LoadU(s + 3 * W);
      V::Stream(d, a);
      V::Stream(d + W, b);
      V::Stream(d + 2 * W, c);
      V::Stream(d + 3 * W, e);
    }
    for (; n >= W; n -= W, d += W, s += W) V::Stream(d, V::LoadU(s));
    V::Fence();
  } else {
    for (; n >= 4 * W; n -= 4 * W, d += 4 * W, s += 4 * W) {
      auto a = V::LoadU(s), b = V::LoadU(s + W), c = V::LoadU(s + 2 * W), e = V::LoadU(s + 3 * W);
      V::Store(d, a);
      V::Store(d + W, b);
      V::Store(d + 2 * W, c);
      V::Store(d + 3 * W, e);
    }
    for (; n >= W; n -= W, d += W, s += W) V::Store(d, V::LoadU(s));
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

}  // namespace tierflow::cpu::internal
