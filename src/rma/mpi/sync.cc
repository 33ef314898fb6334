// SPDX-License-Identifier: Apache-2.0
// Synchronisation: GATS (post/start/complete/wait/test), fence, passive target (lock,
// lock_all, flush, sync). Every call on an accelerated window stays here; the MPI underneath
// never sees an epoch of it.
#include <atomic>
#include <vector>

#include <fmt/format.h>

#include "rma/mpi/coherence.h"
#include "rma/mpi/hybrid.h"
#include "rma/mpi/offload.h"
#include "rma/mpi/window.h"

namespace tierflow::rma {

namespace {

// Every synchronisation call first waits for the window's offloaded copies; their error (the
// first) is the call's, but the call still does its work (a target waits for this complete, a
// lock is released), so that the error costs no hang.
template <typename Body>
int Drained(Window& w, const char* call, Body body) {
  const int drained = DrainOffloaded(w, call);
  const int rc = body();
  return drained != MPI_SUCCESS ? drained : rc;
}

constexpr std::uint8_t kUnlocked = 0, kShared = 1, kExclusive = 2, kNoCheck = 3;

// The window ranks of `group`'s members, or an error naming the first that is not in the window.
int Translate(Window& w, MPI_Group group, std::vector<int>& out, const char* call) {
  int n = 0;
  if (group == MPI_GROUP_NULL || PMPI_Group_size(group, &n) != MPI_SUCCESS) {
    return Fail(w, Misuse::kNotInGroup,
                fmt::format("{}: MPI_GROUP_NULL or an invalid group", call));
  }
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i;
  out.assign(n, MPI_UNDEFINED);
  PMPI_Group_translate_ranks(group, n, in.data(), w.group, out.data());
  for (int i = 0; i < n; ++i) {
    if (out[i] == MPI_UNDEFINED) {
      return Fail(w, Misuse::kNotInGroup,
                  fmt::format("{}: member {} of the group is not in the window", call, i));
    }
  }
  return MPI_SUCCESS;
}

bool PassiveEpoch(const Window& w) { return w.locks_held > 0 || w.lock_all; }

int PeerGone(Window& w, const Status& s) { return SyncFailed(w, s); }

// The end of an exposure epoch (wait, a successful test): the origins' puts, where they noted
// them; MPI_MODE_NOPUT on the post said there would be none.
int EndExposure(Window& w) {
  if (!Kept(HookPoint::kWaitInvalidate) || (w.post_assert & MPI_MODE_NOPUT)) return MPI_SUCCESS;
  return InvalidateOwnWritten(w, kGatsSlot);
}

// A fence notes in each rank's ledger what this rank stored into its window, writes back its
// copies of the others' windows (its puts) and, unless MPI_MODE_NOSTORE says there were no
// local stores, its own window.
int FenceWriteBack(Window& w, int asserts) {
  for (int r = 0; r < w.ranks; ++r) {
    Publish(w, r, FenceSlot(w));
    if (int rc = WriteBackCopy(w, r); rc != MPI_SUCCESS) return rc;
  }
  return asserts & MPI_MODE_NOSTORE ? MPI_SUCCESS : WriteBackOwn(w);
}

// After the barrier: its own window where the others noted stores, unless the fence that
// opened the closing epoch said MPI_MODE_NOPUT (nobody put into it since: the slot is only
// cleared). The others' windows are invalidated where they are accessed.
int FenceInvalidate(Window& w, int opening_asserts) {
  if (opening_asserts & MPI_MODE_NOPUT) {
    ResetLedger(w, FenceSlot(w));
    return MPI_SUCCESS;
  }
  return InvalidateOwnWritten(w, FenceSlot(w));
}

}  // namespace

}  // namespace tierflow::rma

using namespace tierflow;
using namespace tierflow::rma;

extern "C" int MPI_Win_start(MPI_Group group, int asserts, MPI_Win win) {
  return Guarded("MPI_Win_start", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridStart(*h, group, asserts);
      return PMPI_Win_start(group, asserts, win);
    }
    return Drained(*w, "MPI_Win_start", [&]() -> int {
      if (w->started || PassiveEpoch(*w)) {
        return Fail(*w, Misuse::kEpochOpen, "MPI_Win_start while an access epoch is open");
      }
      if (int rc = Translate(*w, group, w->start_group, "MPI_Win_start"); rc != MPI_SUCCESS)
        return rc;
      std::fill(w->seen.begin(), w->seen.end(), 0);
      for (int t : w->start_group) w->seen[t] = 1;
      w->started = true;
      w->fence_epoch = false;
      return MPI_SUCCESS;
    });
  });
}

