// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/access.h"

#include <limits.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kernels/kernels.h"
#include "rma/mpi/coherence.h"
#include "tierflow/cpu_isa.h"

namespace tierflow::rma {

namespace {
constexpr std::size_t kStreamingBytes = 512 * 1024;
// From here on the copy kernel rather than glibc's memcpy: as fast below it, and glibc 2.36
// switches to rep movsb at 2112 bytes, which on Zen 3 takes 25-30 times longer when the
// destination lies a few bytes above the source modulo 4 KiB (a get into a malloc'd buffer
// from a page-aligned window: docs/rma.md).
constexpr std::size_t kKernelCopy = 1024;
}  // namespace

void CopyBytes(void* to, const void* from, std::size_t n, bool stream) {
  if (n < kKernelCopy) {
    std::memcpy(to, from, n);
    return;
  }
  static const kernels::Kernels& k = kernels::KernelsFor(DetectCpuIsa());
  k.copy(to, from, n, stream);
}

// The access epoch check of every RMA call: in a GATS epoch the target must be in the start
// group and have posted (waited for on the first access); else a lock, lock_all or fence.
int CheckAccess(Window& w, int target, const char* call) {
  if (target < 0 || target >= w.ranks) {
    return Fail(w, Misuse::kNotInGroup,
                fmt::format("{}: target {} of a window of {} ranks", call, target, w.ranks));
  }
  if (w.started) {
    if (w.seen[target] == 2) return MPI_SUCCESS;
    if (w.seen[target] == 0) {
      return Fail(
          w, Misuse::kNotInGroup,
          fmt::format("{}: target {} is not in the group given to MPI_Win_start", call, target));
    }
    if (Status s = w.sync->AwaitPosted(target); !s.ok()) {
      return SyncFailed(w, s);
    }
    w.seen[target] = 2;
    return MPI_SUCCESS;
  }
  if (w.lock_all || w.lock[target] != 0 || w.fence_epoch) return MPI_SUCCESS;
  return Fail(w, Misuse::kNoEpoch, fmt::format("{} to target {} outside an epoch", call, target));
}

// Where `count` elements of `type` at displacement `disp` lie in the target's window, checked
// against its size with their true bounds (a negative extent places elements below the
// first) and without overflow. Sets `offset` (bytes from the window's start of the first
// byte touched).
int CheckRange(Window& w, int target, MPI_Aint disp, MPI_Aint count, const TypeInfo& t,
               MPI_Aint& offset, const char* call) {
  MPI_Aint start = 0, lo = 0, hi = 0;
  const bool bounded = disp >= 0 && TouchedBounds(t, count, lo, hi);
  if (bounded && lo == hi) {  // touches nothing: any displacement that is not negative
    offset = 0;
    return MPI_SUCCESS;
  }
  const bool known =
      bounded && !__builtin_mul_overflow(disp, MPI_Aint{w.disp_unit[target]}, &start) &&
      !__builtin_add_overflow(start, lo, &lo) && !__builtin_add_overflow(start, hi, &hi);
  if (known && lo >= 0 && static_cast<std::uint64_t>(hi) <= w.size[target]) {
    offset = lo;
    return MPI_SUCCESS;
  }
  if (!known) {
    return Fail(
        w, Misuse::kRange,
        fmt::format("{}: displacement {} (unit {}) and {} elements of extent {} reach "
                    "beyond any address: target {}'s window has {} bytes",
                    call, disp, w.disp_unit[target], count, t.extent, target, w.size[target]));
  }
  return Fail(w, Misuse::kRange,
              fmt::format("{}: bytes [{}, {}) of target {}'s window of {} bytes", call, lo, hi,
                          target, w.size[target]));
}

int CheckTypes(Window& w, Side& origin, Side& target, const char* call) {
  const bool same = origin.type == target.type;  // one lookup for the common case
  if (!LookUpType(origin.type, origin.info) ||
      (same ? (target.info = origin.info, false) : !LookUpType(target.type, target.info)) ||
      origin.count < 0 || target.count < 0) {
    return Fail(w, Misuse::kDatatype, fmt::format("{}: a datatype or count is invalid", call));
  }
  MPI_Aint from = 0, to = 0;
  if (__builtin_mul_overflow(origin.count, origin.info.size, &from) ||
      __builtin_mul_overflow(target.count, target.info.size, &to)) {
    return Fail(w, Misuse::kDatatype,
                fmt::format("{}: {} or {} elements are more bytes than an address holds", call,
                            origin.count, target.count));
  }
  if (from != to) {
    return Fail(w, Misuse::kDatatype,
                fmt::format("{}: the origin has {} bytes, the target {}: the type signatures "
                            "must match",
                            call, from, to));
  }
  return MPI_SUCCESS;
}

namespace {

// Elements of `t` in the next piece of a pack or unpack: at most `piece`, and no more than an
// int counts in bytes (the MPI-3 forms take int counts and sizes).
MPI_Aint NextPiece(const TypeInfo& t, MPI_Aint left, MPI_Aint piece) {
  const MPI_Aint k = std::min(left, std::min<MPI_Aint>(piece, INT_MAX));
  return t.size > 0 ? std::min<MPI_Aint>(k, INT_MAX / t.size) : k;
}

}  // namespace

int PackElements(const void* addr, MPI_Aint count, MPI_Datatype type, const TypeInfo& t,
                 std::byte* out, MPI_Comm comm, MPI_Aint piece) {
#if MPI_VERSION >= 4
  if (piece >= kWholePiece) {
    MPI_Count pos = 0;
    return PMPI_Pack_c(addr, count, type, out, count * t.size, &pos, comm);
  }
#endif
  const auto* at = static_cast<const std::byte*>(addr);
  for (MPI_Aint i = 0; i < count;) {
    const MPI_Aint k = NextPiece(t, count - i, piece);
    if (k == 0) return MPI_ERR_COUNT;  // one element of more than INT_MAX bytes
    int pos = 0;
    const int rc = PMPI_Pack(at + i * t.extent, static_cast<int>(k), type, out + i * t.size,
                             static_cast<int>(k * t.size), &pos, comm);
    if (rc != MPI_SUCCESS) return rc;
    i += k;
  }
  return MPI_SUCCESS;
}

int UnpackElements(const std::byte* in, void* addr, MPI_Aint count, MPI_Datatype type,
                   const TypeInfo& t, MPI_Comm comm, MPI_Aint piece) {
#if MPI_VERSION >= 4
  if (piece >= kWholePiece) {
    MPI_Count pos = 0;
    return PMPI_Unpack_c(in, count * t.size, &pos, addr, count, type, comm);
  }
#endif
  auto* at = static_cast<std::byte*>(addr);
  for (MPI_Aint i = 0; i < count;) {
    const MPI_Aint k = NextPiece(t, count - i, piece);
    if (k == 0) return MPI_ERR_COUNT;
    int pos = 0;
    const int rc = PMPI_Unpack(in + i * t.size, static_cast<int>(k * t.size), &pos,
                               at + i * t.extent, static_cast<int>(k), type, comm);
    if (rc != MPI_SUCCESS) return rc;
    i += k;
  }
  return MPI_SUCCESS;
}

int ReduceElements(const void* in, void* inout, MPI_Aint count, MPI_Datatype basic, MPI_Aint extent,
                   MPI_Op op, MPI_Aint piece) {
#if MPI_VERSION >= 4
  if (piece >= kWholePiece) return PMPI_Reduce_local_c(in, inout, count, basic, op);
#endif
  const auto* from = static_cast<const std::byte*>(in);
  auto* to = static_cast<std::byte*>(inout);
  for (MPI_Aint i = 0; i < count;) {
    const MPI_Aint k = std::min(count - i, std::min<MPI_Aint>(piece, INT_MAX));
    const int rc =
        PMPI_Reduce_local(from + i * extent, to + i * extent, static_cast<int>(k), basic, op);
    if (rc != MPI_SUCCESS) return rc;
    i += k;
  }
  return MPI_SUCCESS;
}

int Packed(Window& w, const Side& side, std::vector<std::byte>& tmp, const std::byte*& out) {
  const auto* p = static_cast<const std::byte*>(side.addr);
  if (side.info.Contiguous(side.count)) {
    out = p + side.info.true_lb;
    return MPI_SUCCESS;
  }
  tmp.resize(static_cast<std::size_t>(side.count * side.info.size));
  out = tmp.data();
  return PackElements(side.addr, side.count, side.type, side.info, tmp.data(), w.comm);
}

int Unpacked(Window& w, const std::byte* from, std::size_t n, void* addr, const Side& side) {
  if (side.info.Contiguous(side.count)) {
    // A large copy to a place other than the last one streams past the caches (no read for
    // ownership of lines nobody will read from this cache; docs/rma.md has the measurement);
    // one to the same place again, which the caches likely hold, does not.
    std::byte* to = static_cast<std::byte*>(addr) + side.info.true_lb;
    const bool stream = n >= kStreamingBytes && to != w.last_large_copy;
    if (n >= kStreamingBytes) w.last_large_copy = to;
    CopyBytes(to, from, n, stream);
    return MPI_SUCCESS;
  }
  return UnpackElements(from, addr, side.count, side.type, side.info, w.comm);
}

namespace {

// The runs of bytes `side` (count elements of its type at offset 0) touches, in address order:
// found by letting the MPI unpack all-ones into zeroed memory, so every type constructor the
// MPI knows is covered without decoding it here.
std::vector<iovec> TouchedRuns(Window& w, const Side& side, std::byte* at) {
  const auto span = static_cast<std::size_t>(side.info.Span(side.count));
  const auto n = static_cast<std::size_t>(side.count * side.info.size);
  if (side.info.Contiguous(side.count)) return {iovec{at + side.info.true_lb, n}};
  const MPI_Aint low = side.info.Low(side.count);
  std::vector<std::byte> mask(span, std::byte{0});
  std::vector<std::byte> ones(n, std::byte{0xff});
  if (UnpackElements(ones.data(), mask.data() - low, side.count, side.type, side.info, w.comm) !=
      MPI_SUCCESS) {
    return {iovec{at + low, span}};  // every byte of the span: more than needed, never less
  }
  std::vector<iovec> runs;
  for (std::size_t i = 0; i < span;) {
    if (mask[i] == std::byte{0}) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < span && mask[j] != std::byte{0}) ++j;
    runs.push_back(iovec{at + low + i, j - i});
    i = j;
  }
  return runs;
}

// Copies between `image` (the target's bytes from its first touched byte on) and the target
// process: a read takes the whole span, a write only the runs the datatype touches (in
// batches of IOV_MAX; local and remote runs have the same lengths).
int RemoteCopy(Window& w, int target, MPI_Aint first, std::byte* image, const Side& side,
               bool write) {
  const auto span = static_cast<std::size_t>(side.info.Span(side.count));
  auto* remote_first = reinterpret_cast<std::byte*>(w.address[target] + first);
  std::vector<iovec> local{iovec{image, span}}, remote{iovec{remote_first, span}};
  if (write) {
    local = TouchedRuns(w, side, image - side.info.Low(side.count));
    remote = TouchedRuns(w, side, remote_first - side.info.Low(side.count));
  }
  for (std::size_t i = 0; i < local.size(); i += IOV_MAX) {
    const std::size_t k = std::min<std::size_t>(IOV_MAX, local.size() - i);
    std::size_t want = 0;
    for (std::size_t j = i; j < i + k; ++j) want += local[j].iov_len;
    const ssize_t done = write ? process_vm_writev(w.pid[target], &local[i], k, &remote[i], k, 0)
                               : process_vm_readv(w.pid[target], &local[i], k, &remote[i], k, 0);
    if (done != static_cast<ssize_t>(want)) {
      return Fail(w, Misuse::kPeerGone,
                  fmt::format("process_vm_{}v of {} bytes at rank {} failed: {}",
                              write ? "write" : "read", want, target, std::strerror(errno)));
    }
  }
  return MPI_SUCCESS;
}

}  // namespace

