// SPDX-License-Identifier: Apache-2.0
// Windows across hosts (rma/mpi/hybrid.h): creation, routing of puts and gets, and
// synchronisation calls that act on the node window and on the MPI's window.
#include "rma/mpi/hybrid.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "rma/mpi/coherence.h"

namespace tierflow::rma {

namespace {

std::shared_mutex g_mu;
std::unordered_map<std::uint64_t, Hybrid*> g_hybrids;
std::atomic<int> g_count{0};  // no lookup at all while no window spans hosts
// Changed by every Add and Remove: a thread's last answer stays good while it is unchanged.
// Every put, get and synchronisation call asks, most of them about the window asked about
// last, and the shared lock's two atomic updates cost more than the transfer of a few bytes.
std::atomic<std::uint64_t> g_generation{0};
struct Recent {
  std::uint64_t generation = ~std::uint64_t{0}, key = 0;
  Hybrid* hybrid = nullptr;
};
thread_local Recent t_recent __attribute__((tls_model("initial-exec")));

std::uint64_t KeyOf(MPI_Win win) {
  std::uint64_t k = 0;
  static_assert(sizeof(win) <= sizeof(k));
  std::memcpy(&k, &win, sizeof(win));
  return k;
}

void Add(Hybrid* h) {
  std::unique_lock lock(g_mu);
  g_hybrids[KeyOf(h->win)] = h;
  g_count.fetch_add(1, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_release);
}

void Remove(MPI_Win win) {
  std::unique_lock lock(g_mu);
  if (g_hybrids.erase(KeyOf(win)) != 0) g_count.fetch_sub(1, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_release);
}

bool Local(const Hybrid& h, int rank) {
  return rank >= 0 && rank < static_cast<int>(h.node_rank.size()) && h.node_rank[rank] >= 0;
}

// Each rank's rank in the node window, and then, in one allgather across hosts, what every
// rank must know of every other: its window's size, whether its node window was made and
// whether it is its host's first rank (the hosts counted). True when every node window was.
bool Exchange(Hybrid& h, MPI_Comm comm, std::uint64_t size, bool made) {
  int ranks = 0;
  PMPI_Comm_rank(comm, &h.me);
  PMPI_Comm_size(comm, &ranks);
  MPI_Group all;
  PMPI_Comm_group(comm, &all);
  std::vector<int> in(ranks);
  for (int r = 0; r < ranks; ++r) in[r] = r;
  h.node_rank.assign(ranks, MPI_UNDEFINED);
  PMPI_Group_translate_ranks(all, ranks, in.data(), h.node, h.node_rank.data());
  for (int& r : h.node_rank) r = r == MPI_UNDEFINED ? -1 : r;
  PMPI_Group_free(&all);
  const std::uint64_t mine[2] = {size, (made ? 1u : 0u) | (h.node_rank[h.me] == 0 ? 2u : 0u)};
  std::vector<std::uint64_t> every(2 * static_cast<std::size_t>(ranks));
  PMPI_Allgather(mine, 2, MPI_UINT64_T, every.data(), 2, MPI_UINT64_T, comm);
  bool all_made = true;
  h.size.assign(ranks, 0);
  h.hosts = 0;
  for (int r = 0; r < ranks; ++r) {
    h.size[r] = every[2 * r];
    all_made = all_made && (every[2 * r + 1] & 1u) != 0;
    h.hosts += (every[2 * r + 1] & 2u) != 0 ? 1 : 0;
  }
  h.lock.assign(ranks, 0);
  h.forced.assign(ranks, 0);
  h.via_mpi.assign(ranks, 0);
  return all_made;
}

// The node window made (by `make`, collective over the communicator of this host's ranks) on
// every rank, or on none. The node communicator is the one create.cc keeps on `comm` (split
// anew, and freed, only where it keeps none); the window keeps that communicator's group, since
// the node window has a communicator of its own and each one held costs a context id.
template <typename Make>
std::unique_ptr<Hybrid> NodeWindow(MPI_Comm comm, std::uint64_t size, int& rc, Make&& make) {
  auto h = std::make_unique<Hybrid>();
  MPI_Comm node = KeptNodeCommunicator(comm);
  const bool kept = node != MPI_COMM_NULL;
  if (!kept) {
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MarkOnThisNode(node);  // the node window's creation need not split it once more
  }
  rc = make(*h, node);
  PMPI_Comm_group(node, &h->node);
  if (!kept) PMPI_Comm_free(&node);
  const bool ok = rc == MPI_SUCCESS;
  if (Exchange(*h, comm, size, ok)) return h;
  if (ok) MPI_Win_free(&h->node_win);
  PMPI_Group_free(&h->node);
  if (ok) {  // another host failed: this rank fails too, through the communicator's handler
    rc = MPI_ERR_OTHER;
    PMPI_Comm_call_errhandler(comm, rc);
  }
  return nullptr;
}

// What the MPI's window lies over: the node window's memory, which in the simulated mode is
// its public copy (the program's memory is the private one there).
void* MpiBase(const Hybrid& h) {
  const Window* n = FindWindow(h.node_win);
  if (n == nullptr || n->coherence != Coherence::kSimulated) return h.base;
  return n->pub[n->me];
}

// The MPI's window over the node window's memory, then the window is found by every call.
int Finish(std::unique_ptr<Hybrid> h, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
           MPI_Win* win) {
  int rc = PMPI_Win_create(MpiBase(*h), size, disp_unit, info, comm, &h->win);
  if (rc != MPI_SUCCESS) {
    MPI_Win_free(&h->node_win);
    PMPI_Group_free(&h->node);
    return rc;
  }
  h->node_state = FindWindow(h->node_win);
  h->attr_size = size;
  h->attr_disp_unit = disp_unit;
  PMPI_Comm_dup(comm, &h->comm);
  HoldCommunicators(kHeldAcrossHosts - kHeldOnNode);  // h->comm and the node window's MPI one
  if (Window* n = h->node_state) {
    // The node window's errors go to the handler of the window the program holds; its memory
    // model (separate in the noncoherent mode) is the window's.
    n->report = h->win;
    h->model = n->model;
    // A rank waiting in the node window keeps the MPI moving: over TCP, other hosts' puts into
    // this rank (and their completion) advance only while it calls the MPI, and the rank it
    // waits for may be waiting on them.
    n->sync->SetWakeInterval(1);
    n->sync->SetProgress([comm = h->comm] {
      int flag = 0;
      PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
    });
  }
  if (Verbose()) {
    int here = 0;
    for (int r : h->node_rank) here += r >= 0;
    Say(h->me, fmt::format("window of {} ranks on {} hosts: the {} on this host reached through "
                           "{}, the others through the MPI; accumulates through the MPI",
                           h->node_rank.size(), h->hosts, here,
                           h->node_state != nullptr ? "the library's shared memory"
                                                    : "the MPI (no shared memory)"));
  }
  *win = h->win;
  Add(h.release());
  return MPI_SUCCESS;
}

// Ranks of `group` as window ranks; false when one is not in the window.
bool WindowRanks(const Hybrid& h, MPI_Group group, std::vector<int>& out) {
  int n = 0;
  PMPI_Group_size(group, &n);
  MPI_Group all;
  PMPI_Win_get_group(h.win, &all);
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i;
  out.assign(n, MPI_UNDEFINED);
  PMPI_Group_translate_ranks(group, n, in.data(), all, out.data());
  PMPI_Group_free(&all);
  for (int r : out) {
    if (r == MPI_UNDEFINED) return false;
  }
  return true;
}

void FreeSplit(Hybrid::GroupSplit& e) {
  for (MPI_Group* g : {&e.members, &e.node, &e.rest}) {
    if (*g != MPI_GROUP_NULL) PMPI_Group_free(g);
  }
}

// `group` split into this host's ranks (as a group of the node window) and the others (as a
// group of the MPI's window); MPI_GROUP_NULL for an empty half.
void Split(const Hybrid& h, const std::vector<int>& ranks, MPI_Group& node, MPI_Group& rest) {
  std::vector<int> here, there;
  for (int r : ranks) {
    if (Local(h, r)) {
      here.push_back(h.node_rank[r]);
    } else {
      there.push_back(r);
    }
  }
  node = rest = MPI_GROUP_NULL;
  MPI_Group g;
  if (!here.empty()) {
    PMPI_Group_incl(h.node, static_cast<int>(here.size()), here.data(), &node);
  }
  if (!there.empty()) {
    PMPI_Win_get_group(h.win, &g);
    PMPI_Group_incl(g, static_cast<int>(there.size()), there.data(), &rest);
    PMPI_Group_free(&g);
  }
}

// Opens the halves of a post or start: the MPI's half also when the group is empty, so that
// the MPI keeps its epoch (and its errors) as without the library.
// The split of `group`, from the window's cache when a group with the same members was split
// before (epochs repeat their groups; splitting costs more than the epoch's synchronisation);
// false when a member is not in the window.
bool Cached(Hybrid& h, MPI_Group group, Hybrid::GroupSplit*& out) {
  for (Hybrid::GroupSplit& e : h.splits) {
    int same = MPI_UNEQUAL;
    PMPI_Group_compare(group, e.members, &same);
    if (same == MPI_IDENT) {
      out = &e;
      return true;
    }
  }
  std::vector<int> ranks;
  if (!WindowRanks(h, group, ranks)) return false;
  if (h.splits.size() == Hybrid::kSplits) {
    FreeSplit(h.splits.front());
    h.splits.erase(h.splits.begin());
  }
  Hybrid::GroupSplit e;
  PMPI_Group_union(group, MPI_GROUP_EMPTY, &e.members);  // a copy the program cannot free
  Split(h, ranks, e.node, e.rest);
  h.splits.push_back(e);
  out = &h.splits.back();
  return true;
}

template <typename Node, typename Mpi>
int OpenGats(Hybrid& h, MPI_Group group, bool& node_open, bool& mpi_open, Node&& node_call,
             Mpi&& mpi_call) {
  Hybrid::GroupSplit* split = nullptr;
  if (!Cached(h, group, split)) return mpi_call(group);  // the MPI reports the rank
  int rc = MPI_SUCCESS;
  if (split->node != MPI_GROUP_NULL) {
    rc = node_call(split->node);
    node_open = rc == MPI_SUCCESS;
  }
  if (rc == MPI_SUCCESS && (split->rest != MPI_GROUP_NULL || !node_open)) {
    rc = mpi_call(split->rest != MPI_GROUP_NULL ? split->rest : MPI_GROUP_EMPTY);
    mpi_open = rc == MPI_SUCCESS;
  }
  return rc;
}

// Closes what OpenGats opened; with nothing open, the MPI reports the missing start or post.
template <typename Node, typename Mpi>
int CloseGats(bool& node_open, bool& mpi_open, Node&& node_call, Mpi&& mpi_call) {
  if (!node_open && !mpi_open) return mpi_call();
  int rc = MPI_SUCCESS;
  if (node_open) {
    rc = node_call();
    node_open = false;
  }
  if (mpi_open) {
    const int mpi = mpi_call();
    mpi_open = false;
    if (rc == MPI_SUCCESS) rc = mpi;
  }
  return rc;
}

// The MPI's flush or unlock of `rank` (any value the program passed) has returned: no
// operation to it is left in the MPI.
void Completed(Hybrid& h, int rank) {
  if (rank >= 0 && rank < static_cast<int>(h.via_mpi.size()) && h.via_mpi[rank] != 0) {
    h.via_mpi[rank] = 0;
    --h.via_mpi_ranks;
  }
}

// The same, of every rank.
void CompletedAll(Hybrid& h) {
  std::fill(h.via_mpi.begin(), h.via_mpi.end(), 0);
  h.via_mpi_ranks = 0;
}

// Whether the MPI holds a lock of one target (MPI_Win_lock, not MPI_Win_lock_all) once a
// flush of that target has returned, with no operation in the epoch yet. Open MPI's components
// across nodes take that lock in MPI_Win_lock itself (osc ucx) or wait in the flush for its
// grant (osc pt2pt: rma_hosts_openmpi_lib_pt2pt_2x2 loses increments without the flush);
// MPICH may grant it only with the first operation, and its flush of an epoch without one need
// not ask for it. pt2pt locks lock_all's targets only on demand: lock_all is never taken for
// granted. Where it holds, MPI_Win_lock leaves the rank kAsked, as the first operation does.
#if defined(OPEN_MPI)
constexpr bool kFlushTakesLock = true;
#else
constexpr bool kFlushTakesLock = false;
#endif

// The MPI's lock on `rank` granted: a flush, once the lock is asked for (kAsked), else a get of
// one byte, flushed (the MPI performs them at the target only under the lock).
int Force(Hybrid& h, int rank) {
  std::byte b{};
  if (h.forced[rank] == Hybrid::kNotKnown && h.size[rank] != 0) {
    if (int rc = PMPI_Get(&b, 1, MPI_BYTE, rank, 0, 1, MPI_BYTE, h.win); rc != MPI_SUCCESS) {
      return rc;
    }
  }
  if (int rc = PMPI_Win_flush(rank, h.win); rc != MPI_SUCCESS) return rc;
  h.forced[rank] = Hybrid::kGranted;
  Completed(h, rank);
  return MPI_SUCCESS;
}

// Whether an operation of `count` elements of `type` is small enough to go to the MPI with its
// request for the lock (at most kAskWith bytes).
bool AskWith(MPI_Count count, MPI_Datatype type) {
  constexpr MPI_Count kAskWith = 1024;
  MPI_Count size = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size == MPI_UNDEFINED) return false;
  return count >= 0 && (size == 0 || count <= kAskWith / size);
}

bool AnyLocalLock(const Hybrid& h) {
  for (std::size_t r = 0; r < h.lock.size(); ++r) {
    if (h.lock[r] && h.node_rank[r] >= 0) return true;
  }
  return h.lock_all;
}

// The node window's state where its memory is maintained (the two non-coherent modes), or
// nullptr.
Window* Maintained(const Hybrid& h) {
  Window* n = h.node_state;
  return n != nullptr && n->coherence != Coherence::kCoherent ? n : nullptr;
}

// The MPI's half of an exposure epoch of this rank has ended: what it put here is in memory
// (the public copy), noted in no ledger, so the own window is read again whole; `noput`: the
// epoch's opening call said that nobody would put.
int AfterMpiExposure(const Hybrid& h, bool noput) {
  Window* n = Maintained(h);
  return n == nullptr || noput ? MPI_SUCCESS : InvalidateOwn(*n);
}

}  // namespace

