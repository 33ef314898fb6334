// SPDX-License-Identifier: Apache-2.0
// Synchronisation: GATS (post/start/complete/wait/test), fence, passive target (lock,
// lock_all, flush, sync). Every call on an accelerated window stays here; the MPI underneath
// never sees an epoch of it.
#include <atomic>
#include <vector>

#include <fmt/format.h>

#include "rma/mpi/coherence.h"
#include "rma/mpi/window.h"

namespace tierflow::rma {

namespace {

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

int PeerGone(Window& w, const Status& s) { return Fail(w, Misuse::kPeerGone, s.message()); }

// A fence writes back this rank's copies of the others' windows (its puts) and, unless
// MPI_MODE_NOSTORE says there were no local stores, its own window.
void FenceWriteBack(Window& w, int asserts) {
  for (int r = 0; r < w.ranks; ++r) {
    if (r != w.me || !(asserts & MPI_MODE_NOSTORE)) WriteBack(w, r);
  }
}

// After the barrier: the copies of the others' windows, and its own unless the fence that
// opened the closing epoch said MPI_MODE_NOPUT (nobody put into it since).
void FenceInvalidate(Window& w, int opening_asserts) {
  for (int r = 0; r < w.ranks; ++r) {
    if (r != w.me || !(opening_asserts & MPI_MODE_NOPUT)) Invalidate(w, r);
  }
}

}  // namespace

}  // namespace tierflow::rma

using namespace tierflow;
using namespace tierflow::rma;

