// SPDX-License-Identifier: Apache-2.0
// Windows whose ranks span hosts (as the MPI sees hosts: MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED). Each such window (but an allocated one that reach.h leaves whole) is
// two:
//  - a window of the library over the ranks of this host (the node window: shared memory,
//    trigger-only synchronisation), through which puts and gets to those ranks go;
//  - the MPI's window over all ranks and the same memory (the window the program holds),
//    through which go puts and gets to other hosts and every accumulate (their atomicity and
//    ordering are the MPI's, whichever host the origin is on).
// Every synchronisation call acts on both: a fence fences both, a post or start splits its
// group into this host's ranks and the others, a lock of a rank of this host is the MPI's lock
// (which excludes other hosts' ranks) plus an epoch of the node window, flushes flush both.
// Under a lock the MPI may grant the lock only with the first operation (MPICH does), so the
// first put or get to a rank of this host in a passive epoch, if small, goes to the MPI, which
// asks for the lock with it (a lock, put and unlock then cost what they cost the MPI alone); a
// flush then tells that the lock is held, and the next put or get to that rank flushes first
// if no flush did. A large first one is preceded by a one-byte get, flushed, instead (the
// MPI's large transfers into the library's memory take a system call; its small ones do not).
// Where the MPI holds a lock of one target once a flush of it returns (Open MPI), the first
// put or get under MPI_Win_lock is preceded by that flush alone. From there on they are stores
// and loads.
//
// Every coherence mode is split this way, the node window in the mode asked for and the window
// reporting its memory model. In the two non-coherent modes the MPI's half writes this rank's
// window past the node window's ledger (in the simulated mode, into the public copy, where the
// MPI's window lies, as a device writes memory): so a post with no rank of this host writes
// the own window back before the MPI's post, and after the MPI's fence or wait the own window
// is invalidated whole (as after a lock of it or MPI_Win_sync), unless MPI_MODE_NOPUT said that
// nobody put into it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rma/mpi/window.h"