Hybrid* FindHybrid(MPI_Win win) {
  if (g_count.load(std::memory_order_acquire) == 0) return nullptr;
  // Read before the map: an Add or Remove after it makes the answer kept below stale at once.
  const std::uint64_t generation = g_generation.load(std::memory_order_acquire);
  const std::uint64_t key = KeyOf(win);
  Recent& recent = t_recent;
  if (recent.generation == generation && recent.key == key) return recent.hybrid;
  Hybrid* found = nullptr;
  {
    std::shared_lock lock(g_mu);
    auto it = g_hybrids.find(key);
    if (it != g_hybrids.end()) found = it->second;
  }
  recent = {generation, key, found};
  return found;
}

Window* RouteTransfer(Hybrid& h, MPI_Win& win, int& target, int& rc, MPI_Count count,
                      MPI_Datatype type) {
  if (!Local(h, target)) {
    NoteMpi(h, target);
    return nullptr;
  }
  if ((h.lock[target] || h.lock_all) && h.forced[target] != Hybrid::kGranted) {
    if (h.forced[target] == Hybrid::kNotKnown && AskWith(count, type)) {
      h.forced[target] = Hybrid::kAsked;
      NoteMpi(h, target);
      return nullptr;  // to the MPI, which takes the lock with it
    }
    rc = Force(h, target);
    if (rc != MPI_SUCCESS) return nullptr;
  }
  win = h.node_win;
  target = h.node_rank[target];
  return h.node_state;
}

int HybridAllocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                   MPI_Win* win) {
  int rc = MPI_SUCCESS;
  std::unique_ptr<Hybrid> h =
      NodeWindow(comm, static_cast<std::uint64_t>(size), rc, [&](Hybrid& n, MPI_Comm node) {
        return MPI_Win_allocate(size, disp_unit, info, node, &n.base, &n.node_win);
      });
  if (h == nullptr) return rc;
  h->flavor = MPI_WIN_FLAVOR_ALLOCATE;
  void* base = h->base;
  rc = Finish(std::move(h), size, disp_unit, info, comm, win);
  if (rc == MPI_SUCCESS) *static_cast<void**>(baseptr) = base;
  return rc;
}

int HybridCreate(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                 MPI_Win* win) {
  int rc = MPI_SUCCESS;
  std::unique_ptr<Hybrid> h =
      NodeWindow(comm, static_cast<std::uint64_t>(size), rc, [&](Hybrid& n, MPI_Comm node) {
        n.base = base;
        return MPI_Win_create(base, size, disp_unit, info, node, &n.node_win);
      });
  if (h == nullptr) return rc;
  h->flavor = MPI_WIN_FLAVOR_CREATE;
  return Finish(std::move(h), size, disp_unit, info, comm, win);
}

int HybridFree(MPI_Win* win) {
  Hybrid* h = FindHybrid(*win);
  // Collective like the free: every rank fails when one has an epoch open.
  const int open = h->started_node || h->started_mpi || h->posted_node || h->posted_mpi ||
                   h->lock_all || AnyLocalLock(*h);
  int out = 0;
  PMPI_Allreduce(&open, &out, 1, MPI_INT, MPI_LOR, h->comm);
  if (out) {
    if (Verbose()) {
      Say(h->me, open ? "MPI_Win_free with an epoch open (start, post, lock or lock_all)"
                      : "MPI_Win_free while another rank has an epoch open on the window");
    }
    PMPI_Win_call_errhandler(h->win, MPI_ERR_RMA_SYNC);
    return MPI_ERR_RMA_SYNC;
  }
  int rc = MPI_Win_free(&h->node_win);
  Remove(h->win);
  const int mpi = PMPI_Win_free(win);
  for (Hybrid::GroupSplit& e : h->splits) FreeSplit(e);
  PMPI_Group_free(&h->node);
  PMPI_Comm_free(&h->comm);
  HoldCommunicators(kHeldOnNode - kHeldAcrossHosts);
  delete h;
  return rc != MPI_SUCCESS ? rc : mpi;
}