extern "C" int MPI_Win_complete(MPI_Win win) {
  return Guarded("MPI_Win_complete", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridComplete(*h);
      return PMPI_Win_complete(win);
    }
    return Drained(*w, "MPI_Win_complete", [&]() -> int {
      if (!w->started) {
        return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_complete without MPI_Win_start");
      }
      w->started = false;
      // The puts, noted for the targets and written back before their counters drop.
      for (int t : w->start_group) Publish(*w, t, kGatsSlot);
      if (Kept(HookPoint::kCompleteWriteBack)) {
        for (int t : w->start_group) {
          if (int rc = WriteBackCopy(*w, t); rc != MPI_SUCCESS) return rc;
        }
      }
      if (Status s = w->sync->Complete(w->start_group); !s.ok()) return PeerGone(*w, s);
      return MPI_SUCCESS;
    });
  });
}

extern "C" int MPI_Win_post(MPI_Group group, int asserts, MPI_Win win) {
  return Guarded("MPI_Win_post", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridPost(*h, group, asserts);
      return PMPI_Win_post(group, asserts, win);
    }
    return Drained(*w, "MPI_Win_post", [&]() -> int {
      if (w->posted) return Fail(*w, Misuse::kEpochOpen, "MPI_Win_post while a post is open");
      if (int rc = Translate(*w, group, w->post_group, "MPI_Win_post"); rc != MPI_SUCCESS)
        return rc;
      std::atomic_thread_fence(std::memory_order_seq_cst);  // local stores before the origins look
      // MPI_MODE_NOSTORE: no local stores since the last synchronisation, nothing to write back.
      if (Kept(HookPoint::kPostWriteBack) && !(asserts & MPI_MODE_NOSTORE)) {
        if (int rc = WriteBackOwn(*w); rc != MPI_SUCCESS) return rc;
      }
      ResetLedger(*w, kGatsSlot);  // before any origin of this epoch can see the post
      w->post_assert = asserts;
      w->sync->Post(w->post_group);
      w->posted = true;
      w->fence_epoch = false;
      return MPI_SUCCESS;
    });
  });
}

extern "C" int MPI_Win_wait(MPI_Win win) {
  return Guarded("MPI_Win_wait", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridWait(*h);
      return PMPI_Win_wait(win);
    }
    return Drained(*w, "MPI_Win_wait", [&]() -> int {
      if (!w->posted) return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_wait without MPI_Win_post");
      if (Status s = w->sync->AwaitCompletion(); !s.ok()) return PeerGone(*w, s);
      w->posted = false;
      return EndExposure(*w);
    });
  });
}

extern "C" int MPI_Win_test(MPI_Win win, int* flag) {
  return Guarded("MPI_Win_test", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridTest(*h, flag);
      return PMPI_Win_test(win, flag);
    }
    return Drained(*w, "MPI_Win_test", [&]() -> int {
      if (!w->posted) return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_test without MPI_Win_post");
      *flag = w->sync->Completed() ? 1 : 0;
      if (!*flag) return MPI_SUCCESS;
      w->posted = false;
      return EndExposure(*w);
    });
  });
}

extern "C" int MPI_Win_fence(int asserts, MPI_Win win) {
  return Guarded("MPI_Win_fence", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridFence(*h, asserts);
      return PMPI_Win_fence(asserts, win);
    }
    return Drained(*w, "MPI_Win_fence", [&]() -> int {
      if (w->started || w->posted || PassiveEpoch(*w)) {
        return Fail(*w, Misuse::kEpochOpen,
                    "MPI_Win_fence inside a GATS or passive-target epoch of this window");
      }
      // Neither an epoch before nor one after: nothing to order with the other ranks.
      const bool alone = (asserts & MPI_MODE_NOPRECEDE) && (asserts & MPI_MODE_NOSUCCEED);
      if (!alone) {
        if (Kept(HookPoint::kFenceWriteBack)) {
          if (int rc = FenceWriteBack(*w, asserts); rc != MPI_SUCCESS) return rc;
        }
        if (Status s = w->sync->Barrier(); !s.ok()) return PeerGone(*w, s);
        if (Kept(HookPoint::kFenceInvalidate)) {
          if (int rc = FenceInvalidate(*w, w->fence_assert); rc != MPI_SUCCESS) return rc;
        }
        ++w->fences;
      }
      w->fence_epoch = (asserts & MPI_MODE_NOSUCCEED) == 0;
      w->fence_assert = asserts;
      return MPI_SUCCESS;
    });
  });
}

