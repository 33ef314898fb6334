// SPDX-License-Identifier: Apache-2.0
// Communication: MPI_Put, MPI_Get and their request-based forms. A transfer is complete when
// its call returns — the bytes are in the target's window (mapped memory: memcpy or the MPI's
// own unpacking into it) or copied with process_vm_readv/writev — except a large contiguous
// one offloaded to an engine (rma/mpi/offload.h), complete when its epoch's end returns.
#include <vector>

#include <fmt/format.h>

#include "rma/mpi/access.h"
#include "rma/mpi/coherence.h"
#include "rma/mpi/datatype.h"
#include "rma/mpi/hybrid.h"
#include "rma/mpi/offload.h"
#include "rma/mpi/window.h"

namespace tierflow::rma {

namespace {

constexpr std::size_t kSmallCopy = 4096;

// Both sides contiguous, the target mapped here, a small copy: the latency path, without
// packing or TargetView.
// Sets `rc` (MPI_SUCCESS or the coherence hook's error) when it returns true.
bool SmallCopy(Window& w, const Side& origin, const Side& target, int rank, MPI_Aint disp,
               std::size_t n, bool put, int& rc) {
  if (w.base[rank] == nullptr || n >= kSmallCopy || !origin.info.Contiguous(origin.count) ||
      !target.info.Contiguous(target.count)) {
    return false;
  }
  auto* o = static_cast<std::byte*>(const_cast<void*>(origin.addr)) + origin.info.true_lb;
  const MPI_Aint offset = disp * static_cast<MPI_Aint>(w.disp_unit[rank]) + target.info.true_lb;
  rc = Touch(w, rank, static_cast<std::uint64_t>(offset), n, put);
  if (rc != MPI_SUCCESS) return true;
  std::byte* t = w.base[rank] + offset;
  CopyBytes(put ? t : o, put ? o : t, n);
  return true;
}

// Both sides contiguous, the target mapped here, at least the offload threshold: the copy goes
// to the engine and completes by the epoch's end. The caller has checked and touched the range.
bool OffloadedCopy(Window& w, const Side& origin, const Side& target, int rank, MPI_Aint disp,
                   std::size_t n, bool put, bool request) {
  if (request || w.base[rank] == nullptr || !origin.info.Contiguous(origin.count) ||
      !target.info.Contiguous(target.count)) {
    return false;
  }
  auto* o = static_cast<std::byte*>(const_cast<void*>(origin.addr)) + origin.info.true_lb;
  const MPI_Aint offset = disp * static_cast<MPI_Aint>(w.disp_unit[rank]) + target.info.true_lb;
  std::byte* t = w.base[rank] + offset;
  return Offloaded(w, rank, static_cast<std::uint64_t>(offset), put ? t : o, put ? o : t, n);
}

// The sides by reference: passed by value, their copies onto the stack stalled the loads
// that followed (store forwarding), a sixth of a small put's time.
// `request`: a request-based call, whose request is complete when it returns.
int Transfer(Window* w, Side& origin, int target_rank, MPI_Aint disp, Side& target, bool put,
             const char* call, bool request) {
  if (target_rank == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int rc = CheckAccess(*w, target_rank, call); rc != MPI_SUCCESS) return rc;
  if (int rc = CheckTypes(*w, origin, target, call); rc != MPI_SUCCESS) return rc;
  MPI_Aint first = 0;
  if (int rc = CheckRange(*w, target_rank, disp, target.count, target.info, first, call);
      rc != MPI_SUCCESS) {
    return rc;
  }
  const auto n = static_cast<std::size_t>(origin.count * origin.info.size);
  if (n == 0) return MPI_SUCCESS;
  if (int rc = MPI_SUCCESS; SmallCopy(*w, origin, target, target_rank, disp, n, put, rc)) return rc;
  if (int rc = Touch(*w, target_rank, static_cast<std::uint64_t>(first),
                     static_cast<std::uint64_t>(target.info.Span(target.count)), put);
      rc != MPI_SUCCESS) {
    return rc;
  }
  if (OffloadedCopy(*w, origin, target, target_rank, disp, n, put, request)) return MPI_SUCCESS;
  TargetView view(*w, target_rank, disp, first, target, false);
  std::vector<std::byte> tmp;
  const std::byte* bytes = nullptr;
  if (put) {
    if (int rc = Packed(*w, origin, tmp, bytes); rc != MPI_SUCCESS) return rc;
    if (int rc = Unpacked(*w, bytes, n, const_cast<void*>(view.side().addr), view.side());
        rc != MPI_SUCCESS) {
      return rc;
    }
    return view.Store();
  }
  if (int rc = view.Load(); rc != MPI_SUCCESS) return rc;
  if (int rc = Packed(*w, view.side(), tmp, bytes); rc != MPI_SUCCESS) return rc;
  return Unpacked(*w, bytes, n, const_cast<void*>(origin.addr), origin);
}

template <typename Count>
int Put(const void* oaddr, Count ocount, MPI_Datatype otype, int target, MPI_Aint disp,
        Count tcount, MPI_Datatype ttype, Window* w, const char* call, bool request = false) {
  Side o{oaddr, static_cast<MPI_Aint>(ocount), otype, {}};
  Side t{nullptr, static_cast<MPI_Aint>(tcount), ttype, {}};
  return Transfer(w, o, target, disp, t, true, call, request);
}

template <typename Count>
int Get(void* oaddr, Count ocount, MPI_Datatype otype, int target, MPI_Aint disp, Count tcount,
        MPI_Datatype ttype, Window* w, const char* call, bool request = false) {
  Side o{oaddr, static_cast<MPI_Aint>(ocount), otype, {}};
  Side t{nullptr, static_cast<MPI_Aint>(tcount), ttype, {}};
  return Transfer(w, o, target, disp, t, false, call, request);
}

}  // namespace

}  // namespace tierflow::rma

