// SPDX-License-Identifier: Apache-2.0
// Accumulates: MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op, MPI_Compare_and_swap and
// the request-based forms. Each runs under the target's accumulate lock (in the window's
// shared words), which makes accumulates to one target atomic with each other and keeps
// MPI's ordering of accumulates from one origin (each completes before its call returns).
// The element-wise operation is the MPI's own (MPI_Reduce_local), so every predefined
// operation and type the MPI supports is supported, with its semantics.
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "rma/mpi/access.h"
#include "rma/mpi/coherence.h"
#include "rma/mpi/hybrid.h"

namespace tierflow::rma {

namespace {

bool PredefinedOp(MPI_Op op) {
  for (MPI_Op p : {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND,
                   MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP}) {
    if (op == p) return true;
  }
  return false;
}

class AccumulateLock {
 public:
  AccumulateLock(Window& w, int target) : w_(w), target_(target) {
    status_ = w.sync->LockAccumulate(target);
  }
  ~AccumulateLock() {
    if (status_.ok()) w_.sync->UnlockAccumulate(target_);
  }
  const Status& status() const { return status_; }

 private:
  Window& w_;
  int target_;
  Status status_;
};

struct Accumulation {
  Side origin, result, target;
  bool fetch;  // result receives the target's previous contents
  MPI_Op op;
  MPI_Datatype basic = MPI_DATATYPE_NULL;  // the elements' predefined type, set by the check
};

int CheckAccumulate(Window& w, Accumulation& a, const char* call) {
  if (!PredefinedOp(a.op)) {
    return Fail(w, Misuse::kOp, fmt::format("{}: a user-defined operation", call));
  }
  Side& data = a.op == MPI_NO_OP ? a.result : a.origin;  // NO_OP ignores the origin buffer
  if (int rc = CheckTypes(w, data, a.target, call); rc != MPI_SUCCESS) return rc;
  if (a.fetch && a.op != MPI_NO_OP) {
    if (int rc = CheckTypes(w, a.result, a.target, call); rc != MPI_SUCCESS) return rc;
  }
  if (a.target.count * a.target.info.size == 0 && data.count * data.info.size == 0) {
    return MPI_SUCCESS;  // nothing moves: any types will do (a.basic stays null)
  }
  a.basic = a.target.info.basic;
  if (a.basic == MPI_DATATYPE_NULL || data.info.basic != a.basic) {
    return Fail(w, Misuse::kOp,
                fmt::format("{}: origin and target are not made of one and the same "
                            "predefined type",
                            call));
  }
  return MPI_SUCCESS;
}

// current[i] = o[i] op current[i] over n packed bytes of `basic` elements. Packed pairs
// (MPI_LONG_DOUBLE_INT: 20 bytes, extent 32) lie apart from their padding in memory, where
// MPI_Reduce_local expects them: they are unpacked, reduced and packed again.
int Reduce(const std::byte* o, std::byte* current, std::size_t n, MPI_Datatype basic, MPI_Op op) {
  int size = 1;
  MPI_Aint lb = 0, extent = 0;
  if (PMPI_Type_size(basic, &size) != MPI_SUCCESS || size <= 0 ||
      PMPI_Type_get_extent(basic, &lb, &extent) != MPI_SUCCESS) {
    return MPI_ERR_TYPE;
  }
  const auto count = static_cast<MPI_Aint>(n / static_cast<std::size_t>(size));
  if (extent == size) return ReduceElements(o, current, count, basic, extent, op);
  TypeInfo t;
  if (!LookUpType(basic, t)) return MPI_ERR_TYPE;
  std::vector<std::byte> in(static_cast<std::size_t>(count * extent)), inout(in.size());
  if (int rc = UnpackElements(o, in.data(), count, basic, t, MPI_COMM_SELF); rc != MPI_SUCCESS) {
    return rc;
  }
  if (int rc = UnpackElements(current, inout.data(), count, basic, t, MPI_COMM_SELF);
      rc != MPI_SUCCESS) {
    return rc;
  }
  if (int rc = ReduceElements(in.data(), inout.data(), count, basic, extent, op);
      rc != MPI_SUCCESS) {
    return rc;
  }
  return PackElements(inout.data(), count, basic, t, current, MPI_COMM_SELF);
}

// The common case, done in place: the target mapped here and contiguous, made of unpadded
// elements of its predefined type, and so are the origin and the result. No staging copies
// (they and their allocations were most of a small accumulate's time).
bool InPlace(const Accumulation& a, const TargetView& view) {
  const auto whole = [](const Side& s) {
    return s.info.Contiguous(s.count) && s.info.size == s.info.extent;
  };
  return view.mapped() && a.target.info.basic_size > 0 && whole(a.target) &&
         (a.op == MPI_NO_OP || whole(a.origin)) &&
         (!a.fetch || a.result.info.Contiguous(a.result.count));
}

int CombineInPlace(const Accumulation& a, const TargetView& view) {
  auto* t = static_cast<std::byte*>(const_cast<void*>(view.side().addr)) + a.target.info.true_lb;
  const auto n = static_cast<std::size_t>(a.target.count * a.target.info.size);
  if (a.fetch) {
    std::memcpy(static_cast<std::byte*>(const_cast<void*>(a.result.addr)) + a.result.info.true_lb,
                t, n);
  }
  if (a.op == MPI_NO_OP) return MPI_SUCCESS;
  const auto* o = static_cast<const std::byte*>(a.origin.addr) + a.origin.info.true_lb;
  if (a.op == MPI_REPLACE) {
    std::memmove(t, o, n);
  } else {
    const auto count =
        static_cast<MPI_Aint>(n / static_cast<std::size_t>(a.target.info.basic_size));
    return ReduceElements(o, t, count, a.basic, a.target.info.basic_size, a.op);
  }
  return MPI_SUCCESS;
}

// Under the lock: fetch, combine, store.
int Combine(Window& w, const Accumulation& a, TargetView& view) {
  if (InPlace(a, view)) return CombineInPlace(a, view);
  if (int rc = view.Load(); rc != MPI_SUCCESS) return rc;
  std::vector<std::byte> tmp, in;
  const std::byte* t = nullptr;
  if (int rc = Packed(w, view.side(), tmp, t); rc != MPI_SUCCESS) return rc;
  const auto n = static_cast<std::size_t>(a.target.count * a.target.info.size);
  std::vector<std::byte> current(t, t + n);
  if (a.fetch) {
    if (int rc = Unpacked(w, current.data(), n, const_cast<void*>(a.result.addr), a.result);
        rc != MPI_SUCCESS) {
      return rc;
    }
  }
  if (a.op == MPI_NO_OP || n == 0) return MPI_SUCCESS;
  const std::byte* o = nullptr;
  if (int rc = Packed(w, a.origin, in, o); rc != MPI_SUCCESS) return rc;
  if (a.op == MPI_REPLACE) {
    std::memcpy(current.data(), o, n);
  } else if (int rc = Reduce(o, current.data(), n, a.basic, a.op); rc != MPI_SUCCESS) {
    return rc;
  }
  if (int rc = Unpacked(w, current.data(), n, const_cast<void*>(view.side().addr), view.side());
      rc != MPI_SUCCESS) {
    return rc;
  }
  return view.Store();
}

// `a` by reference: three sides copied by value stall on store forwarding (transfer.cc).
int Accumulate(Window* w, Accumulation& a, int target, MPI_Aint disp, const char* call) {
  if (target == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int rc = CheckAccess(*w, target, call); rc != MPI_SUCCESS) return rc;
  if (int rc = CheckAccumulate(*w, a, call); rc != MPI_SUCCESS) return rc;
  MPI_Aint first = 0;
  if (int rc = CheckRange(*w, target, disp, a.target.count, a.target.info, first, call);
      rc != MPI_SUCCESS) {
    return rc;
  }
  if (a.basic == MPI_DATATYPE_NULL) return MPI_SUCCESS;  // no bytes
  AccumulateLock lock(*w, target);
  if (!lock.status().ok()) return SyncFailed(*w, lock.status());
  const auto at = static_cast<std::uint64_t>(first);
  const auto span = static_cast<std::uint64_t>(a.target.info.Span(a.target.count));
  if (int rc = BeforeAccumulate(*w, target, at, span); rc != MPI_SUCCESS) return rc;
  TargetView view(*w, target, disp, first, a.target, true);
  if (int rc = Combine(*w, a, view); rc != MPI_SUCCESS) return rc;
  return AfterAccumulate(*w, target, at, span);
}

Side Of(const void* addr, MPI_Aint count, MPI_Datatype type) { return Side{addr, count, type, {}}; }

}  // namespace

// Shared by the C entry points below (and their large-count forms).
int AccumulateCall(Window* w, const void* oaddr, MPI_Aint ocount, MPI_Datatype otype, void* raddr,
                   MPI_Aint rcount, MPI_Datatype rtype, int target, MPI_Aint disp, MPI_Aint tcount,
                   MPI_Datatype ttype, MPI_Op op, bool fetch, const char* call,
                   MPI_Request* request) {
  Accumulation a{Of(oaddr, ocount, otype), Of(raddr, rcount, rtype), Of(nullptr, tcount, ttype),
                 fetch, op};
  if (request == nullptr) return Accumulate(w, a, target, disp, call);
  return AsRequest(w, target, call, request, [&] { return Accumulate(w, a, target, disp, call); });
}

int CompareAndSwapCall(Window* w, const void* origin, const void* compare, void* result,
                       MPI_Datatype type, int target, MPI_Aint disp) {
  const char* call = "MPI_Compare_and_swap";
  if (target == MPI_PROC_NULL) return MPI_SUCCESS;
  Side t = Of(nullptr, 1, type);
  if (!LookUpType(type, t.info) || t.info.basic != type) {
    return Fail(*w, Misuse::kOp, fmt::format("{}: the datatype must be predefined", call));
  }
  if (int rc = CheckAccess(*w, target, call); rc != MPI_SUCCESS) return rc;
  MPI_Aint first = 0;
  if (int rc = CheckRange(*w, target, disp, 1, t.info, first, call); rc != MPI_SUCCESS) return rc;
  AccumulateLock lock(*w, target);
  if (!lock.status().ok()) return SyncFailed(*w, lock.status());
  const auto n = static_cast<std::size_t>(t.info.size);
  const auto offset = static_cast<std::uint64_t>(first);
  if (int rc = BeforeAccumulate(*w, target, offset, n); rc != MPI_SUCCESS) return rc;
  TargetView view(*w, target, disp, first, t, true);
  if (int rc = view.Load(); rc != MPI_SUCCESS) return rc;
  auto* at = static_cast<std::byte*>(const_cast<void*>(view.side().addr));
  std::vector<std::byte> old(at, at + n);
  std::memcpy(result, old.data(), n);
  if (std::memcmp(old.data(), compare, n) == 0) {
    std::memcpy(at, origin, n);
    if (int rc = view.Store(); rc != MPI_SUCCESS) return rc;
  }
  return AfterAccumulate(*w, target, offset, n);
}

}  // namespace tierflow::rma

