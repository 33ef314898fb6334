// SPDX-License-Identifier: Apache-2.0
// Software coherence of window memory: the write-backs and invalidations that the
// synchronisation calls make (Christgau's hooks), in three modes:
//   coherent     (default) the hardware keeps caches coherent: the hooks do nothing beyond the
//                fences of the synchronisation words themselves.
//   noncoherent  windows in memory the hardware does not keep coherent (a CXL pool shared by
//                hosts, a file mapped by several): real write-back / invalidate instructions
//                (tierflow/coherence.h) on the window ranges.
//   simulated    every process reads and writes a private copy of every window: its own
//                window is the program's memory, the others' are caches; the shared segment
//                is the public copy. A write-back moves the bytes that differ from the copy's
//                twin (taken when it was last filled) to the public copy; an invalidate writes
//                back, then refills copy and twin from the public copy. A protocol that misses
//                a hook reads stale data here, on any machine.
// Chosen per process with TIERFLOW_RMA_COHERENCE=coherent|noncoherent|simulated. In the two
// non-coherent modes windows report MPI_WIN_SEPARATE, and MPI_Win_sync moves data between the
// copies, as the MPI standard's separate model says.
//
// Where the hooks are (HookPoint): post writes back the target's window before the origins
// may read it; complete writes back what the origin stored into its targets' windows before
// their counters drop; wait (and a successful test) invalidates the target's window; fence
// writes back everything before its barrier and invalidates after; unlock and flush write back
// the copy of the target, and a lock of one's own window invalidates it. An origin invalidates
// a target's lines when it accesses them (Christgau's selective invalidation for GETs, seed 002
// §4.6.3): the lines a get reads, the partial lines at the ends of what a put stores; once the
// target's post, the lock or the fence has been seen, memory holds what the target wrote, and a
// line the origin cached earlier is dropped and read again. Accumulates act at the point of
// coherence under the accumulate lock, as atomics do.
//
// Selectively (§4.6.2-4.6.3): a copy of another rank's window is written back only where this
// process stored into it (Window::dirty); a rank's own window is invalidated at the end of a
// GATS epoch or fence only where the origins stored into it, as they note in the window's
// WriteLedger. What a program stores into its own window with plain stores is known to
// nobody: the post and fence write that window back whole unless MPI_MODE_NOSTORE says there
// were none, and a lock of one's own window and MPI_Win_sync maintain it whole. The simulation
// keeps per line of each copy whether it is present (filled from the public copy on first
// touch, as a cache fills a line on a miss); its byte-granular write-back cannot tell a store
// of an unchanged byte into a stale line, so there a put refreshes every line it stores into,
// where the hardware writes the whole dirty line back.
#pragma once

#include "rma/mpi/window.h"

namespace tierflow::rma {

// Each hook by name, so that the test build's library can leave one out and show that the tests
// then fail (TIERFLOW_RMA_LEAVE_OUT=post_writeback ..., read by that library alone).
enum class HookPoint : int {
  kPostWriteBack = 0,
  kAccessInvalidate,
  kCompleteWriteBack,
  kWaitInvalidate,
  kFenceWriteBack,
  kFenceInvalidate,
  kLockInvalidate,
  kUnlockWriteBack,
  kFlushWriteBack,
  kSyncInvalidate,  // of a synchronisation word before reading it (rma/window_sync.h)
  kSyncWriteBack,   // of a synchronisation word after updating it
  kCount
};

#ifdef TIERFLOW_RMA_MUTANTS
bool Kept(HookPoint h);  // false for the hook TIERFLOW_RMA_LEAVE_OUT names
#else
constexpr bool Kept(HookPoint) { return true; }
#endif

// The maintenance of the synchronisation words in `mode` (all of it, but in a mutant).
WordCoherence WordsIn(Coherence mode);
WordHooks KeptWordHooks();

// "coherent", "noncoherent" or "simulated".
const char* CoherenceName(Coherence mode);
// Reads TIERFLOW_RMA_COHERENCE; false with `error` set for a value it does not know.
bool CoherenceFromEnvironment(Coherence& out, std::string& error);

// Before this process accesses [offset, offset + len) of `rank`'s window through base[rank]
// (`store`: a put): the invalidation of the lines it reads or partly stores (above), and the
// bytes stored noted for the next write-back. MPI_SUCCESS or the error code.
int Touch(Window& w, int rank, std::uint64_t offset, std::uint64_t len, bool store);
// Around an accumulate on [offset, offset + len) of `rank`'s window, under its accumulate
// lock: it acts at the point of coherence, as an atomic does. Before: in the noncoherent mode
// the bytes are read fresh (invalidated). After: written back and dropped there; in the
// simulation (which acted on the public copy) this process's copy of them is stale and dropped;
// in both, noted as stored so that the target learns of them. MPI_SUCCESS or the error code.
int BeforeAccumulate(Window& w, int rank, std::uint64_t offset, std::uint64_t len);
int AfterAccumulate(Window& w, int rank, std::uint64_t offset, std::uint64_t len);

// The hooks. Each returns MPI_SUCCESS or, when a cache-maintenance instruction failed, the
// window's error handler's code (Misuse::kCoherence). In the coherent mode they do nothing.
// The copy of `rank`'s window (rank may be this rank, for its RMA calls to itself): write back
// what was stored into it.
int WriteBackCopy(Window& w, int rank);
// This rank's own window, whole.
int WriteBackOwn(Window& w);
int InvalidateOwn(Window& w);
// This rank's own window where the origins of the epoch noted stores in `slot` of the ledger
// (the whole window when the slot overflowed); the slot is cleared.
int InvalidateOwnWritten(Window& w, int slot);
// Notes in `target`'s ledger `slot` what this process stored into its window (before the
// write-back that clears it, before the epoch's release).
void Publish(Window& w, int target, int slot);
void ResetLedger(Window& w, int slot);
// The ledger slots: one for GATS epochs, two for fences (alternating, so that a fast rank's
// notes for the next fence never land in a slot its target is still reading).
constexpr int kGatsSlot = 2;
inline int FenceSlot(const Window& w) { return w.fences % 2; }

// kSimulated: the public copy of every rank mapped here, the private copies and twins made
// from them (after the program's memory was copied to its public copy).
void StartSimulation(Window& w, const std::vector<std::byte*>& pub);

}  // namespace tierflow::rma
