// SPDX-License-Identifier: Apache-2.0
// The cellular automaton of the thesis' §4.4.5 (Christgau, seed 002): a two-state automaton on
// the 9-point (Moore) stencil over a torus of `rows` lines of `cells` cells, here with
// Conway's rule (a cell is alive next when 3 of its 8 neighbours are, or when it is alive and 2
// are). A line is stored with one border cell on either side that mirrors the opposite end
// (cells + 2 bytes: 8192 for the thesis' 8190 cells); a rank's block of lines has a ghost line
// above and below for its neighbours' border lines. Lines are dealt out in blocks, the first
// rows % ranks ranks taking one more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ca {

struct Shape {
  int rows = 2400, cells = 8190;
  std::size_t width() const { return static_cast<std::size_t>(cells) + 2; }
};

// The lines of `rank` out of `ranks`: [first, first + count).
struct Block {
  int first = 0, count = 0;
  static Block Of(const Shape& s, int rank, int ranks);
  // Bytes of one array: count lines and two ghost lines.
  std::size_t bytes(const Shape& s) const {
    return (static_cast<std::size_t>(count) + 2) * s.width();
  }
};

// Line `i` of a block's array (0 the upper ghost, 1..count its lines, count + 1 the lower ghost).
inline std::uint8_t* Line(std::uint8_t* array, const Shape& s, int i) {
  return array + static_cast<std::size_t>(i) * s.width();
}

// The initial state of the block's lines (ghost lines left as they are): a fixed pseudo-random
// function of each cell's global position, so that every decomposition starts alike.
void Seed(const Shape& s, const Block& b, std::uint8_t* array);

// Computes line `i` of `next` from lines i-1, i, i+1 of `current`, borders included.
void StepLine(const Shape& s, const std::uint8_t* current, std::uint8_t* next, int i);

// FNV-1a (64 bit) over the cells of `lines` consecutive lines (borders left out), continuing
// from `hash`: the hash of the whole grid is that of its lines in order.
std::uint64_t HashLines(const Shape& s, const std::uint8_t* first_line, int lines,
                        std::uint64_t hash);
constexpr std::uint64_t kHashStart = 14695981039346656037ull;

// The whole automaton on one process, no MPI: the reference every decomposition must match.
std::uint64_t SerialHash(const Shape& s, int iterations);

}  // namespace ca
