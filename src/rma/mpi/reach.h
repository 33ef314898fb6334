// SPDX-License-Identifier: Apache-2.0
// Whether an allocated window across hosts is split by host (hybrid.h) or left whole to the
// MPI. Splitting gives the ranks of one host the library's loads and stores where the MPI
// would send a message or make a system call, and the library's synchronisation (fences and
// GATS through shared memory); but where the MPI already reaches the ranks of its host with
// loads and stores (an MPI that maps the memory of the windows it allocates into each process
// of the host), a split adds to each passive epoch a second lock: the MPI's, which still has
// to exclude other hosts' lockers. So, in the coherent mode, a window of MPI_Win_allocate
// across hosts that may be locked is left whole where the MPI was measured to reach a rank of
// the same host at memory speed: the slowest rank's median of small gets, each flushed, to
// another rank of its host, over a small window the MPI allocates, at the first such window
// of the process (the answer is kept: it is the MPI's, not the window's). Windows every rank
// creates with the standard hint no_locks=true, the non-coherent modes, windows of
// MPI_Win_create (whose memory the MPI cannot share as it shares its own) and
// TIERFLOW_RMA_HOST_SPLIT=always always split.
#pragma once

#include <mpi.h>

#include <string>

#include "rma/mpi/window.h"

namespace tierflow::rma {

// This process's TIERFLOW_RMA_HOST_SPLIT: 0 for `auto` (or unset), 1 for `always`; -1, with
// the reason and the fix in `error`, for anything else. The ranks of a window must agree on it
// (create.cc checks that with the coherence mode).
int HostSplitSetting(std::string& error);

// What the ranks of a window across hosts agreed on in the first collective of its creation
// (create.cc).
struct SpanAgreement {
  Coherence mode = Coherence::kCoherent;  // the mode every rank asked for
  bool split_always = false;              // TIERFLOW_RMA_HOST_SPLIT=always on every rank
  bool pool_asked = false;                // some rank set TIERFLOW_RMA_POOL
  int reach = 0;                          // the least of the ranks' ReachKnown
  bool no_locks = false;                  // NeverLocked on every rank
};

// What this process knows of the MPI's reach: 0 until it measured, then the verdict. The least
// over the ranks of a window is what they may all rely on (create.cc agrees on it).
int ReachKnown();
// Whether `info` holds the standard hint no_locks=true: the program never locks the window.
bool NeverLocked(MPI_Info info);

// Collective over `comm`, the communicator of a window of MPI_Win_allocate across hosts that
// is not in a pool, whose ranks `agreed`: whether to split the window, the same answer on every
// rank. `why` says what was decided and why.
bool SplitAllocated(MPI_Comm comm, const SpanAgreement& agreed, std::string& why);

}  // namespace tierflow::rma