using namespace tierflow;
using namespace tierflow::rma;

extern "C" int MPI_Accumulate(const void* oaddr, int ocount, MPI_Datatype otype, int target,
                              MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op,
                              MPI_Win win) {
  return Guarded("MPI_Accumulate", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Accumulate(oaddr, ocount, otype, target, disp, tcount, ttype, op, win);
    }
    return AccumulateCall(w, oaddr, ocount, otype, nullptr, 0, MPI_DATATYPE_NULL, target, disp,
                          tcount, ttype, op, false, "MPI_Accumulate", nullptr);
  });
}

extern "C" int MPI_Get_accumulate(const void* oaddr, int ocount, MPI_Datatype otype, void* raddr,
                                  int rcount, MPI_Datatype rtype, int target, MPI_Aint disp,
                                  int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
  return Guarded("MPI_Get_accumulate", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Get_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                                 ttype, op, win);
    }
    return AccumulateCall(w, oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                          ttype, op, true, "MPI_Get_accumulate", nullptr);
  });
}

extern "C" int MPI_Fetch_and_op(const void* oaddr, void* raddr, MPI_Datatype type, int target,
                                MPI_Aint disp, MPI_Op op, MPI_Win win) {
  return Guarded("MPI_Fetch_and_op", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Fetch_and_op(oaddr, raddr, type, target, disp, op, win);
    }
    return AccumulateCall(w, oaddr, 1, type, raddr, 1, type, target, disp, 1, type, op, true,
                          "MPI_Fetch_and_op", nullptr);
  });
}