int HybridAttr(Hybrid& h, int keyval, void* value, int* flag) {
  void* out = nullptr;
  if (keyval == MPI_WIN_BASE) {
    out = h.base;
  } else if (keyval == MPI_WIN_SIZE) {
    out = &h.attr_size;
  } else if (keyval == MPI_WIN_DISP_UNIT) {
    out = &h.attr_disp_unit;
  } else if (keyval == MPI_WIN_CREATE_FLAVOR) {
    out = &h.flavor;
  } else if (keyval == MPI_WIN_MODEL) {
    out = &h.model;
  } else {
    return PMPI_Win_get_attr(h.win, keyval, value, flag);
  }
  *static_cast<void**>(value) = out;
  *flag = 1;
  return MPI_SUCCESS;
}

int HybridFence(Hybrid& h, int asserts) {
  // Both, always: every rank of the window calls both collectives, even after an error. The
  // node window's fence writes the own window back before the MPI's fence lets others read it.
  const int node = MPI_Win_fence(asserts, h.node_win);
  int mpi = PMPI_Win_fence(asserts, h.win);
  if (node == MPI_SUCCESS && mpi == MPI_SUCCESS) {
    mpi = AfterMpiExposure(h, h.fence_noput || (asserts & MPI_MODE_NOPRECEDE) != 0);
  }
  h.fence_noput = (asserts & MPI_MODE_NOPUT) != 0;
  return node != MPI_SUCCESS ? node : mpi;
}

