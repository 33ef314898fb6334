// SPDX-License-Identifier: Apache-2.0
// What the MPI applications of apps/ (ft, ca) share: the thesis' split of a rank's time into
// computation, communication (data movement calls and the copies a scheme needs) and
// synchronisation (fences, GATS calls, waits), gathered per rank and printed as a table or as
// JSON arrays, the check whether the job has more ranks than the machine has CPUs, and their
// windows.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace mpiapp {

struct Times {
  double compute = 0, comm = 0, sync = 0;
};

// Adds the seconds of its scope to one of Times' members.
class Timed {
 public:
  explicit Timed(double& into) : into_(into), start_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    into_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double& into_;
  std::chrono::steady_clock::time_point start_;
};

// Every rank's times and total seconds, at rank 0 (the other ranks' vectors are not
// meaningful). Collective over MPI_COMM_WORLD.
struct PerRank {
  std::vector<double> compute, comm, sync, total;
  static PerRank Gather(const Times& t, double total, int ranks);
};

double Mean(const std::vector<double>& v);
double Max(const std::vector<double>& v);
double Min(const std::vector<double>& v);

// "[0.100000,0.200000]"
std::string JsonArray(const std::vector<double>& v);
// `"per_rank":{...}` with the four arrays.
std::string PerRankJson(const PerRank& p);

// A line per rank and one of the spread between ranks (process skew), on stdout.
void PrintBreakdown(const PerRank& p);

// More ranks in MPI_COMM_WORLD than CPUs online.
bool Oversubscribed(int ranks);

// The items of a comma-separated list ("a,b" -> a, b; "a," -> a and an empty item).
std::vector<std::string> SplitList(const std::string& list);

// MPI_Win_allocate over MPI_COMM_WORLD of a window the program never locks (it synchronises
// with fences and GATS only), saying so with the standard info key no_locks=true: the MPI may
// spare the lock's state, and tierflow's RMA library splits such a window across hosts
// without measuring whether the MPI reaches the ranks of a host as fast (docs/rma.md).
int AllocateUnlocked(MPI_Aint bytes, int disp_unit, void* base, MPI_Win* win);

// An MPI program's frame: MPI_Init, `body(rank, ranks)`, then rank 0's exit status given to
// every rank and MPI_Finalize. A std::bad_alloc from `body` prints `out_of_memory` (with the
// rank) and aborts the job, since the other ranks would wait for this one forever.
int RunProgram(int argc, char** argv, const char* out_of_memory,
               const std::function<int(int rank, int ranks)>& body);

}  // namespace mpiapp
