// SPDX-License-Identifier: Apache-2.0
// Compiled with -mavx512f; only called after a CPUID check.
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/vec_avx512.h"

namespace tierflow::kernels::internal {
namespace {

template <bool kSoftwarePrefetch>
void Copy(void* d, const void* s, std::size_t n, bool nt) {
  CopyImpl<Avx512, kSoftwarePrefetch>(d, s, n, nt);
  _mm256_zeroupper();
}
void Fill(void* d, std::uint64_t p, std::size_t ph, std::size_t n, bool nt) {
  FillImpl<Avx512>(d, p, ph, n, nt);
  _mm256_zeroupper();
}

}  // namespace

const Kernels kAvx512Kernels = {&Copy<true>, &Fill};
const Kernels kAvx512KernelsHw = {&Copy<false>, &Fill};

}  // namespace tierflow::kernels::internal
#else
namespace tierflow::kernels::internal {
const Kernels kAvx512Kernels = {nullptr, nullptr};  // never selected: IsaSupported is false
const Kernels kAvx512KernelsHw = {nullptr, nullptr};
}  // namespace tierflow::kernels::internal
#endif
