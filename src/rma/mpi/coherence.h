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
// may read it; start invalidates the origin's copies of its targets; complete writes them
// back before the targets' counters drop; wait (and a successful test) invalidates the
// target's window; fence writes back everything before its barrier and invalidates after;
// lock invalidates the copy of the target once the lock is held, unlock and flush write it
// back. Accumulates act on the public copy under the accumulate lock, as atomics act at the
// point of coherence.
#pragma once

#include "rma/mpi/window.h"

namespace tierflow::rma {

// Each hook by name, so that a test build can leave one out (TIERFLOW_RMA_MUTANT=<index>)
// and show that the tests then fail.
enum class HookPoint : int {
  kPostWriteBack = 0,
  kStartInvalidate,
  kCompleteWriteBack,
  kWaitInvalidate,
  kFenceWriteBack,
  kFenceInvalidate,
  kLockInvalidate,
  kUnlockWriteBack,
  kFlushWriteBack,
  kCount
};

#ifndef TIERFLOW_RMA_MUTANT
#define TIERFLOW_RMA_MUTANT -1
#endif
constexpr bool Kept(HookPoint h) { return static_cast<int>(h) != TIERFLOW_RMA_MUTANT; }

// Reads TIERFLOW_RMA_COHERENCE; false with `error` set for a value it does not know.
bool CoherenceFromEnvironment(Coherence& out, std::string& error);

// `rank`'s window as this process sees it -> its public copy / the reverse (see above).
void WriteBack(Window& w, int rank);
void Invalidate(Window& w, int rank);
// The same for every rank of the window.
void WriteBackAll(Window& w);
void InvalidateAll(Window& w);

// kSimulated: the public copy of every rank mapped here, the private copies and twins made
// from them (after the program's memory was copied to its public copy).
void StartSimulation(Window& w, const std::vector<std::byte*>& pub);

}  // namespace tierflow::rma