using namespace tierflow;
using namespace tierflow::rma;

extern "C" int MPI_Put(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
                       int tcount, MPI_Datatype ttype, MPI_Win win) {
  return Guarded("MPI_Put", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) return PMPI_Put(oaddr, ocount, otype, target, disp, tcount, ttype, win);
    return Put(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Put");
  });
}

extern "C" int MPI_Get(void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
                       int tcount, MPI_Datatype ttype, MPI_Win win) {
  return Guarded("MPI_Get", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) return PMPI_Get(oaddr, ocount, otype, target, disp, tcount, ttype, win);
    return Get(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Get");
  });
}

extern "C" int MPI_Rput(const void* oaddr, int ocount, MPI_Datatype otype, int target,
                        MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win,
                        MPI_Request* request) {
  return Guarded("MPI_Rput", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) {
      return PMPI_Rput(oaddr, ocount, otype, target, disp, tcount, ttype, win, request);
    }
    return AsRequest(w, target, "MPI_Rput", request, [&] {
      return Put(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Rput", true);
    });
  });
}

extern "C" int MPI_Rget(void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
                        int tcount, MPI_Datatype ttype, MPI_Win win, MPI_Request* request) {
  return Guarded("MPI_Rget", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) {
      return PMPI_Rget(oaddr, ocount, otype, target, disp, tcount, ttype, win, request);
    }
    return AsRequest(w, target, "MPI_Rget", request, [&] {
      return Get(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Rget", true);
    });
  });
}

#if MPI_VERSION >= 4
extern "C" int MPI_Put_c(const void* oaddr, MPI_Count ocount, MPI_Datatype otype, int target,
                         MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Win win) {
  return Guarded("MPI_Put_c", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) return PMPI_Put_c(oaddr, ocount, otype, target, disp, tcount, ttype, win);
    return Put(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Put_c");
  });
}

extern "C" int MPI_Rput_c(const void* oaddr, MPI_Count ocount, MPI_Datatype otype, int target,
                          MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Win win,
                          MPI_Request* request) {
  return Guarded("MPI_Rput_c", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) {
      return PMPI_Rput_c(oaddr, ocount, otype, target, disp, tcount, ttype, win, request);
    }
    return AsRequest(w, target, "MPI_Rput_c", request, [&] {
      return Put(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Rput_c", true);
    });
  });
}

extern "C" int MPI_Rget_c(void* oaddr, MPI_Count ocount, MPI_Datatype otype, int target,
                          MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Win win,
                          MPI_Request* request) {
  return Guarded("MPI_Rget_c", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) {
      return PMPI_Rget_c(oaddr, ocount, otype, target, disp, tcount, ttype, win, request);
    }
    return AsRequest(w, target, "MPI_Rget_c", request, [&] {
      return Get(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Rget_c", true);
    });
  });
}

extern "C" int MPI_Get_c(void* oaddr, MPI_Count ocount, MPI_Datatype otype, int target,
                         MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Win win) {
  return Guarded("MPI_Get_c", [&]() -> int {
    int routed = MPI_SUCCESS;
    Window* w = Route(win, target, routed, tcount, ttype);
    if (routed != MPI_SUCCESS) return routed;
    if (w == nullptr) return PMPI_Get_c(oaddr, ocount, otype, target, disp, tcount, ttype, win);
    return Get(oaddr, ocount, otype, target, disp, tcount, ttype, w, "MPI_Get_c");
  });
}
#endif
