// SPDX-License-Identifier: Apache-2.0
#include "common/crc32c.h"

#include <array>
#include <cstring>

namespace tierflow {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli

constexpr std::array<std::uint32_t, 256> MakeTable() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kTable = MakeTable();

std::uint32_t RawTable(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t RawSse42(std::uint32_t crc, const unsigned char* p,
                                                         std::size_t n) {
  std::uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

// a * b modulo the polynomial, in the reflected representation (bit 31 is x^0).
std::uint32_t MulMod(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// kPow2[k] = x^(2^k) modulo the polynomial.
constexpr int kPowers = 64;
std::array<std::uint32_t, kPowers> MakePowers() {
  std::array<std::uint32_t, kPowers> t{};
  t[0] = 1u << 30;  // x^1
  for (int k = 1; k < kPowers; ++k) t[k] = MulMod(t[k - 1], t[k - 1]);
  return t;
}
const std::array<std::uint32_t, kPowers> kPow2 = MakePowers();

}  // namespace

std::uint32_t Crc32c(std::uint32_t seed, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = ~seed;
#if defined(__x86_64__)
  if (kHaveSse42) return ~RawSse42(crc, p, n);
#endif
  return ~RawTable(crc, p, n);
}

std::uint32_t Crc32cShift(std::uint32_t crc, std::uint64_t bytes) {
  // x^(8 * bytes) = product of x^(2^k) over the set bits of 8 * bytes (bit k + 3 of bytes).
  std::uint32_t factor = 1u << 31;  // x^0
  for (int k = 3; bytes != 0 && k < kPowers; ++k, bytes >>= 1) {
    if (bytes & 1) factor = MulMod(kPow2[k], factor);
  }
  return MulMod(factor, crc);
}

}  // namespace tierflow
