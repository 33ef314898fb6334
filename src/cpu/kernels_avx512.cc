// Compiled with -mavx512f; only called after a CPUID check.
#include "cpu/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tierflow::cpu::internal {
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
