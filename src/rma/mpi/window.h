// SPDX-License-Identifier: Apache-2.0
// The state of one accelerated window and the table that finds it from an MPI_Win.
//
// A window is accelerated when all its ranks share a node and its memory can be reached
// from every rank (shared segments, or process_vm_readv/writev); every other window stays
// with the MPI underneath, untouched. An accelerated window still has a window of the MPI
// underneath (made over the same memory), so attributes, names, error handlers and the group
// keep working; only synchronisation and communication bypass it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rma/pool.h"
#include "rma/range_set.h"
#include "rma/shared_segment.h"
#include "rma/window_sync.h"
#include "rma/write_ledger.h"
#include "tierflow/handle.h"
#include "tierflow/status.h"

namespace tierflow::rma {

enum class Coherence : std::uint8_t { kCoherent, kNoncoherent, kSimulated };

struct Window {
  MPI_Win win = MPI_WIN_NULL;     // the window of the MPI underneath
  MPI_Win report = MPI_WIN_NULL;  // whose error handler reports errors, when not `win`'s
                                  // (the node window of a window across hosts: hybrid.h)
  MPI_Comm comm = MPI_COMM_NULL;  // a duplicate of the window's communicator
  MPI_Group group = MPI_GROUP_NULL;
  int flavor = 0;  // what the program asked for (MPI_WIN_FLAVOR_CREATE / _ALLOCATE)
  int model = 0;   // MPI_WIN_UNIFIED, or MPI_WIN_SEPARATE when caches are not coherent
  Coherence coherence = Coherence::kCoherent;
  int me = 0, ranks = 0;
  SharedSegment control;  // the WindowSync words
  // A window across hosts in a pool (rma/mpi/pooled.h): the pool, and this process's holds of
  // the allocations of the window (the synchronisation words first, then window memory).
  std::shared_ptr<Pool> pool;
  std::vector<PoolRegion> pooled;
  std::vector<SharedSegment> memory;   // window memory mapped here (one or one per rank)
  std::vector<std::byte*> base;        // rank -> its window memory in this process (kMapped)
  std::vector<std::int32_t> pid;       // rank -> process (kProcessVm)
  std::vector<std::uint64_t> address;  // rank -> its window's address in its own process
  std::vector<std::uint64_t> size;     // rank -> bytes
  std::vector<std::uint32_t> disp_unit;
  std::unique_ptr<WindowSync> sync;
  // kSimulated only (rma/mpi/coherence.h): every rank's public copy, mapped here; this
  // process's private copies of the other ranks' windows (base[r] points into them) and the
  // twins of all private copies, its own window's included.
  std::vector<std::byte*> pub;
  std::vector<std::vector<std::byte>> cache, twin;
  std::vector<std::byte> local;  // the program's memory of a simulated MPI_Win_allocate window
  std::vector<std::vector<std::uint8_t>> present;  // per rank != me, per line of its copy

  // The non-coherent modes (rma/mpi/coherence.h): per rank, the bytes of its window this
  // process stored into since the last write-back of them.
  std::vector<RangeSet> dirty;
  WriteLedger ledger;  // in the control segment, after the WindowSync words
  int fences = 0;      // fences with a barrier so far: which ledger slot a fence uses

  // Epochs of this rank.
  bool fence_epoch = false;                  // opened by a fence without MPI_MODE_NOSUCCEED
  bool started = false, posted = false;      // GATS access / exposure epoch
  int post_assert = 0;                       // the assertions of the open post
  int fence_assert = 0;                      // ... of the last fence
  std::vector<int> start_group, post_group;  // window ranks
  std::vector<std::uint8_t> seen;            // started: target's post observed
  std::vector<std::uint8_t> lock;            // rank -> 0 none, 1 shared, 2 exclusive, 3 nocheck
  int locks_held = 0;
  bool lock_all = false;