int HybridStart(Hybrid& h, MPI_Group group, int asserts) {
  return OpenGats(
      h, group, h.started_node, h.started_mpi,
      [&](MPI_Group g) { return MPI_Win_start(g, asserts, h.node_win); },
      [&](MPI_Group g) { return PMPI_Win_start(g, asserts, h.win); });
}

int HybridComplete(Hybrid& h) {
  return CloseGats(
      h.started_node, h.started_mpi, [&] { return MPI_Win_complete(h.node_win); },
      [&] { return PMPI_Win_complete(h.win); });
}

int HybridPost(Hybrid& h, MPI_Group group, int asserts) {
  h.post_noput = (asserts & MPI_MODE_NOPUT) != 0;
  return OpenGats(
      h, group, h.posted_node, h.posted_mpi,
      [&](MPI_Group g) { return MPI_Win_post(g, asserts, h.node_win); },
      [&](MPI_Group g) {
        // The node window's post wrote the own window back; without one, this does.
        Window* n = Maintained(h);
        if (n != nullptr && !h.posted_node && (asserts & MPI_MODE_NOSTORE) == 0) {
          if (int rc = WriteBackOwn(*n); rc != MPI_SUCCESS) return rc;
        }
        return PMPI_Win_post(g, asserts, h.win);
      });
}

