// SPDX-License-Identifier: Apache-2.0
// The steps of window creation (create.cc) that windows in a pool (pooled.cc) share.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rma/mpi/window.h"
#include "rma/pool.h"

namespace tierflow::rma {

// What each rank tells the others about its window memory.
struct Offer {
  SegmentName segment;       // where its memory lives (pid 0: not in a shared segment)
  std::uint64_t offset = 0;  // of its window in that segment (or in `pooled`)
  std::uint64_t size = 0;
  std::uint64_t address = 0;  // in its own process
  std::int32_t pid = 0;
  std::uint32_t disp_unit = 1;
  std::uint64_t offload_min = 0;  // its offload threshold; 0: it has no engine
  PoolRef pooled;                 // its window's allocation in the pool (pooled.h)
  PoolLease lease;                // its lease on the pool
};

// Collective: whether `mine` holds on every rank of `comm`.
bool AllTrue(MPI_Comm comm, bool mine);
// With TIERFLOW_RMA_VERBOSE=1: says on stderr why `call` on `comm` went to the MPI underneath.
void PassThroughReason(MPI_Comm comm, const char* call, const std::string& why);
// More ranks than the machine has CPUs: waits spin briefly, then yield.
bool Oversubscribed(int ranks);
std::size_t PageRound(std::uint64_t n);
// Each rank's offset in one allocation of all their windows, in pages, and the total; false
// when the total would not fit in a file.
bool Layout(const std::vector<Offer>& all, std::vector<std::uint64_t>& offset,
            std::uint64_t& total);
// MPI_ERR_SIZE through the communicator's error handler, the window dropped.
int TooLarge(std::unique_ptr<Window> w, MPI_Comm comm, const std::vector<Offer>& all);

// A window's state without synchronisation words; UseControl gives it those (ControlBytes of
// shared, zero-filled memory every rank maps).
std::unique_ptr<Window> NewWindowState(MPI_Comm comm, int flavor, int disp_unit, MPI_Aint size,
                                       Coherence mode);
std::size_t ControlBytes(int ranks, Coherence mode);
void UseControl(Window& w, std::byte* control);
void DropWindow(std::unique_ptr<Window> w);
// Simulated coherence for MPI_Win_allocate memory at base[]: that memory holds the public
// copies; the program works on a private copy of its own window, filled from it.
void SimulateAllocated(Window& w);
// This rank's offer of `size` bytes at `base` (nullptr: not yet known) in units of `disp_unit`;
// where its memory lives is the caller's to fill in.
Offer OfferOf(void* base, MPI_Aint size, int disp_unit);
// The offers of every rank (the offload threshold filled in), and keeping them in `w`.
std::vector<Offer> Exchange(const Window& w, Offer mine);
void Record(Window& w, const std::vector<Offer>& all);
// The MPI's window underneath, then the window registered: MPI_SUCCESS or the MPI's error.
int Finish(std::unique_ptr<Window> w, void* base, MPI_Info info, MPI_Comm comm, MPI_Win* win);

}  // namespace tierflow::rma
