// SPDX-License-Identifier: Apache-2.0
#include "ca/grid.h"

#include <cstring>
#include <utility>

namespace ca {

Block Block::Of(const Shape& s, int rank, int ranks) {
  const int base = s.rows / ranks, extra = s.rows % ranks;
  return {rank * base + (rank < extra ? rank : extra), base + (rank < extra ? 1 : 0)};
}

void Seed(const Shape& s, const Block& b, std::uint8_t* array) {
  for (int i = 1; i <= b.count; ++i) {
    std::uint8_t* line = Line(array, s, i);
    const std::uint64_t row = static_cast<std::uint64_t>(b.first + i - 1);
    for (int j = 0; j < s.cells; ++j) {
      // splitmix64 of the cell's global index: about a third of the cells start alive.
      std::uint64_t z = row * static_cast<std::uint64_t>(s.cells) + j + 0x9e3779b97f4a7c15ull;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      line[j + 1] = (z ^ (z >> 31)) % 3 == 0;
    }
    line[0] = line[s.cells];
    line[s.cells + 1] = line[1];
  }
}

void StepLine(const Shape& s, const std::uint8_t* current, std::uint8_t* next, int i) {
  const std::size_t w = s.width();
  const std::uint8_t* up = current + (i - 1) * w;
  const std::uint8_t* mid = current + i * w;
  const std::uint8_t* down = current + (i + 1) * w;
  std::uint8_t* out = next + i * w;
  // Byte arithmetic on 0/1 cells (at most 8): the compiler vectorises this loop, once the
  // bound is a local (stores through a byte pointer could change s.cells, as far as it knows).
  const int cells = s.cells;
  for (int j = 1; j <= cells; ++j) {
    const std::uint8_t n = up[j - 1] + up[j] + up[j + 1] + mid[j - 1] + mid[j + 1] + down[j - 1] +
                           down[j] + down[j + 1];
    out[j] = (n == 3) | (mid[j] & (n == 2));
  }
  out[0] = out[cells];
  out[cells + 1] = out[1];
}

std::uint64_t HashLines(const Shape& s, const std::uint8_t* first_line, int lines,
                        std::uint64_t hash) {
  for (int i = 0; i < lines; ++i) {
    const std::uint8_t* line = first_line + static_cast<std::size_t>(i) * s.width();
    for (int j = 1; j <= s.cells; ++j) hash = (hash ^ line[j]) * 1099511628211ull;
  }
  return hash;
}

std::uint64_t SerialHash(const Shape& s, int iterations) {
  const Block all{0, s.rows};
  std::vector<std::uint8_t> current(all.bytes(s)), next(all.bytes(s));
  Seed(s, all, current.data());
  for (int t = 0; t < iterations; ++t) {
    // The torus: the ghost lines are the opposite ends.
    std::memcpy(Line(current.data(), s, 0), Line(current.data(), s, s.rows), s.width());
    std::memcpy(Line(current.data(), s, s.rows + 1), Line(current.data(), s, 1), s.width());
    for (int i = 1; i <= s.rows; ++i) StepLine(s, current.data(), next.data(), i);
    std::swap(current, next);
  }
  return HashLines(s, Line(current.data(), s, 1), s.rows, kHashStart);
}

}  // namespace ca
