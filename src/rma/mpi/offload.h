// SPDX-License-Identifier: Apache-2.0
// Large puts and gets on a tierflow engine (the thesis' copy cores, §4.6.4). A contiguous
// transfer of at least the threshold between this process and window memory mapped here is
// submitted to the engine and the call returns at once; the calls that complete transfers
// (MPI_Win_complete, _fence, _unlock, _unlock_all, _flush*, _sync, _free) wait for the
// window's offloaded copies first (DrainOffloaded), so MPI's completion rules hold: the origin
// buffer is the program's again, and the target's memory holds the bytes, when they return.
//
// TIERFLOW_RMA_OFFLOAD chooses the engine by what it is:
//   auto (default)  a DSA device when one is usable; else the CPU engine's workers when the
//                   node has CPUs the window's ranks leave free; else none
//   off             every transfer on the calling thread
//   cpu             the CPU engine's workers (the free CPUs shared among the node's ranks, at
//                   least one each)
//   dsa             a DSA device (none usable: transfers stay on the calling thread)
//   dsa-model       tierflow's DSA device model (dsa_model.h): the DSA path without the device
// The threshold is where the engine's fixed cost (the calibrated latency of a 4 KiB copy) is
// an eighth of the copy at its calibrated bandwidth, rounded to the nearest power of two (at
// least 64 KiB), from the calibration cache (calibration.h) or, without a figure there,
// measured when the engine is made;
// TIERFLOW_RMA_OFFLOAD_MIN (a size, "256KiB") replaces it. Request-based calls (MPI_Rput,
// MPI_Rget) return complete requests and stay on the calling thread, as do transfers to ranks
// reached with process_vm copies and transfers of non-contiguous datatypes.
#pragma once

#include <cstddef>
#include <string>

#include "rma/mpi/window.h"
#include "tierflow/status.h"

namespace tierflow::rma {

// TIERFLOW_RMA_OFFLOAD and TIERFLOW_RMA_OFFLOAD_MIN as this process has them; an error names
// the value and what to use instead. Checked at every window creation (rma/mpi/create.cc).
Status CheckOffloadEnvironment();
// Makes this process's engine once, on its first accelerated window (`ranks` processes of the
// node share its CPUs). Without an engine (off, none usable, none could be made) transfers stay
// on the calling thread; with TIERFLOW_RMA_VERBOSE=1 rank `me` says what was chosen and why.
void PrepareOffload(int me, int ranks);
// This process's threshold, 0 without an engine. A window offloads from the largest of its
// ranks' thresholds (Window::offload_min), so that every rank offloads the same transfers.
std::uint64_t OffloadThreshold();
// Submits the copy of n bytes (to or from bytes [offset, offset + n) of rank's window) when an
// engine is there and n is at least the window's threshold: true, and the window waits for it at
// its next synchronisation call. False: the caller copies.
bool Offloaded(Window& w, int rank, std::uint64_t offset, void* to, const void* from,
               std::size_t n);
// Waits for every copy offloaded on the window. MPI_SUCCESS, or the window's error handler's
// code when the engine reported an error (the first; every copy is waited for).
int DrainOffloaded(Window& w, const char* call);
// DrainOffloaded when a copy in flight touches rank's window within [begin, end): the cache
// maintenance of non-coherent windows works on whole lines (rma/mpi/coherence.h), which must
// not move under the engine.
int DrainOverlapping(Window& w, int rank, std::uint64_t begin, std::uint64_t end);

}  // namespace tierflow::rma