extern "C" int MPI_Compare_and_swap(const void* oaddr, const void* caddr, void* raddr,
                                    MPI_Datatype type, int target, MPI_Aint disp, MPI_Win win) {
  return Guarded("MPI_Compare_and_swap", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Compare_and_swap(oaddr, caddr, raddr, type, target, disp, win);
    }
    return CompareAndSwapCall(w, oaddr, caddr, raddr, type, target, disp);
  });
}

extern "C" int MPI_Raccumulate(const void* oaddr, int ocount, MPI_Datatype otype, int target,
                               MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op,
                               MPI_Win win, MPI_Request* request) {
  return Guarded("MPI_Raccumulate", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Raccumulate(oaddr, ocount, otype, target, disp, tcount, ttype, op, win, request);
    }
    return AccumulateCall(w, oaddr, ocount, otype, nullptr, 0, MPI_DATATYPE_NULL, target, disp,
                          tcount, ttype, op, false, "MPI_Raccumulate", request);
  });
}

extern "C" int MPI_Rget_accumulate(const void* oaddr, int ocount, MPI_Datatype otype, void* raddr,
                                   int rcount, MPI_Datatype rtype, int target, MPI_Aint disp,
                                   int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win,
                                   MPI_Request* request) {
  return Guarded("MPI_Rget_accumulate", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Rget_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                                  ttype, op, win, request);
    }
    return AccumulateCall(w, oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                          ttype, op, true, "MPI_Rget_accumulate", request);
  });
}

