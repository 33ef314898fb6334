// SPDX-License-Identifier: Apache-2.0
// A rank dies (SIGKILL) inside a GATS epoch while the others wait for it: the run must end
// (an MPI error from the library, or the MPI's own abort of the job), never hang. Run by
// tests/rma/rma_kill_test.sh, which times it and checks that no shared memory is left.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int* base = nullptr;
  MPI_Win win;
  MPI_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Group world, peer;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int other = 1 - rank;
  MPI_Group_incl(world, 1, &other, &peer);
  if (rank == 0) {
    MPI_Win_post(peer, 0, win);
    const int rc = MPI_Win_wait(win);  // rank 1 never completes
    std::printf("rank 0: MPI_Win_wait returned %d after rank 1 died\n", rc);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
  } else {
    MPI_Win_start(peer, 0, win);
    const int v = 1;
    MPI_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
    kill(getpid(), SIGKILL);
  }
  MPI_Finalize();
  return 0;
}
