// SPDX-License-Identifier: Apache-2.0
// The AVX-512 kernels on a CPU without AVX-512: the same kernel template and vector traits as
// src/cpu/kernels_avx512.cc, over SIMDe's portable implementation of the intrinsics. Aligned
// and streaming stores check their alignment, as the hardware does (it faults on a misaligned
// one). On a CPU with AVX-512F, tests/cpu/property_test.cc runs the real kernels as well.
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "testing/random_bytes.h"

namespace {
long g_misaligned_stores = 0;
long g_aligned_stores = 0;
long g_fences = 0;
inline void CheckedAlignedStore(void* p, simde__m512i v) {
  ++g_aligned_stores;
  if (reinterpret_cast<std::uintptr_t>(p) % 64 != 0) ++g_misaligned_stores;
  simde_mm512_storeu_si512(p, v);
}
inline void CountedFence() { ++g_fences; }
}  // namespace

#undef _mm512_store_si512
#define _mm512_store_si512(p, v) CheckedAlignedStore(p, v)
#define _mm512_stream_si512(p, v) CheckedAlignedStore(p, v)
#define _mm_sfence() CountedFence()

#include "kernels/kernels_impl.h"
#include "kernels/vec_avx512.h"

namespace tierflow::kernels::internal {
namespace {

using tierflow::testkit::RandomBytes;

unsigned char PatternByte(std::uint64_t pattern, std::size_t phase, std::size_t i) {
  return static_cast<unsigned char>(pattern >> (8 * ((phase + i) % 8)));
}

struct Counters {
  long misaligned = g_misaligned_stores, aligned = g_aligned_stores, fences = g_fences;
};

TEST(Avx512Emulated, CopyEverySmallSizeAndAlignment) {
  auto src = RandomBytes(1024, 1);
  std::vector<unsigned char> dst(1200), ref(1200);
  Counters before;
  for (bool prefetch : {true, false}) {
    for (bool nt : {false, true}) {
      for (std::size_t n = 0; n <= 700; ++n) {
        for (std::size_t d : {0, 1, 31, 63, 64}) {
          for (std::size_t s : {0, 3, 64}) {
            std::fill(dst.begin(), dst.end(), 0xee);
            std::fill(ref.begin(), ref.end(), 0xee);
            if (prefetch) {
              CopyImpl<Avx512, true>(dst.data() + d, src.data() + s, n, nt);
            } else {
              CopyImpl<Avx512, false>(dst.data() + d, src.data() + s, n, nt);
            }
            std::memcpy(ref.data() + d, src.data() + s, n);
            ASSERT_EQ(dst, ref) << "n=" << n << " dst+" << d << " src+" << s << " nt=" << nt;
          }
        }
      }
    }
  }
  EXPECT_EQ(g_misaligned_stores, before.misaligned) << "an aligned store got a misaligned address";
  EXPECT_GT(g_aligned_stores, before.aligned) << "the aligned loop never ran";
  EXPECT_GT(g_fences, before.fences) << "streaming copies must end with a fence";
}

TEST(Avx512Emulated, FillEverySmallSizePhaseAndAlignment) {
  std::vector<unsigned char> dst(1200), ref(1200);
  const std::uint64_t pattern = 0x0123456789abcdefull;
  Counters before;
  for (bool nt : {false, true}) {
    for (std::size_t n = 0; n <= 700; n += (n < 300 ? 1 : 7)) {
      for (std::size_t d : {0, 5, 63}) {
        for (std::size_t phase : {0, 3, 7, 13}) {
          std::fill(dst.begin(), dst.end(), 0);
          std::fill(ref.begin(), ref.end(), 0);
          FillImpl<Avx512>(dst.data() + d, pattern, phase, n, nt);
          for (std::size_t i = 0; i < n; ++i) ref[d + i] = PatternByte(pattern, phase, i);
          ASSERT_EQ(dst, ref) << "n=" << n << " dst+" << d << " phase=" << phase << " nt=" << nt;
        }
      }
    }
  }
  EXPECT_EQ(g_misaligned_stores, before.misaligned);
  EXPECT_GT(g_aligned_stores, before.aligned);
}

TEST(Avx512Emulated, RandomLargeCopiesAndFills) {
  std::mt19937_64 rng(42);
  const std::size_t cap = 4 << 20;
  auto src = RandomBytes(cap + 4096, 2);
  std::vector<unsigned char> dst(cap + 4096);
  Counters before;
  for (int i = 0; i < 60; ++i) {
    std::size_t n = rng() % cap;
    std::size_t d = rng() % 4096, s = rng() % 4096;
    bool nt = rng() & 1;
    std::fill(dst.begin(), dst.end(), 0);
    if (rng() & 1) {
      CopyImpl<Avx512, true>(dst.data() + d, src.data() + s, n, nt);
    } else {
      CopyImpl<Avx512, false>(dst.data() + d, src.data() + s, n, nt);
    }
    ASSERT_EQ(std::memcmp(dst.data() + d, src.data() + s, n), 0) << "n=" << n << " nt=" << nt;
    ASSERT_TRUE(std::all_of(dst.begin(), dst.begin() + d, [](unsigned char c) { return c == 0; }));
    ASSERT_TRUE(
        std::all_of(dst.begin() + d + n, dst.end(), [](unsigned char c) { return c == 0; }));
    std::uint64_t pattern = rng();
    std::size_t phase = rng() % 64;
    FillImpl<Avx512>(dst.data() + d, pattern, phase, n, nt);
    for (std::size_t k = 0; k < n; k += 1 + k % 997) {
      ASSERT_EQ(dst[d + k], PatternByte(pattern, phase, k)) << "n=" << n << " at " << k;
    }
    if (n > 0) {
      ASSERT_EQ(dst[d + n - 1], PatternByte(pattern, phase, n - 1));
    }
  }
  EXPECT_EQ(g_misaligned_stores, before.misaligned);
}

}  // namespace
}  // namespace tierflow::kernels::internal
