// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/reach.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "rma/mpi/hybrid.h"

namespace tierflow::rma {
namespace {

// What the process knows of the MPI's reach into the windows it allocates, ordered so that the
// minimum over the ranks of a window is what they all may rely on.
enum Reach : int { kUnknown = 0, kSlow = 1, kDirect = 2 };
std::atomic<int> g_reach{kUnknown};

constexpr int kWarmup = 4;  // the first gets may make the MPI's connection
constexpr int kSamples = 31;
// Loads and stores through the MPI take tens of nanoseconds per flushed get; a message through
// the MPI's progress or a system call per transfer takes a microsecond or more. The line
// between them is far from both, so that a busy machine does not move a measurement across.
constexpr double kMemorySpeedUs = 0.4;

// The rank of `comm` after this rank among those of its host (as the MPI sees hosts), or -1
// where it is alone on its host. Collective where create.cc kept no node communicator.
int SameHostPeer(MPI_Comm comm) {
  MPI_Comm node = KeptNodeCommunicator(comm);
  const bool kept = node != MPI_COMM_NULL;
  if (!kept) PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int size = 0, me = 0, peer = -1;
  PMPI_Comm_size(node, &size);
  PMPI_Comm_rank(node, &me);
  if (size > 1) {
    MPI_Group from, to;
    PMPI_Comm_group(node, &from);
    PMPI_Comm_group(comm, &to);
    const int next = (me + 1) % size;
    PMPI_Group_translate_ranks(from, 1, &next, to, &peer);
    PMPI_Group_free(&from);
    PMPI_Group_free(&to);
  }
  if (!kept) PMPI_Comm_free(&node);
  return peer;
}

// Microseconds per get of 8 bytes from `peer` over `probe`, each flushed: the median, or once
// more than half the samples are slower than memory speed (a slow MPI may take milliseconds per
// get on a busy machine), the median of those taken, which is then slower too. Passive and with
// MPI_MODE_NOCHECK: no rank locks the probe window, and a get changes nothing.
double MedianFlushedGet(MPI_Win probe, int peer) {
  std::array<double, kSamples> us{};
  std::uint64_t value = 0;
  int taken = 0, slow = 0;
  PMPI_Win_lock_all(MPI_MODE_NOCHECK, probe);
  for (int i = -kWarmup; i < kSamples && slow <= kSamples / 2; ++i) {
    const auto start = std::chrono::steady_clock::now();
    PMPI_Get(&value, 8, MPI_BYTE, peer, 0, 8, MPI_BYTE, probe);
    PMPI_Win_flush(peer, probe);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    if (i < 0) continue;
    us[taken++] = took.count();
    slow += took.count() > kMemorySpeedUs;
  }
  PMPI_Win_unlock_all(probe);
  std::nth_element(us.begin(), us.begin() + taken / 2, us.begin() + taken);
  return us[taken / 2];
}

// Collective: the slowest rank's median over a window of 64 bytes the MPI allocates (infinity
// where the MPI could not make it; 0 where no rank shares its host with another). Every rank
// stays in the MPI (the window's free, the reduction) until the last has measured: a rank's
// gets may need the target's progress.
double SlowestReach(MPI_Comm comm) {
  const int peer = SameHostPeer(comm);
  MPI_Win probe = MPI_WIN_NULL;
  void* base = nullptr;
  double mine = std::numeric_limits<double>::infinity();
  if (PMPI_Win_allocate(64, 1, MPI_INFO_NULL, comm, &base, &probe) == MPI_SUCCESS) {
    mine = peer >= 0 ? MedianFlushedGet(probe, peer) : 0.0;
    PMPI_Win_free(&probe);
  }
  double slowest = 0;
  PMPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

std::string Explain(int reach, double slowest) {
  const std::string measured =
      slowest < 0
          ? "measured at this process's first allocated window across hosts"
          : fmt::format("{:.3f} µs per flushed get of 8 bytes, the slowest rank's median", slowest);
  if (reach == kDirect) {
    return fmt::format(
        "the MPI reaches the ranks of a host with loads and stores ({}): a split "
        "would add a second lock to its passive epochs (the info key no_locks=true, for a "
        "window never locked, or TIERFLOW_RMA_HOST_SPLIT=always splits it)",
        measured);
  }
  return fmt::format(
      "split by host: the MPI reaches the ranks of a host by messages or system "
      "calls ({})",
      measured);
}

}  // namespace

int HostSplitSetting(std::string& error) {
  const char* v = std::getenv("TIERFLOW_RMA_HOST_SPLIT");
  const std::string s = v == nullptr ? "" : v;
  if (s.empty() || s == "auto") return 0;
  if (s == "always") return 1;
  error = "TIERFLOW_RMA_HOST_SPLIT=" + s +
          " is not a choice: use auto (the default: allocated windows are left whole where the "
          "MPI reaches a host's ranks with loads and stores) or always";
  return -1;
}

int ReachKnown() { return g_reach.load(std::memory_order_relaxed); }

bool NeverLocked(MPI_Info info) {
  if (info == MPI_INFO_NULL) return false;
  char value[8] = {};
  int flag = 0;
  PMPI_Info_get(info, "no_locks", sizeof(value) - 1, value, &flag);
  return flag && std::strcmp(value, "true") == 0;
}

bool SplitAllocated(MPI_Comm comm, const SpanAgreement& agreed, std::string& why) {
  if (agreed.mode != Coherence::kCoherent) {
    why = "split by host: the library keeps the ranks of a host coherent in this mode";
    return true;
  }
  if (agreed.split_always) {
    why = "split by host: TIERFLOW_RMA_HOST_SPLIT=always";
    return true;
  }
  if (agreed.no_locks) {
    why = "split by host: every rank's info says no_locks, and without locks a split costs nothing";
    return true;
  }
  int reach = agreed.reach;
  double slowest = -1;
  if (reach == kUnknown) {
    slowest = SlowestReach(comm);
    if (slowest == 0) {
      why = "split by host: no rank shares its host with another, nothing to measure";
      return true;
    }
    reach = slowest <= kMemorySpeedUs ? kDirect : kSlow;
    g_reach.store(reach, std::memory_order_relaxed);
  }
  why = Explain(reach, slowest);
  return reach != kDirect;
}

}  // namespace tierflow::rma