int HybridWait(Hybrid& h) {
  const bool mpi = h.posted_mpi;
  const int rc = CloseGats(
      h.posted_node, h.posted_mpi, [&] { return MPI_Win_wait(h.node_win); },
      [&] { return PMPI_Win_wait(h.win); });
  return rc == MPI_SUCCESS && mpi ? AfterMpiExposure(h, h.post_noput) : rc;
}

int HybridTest(Hybrid& h, int* flag) {
  if (!h.posted_node && !h.posted_mpi) return PMPI_Win_test(h.win, flag);
  *flag = 0;
  if (h.posted_node) {
    int done = 0;
    if (int rc = MPI_Win_test(h.node_win, &done); rc != MPI_SUCCESS) return rc;
    if (!done) return MPI_SUCCESS;
    h.posted_node = false;  // that half's exposure epoch has ended
  }
  if (h.posted_mpi) {
    int done = 0;
    if (int rc = PMPI_Win_test(h.win, &done); rc != MPI_SUCCESS) return rc;
    if (!done) return MPI_SUCCESS;
    h.posted_mpi = false;
    if (int rc = AfterMpiExposure(h, h.post_noput); rc != MPI_SUCCESS) return rc;
  }
  *flag = 1;
  return MPI_SUCCESS;
}

int HybridLock(Hybrid& h, int type, int rank, int asserts) {
  int rc = PMPI_Win_lock(type, rank, asserts, h.win);
  if (rc != MPI_SUCCESS || !Local(h, rank)) return rc;
  // The MPI's lock excludes the other lockers, wherever they are: the node window's epoch
  // needs no lock of its own.
  rc = MPI_Win_lock(type, h.node_rank[rank], asserts | MPI_MODE_NOCHECK, h.node_win);
  if (rc != MPI_SUCCESS) {
    PMPI_Win_unlock(rank, h.win);
    return rc;
  }
  h.lock[rank] = 1;
  h.forced[rank] = (asserts & MPI_MODE_NOCHECK) ? Hybrid::kGranted
                   : kFlushTakesLock            ? Hybrid::kAsked
                                                : Hybrid::kNotKnown;
  return MPI_SUCCESS;
}

int HybridUnlock(Hybrid& h, int rank) {
  if (!Local(h, rank) || !h.lock[rank]) {
    const int rc = PMPI_Win_unlock(rank, h.win);
    if (rc == MPI_SUCCESS) Completed(h, rank);
    return rc;
  }
  h.lock[rank] = 0;
  const int node = MPI_Win_unlock(h.node_rank[rank], h.node_win);  // this rank's stores first
  const int mpi = PMPI_Win_unlock(rank, h.win);
  if (mpi == MPI_SUCCESS) Completed(h, rank);
  return node != MPI_SUCCESS ? node : mpi;
}