namespace {

int CheckLockTarget(Window& w, int rank, const char* call) {
  if (rank < 0 || rank >= w.ranks) {
    return Fail(w, Misuse::kNotInGroup,
                fmt::format("{}: rank {} of a window of {} ranks", call, rank, w.ranks));
  }
  return MPI_SUCCESS;
}

int Acquire(Window& w, int type, int rank, int asserts) {
  if (asserts & MPI_MODE_NOCHECK) {
    w.lock[rank] = kNoCheck;
  } else {
    const bool exclusive = type == MPI_LOCK_EXCLUSIVE;
    Status s = exclusive ? w.sync->LockExclusive(rank) : w.sync->LockShared(rank);
    if (!s.ok()) return PeerGone(w, s);
    w.lock[rank] = exclusive ? kExclusive : kShared;
  }
  // What the last holder wrote into one's own window, which nobody noted: the whole of it.
  // Another rank's lines are invalidated when they are accessed.
  if (!Kept(HookPoint::kLockInvalidate) || rank != w.me) return MPI_SUCCESS;
  return InvalidateOwn(w);
}

// The write-back of what was stored under the lock (of one's own window: the whole, the
// program's local stores included), then the lock word.
int Release(Window& w, int rank) {
  int rc = MPI_SUCCESS;
  if (Kept(HookPoint::kUnlockWriteBack)) {
    rc = rank == w.me ? WriteBackOwn(w) : WriteBackCopy(w, rank);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (w.lock[rank] == kShared) w.sync->UnlockShared(rank);
  if (w.lock[rank] == kExclusive) w.sync->UnlockExclusive(rank);
  w.lock[rank] = kUnlocked;
  return rc;
}

}  // namespace

extern "C" int MPI_Win_lock(int type, int rank, int asserts, MPI_Win win) {
  return Guarded("MPI_Win_lock", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridLock(*h, type, rank, asserts);
      return PMPI_Win_lock(type, rank, asserts, win);
    }
    return Drained(*w, "MPI_Win_lock", [&]() -> int {
      if (rank == MPI_PROC_NULL)
        return MPI_SUCCESS;  // a valid target with no effect, as in MPI 3.1
      if (int rc = CheckLockTarget(*w, rank, "MPI_Win_lock"); rc != MPI_SUCCESS) return rc;
      if (w->lock[rank] != kUnlocked || w->lock_all || w->started) {
        return Fail(*w, Misuse::kEpochOpen,
                    fmt::format("MPI_Win_lock of rank {}: this rank already has an access epoch "
                                "to it (lock, lock_all or start)",
                                rank));
      }
      if (type != MPI_LOCK_SHARED && type != MPI_LOCK_EXCLUSIVE) {
        return Fail(*w, Misuse::kLockType, fmt::format("MPI_Win_lock: lock type {}", type));
      }
      if (int rc = Acquire(*w, type, rank, asserts); rc != MPI_SUCCESS) return rc;
      ++w->locks_held;
      return MPI_SUCCESS;
    });
  });
}

extern "C" int MPI_Win_unlock(int rank, MPI_Win win) {
  return Guarded("MPI_Win_unlock", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridUnlock(*h, rank);
      return PMPI_Win_unlock(rank, win);
    }
    return Drained(*w, "MPI_Win_unlock", [&]() -> int {
      if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
      if (int rc = CheckLockTarget(*w, rank, "MPI_Win_unlock"); rc != MPI_SUCCESS) return rc;
      if (w->lock[rank] == kUnlocked || w->lock_all) {
        return Fail(*w, Misuse::kNoMatchingSync,
                    fmt::format("MPI_Win_unlock of rank {} without MPI_Win_lock of it", rank));
      }
      const int rc = Release(*w, rank);
      --w->locks_held;
      return rc;
    });
  });
}

extern "C" int MPI_Win_lock_all(int asserts, MPI_Win win) {
  return Guarded("MPI_Win_lock_all", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridLockAll(*h, asserts);
      return PMPI_Win_lock_all(asserts, win);
    }
    return Drained(*w, "MPI_Win_lock_all", [&]() -> int {
      if (PassiveEpoch(*w) || w->started) {
        return Fail(*w, Misuse::kEpochOpen, "MPI_Win_lock_all while an access epoch is open");
      }
      for (int r = 0; r < w->ranks; ++r) {
        if (int rc = Acquire(*w, MPI_LOCK_SHARED, r, asserts); rc != MPI_SUCCESS) {
          for (int q = 0; q < r; ++q) (void)Release(*w, q);  // the first error is reported
          return rc;
        }
      }
      w->lock_all = true;
      return MPI_SUCCESS;
    });
  });
}

