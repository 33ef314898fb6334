// SPDX-License-Identifier: Apache-2.0
// CRC-32C against a bit-at-a-time reference, and the combination of pieces in any order.
#include "common/crc32c.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "testing/random_bytes.h"

namespace tierflow {
namespace {

using tierflow::testkit::RandomBytes;

// The definition: reflected polynomial 0x82F63B78, one bit at a time, seed and result inverted.
std::uint32_t Reference(std::uint32_t seed, const unsigned char* p, std::size_t n) {
  std::uint32_t c = ~seed;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

TEST(Crc32c, CheckValueAndReference) {
  const char* check = "123456789";
  EXPECT_EQ(Crc32c(0, check, 9), 0xE3069283u);  // the catalogue's check value for CRC-32C
  EXPECT_EQ(Crc32c(0, nullptr, 0), 0u);
  for (std::size_t n : {1u, 7u, 8u, 9u, 63u, 64u, 1000u, 4097u}) {
    auto data = RandomBytes(n, static_cast<unsigned>(n));
    for (std::uint32_t seed : {0u, 1u, 0xdeadbeefu}) {
      EXPECT_EQ(Crc32c(seed, data.data(), n), Reference(seed, data.data(), n)) << n << " " << seed;
    }
  }
}

TEST(Crc32c, ContinuesFromASeed) {
  auto data = RandomBytes(10000, 3);
  for (std::size_t cut : {0u, 1u, 4095u, 5000u, 10000u}) {
    EXPECT_EQ(Crc32c(Crc32c(0, data.data(), cut), data.data() + cut, data.size() - cut),
              Crc32c(0, data.data(), data.size()))
        << cut;
  }
}

TEST(Crc32c, PiecesCombineInAnyOrder) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    const std::size_t n = 1 + rng() % 200000;
    auto data = RandomBytes(n, static_cast<unsigned>(round));
    const std::uint32_t seed = rng();
    std::vector<std::size_t> cuts = {0, n};
    for (int k = 0; k < 5; ++k) cuts.push_back(rng() % (n + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::size_t> order(cuts.size() - 1);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::uint32_t combined = Crc32cShift(seed, n);
    for (std::size_t i : order) {
      std::size_t lo = cuts[i], hi = cuts[i + 1];
      combined ^= Crc32cShift(Crc32c(0, data.data() + lo, hi - lo), n - hi);
    }
    EXPECT_EQ(combined, Crc32c(seed, data.data(), n)) << "round " << round;
  }
  EXPECT_EQ(Crc32cShift(0x12345678u, 0), 0x12345678u);
  EXPECT_EQ(Crc32cShift(0, 1000), 0u);
}

}  // namespace
}  // namespace tierflow
