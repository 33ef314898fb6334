// SPDX-License-Identifier: Apache-2.0
// Windows whose ranks span hosts (rank placement as the MPI sees it: create.cc's OnThisNode).
//
// With TIERFLOW_RMA_POOL=PATH naming memory every host maps (rma/pool.h: a CXL device shared
// by hosts, or a file on it), such a window is accelerated whole, as a window of one node is:
// its synchronisation words and every rank's window memory are allocations in the pool, reached
// by loads and stores from every host. MPI_Win_allocate memory is allocated there; the memory of
// MPI_Win_create (whole pages of private memory) is moved there in place and moved back when the
// window is freed. A pool is taken to be non-coherent between hosts unless the program says
// otherwise: without TIERFLOW_RMA_COHERENCE the window runs in the noncoherent mode's
// maintenance (rma/mpi/coherence.h); coherent (a pool the hosts keep coherent, CXL 3's
// back-invalidation) and simulated (every process's view a private copy, proving the protocol)
// are as asked. A rank's death is seen through its lease on the pool, and a waiter wakes every
// millisecond, since a host cannot wake a futex sleeper on another.
//
// Without a pool (or where a rank cannot map it: a verbose-mode message says why), the coherent
// and noncoherent modes split the window into this host's part and the MPI's
// (rma/mpi/hybrid.h); the simulated mode leaves it to the MPI whole.
//
// A pool that is set on some ranks only, is not the same memory on every rank (a copy of the
// file, another file at that path), is another user's, has modes others can read, is too small
// for the window, or cannot be mapped shared is refused: the window call fails on every rank with
// MPI_ERR_OTHER (MPI_ERR_NO_MEM when the pool lacks the space) through the communicator's error
// handler, each rank that found a problem saying which on stderr, and nothing is created.
//
// Environment: TIERFLOW_RMA_POOL (the path; absolute, the same on every host);
// TIERFLOW_RMA_POOL_SIZE (size of a pool file created because none existed, default 1GiB);
// TIERFLOW_RMA_POOL_LEASE_MS (how long a rank may not renew its lease before the others take it
// for dead, default 10000).
#pragma once

#include <mpi.h>

#include "rma/mpi/reach.h"
#include "rma/mpi/window.h"

namespace tierflow::rma {

// Whether this rank's environment asks for a pool (TIERFLOW_RMA_POOL set and not empty).
bool PoolAsked();

// MPI_Win_allocate / MPI_Win_create over ranks on several hosts.
int SpanAllocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                 const SpanAgreement& agreed, void* baseptr, MPI_Win* win);
int SpanCreate(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
               const SpanAgreement& agreed, MPI_Win* win);

}  // namespace tierflow::rma