namespace tierflow::rma {

struct Hybrid {
  MPI_Win win = MPI_WIN_NULL;       // the MPI's, over all ranks: the program's handle
  MPI_Win node_win = MPI_WIN_NULL;  // the library's, over this host's ranks
  Window* node_state = nullptr;     // its state; nullptr where the library left it to the MPI
  MPI_Group node = MPI_GROUP_NULL;  // this host's ranks of the window, as the node window's
  MPI_Comm comm = MPI_COMM_NULL;    // all of them (a duplicate of the window's communicator)
  std::vector<int> node_rank;       // window rank -> rank in the node window, -1 on another host
  std::vector<std::uint64_t> size;  // window rank -> bytes of its window
  void* base = nullptr;
  MPI_Aint attr_size = 0;
  int attr_disp_unit = 1, flavor = 0, model = MPI_WIN_UNIFIED;
  int me = 0, hosts = 0;
  // Epochs: which half has one open.
  bool started_node = false, started_mpi = false, posted_node = false, posted_mpi = false;
  // MPI_MODE_NOPUT given to the open post, and to the fence that opened the current epoch.
  bool post_noput = false, fence_noput = false;
  std::vector<std::uint8_t> lock;  // window rank -> MPI lock held by this rank
  // ... and what is known of its grant: one of the values below.
  std::vector<std::uint8_t> forced;
  static constexpr std::uint8_t kNotKnown = 0;  // no operation to the rank yet
  static constexpr std::uint8_t kGranted = 1;   // or MPI_MODE_NOCHECK: the memory may be touched
  // Asked for, unflushed: the first operation went to the MPI, or the MPI's flush takes the lock.
  static constexpr std::uint8_t kAsked = 2;
  bool lock_all = false;
  // Window rank -> an operation to it went to the MPI and no flush or unlock of it has returned
  // since; `via_mpi_ranks` counts those ranks. A flush of a rank of this host with none is the
  // node window's alone (but for every kProgressEvery-th in a row: `skipped` counts them).
  std::vector<std::uint8_t> via_mpi;
  int via_mpi_ranks = 0;
  unsigned skipped = 0;
  static constexpr unsigned kProgressEvery = 16;
  // Groups of posts and starts split by host, the latest few: their members (a copy), this
  // host's part (node window ranks) and the rest (window ranks); MPI_GROUP_NULL when empty.
  struct GroupSplit {
    MPI_Group members = MPI_GROUP_NULL, node = MPI_GROUP_NULL, rest = MPI_GROUP_NULL;
  };
  static constexpr std::size_t kSplits = 4;
  std::vector<GroupSplit> splits;
};

// nullptr for any other window.
Hybrid* FindHybrid(MPI_Win win);

// Notes that an operation to `target` (any value the program passed) goes to the MPI.
inline void NoteMpi(Hybrid& h, int target) {
  if (target < 0 || target >= static_cast<int>(h.via_mpi.size()) || h.via_mpi[target] != 0) {
    return;
  }
  h.via_mpi[target] = 1;
  ++h.via_mpi_ranks;
}

// The library's window with handle `win`, or nullptr: an operation on it to `target` is then
// left to the MPI whole, and noted (NoteMpi) where `win` is split by host.
inline Window* LibraryWindow(MPI_Win win, int target) {
  if (Window* w = FindWindow(win)) return w;
  if (Hybrid* h = FindHybrid(win)) NoteMpi(*h, target);
  return nullptr;
}

// Records on `comm`, a communicator from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), that all
// its ranks are on this node: a window over it then skips splitting it again (create.cc).
void MarkOnThisNode(MPI_Comm comm);
// The communicator of this host's ranks of `comm` that create.cc keeps on it (made by its
// first window's creation, freed with `comm`), or MPI_COMM_NULL when it keeps none.
MPI_Comm KeptNodeCommunicator(MPI_Comm comm);

// The window for a put or get to `target` of the window `win`: for a target on this host, the
// node window's state (nullptr when the node window is the MPI's own), with `win` and `target`
// changed to the node window and the target's rank there; otherwise nullptr and `win`
// unchanged (also for the first small put or get to a rank of this host in a passive epoch,
// above). A put or get then goes to the MPI with the changed arguments when the answer is
// nullptr. `count` and `type` are the operation's target side. Errors of the MPI's lock check
// are returned in `rc`.
Window* RouteTransfer(Hybrid& h, MPI_Win& win, int& target, int& rc, MPI_Count count,
                      MPI_Datatype type);
// FindWindow, or RouteTransfer for a window across hosts.
inline Window* Route(MPI_Win& win, int& target, int& rc, MPI_Count count, MPI_Datatype type) {
  if (Window* w = FindWindow(win)) return w;
  Hybrid* h = FindHybrid(win);
  return h == nullptr ? nullptr : RouteTransfer(*h, win, target, rc, count, type);
}

int HybridAllocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                   MPI_Win* win);
int HybridCreate(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                 MPI_Win* win);
int HybridFree(MPI_Win* win);
int HybridAttr(Hybrid& h, int keyval, void* value, int* flag);

int HybridFence(Hybrid& h, int asserts);
int HybridStart(Hybrid& h, MPI_Group group, int asserts);
int HybridComplete(Hybrid& h);
int HybridPost(Hybrid& h, MPI_Group group, int asserts);
int HybridWait(Hybrid& h);
int HybridTest(Hybrid& h, int* flag);
int HybridLock(Hybrid& h, int type, int rank, int asserts);
int HybridUnlock(Hybrid& h, int rank);
int HybridLockAll(Hybrid& h, int asserts);
int HybridUnlockAll(Hybrid& h);
// flush / flush_local of one rank, and of all (`rank` < 0); MPI_Win_sync with `sync`.
int HybridFlush(Hybrid& h, int rank, bool local);
int HybridSync(Hybrid& h);

}  // namespace tierflow::rma
