// What a transfer needs to know of a datatype, looked up once per type and cached: its size,
// extent and true bounds, and whether `count` of them are one contiguous run of bytes.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace tierflow::rma {

struct TypeInfo {
  MPI_Aint size = 0;  // bytes of data in one element
  MPI_Aint extent = 0;
  MPI_Aint true_lb = 0, true_extent = 0;
  // count elements are size*count bytes without gaps starting at true_lb.
  bool Contiguous(MPI_Aint count) const {
    return size == true_extent && (count <= 1 || extent == size);
  }
  // The bytes [first, last) that count elements touch, relative to the buffer.
  MPI_Aint Span(MPI_Aint count) const {
    return count == 0 ? 0 : (count - 1) * extent + true_extent;
  }
};

// Returns false for MPI_DATATYPE_NULL or a type the MPI refuses.
bool LookUpType(MPI_Datatype type, TypeInfo& out);
// A derived type was freed: its handle may come back for another type.
void ForgetType(MPI_Datatype type);

}  // namespace tierflow::rma