#if MPI_VERSION >= 4
extern "C" int MPI_Accumulate_c(const void* oaddr, MPI_Count ocount, MPI_Datatype otype, int target,
                                MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Op op,
                                MPI_Win win) {
  return Guarded("MPI_Accumulate_c", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Accumulate_c(oaddr, ocount, otype, target, disp, tcount, ttype, op, win);
    }
    return AccumulateCall(w, oaddr, ocount, otype, nullptr, 0, MPI_DATATYPE_NULL, target, disp,
                          tcount, ttype, op, false, "MPI_Accumulate_c", nullptr);
  });
}

extern "C" int MPI_Get_accumulate_c(const void* oaddr, MPI_Count ocount, MPI_Datatype otype,
                                    void* raddr, MPI_Count rcount, MPI_Datatype rtype, int target,
                                    MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Op op,
                                    MPI_Win win) {
  return Guarded("MPI_Get_accumulate_c", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Get_accumulate_c(oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                                   ttype, op, win);
    }
    return AccumulateCall(w, oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                          ttype, op, true, "MPI_Get_accumulate_c", nullptr);
  });
}

extern "C" int MPI_Raccumulate_c(const void* oaddr, MPI_Count ocount, MPI_Datatype otype,
                                 int target, MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype,
                                 MPI_Op op, MPI_Win win, MPI_Request* request) {
  return Guarded("MPI_Raccumulate_c", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Raccumulate_c(oaddr, ocount, otype, target, disp, tcount, ttype, op, win,
                                request);
    }
    return AccumulateCall(w, oaddr, ocount, otype, nullptr, 0, MPI_DATATYPE_NULL, target, disp,
                          tcount, ttype, op, false, "MPI_Raccumulate_c", request);
  });
}

extern "C" int MPI_Rget_accumulate_c(const void* oaddr, MPI_Count ocount, MPI_Datatype otype,
                                     void* raddr, MPI_Count rcount, MPI_Datatype rtype, int target,
                                     MPI_Aint disp, MPI_Count tcount, MPI_Datatype ttype, MPI_Op op,
                                     MPI_Win win, MPI_Request* request) {
  return Guarded("MPI_Rget_accumulate_c", [&]() -> int {
    Window* w = LibraryWindow(win, target);
    if (w == nullptr) {
      return PMPI_Rget_accumulate_c(oaddr, ocount, otype, raddr, rcount, rtype, target, disp,
                                    tcount, ttype, op, win, request);
    }
    return AccumulateCall(w, oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount,
                          ttype, op, true, "MPI_Rget_accumulate_c", request);
  });
}
#endif
