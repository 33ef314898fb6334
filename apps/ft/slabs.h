// SPDX-License-Identifier: Apache-2.0
// How FT's nx x ny x nz grid is spread over the ranks: in slabs, two ways.
//   planes  (z split): rank r holds z in [r*nzl, (r+1)*nzl), all y and x; element (x, y, z) at
//           (zl * ny + y) * nx + x. The x and y transforms run here.
//   columns (y split): rank r holds y in [r*nyl, (r+1)*nyl), all z and x; element at
//           (z * nyl + yl) * nx + x. The z transforms run here.
// Going from one to the other, the part a rank sends to rank r is nzl blocks of nyl * nx
// consecutive elements, and each lands as a whole, consecutively, at r: no element moves
// alone, so a put can take a block straight from where it was computed to where it is used.
#pragma once

#include <cstddef>

namespace ft {

enum class Direction {
  kToColumns,  // planes -> columns (forward FFT: after x and y, before z)
  kToPlanes,   // columns -> planes (inverse FFT: after z, before y and x)
};

struct Slabs {
  int nx = 0, ny = 0, nz = 0;
  int ranks = 1, rank = 0;
  int nzl = 0, nyl = 0;  // planes and rows per rank

  Slabs(int x, int y, int z, int p, int r)
      : nx(x), ny(y), nz(z), ranks(p), rank(r), nzl(z / p), nyl(y / p) {}

  std::size_t local() const { return static_cast<std::size_t>(nx) * ny * nzl; }
  std::size_t block() const { return static_cast<std::size_t>(nyl) * nx; }
  int z0() const { return rank * nzl; }
  int y0() const { return rank * nyl; }

  // Where block `zl` for rank `to` starts in this rank's source array.
  std::size_t SourceOffset(Direction d, int to, int zl) const {
    if (d == Direction::kToColumns) return (static_cast<std::size_t>(zl) * ny + to * nyl) * nx;
    return static_cast<std::size_t>(to * nzl + zl) * block();
  }
  // Where block `zl` from rank `from` lands in the receiver's destination array.
  std::size_t DestinationOffset(Direction d, int from, int zl) const {
    if (d == Direction::kToColumns) return static_cast<std::size_t>(from * nzl + zl) * block();
    return (static_cast<std::size_t>(zl) * ny + from * nyl) * nx;
  }
};

}  // namespace ft
