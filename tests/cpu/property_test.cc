// SPDX-License-Identifier: Apache-2.0
// Property tests: random sizes (0 B .. 64 MiB) and alignments (0..4095 byte offsets) of copy,
// move, fill and compare against glibc, for every instruction set this CPU runs, both inline
// and handed to workers, temporal and non-temporal.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "testing/engine_fixture.h"

namespace tierflow {
namespace {

using testkit::MakeCpuEngine;

struct Config {
  CpuIsa isa;
  std::size_t inline_max;
  std::size_t nt_threshold;
};

std::vector<Config> Configs() {
  std::vector<Config> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!kernels::IsaSupported(isa)) continue;
    out.push_back({isa, 32 << 10, 0});       // defaults
    out.push_back({isa, 0, 1 << 20});        // always workers, NT above 1 MiB
    out.push_back({isa, 128u << 20, 4096});  // always inline, NT above 4 KiB
  }
  return out;
}

unsigned Seed() {
  if (const char* s = std::getenv("TIERFLOW_SEED"))
    return static_cast<unsigned>(std::strtoul(s, nullptr, 10));
  return 20261121u;
}

std::size_t RandomSize(std::mt19937_64& rng) {
  // Log-uniform over 0 .. 64 MiB, with extra weight on tiny and vector-edge sizes.
  std::uniform_int_distribution<int> pick(0, 9);
  if (pick(rng) == 0) return std::uniform_int_distribution<std::size_t>(0, 300)(rng);
  double exp = std::uniform_real_distribution<double>(0, 26)(rng);
  return static_cast<std::size_t>(std::pow(2.0, exp));
}

class Property : public ::testing::TestWithParam<Config> {};

TEST_P(Property, MatchesGlibc) {
  const Config cfg = GetParam();
  CpuEngineOptions o;
  o.isa = cfg.isa;
  o.inline_max_bytes = cfg.inline_max;
  o.nt_threshold_bytes = cfg.nt_threshold;
  o.min_piece_bytes = 64 << 10;
  auto e = MakeCpuEngine(o);
  ASSERT_TRUE(e);
  std::mt19937_64 rng(Seed() + static_cast<unsigned>(cfg.isa) * 1000 + cfg.inline_max % 997);
  const std::size_t kCap = (64u << 20) + 8192;
  std::vector<unsigned char> src(kCap), dst(kCap), ref(kCap);
  for (std::size_t i = 0; i < kCap; ++i) src[i] = static_cast<unsigned char>(rng());
  std::uniform_int_distribution<std::size_t> off(0, 4095);
  for (int iter = 0; iter < 24; ++iter) {
    const std::size_t n = RandomSize(rng), so = off(rng), d_o = off(rng);
    SCOPED_TRACE(::testing::Message()
                 << "isa " << CpuIsaName(cfg.isa) << " seed " << Seed() << " iter " << iter
                 << " size " << n << " src+" << so << " dst+" << d_o);
    const std::size_t span = n + 4096;  // only this part of dst is compared each round
    std::memset(dst.data(), 0xee, span + 4096);
    std::memset(ref.data(), 0xee, span + 4096);
    Result<Handle> h = e->Submit(Operation::Copy(dst.data() + d_o, src.data() + so, n));
    if (n == 0) {
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(0, std::memcmp(dst.data(), ref.data(), span)) << "a rejected copy writes nothing";
      continue;
    }
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(h->Wait().ok());
    std::memcpy(ref.data() + d_o, src.data() + so, n);
    ASSERT_EQ(0, std::memcmp(dst.data(), ref.data(), span + 4096));

    // Overlapping move within dst (forward or backward by a random distance).
    const std::size_t shift = off(rng) + 1;
    const bool forward = rng() & 1;
    unsigned char* from = forward ? dst.data() : dst.data() + shift;
    unsigned char* to = forward ? dst.data() + shift : dst.data();
    std::size_t mn = std::min(n, kCap - shift - 1);
    ASSERT_TRUE(e->Submit(Operation::Move(to, from, mn))->Wait().ok());
    std::memmove(forward ? ref.data() + shift : ref.data(),
                 forward ? ref.data() : ref.data() + shift, mn);
    ASSERT_EQ(0, std::memcmp(dst.data(), ref.data(), span + 4096));

    // Fill with a random pattern.
    const std::uint64_t pattern = rng();
    ASSERT_TRUE(e->Submit(Operation::Fill(dst.data() + d_o, pattern, n))->Wait().ok());
    for (std::size_t i = 0; i < n; ++i)
      ref[d_o + i] = static_cast<unsigned char>(pattern >> (8 * (i % 8)));
    ASSERT_EQ(0, std::memcmp(dst.data(), ref.data(), span + 4096));

    // Compare: equal, then one flipped byte.
    Result<Handle> eq = e->Submit(Operation::Compare(dst.data(), ref.data(), span));
    ASSERT_TRUE(eq->Wait().ok());
    EXPECT_TRUE(eq->result().equal);
    const std::size_t flip = std::uniform_int_distribution<std::size_t>(0, span - 1)(rng);
    ref[flip] ^= 0x40;
    Result<Handle> ne = e->Submit(Operation::Compare(dst.data(), ref.data(), span));
    ASSERT_TRUE(ne->Wait().ok());
    EXPECT_FALSE(ne->result().equal);
    EXPECT_EQ(ne->result().first_difference, flip);
    ref[flip] ^= 0x40;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Property, ::testing::ValuesIn(Configs()),
                         [](const ::testing::TestParamInfo<Config>& i) {
                           return std::string(CpuIsaName(i.param.isa)) + "_inline" +
                                  std::to_string(i.param.inline_max) + "_nt" +
                                  std::to_string(i.param.nt_threshold);
                         });

// Every supported ISA's kernels, with software prefetch and with the hardware's alone.
std::vector<std::pair<CpuIsa, kernels::StreamPrefetch>> EveryKernelSet() {
  std::vector<std::pair<CpuIsa, kernels::StreamPrefetch>> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!kernels::IsaSupported(isa)) continue;
    out.emplace_back(isa, kernels::StreamPrefetch::kSoftware);
    out.emplace_back(isa, kernels::StreamPrefetch::kHardware);
  }
  return out;
}