int HybridLockAll(Hybrid& h, int asserts) {
  int rc = PMPI_Win_lock_all(asserts, h.win);
  if (rc != MPI_SUCCESS) return rc;
  rc = MPI_Win_lock_all(asserts | MPI_MODE_NOCHECK, h.node_win);
  if (rc != MPI_SUCCESS) {
    PMPI_Win_unlock_all(h.win);
    return rc;
  }
  h.lock_all = true;
  std::fill(h.forced.begin(), h.forced.end(),
            (asserts & MPI_MODE_NOCHECK) ? Hybrid::kGranted : Hybrid::kNotKnown);
  return MPI_SUCCESS;
}

int HybridUnlockAll(Hybrid& h) {
  if (!h.lock_all) return PMPI_Win_unlock_all(h.win);
  h.lock_all = false;
  const int node = MPI_Win_unlock_all(h.node_win);
  const int mpi = PMPI_Win_unlock_all(h.win);
  if (mpi == MPI_SUCCESS) CompletedAll(h);
  return node != MPI_SUCCESS ? node : mpi;
}

namespace {

// The MPI's flush of `rank` (all ranks when negative), local or not.
int MpiFlush(Hybrid& h, int rank, bool local) {
  if (rank < 0) return local ? PMPI_Win_flush_local_all(h.win) : PMPI_Win_flush_all(h.win);
  return local ? PMPI_Win_flush_local(rank, h.win) : PMPI_Win_flush(rank, h.win);
}

// A flush (not a local one, which may end before the target has the data) of `rank` (all when
// negative) performed the operations that asked for locks: they are held.
void MarkHeld(Hybrid& h, int rank) {
  auto held = [](std::uint8_t& f) {
    if (f == Hybrid::kAsked) f = Hybrid::kGranted;
  };
  if (rank >= 0) {
    held(h.forced[rank]);
  } else {
    std::for_each(h.forced.begin(), h.forced.end(), held);
  }
}

// Whether the MPI's flush of `rank` (all when negative) can be left out: it would complete
// nothing, since no operation to that rank went to the MPI since its last completion, and it
// cannot fail, since this rank holds the passive epoch to it. Every kProgressEvery-th such
// flush in a row is made all the same: the MPI's calls drive its progress (over TCP, other
// hosts' operations on this rank's memory advance only while it calls the MPI).
bool NothingInMpi(Hybrid& h, int rank) {
  const bool held = rank < 0 ? h.lock_all : Local(h, rank) && (h.lock[rank] || h.lock_all);
  const bool idle = rank < 0 ? h.via_mpi_ranks == 0 : held && h.via_mpi[rank] == 0;
  if (held && idle && ++h.skipped < Hybrid::kProgressEvery) return true;
  h.skipped = 0;
  return false;
}

}  // namespace

int HybridFlush(Hybrid& h, int rank, bool local) {
  if (!NothingInMpi(h, rank)) {
    if (int rc = MpiFlush(h, rank, local); rc != MPI_SUCCESS) return rc;
    if (!local) {
      MarkHeld(h, rank);
      rank < 0 ? CompletedAll(h) : Completed(h, rank);
    }
  }
  if (rank < 0) {
    if (!AnyLocalLock(h)) return MPI_SUCCESS;
    return local ? MPI_Win_flush_local_all(h.node_win) : MPI_Win_flush_all(h.node_win);
  }
  if (!Local(h, rank) || !(h.lock[rank] || h.lock_all)) return MPI_SUCCESS;
  const int n = h.node_rank[rank];
  return local ? MPI_Win_flush_local(n, h.node_win) : MPI_Win_flush(n, h.node_win);
}

int HybridSync(Hybrid& h) {
  const int mpi = PMPI_Win_sync(h.win);
  const int node = MPI_Win_sync(h.node_win);
  return mpi != MPI_SUCCESS ? mpi : node;
}

}  // namespace tierflow::rma

using namespace tierflow::rma;

extern "C" int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler handler) {
  return Guarded("MPI_Win_set_errhandler", [&]() -> int {
    // The node window's own MPI calls report through the same handler.
    if (Hybrid* h = FindHybrid(win)) PMPI_Win_set_errhandler(h->node_win, handler);
    return PMPI_Win_set_errhandler(win, handler);
  });
}
