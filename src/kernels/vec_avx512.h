// SPDX-License-Identifier: Apache-2.0
// The AVX-512F vector operations the kernel template needs. Include <immintrin.h> first and
// compile with -mavx512f; the emulated kernel test includes SIMDe's AVX-512 instead, so the
// same code runs on CPUs without AVX-512.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tierflow::kernels::internal {
// Internal linkage: the emulated test defines the same name over SIMDe's types.
namespace {

struct Avx512 {
  static constexpr std::size_t kWidth = 64;
  using Vec = __m512i;
  static Vec LoadU(const void* p) { return _mm512_loadu_si512(p); }
  static void Store(void* p, Vec v) { _mm512_store_si512(p, v); }
  static void StoreU(void* p, Vec v) { _mm512_storeu_si512(p, v); }
  static void Stream(void* p, Vec v) { _mm512_stream_si512(static_cast<__m512i*>(p), v); }
  static Vec Broadcast64(std::uint64_t x) { return _mm512_set1_epi64(static_cast<long long>(x)); }
  static void Fence() { _mm_sfence(); }
};

}  // namespace
}  // namespace tierflow::kernels::internal