TEST(Kernels, EdgeSizesEveryIsa) {
  for (auto [isa, prefetch] : EveryKernelSet()) {
    const kernels::Kernels& k = kernels::KernelsFor(isa, prefetch);
    std::vector<unsigned char> src(1024), dst(1200), ref(1200);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    for (bool nt : {false, true}) {
      for (std::size_t n = 0; n <= 600; ++n) {
        for (std::size_t o : {0, 1, 31, 63}) {
          std::fill(dst.begin(), dst.end(), 0);
          std::fill(ref.begin(), ref.end(), 0);
          k.copy(dst.data() + o, src.data() + 3, n, nt);
          std::memcpy(ref.data() + o, src.data() + 3, n);
          ASSERT_EQ(dst, ref) << CpuIsaName(isa) << " copy n=" << n << " o=" << o << " nt=" << nt;
          k.fill(dst.data() + o, 0x1122334455667788ull, 5, n, nt);
          for (std::size_t i = 0; i < n; ++i) {
            ref[o + i] = static_cast<unsigned char>(0x1122334455667788ull >> (8 * ((5 + i) % 8)));
          }
          ASSERT_EQ(dst, ref) << CpuIsaName(isa) << " fill n=" << n << " o=" << o << " nt=" << nt;
        }
      }
    }
  }
}

// Streaming copies ask for the source ahead of their loads (kStreamPrefetchAhead): a source
// that ends where an unreadable page begins must still copy, byte for byte, without a fault.
TEST(Kernels, StreamingCopyOfASourceEndingAtAnUnreadablePage) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t data = 4 * page;
  auto* map = static_cast<unsigned char*>(
      mmap(nullptr, data + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(mprotect(map + data, page, PROT_NONE), 0);
  for (std::size_t i = 0; i < data; ++i) map[i] = static_cast<unsigned char>(i * 13 + 5);
  std::vector<unsigned char> dst(data + 64);
  for (auto [isa, prefetch] : EveryKernelSet()) {
    const kernels::Kernels& k = kernels::KernelsFor(isa, prefetch);
    for (std::size_t n : {std::size_t{256}, std::size_t{1000}, page, data - 3, data}) {
      const unsigned char* src = map + data - n;  // its last byte is the page's last readable one
      std::fill(dst.begin(), dst.end(), 0);
      k.copy(dst.data() + 1, src, n, /*nt=*/true);
      ASSERT_EQ(std::memcmp(dst.data() + 1, src, n), 0) << CpuIsaName(isa) << " n=" << n;
    }
  }
  munmap(map, data + page);
}

}  // namespace
}  // namespace tierflow
