// Compiled with -mavx512f; only called after a CPUID check.
#include "cpu/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu/vec_avx512.h"

namespace tierflow::cpu::internal {
namespace {

void Copy(void* d, const void* s, std::size_t n, bool nt) {
  CopyImpl<Avx512>(d, s, n, nt);
  _mm256_zeroupper();
}
void Fill(void* d, std::uint64_t p, std::size_t ph, std::size_t n, bool nt) {
  FillImpl<Avx512>(d, p, ph, n, nt);
  _mm256_zeroupper();
}

}  // namespace

const Kernels kAvx512Kernels = {&Copy, &Fill};

}  // namespace tierflow::cpu::internal
#else
namespace tierflow::cpu::internal {
const Kernels kAvx512Kernels = {nullptr, nullptr};  // never selected: IsaSupported is false
}
#endif
