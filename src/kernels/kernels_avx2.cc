// SPDX-License-Identifier: Apache-2.0
// Compiled with -mavx2; only called after a CPUID check.
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tierflow::kernels::internal {
namespace {

struct Avx2 {
  static constexpr std::size_t kWidth = 32;
  using Vec = __m256i;
  static Vec LoadU(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void Store(void* p, Vec v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }
  static void StoreU(void* p, Vec v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
  static void Stream(void* p, Vec v) { _mm256_stream_si256(static_cast<__m256i*>(p), v); }
  static Vec Broadcast64(std::uint64_t x) { return _mm256_set1_epi64x(static_cast<long long>(x)); }
  static void Fence() { _mm_sfence(); }
};
template <bool kSoftwarePrefetch>
void Copy(void* d, const void* s, std::size_t n, bool nt) {
  CopyImpl<Avx2, kSoftwarePrefetch>(d, s, n, nt);
  _mm256_zeroupper();
}
void Fill(void* d, std::uint64_t p, std::size_t ph, std::size_t n, bool nt) {
  FillImpl<Avx2>(d, p, ph, n, nt);
  _mm256_zeroupper();
}

}  // namespace

#if TIERFLOW_RECOVERABLE_COPY
const Kernels kAvx2Kernels = {&Copy<true>, &Fill, &tierflow_copy_recoverable_avx2};
const Kernels kAvx2KernelsHw = {&Copy<false>, &Fill, &tierflow_copy_recoverable_avx2};
#else
const Kernels kAvx2Kernels = {&Copy<true>, &Fill};
const Kernels kAvx2KernelsHw = {&Copy<false>, &Fill};
#endif

}  // namespace tierflow::kernels::internal
#else
namespace tierflow::kernels::internal {
const Kernels kAvx2Kernels = {nullptr, nullptr};  // never selected: IsaSupported is false
const Kernels kAvx2KernelsHw = {nullptr, nullptr};
}  // namespace tierflow::kernels::internal
#endif