extern "C" int MPI_Win_unlock_all(MPI_Win win) {
  return Guarded("MPI_Win_unlock_all", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridUnlockAll(*h);
      return PMPI_Win_unlock_all(win);
    }
    return Drained(*w, "MPI_Win_unlock_all", [&]() -> int {
      if (!w->lock_all) {
        return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_unlock_all without MPI_Win_lock_all");
      }
      int rc = MPI_SUCCESS;
      for (int r = 0; r < w->ranks; ++r) {
        const int released = Release(*w, r);
        if (rc == MPI_SUCCESS) rc = released;  // every lock is released; the first error reported
      }
      w->lock_all = false;
      return rc;
    });
  });
}

namespace {

// Every transfer has completed when its call returned: a flush orders and checks the epoch.
int Flush(MPI_Win win, int rank, const char* call, int (*pass)(int, MPI_Win)) {
  Window* w = FindWindow(win);
  if (w == nullptr) {
    // MPI_PROC_NULL, or a rank the MPI refuses: its answer (HybridFlush takes negative for all).
    if (Hybrid* h = FindHybrid(win); h != nullptr && rank >= 0) {
      return HybridFlush(*h, rank, pass == PMPI_Win_flush_local);
    }
    return pass(rank, win);
  }
  return Drained(*w, call, [&]() -> int {
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (int rc = CheckLockTarget(*w, rank, call); rc != MPI_SUCCESS) return rc;
    if (w->lock[rank] == kUnlocked && !w->lock_all) {
      return Fail(*w, Misuse::kNoMatchingSync,
                  fmt::format("{} of rank {} outside a passive-target epoch to it", call, rank));
    }
    int rc = MPI_SUCCESS;
    if (Kept(HookPoint::kFlushWriteBack)) rc = WriteBackCopy(*w, rank);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return rc;
  });
}

int FlushAll(MPI_Win win, const char* call, int (*pass)(MPI_Win)) {
  Window* w = FindWindow(win);
  if (w == nullptr) {
    if (Hybrid* h = FindHybrid(win)) return HybridFlush(*h, -1, pass == PMPI_Win_flush_local_all);
    return pass(win);
  }
  return Drained(*w, call, [&]() -> int {
    if (!PassiveEpoch(*w)) {
      return Fail(*w, Misuse::kNoMatchingSync,
                  fmt::format("{} outside a passive-target epoch", call));
    }
    int rc = MPI_SUCCESS;
    for (int r = 0; r < w->ranks && rc == MPI_SUCCESS; ++r) {
      if (Kept(HookPoint::kFlushWriteBack)) rc = WriteBackCopy(*w, r);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return rc;
  });
}

}  // namespace

extern "C" int MPI_Win_flush(int rank, MPI_Win win) {
  return Guarded("MPI_Win_flush",
                 [&]() -> int { return Flush(win, rank, "MPI_Win_flush", PMPI_Win_flush); });
}
extern "C" int MPI_Win_flush_local(int rank, MPI_Win win) {
  return Guarded("MPI_Win_flush_local", [&]() -> int {
    return Flush(win, rank, "MPI_Win_flush_local", PMPI_Win_flush_local);
  });
}
extern "C" int MPI_Win_flush_all(MPI_Win win) {
  return Guarded("MPI_Win_flush_all",
                 [&]() -> int { return FlushAll(win, "MPI_Win_flush_all", PMPI_Win_flush_all); });
}
extern "C" int MPI_Win_flush_local_all(MPI_Win win) {
  return Guarded("MPI_Win_flush_local_all", [&]() -> int {
    return FlushAll(win, "MPI_Win_flush_local_all", PMPI_Win_flush_local_all);
  });
}

extern "C" int MPI_Win_sync(MPI_Win win) {
  return Guarded("MPI_Win_sync", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridSync(*h);
      return PMPI_Win_sync(win);
    }
    return Drained(*w, "MPI_Win_sync", [&]() -> int {
      // The separate model's private and public copies of this rank's window meet.
      int rc = WriteBackOwn(*w);
      if (rc == MPI_SUCCESS) rc = InvalidateOwn(*w);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      return rc;
    });
  });
}