extern "C" int MPI_Win_start(MPI_Group group, int asserts, MPI_Win win) {
  return Guarded("MPI_Win_start", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_start(group, asserts, win);
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
}

extern "C" int MPI_Win_complete(MPI_Win win) {
  return Guarded("MPI_Win_complete", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_complete(win);
    if (!w->started) {
      return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_complete without MPI_Win_start");
    }
    w->started = false;
    if (Kept(HookPoint::kCompleteWriteBack)) {
      for (int t : w->start_group) WriteBack(*w, t);  // the puts, before the counters drop
    }
    if (Status s = w->sync->Complete(w->start_group); !s.ok()) return PeerGone(*w, s);
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Win_post(MPI_Group group, int asserts, MPI_Win win) {
  return Guarded("MPI_Win_post", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_post(group, asserts, win);
    if (w->posted) return Fail(*w, Misuse::kEpochOpen, "MPI_Win_post while a post is open");
    if (int rc = Translate(*w, group, w->post_group, "MPI_Win_post"); rc != MPI_SUCCESS) return rc;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // local stores before the origins look
    // MPI_MODE_NOSTORE: no local stores since the last synchronisation, nothing to write back.
    if (Kept(HookPoint::kPostWriteBack) && !(asserts & MPI_MODE_NOSTORE)) WriteBack(*w, w->me);
    w->post_assert = asserts;
    w->sync->Post(w->post_group);
    w->posted = true;
    w->fence_epoch = false;
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Win_wait(MPI_Win win) {
  return Guarded("MPI_Win_wait", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_wait(win);
    if (!w->posted) return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_wait without MPI_Win_post");
    if (Status s = w->sync->AwaitCompletion(); !s.ok()) return PeerGone(*w, s);
    // The origins' puts; MPI_MODE_NOPUT on the post said there would be none.
    if (Kept(HookPoint::kWaitInvalidate) && !(w->post_assert & MPI_MODE_NOPUT)) {
      Invalidate(*w, w->me);
    }
    w->posted = false;
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Win_test(MPI_Win win, int* flag) {
  return Guarded("MPI_Win_test", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_test(win, flag);
    if (!w->posted) return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_test without MPI_Win_post");
    *flag = w->sync->Completed() ? 1 : 0;
    if (*flag) {
      if (Kept(HookPoint::kWaitInvalidate) && !(w->post_assert & MPI_MODE_NOPUT)) {
        Invalidate(*w, w->me);
      }
      w->posted = false;
    }
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Win_fence(int asserts, MPI_Win win) {
  return Guarded("MPI_Win_fence", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_fence(asserts, win);
    if (w->started || w->posted || PassiveEpoch(*w)) {
      return Fail(*w, Misuse::kEpochOpen,
                  "MPI_Win_fence inside a GATS or passive-target epoch of this window");
    }
    // Neither an epoch before nor one after: nothing to order with the other ranks.
    const bool alone = (asserts & MPI_MODE_NOPRECEDE) && (asserts & MPI_MODE_NOSUCCEED);
    if (!alone) {
      if (Kept(HookPoint::kFenceWriteBack)) FenceWriteBack(*w, asserts);
      if (Status s = w->sync->Barrier(); !s.ok()) return PeerGone(*w, s);
      if (Kept(HookPoint::kFenceInvalidate)) FenceInvalidate(*w, w->fence_assert);
    }
    w->fence_epoch = (asserts & MPI_MODE_NOSUCCEED) == 0;
    w->fence_assert = asserts;
    return MPI_SUCCESS;
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
    if (Kept(HookPoint::kLockInvalidate)) Invalidate(w, rank);
    return MPI_SUCCESS;
  }
  const bool exclusive = type == MPI_LOCK_EXCLUSIVE;
  Status s = exclusive ? w.sync->LockExclusive(rank) : w.sync->LockShared(rank);
  if (!s.ok()) return PeerGone(w, s);
  w.lock[rank] = exclusive ? kExclusive : kShared;
  if (Kept(HookPoint::kLockInvalidate)) Invalidate(w, rank);
  return MPI_SUCCESS;
}

void Release(Window& w, int rank) {
  if (Kept(HookPoint::kUnlockWriteBack)) WriteBack(w, rank);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (w.lock[rank] == kShared) w.sync->UnlockShared(rank);
  if (w.lock[rank] == kExclusive) w.sync->UnlockExclusive(rank);
  w.lock[rank] = kUnlocked;
}

}  // namespace

extern "C" int MPI_Win_lock(int type, int rank, int asserts, MPI_Win win) {
  return Guarded("MPI_Win_lock", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_lock(type, rank, asserts, win);
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;  // a valid target with no effect, as in MPI 3.1
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
}

extern "C" int MPI_Win_unlock(int rank, MPI_Win win) {
  return Guarded("MPI_Win_unlock", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_unlock(rank, win);
    if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
    if (int rc = CheckLockTarget(*w, rank, "MPI_Win_unlock"); rc != MPI_SUCCESS) return rc;
    if (w->lock[rank] == kUnlocked || w->lock_all) {
      return Fail(*w, Misuse::kNoMatchingSync,
                  fmt::format("MPI_Win_unlock of rank {} without MPI_Win_lock of it", rank));
    }
    Release(*w, rank);
    --w->locks_held;
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Win_lock_all(int asserts, MPI_Win win) {
  return Guarded("MPI_Win_lock_all", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_lock_all(asserts, win);
    if (PassiveEpoch(*w) || w->started) {
      return Fail(*w, Misuse::kEpochOpen, "MPI_Win_lock_all while an access epoch is open");
    }
    for (int r = 0; r < w->ranks; ++r) {
      if (int rc = Acquire(*w, MPI_LOCK_SHARED, r, asserts); rc != MPI_SUCCESS) {
        for (int q = 0; q < r; ++q) Release(*w, q);
        return rc;
      }
    }
    w->lock_all = true;
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Win_unlock_all(MPI_Win win) {
  return Guarded("MPI_Win_unlock_all", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) return PMPI_Win_unlock_all(win);
    if (!w->lock_all) {
      return Fail(*w, Misuse::kNoMatchingSync, "MPI_Win_unlock_all without MPI_Win_lock_all");
    }
    for (int r = 0; r < w->ranks; ++r) Release(*w, r);
    w->lock_all = false;
    return MPI_SUCCESS;
  });
}

namespace {

// Every transfer has completed when its call returned: a flush orders and checks the epoch.
int Flush(MPI_Win win, int rank, const char* call, int (*pass)(int, MPI_Win)) {
  Window* w = FindWindow(win);
  if (w == nullptr) return pass(rank, win);
  if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int rc = CheckLockTarget(*w, rank, call); rc != MPI_SUCCESS) return rc;
  if (w->lock[rank] == kUnlocked && !w->lock_all) {
    return Fail(*w, Misuse::kNoMatchingSync,
                fmt::format("{} of rank {} outside a passive-target epoch to it", call, rank));
  }
  if (Kept(HookPoint::kFlushWriteBack)) WriteBack(*w, rank);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return MPI_SUCCESS;
}

int FlushAll(MPI_Win win, const char* call, int (*pass)(MPI_Win)) {
  Window* w = FindWindow(win);
  if (w == nullptr) return pass(win);
  if (!PassiveEpoch(*w)) {
    return Fail(*w, Misuse::kNoMatchingSync,
                fmt::format("{} outside a passive-target epoch", call));
  }
  if (Kept(HookPoint::kFlushWriteBack)) WriteBackAll(*w);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return MPI_SUCCESS;
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
    if (w == nullptr) return PMPI_Win_sync(win);
    // The separate model's private and public copies of this rank's window meet.
    WriteBack(*w, w->me);
    Invalidate(*w, w->me);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return MPI_SUCCESS;
  });
}
