// SPDX-License-Identifier: Apache-2.0
// FT's global transpose (planes <-> columns, slabs.h) in the three forms the thesis compares
// (Christgau, seed 002, §4.4.4):
//   2sc     MPI_Alltoall, the NPB reference scheme: the blocks for each rank are packed into
//           one send buffer (planes -> columns) or unpacked from the receive buffer (columns
//           -> planes), one copy of the data either way;
//   osc     MPI_Put of each block into a window kept for the transfer, between two fences;
//           the receiver then copies the window into its array (plain MPI-3 one-sided);
//   scosco  windows from MPI_Win_allocate over the arrays the data are used in, a GATS epoch
//           opened before the computation whose results are put (Open), each block put
//           straight from where it was computed to where it is used: no copy but the put.
// A Transpose owns the two destination arrays (columns and planes), since scosco's are window
// memory. Every rank of MPI_COMM_WORLD takes part in every call, in the same order.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ft/npb.h"
#include "ft/slabs.h"
#include "mpiapp/report.h"

namespace ft {

enum class Variant { kTwoSided, kOneSided, kScosco };

std::optional<Variant> ParseVariant(const std::string& name);  // "2sc", "osc", "scosco"
const char* VariantName(Variant v);

using mpiapp::Timed;
using mpiapp::Times;

class Transpose {
 public:
  // Collective: allocates the arrays (and makes the windows).
  static std::unique_ptr<Transpose> Make(Variant v, const Slabs& s);
  virtual ~Transpose() = default;

  Complex* columns() const { return columns_; }
  Complex* planes() const { return planes_; }

  // Opens what the transpose in `d` needs before the local computation whose results it will
  // move (scosco: post and start of a GATS epoch on the destination window); nothing else.
  virtual void Open(Direction d, Times& t) {
    (void)d;
    (void)t;
  }
  // Moves `from` (this rank's source array in the layout `d` leaves) into every rank's
  // columns() (kToColumns) or planes() (kToPlanes), and returns when this rank's destination
  // holds all of its blocks.
  virtual void Move(Direction d, const Complex* from, Times& t) = 0;

 protected:
  explicit Transpose(const Slabs& s) : slabs_(s) {}
  Slabs slabs_;
  Complex* columns_ = nullptr;
  Complex* planes_ = nullptr;
};

}  // namespace ft
