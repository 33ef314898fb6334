// SPDX-License-Identifier: Apache-2.0
// The parallel automaton in the two forms the thesis compares (§4.4.5), both overlapping the
// exchange of border lines with the computation of the inner lines:
//   two-sided  per step: MPI_Irecv of the next ghost lines, the two border lines computed,
//              MPI_Isend of them, the inner lines computed, MPI_Waitall;
//   gats       both arrays are windows (MPI_Win_allocate, double buffering); per step the GATS
//              epoch on the array being computed is opened first (post and start to the two
//              neighbours), the border lines computed and put straight into the neighbours'
//              ghost lines of that array, the inner lines computed, then complete and wait.
// The lines form a ring of ranks (the torus); with one rank it is its own neighbour.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ca/grid.h"
#include "mpiapp/report.h"

namespace ca {

enum class Variant { kTwoSided, kGats };

std::optional<Variant> ParseVariant(const std::string& name);  // "two-sided", "gats"
const char* VariantName(Variant v);

class Automaton {
 public:
  // Collective: allocates both arrays (windows for gats), seeds the block and fills its ghost
  // lines. Throws std::bad_alloc when the arrays do not fit.
  static std::unique_ptr<Automaton> Make(Variant v, const Shape& s, int rank, int ranks);
  virtual ~Automaton() = default;

  // One time step. Collective.
  virtual void Step(mpiapp::Times& t) = 0;

  // The hash of the whole grid (grid.h's HashLines over every line in order), at rank 0.
  // Collective.
  std::uint64_t Hash() const;

 protected:
  Automaton(const Shape& s, int rank, int ranks);
  void Start();  // seeds arrays_[0] and exchanges its border lines
  std::uint8_t* current() const { return arrays_[current_]; }
  std::uint8_t* next() const { return arrays_[1 - current_]; }
  // Computes the border lines (first and last) or the inner ones of next() from current().
  void ComputeBorders(mpiapp::Times& t) const;
  void ComputeInner(mpiapp::Times& t) const;

  Shape shape_;
  Block block_;
  int rank_, ranks_, up_, down_;  // up_ holds the lines above, down_ those below
  std::uint8_t* arrays_[2] = {nullptr, nullptr};
  int current_ = 0;
};

}  // namespace ca
