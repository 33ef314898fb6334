// SPDX-License-Identifier: Apache-2.0
// What every RMA communication call shares: the epoch and range checks, the two sides of a
// transfer as (address, count, datatype), packing into and out of contiguous bytes with the
// MPI's own datatype engine, the copies to memory of another process (process_vm_readv/writev)
// and the already-complete requests of the request-based calls.
#pragma once

#include <mpi.h>
#include <sys/uio.h>

#include <cstddef>
#include <vector>

#include "rma/mpi/datatype.h"
#include "rma/mpi/window.h"

namespace tierflow::rma {

// One side of a transfer: count elements of type at addr.
struct Side {
  const void* addr;
  MPI_Aint count;
  MPI_Datatype type;
  TypeInfo info;
};

// MPI_SUCCESS, or the window's error handler's code: `target` must be in an access epoch of
// this rank (a GATS access to it waits for its post here).
int CheckAccess(Window& w, int target, const char* call);
// The target side lies inside the target's window; sets `first`, the offset of its first
// byte from the window's start.
int CheckRange(Window& w, int target, MPI_Aint disp, MPI_Aint count, const TypeInfo& t,
               MPI_Aint& first, const char* call);
// Looks both types up; their type signatures must carry the same number of bytes.
int CheckTypes(Window& w, Side& origin, Side& target, const char* call);
// The bytes of `side` as one contiguous run (`out`): the memory itself, or packed into `tmp`.
// MPI_SUCCESS or the MPI's error code.
int Packed(Window& w, const Side& side, std::vector<std::byte>& tmp, const std::byte*& out);
// Copies n bytes between non-overlapping buffers: glibc's memcpy below 1 KiB, this CPU's copy
// kernel from there on (`stream`: non-temporal stores).
void CopyBytes(void* to, const void* from, std::size_t n, bool stream = false);
// Stores n contiguous bytes into count elements of side's type at addr. MPI_SUCCESS or the
// MPI's error code.
int Unpacked(Window& w, const std::byte* from, std::size_t n, void* addr, const Side& side);

// The MPI's pack, unpack and local reduction for counts of any size: its large-count forms
// where it has them (MPI 4), else pieces of at most `piece` elements whose counts and byte
// sizes an int holds. `piece` below kWholePiece forces pieces (tests). MPI_SUCCESS or the
// first error code the MPI returned.
inline constexpr MPI_Aint kWholePiece = MPI_Aint{1} << 62;
int PackElements(const void* addr, MPI_Aint count, MPI_Datatype type, const TypeInfo& t,
                 std::byte* out, MPI_Comm comm, MPI_Aint piece = kWholePiece);
int UnpackElements(const std::byte* in, void* addr, MPI_Aint count, MPI_Datatype type,
                   const TypeInfo& t, MPI_Comm comm, MPI_Aint piece = kWholePiece);
// inout[i] = in[i] op inout[i] over count elements of a predefined type `extent` bytes apart.
int ReduceElements(const void* in, void* inout, MPI_Aint count, MPI_Datatype basic, MPI_Aint extent,
                   MPI_Op op, MPI_Aint piece = kWholePiece);
// The target's elements where this process can load and store them: its memory mapped here,
// or an image read from its process (Load) and written back (Store: only the bytes the
// datatype touches). side().addr is where element 0 lies. `public_copy`: in the simulated
// coherence, the public copy rather than this process's private one (what accumulates use,
// as atomics act at the point of coherence).
class TargetView {
 public:
  // `first`: the offset of the first byte touched, from CheckRange.
  TargetView(Window& w, int rank, MPI_Aint disp, MPI_Aint first, const Side& target,
             bool public_copy);
  int Load();
  int Store();
  const Side& side() const { return side_; }
  // The target's memory is mapped here: side().addr is the window itself.
  bool mapped() const { return image_.empty(); }

 private:
  Window& w_;
  int rank_;
  MPI_Aint first_;
  Side side_;
  std::vector<std::byte> image_;  // empty when the memory is mapped here
};
// Request-based calls need a passive-target epoch to `target`.
int Requested(Window* w, int target, const char* call);
// A generalized request that is already complete.
int CompletedRequest(MPI_Request* request);

// A request-based call: `transfer` inside a passive-target epoch, then an already complete
// request.
template <typename Transfer>
int AsRequest(Window* w, int target, const char* call, MPI_Request* request, Transfer transfer) {
  if (int rc = Requested(w, target, call); rc != MPI_SUCCESS) return rc;
  if (int rc = transfer(); rc != MPI_SUCCESS) return rc;
  return CompletedRequest(request);
}

}  // namespace tierflow::rma
