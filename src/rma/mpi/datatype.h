// SPDX-License-Identifier: Apache-2.0
// What a transfer needs to know of a datatype, looked up once per type and cached: its size,
// extent and true bounds, and whether `count` of them are one contiguous run of bytes.
// Contiguity is proven from the type's constructors (MPI_Type_get_envelope/contents), not
// guessed from its bounds: a type may cover its extent exactly and still visit the bytes in
// another order (a transpose built from an hvector of vectors).
#pragma once

#include <mpi.h>

#include <cstdint>

namespace tierflow::rma {

struct TypeInfo {
  MPI_Aint size = 0;  // bytes of data in one element
  MPI_Aint extent = 0;
  MPI_Aint true_lb = 0, true_extent = 0;
  // One element's type map is a single run of size bytes from true_lb, in order.
  bool one_run = false;
  // The predefined type every element is made of (BasicType), MPI_DATATYPE_NULL for a mix.
  MPI_Datatype basic = MPI_DATATYPE_NULL;
  // Bytes of one `basic` element; 0 when it has none or is padded (MPI_LONG_DOUBLE_INT: 20 of
  // data in an extent of 32).
  MPI_Aint basic_size = 0;
  // count elements are size*count bytes without gaps starting at true_lb, in order.
  bool Contiguous(MPI_Aint count) const {
    return count == 0 || (one_run && (count == 1 || extent == size));
  }
  // The offset from the buffer of the lowest byte count elements touch: elements of a
  // negative extent lie below the first one. For counts whose bounds TouchedBounds found.
  MPI_Aint Low(MPI_Aint count) const {
    return count == 0 ? 0 : true_lb + (extent < 0 ? (count - 1) * extent : 0);
  }
  // How many bytes from Low(count) on count elements touch. Same condition.
  MPI_Aint Span(MPI_Aint count) const {
    return count == 0 ? 0 : (count - 1) * (extent < 0 ? -extent : extent) + true_extent;
  }
};

// The bytes [lo, hi) that count elements of `t` touch, relative to the buffer, computed
// without overflow. False when a bound does not fit MPI_Aint or count is negative.
bool TouchedBounds(const TypeInfo& t, MPI_Aint count, MPI_Aint& lo, MPI_Aint& hi);

// Returns false for MPI_DATATYPE_NULL or a type the MPI refuses.
bool LookUpType(MPI_Datatype type, TypeInfo& out);
// The predefined type every element of `type` is made of; MPI_DATATYPE_NULL when it mixes
// several (which accumulates forbid) or the MPI cannot describe it.
MPI_Datatype BasicType(MPI_Datatype type);
// A derived type was freed: its handle may come back for another type.
void ForgetType(MPI_Datatype type);

}  // namespace tierflow::rma
