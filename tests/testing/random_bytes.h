// SPDX-License-Identifier: Apache-2.0
// Reproducible test data: n pseudo-random bytes from a seed.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace tierflow::testkit {

inline std::vector<unsigned char> RandomBytes(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

}  // namespace tierflow::testkit
