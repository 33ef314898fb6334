// SPDX-License-Identifier: Apache-2.0
// SSE2: every x86-64 CPU has it. On other architectures the kernels fall back to memcpy.
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace tierflow::kernels::internal {
namespace {

#if defined(__x86_64__)
struct Sse2 {
  static constexpr std::size_t kWidth = 16;
  using Vec = __m128i;
  static Vec LoadU(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static void Store(void* p, Vec v) { _mm_store_si128(static_cast<__m128i*>(p), v); }
  static void StoreU(void* p, Vec v) { _mm_storeu_si128(static_cast<__m128i*>(p), v); }
  static void Stream(void* p, Vec v) { _mm_stream_si128(static_cast<__m128i*>(p), v); }
  static Vec Broadcast64(std::uint64_t x) { return _mm_set1_epi64x(static_cast<long long>(x)); }
  static void Fence() { _mm_sfence(); }
};
template <bool kSoftwarePrefetch>
void Copy(void* d, const void* s, std::size_t n, bool nt) {
  CopyImpl<Sse2, kSoftwarePrefetch>(d, s, n, nt);
}
void Fill(void* d, std::uint64_t p, std::size_t ph, std::size_t n, bool nt) {
  FillImpl<Sse2>(d, p, ph, n, nt);
}
#else
template <bool>
void Copy(void* d, const void* s, std::size_t n, bool) {
  std::memcpy(d, s, n);
}
void Fill(void* dst, std::uint64_t p, std::size_t ph, std::size_t n, bool) {
  auto* d = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<unsigned char>(p >> (8 * ((ph + i) % 8)));
}
#endif

}  // namespace

#if TIERFLOW_RECOVERABLE_COPY
const Kernels kBaselineKernels = {&Copy<true>, &Fill, &tierflow_copy_recoverable_sse2};
const Kernels kBaselineKernelsHw = {&Copy<false>, &Fill, &tierflow_copy_recoverable_sse2};
#else
const Kernels kBaselineKernels = {&Copy<true>, &Fill};
const Kernels kBaselineKernelsHw = {&Copy<false>, &Fill};
#endif

}  // namespace tierflow::kernels::internal