TargetView::TargetView(Window& w, int rank, MPI_Aint disp, MPI_Aint first, const Side& target,
                       bool public_copy)
    : w_(w), rank_(rank), first_(first), side_(target) {
  std::byte* mem = public_copy && w.coherence == Coherence::kSimulated ? w.pub[rank] : w.base[rank];
  if (mem != nullptr) {
    side_.addr = mem + disp * static_cast<MPI_Aint>(w.disp_unit[rank]);
  } else {
    image_.resize(static_cast<std::size_t>(target.info.Span(target.count)));
    side_.addr = image_.data() - target.info.Low(target.count);
  }
}

int TargetView::Load() {
  return image_.empty() ? MPI_SUCCESS : RemoteCopy(w_, rank_, first_, image_.data(), side_, false);
}

int TargetView::Store() {
  return image_.empty() ? MPI_SUCCESS : RemoteCopy(w_, rank_, first_, image_.data(), side_, true);
}

// Request-based operations complete in the call; the request is a generalized request that
// is already complete, so MPI_Wait/MPI_Test of the MPI underneath finish it.
namespace {

int QueryDone(void*, MPI_Status* status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  return MPI_SUCCESS;
}
int FreeDone(void*) { return MPI_SUCCESS; }
int CancelDone(void*, int) { return MPI_SUCCESS; }

}  // namespace

int Requested(Window* w, int target, const char* call) {
  if (target != MPI_PROC_NULL && target >= 0 && target < w->ranks && w->lock[target] == 0 &&
      !w->lock_all) {
    return Fail(*w, Misuse::kNoEpoch,
                fmt::format("{}: request-based RMA needs a passive-target epoch (MPI_Win_lock or "
                            "MPI_Win_lock_all)",
                            call));
  }
  return MPI_SUCCESS;
}

int CompletedRequest(MPI_Request* request) {
  int rc = PMPI_Grequest_start(QueryDone, FreeDone, CancelDone, nullptr, request);
  if (rc == MPI_SUCCESS) rc = PMPI_Grequest_complete(*request);
  return rc;
}

}  // namespace tierflow::rma