  const std::byte* last_large_copy = nullptr;  // where the last large put went (access.cc)
  // Copies on the offload engine (rma/mpi/offload.h) until the next synchronisation call: the
  // rank whose window they touch and the bytes of it, [begin, end).
  struct PendingCopy {
    Handle handle;
    int rank;
    std::uint64_t begin, end;
  };
  std::vector<PendingCopy> offloaded;
  std::uint64_t offload_min = 0;  // the ranks' largest offload threshold; 0: no engine here
  std::uint64_t offloaded_copies = 0, offloaded_bytes = 0;  // so far, for TIERFLOW_RMA_VERBOSE

  // Attributes reported for the window (the MPI underneath saw a created window).
  MPI_Aint attr_size = 0;
  int attr_disp_unit = 1;
};

// nullptr for a window the library does not accelerate (or MPI_WIN_NULL).
Window* FindWindow(MPI_Win win);
void AddWindow(Window* w);
void RemoveWindow(MPI_Win win);

// The kinds of user error the library reports, each an error code of its own class whose
// string says what was wrong and how to fix it.
enum class Misuse : int {
  kNoEpoch,         // RMA call outside an access epoch to that target
  kNotInGroup,      // target not in the start group / rank out of range
  kRange,           // beyond the target's window
  kEpochOpen,       // free/start/post/lock while an epoch that forbids it is open
  kNoMatchingSync,  // complete without start, wait without post, unlock without lock
  kDatatype,        // a datatype the library cannot use for this call
  kPeerGone,        // a rank of the window exited while this one waited
  kLockType,        // neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE
  kOp,              // not a predefined operation, or origin and target of other elements
  kCoherence,       // a cache-maintenance instruction failed on window memory
  kTransfer,        // an offloaded put or get failed in its engine (rma/mpi/offload.h)
  kCount
};
// Calls the window's error handler with the code for `what` and returns the code. With
// TIERFLOW_RMA_VERBOSE=1, `detail` is printed on stderr first.
int Fail(const Window& w, Misuse what, const std::string& detail);
// A wait on the synchronisation words that failed: a rank that died (kPeerGone), or a word that
// broke the protocol in a non-coherent mode (kCoherence, the reason always on stderr; the job
// is then aborted, since the other ranks would wait for this one forever).
int SyncFailed(const Window& w, const Status& s);

// Runs the body of a C entry point: what it throws becomes an error code, since no C++
// exception may cross the C API (out of memory: MPI_ERR_NO_MEM; anything else
// MPI_ERR_INTERN), with the reason on stderr.
int Thrown(const char* call) noexcept;
template <typename Body>
int Guarded(const char* call, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return Thrown(call);
  }
}

// The whole number in the environment variable `name`: `fallback` when it is unset or empty.
// Anything but a number in [low, high] is an error that says "NAME=VALUE is not `what`: give
// `unit` from LOW to HIGH (unset: FALLBACK)".
Result<std::uint64_t> NumberFromEnvironment(const char* name, std::uint64_t fallback,
                                            std::uint64_t low, std::uint64_t high, const char* what,
                                            const char* unit);

// Communicators (and windows underneath) the library holds beyond the one per window that the
// MPI alone would hold. An MPI has a fixed number of context ids (MPICH: 2048 per process);
// past TIERFLOW_RMA_COMMUNICATORS (default 512) held at once, new windows are left to the MPI
// so that a program that makes as many windows as the MPI alone allows still can.
// CommunicatorBudget: the limit, or the reason TIERFLOW_RMA_COMMUNICATORS is refused.
Result<int> CommunicatorBudget();
// What one window holds: on one node its communicator; across hosts also the node window's
// and the MPI window's under it (rma/mpi/hybrid.h). A communicator that windows across hosts
// are made over also keeps one, of its ranks on this host, while it lives (create.cc).
constexpr int kHeldOnNode = 1;
constexpr int kHeldAcrossHosts = 3;
int HeldCommunicators();
void HoldCommunicators(int delta);

// TIERFLOW_RMA_VERBOSE=1: the library says per window what it chose and why.
bool Verbose();
// A line on stderr prefixed "tierflow-rma[rank]: ".
void Say(int rank, const std::string& line);

}  // namespace tierflow::rma
