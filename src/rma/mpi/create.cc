// SPDX-License-Identifier: Apache-2.0
// Window creation and destruction: MPI_Win_allocate, MPI_Win_create, MPI_Alloc_mem,
// MPI_Free_mem, MPI_Win_free and the attributes a window reports.
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rma/mpi/coherence.h"
#include "rma/mpi/create.h"
#include "rma/mpi/hybrid.h"
#include "rma/mpi/offload.h"
#include "rma/mpi/pooled.h"
#include "rma/mpi/reach.h"
#include "rma/mpi/window.h"
#include "tierflow/cpu_isa.h"

namespace tierflow::rma {

namespace {

// Memory MPI_Alloc_mem handed out: shared segments, by address.
std::mutex g_alloc_mu;
std::map<std::uintptr_t, SharedSegment> g_alloc;

// Small allocations share segments, in power-of-two classes from 64 bytes: a memfd and a page
// per call would run into the descriptor limit, and Open MPI's osc/rdma attaches at most 64
// regions to a dynamic window (a linked list of MPI_Alloc_mem elements needs one per page).
// Freed blocks are reused by their class; the segments stay until the process ends.
constexpr std::size_t kSmallest = 64, kSmallAlloc = 2048, kChunk = 256 * 1024;
constexpr int kClasses = 6;  // 64 ... 2048
static_assert(kSmallest << (kClasses - 1) == kSmallAlloc);
std::vector<std::byte*> g_free[kClasses];
std::unordered_map<std::uintptr_t, int> g_small;  // live small block: its class
std::unordered_set<std::uintptr_t> g_chunks;      // segments of small blocks, by address

int ClassOf(std::size_t size) {
  int c = 0;
  while ((kSmallest << c) < size) ++c;
  return c;
}

// Under g_alloc_mu: the MPI_Alloc_mem segment holding [a, a+n), or g_alloc.end().
std::map<std::uintptr_t, SharedSegment>::iterator Holding(std::uintptr_t a, std::uint64_t n) {
  auto it = g_alloc.upper_bound(a);
  if (it == g_alloc.begin()) return g_alloc.end();
  --it;
  return a + n <= it->first + it->second.size() ? it : g_alloc.end();
}

// Under g_alloc_mu. nullptr when no segment can be made.
std::byte* TakeSmall(std::size_t size) {
  const int c = ClassOf(size);
  const std::size_t block = kSmallest << c;
  if (g_free[c].empty()) {
    Result<SharedSegment> s = SharedSegment::Create(kChunk);
    if (!s.ok()) return nullptr;
    for (std::size_t at = kChunk; at >= block; at -= block) {
      g_free[c].push_back(s->data() + at - block);  // lowest address handed out first
    }
    if (!s->SetOpenable(false).ok()) return nullptr;
    g_chunks.insert(reinterpret_cast<std::uintptr_t>(s->data()));
    g_alloc.emplace(reinterpret_cast<std::uintptr_t>(s->data()), std::move(*s));
  }
  std::byte* p = g_free[c].back();
  g_free[c].pop_back();
  g_small[reinterpret_cast<std::uintptr_t>(p)] = c;
  return p;
}

// What OnThisNode keeps on a communicator (an attribute, not copied to duplicates): kAllHere,
// or, for ranks on several hosts, the communicator of this host's ranks, which every window
// over that communicator then uses instead of splitting it again (MPI_Comm_split_type costs
// as much as the rest of a window's creation: docs/rma.md). Freed with the communicator.
// kOnePerHost once the ranks have agreed that no host holds two of them and none asks for a
// pool: the library has nothing to add to such windows, and later ones go to the MPI at once.
constexpr std::uintptr_t kAllHere = 1, kOnePerHost = 2;
bool IsMarker(const void* value) {
  const auto v = reinterpret_cast<std::uintptr_t>(value);
  return v == kAllHere || v == kOnePerHost;
}
struct NodeSplit {
  MPI_Comm node = MPI_COMM_NULL;
};

// Set when MPI_Finalize deletes MPI_COMM_SELF's attributes, which it does first of all: from
// then on the MPI frees its communicators itself, and a callback must not free one.
std::atomic<bool> g_finalizing{false};

int NoteFinalize(MPI_Comm, int, void*, void*) {
  g_finalizing.store(true, std::memory_order_relaxed);
  return MPI_SUCCESS;
}

int DropSplit(MPI_Comm, int, void* value, void*) {
  if (IsMarker(value)) return MPI_SUCCESS;
  auto* split = static_cast<NodeSplit*>(value);
  if (!g_finalizing.load(std::memory_order_relaxed)) {
    PMPI_Comm_free(&split->node);
    HoldCommunicators(-1);
  }
  delete split;
  return MPI_SUCCESS;
}

int NodeKeyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID, self = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DropSplit, &k, nullptr);
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, NoteFinalize, &self, nullptr) ==
        MPI_SUCCESS) {
      PMPI_Comm_set_attr(MPI_COMM_SELF, self, nullptr);
    }
    return k;
  }();
  return keyval;
}

// OnThisNode's attribute on `comm`: a marker, a NodeSplit, or nullptr when there is none yet.
void* CachedSplit(MPI_Comm comm) {
  const int keyval = NodeKeyval();
  void* cached = nullptr;
  int found = 0;
  if (keyval == MPI_KEYVAL_INVALID ||
      PMPI_Comm_get_attr(comm, keyval, &cached, &found) != MPI_SUCCESS || !found) {
    return nullptr;
  }
  return cached;
}

// Whether every rank of the intracommunicator `comm` runs on this node. Collective on the first
// call for a communicator; later calls answer from its attribute without communicating. Every
// rank sets the attribute in the same call, so all ranks skip the split alike.
bool OnThisNode(MPI_Comm comm) {
  if (void* cached = CachedSplit(comm)) return reinterpret_cast<std::uintptr_t>(cached) == kAllHere;
  MPI_Comm node;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return false;
  }
  int node_size = 0, size = 0;
  PMPI_Comm_size(node, &node_size);
  PMPI_Comm_size(comm, &size);
  const bool here = node_size == size;
  const int keyval = NodeKeyval();
  if (here || keyval == MPI_KEYVAL_INVALID) {
    PMPI_Comm_free(&node);
    if (keyval != MPI_KEYVAL_INVALID) {
      PMPI_Comm_set_attr(comm, keyval, reinterpret_cast<void*>(kAllHere));
    }
    return here;
  }
  MarkOnThisNode(node);  // windows over it (the node windows) need not split it once more
  HoldCommunicators(1);
  PMPI_Comm_set_attr(comm, keyval, new NodeSplit{node});
  return false;
}

}  // namespace

void MarkOnThisNode(MPI_Comm comm) {
  if (const int keyval = NodeKeyval(); keyval != MPI_KEYVAL_INVALID) {
    PMPI_Comm_set_attr(comm, keyval, reinterpret_cast<void*>(kAllHere));
  }
}

MPI_Comm KeptNodeCommunicator(MPI_Comm comm) {
  void* cached = CachedSplit(comm);
  if (cached == nullptr || IsMarker(cached)) return MPI_COMM_NULL;
  return static_cast<NodeSplit*>(cached)->node;
}

bool AllTrue(MPI_Comm comm, bool mine) {
  int in = mine ? 1 : 0, out = 0;
  PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

// From here to the entry points: the steps of creation; those outside the anonymous namespaces
// are declared in rma/mpi/create.h and shared with windows in a pool (pooled.cc).

// Long spins while every rank can have a CPU of its own (the MPI may have bound each rank to
// one, so the machine's count is what matters, not this rank's affinity); short ones when
// the node runs more ranks than it has CPUs, where a spinning waiter holds the CPU that the
// rank it waits for needs.
bool Oversubscribed(int ranks) { return ranks > sysconf(_SC_NPROCESSORS_ONLN); }

namespace {

// A segment made by rank 0 of `comm` and mapped by all: memfd first, the named fallback when
// some rank cannot open the memfd through /proc.
Result<SharedSegment> MakeShared(MPI_Comm comm, int me, std::size_t bytes) {
  for (bool named : {false, true}) {
    Result<SharedSegment> s = Status::NotFound("not opened");
    SegmentName name;
    if (me == 0) {
      s = SharedSegment::Create(bytes, named);
      if (s.ok()) name = s->name();
    }
    PMPI_Bcast(&name, sizeof(name), MPI_BYTE, 0, comm);
    if (me != 0 && name.pid != 0) s = SharedSegment::Open(name);
    const bool ok = AllTrue(comm, name.pid != 0 && s.ok());
    if (ok) {
      if (me == 0) s->MarkMapped();
      return s;
    }
    if (name.pid == 0) return Status::OutOfMemory("rank 0 could not create the window's memory");
  }
  return Status::Unsupported(
      "the ranks cannot map each other's shared memory (/proc/PID/fd "
      "and /dev/shm both refused)");
}

}  // namespace

std::size_t PageRound(std::uint64_t n) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// Each rank's offset in one segment of all their windows, in page multiples, and the total;
// false when the total would not fit in a file (every rank sees the same sizes, so all agree).
bool Layout(const std::vector<Offer>& all, std::vector<std::uint64_t>& offset,
            std::uint64_t& total) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  constexpr auto kMost = static_cast<std::uint64_t>(INT64_MAX);
  total = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    offset[r] = total;
    if (all[r].size > kMost - page || PageRound(all[r].size) > kMost - total) return false;
    total += PageRound(all[r].size);
  }
  return true;
}

// MPI_Win_allocate's sizes add up to more than a segment holds: MPI_ERR_SIZE on every rank,
// through the communicator's error handler, nothing allocated.
int TooLarge(std::unique_ptr<Window> w, MPI_Comm comm, const std::vector<Offer>& all) {
  if (w->me == 0) {
    std::vector<std::uint64_t> each;
    for (const Offer& o : all) each.push_back(o.size);
    const std::string sizes = fmt::format("{}", fmt::join(each, ", "));
    Say(w->me, fmt::format("MPI_Win_allocate: the ranks' sizes ({}) add up to more than one "
                           "process can map: ask for less",
                           sizes));
  }
  DropWindow(std::move(w));
  PMPI_Comm_call_errhandler(comm, MPI_ERR_SIZE);
  return MPI_ERR_SIZE;
}

namespace {

// The coherence mode and TIERFLOW_RMA_HOST_SPLIT in one number: mode + kSplitStep * setting.
constexpr int kSplitStep = 8;

// This rank's coherence mode and TIERFLOW_RMA_HOST_SPLIT in one number, which the ranks must
// agree on (-1 with the reason in `error` when a setting of the library's environment is
// refused), and its limit on communicators held.
int FromEnvironment(Coherence& mode, std::string& error, Result<int>& budget) {
  int mine = CoherenceFromEnvironment(mode, error) ? static_cast<int>(mode) : -1;
  if (mine >= 0) {
    const int split = HostSplitSetting(error);
    mine = split < 0 ? -1 : mine + kSplitStep * split;
  }
  // The copies' kernels: a TIERFLOW_ISA this CPU lacks is refused, as a mode nobody knows.
  Status other = Status::Ok();
  if (Result<CpuIsa> isa = ChooseCpuIsa(); !isa.ok()) other = isa.status();
  if (Status s = CheckOffloadEnvironment(); !s.ok() && other.ok()) other = s;
  budget = CommunicatorBudget();
  if (!budget.ok() && other.ok()) other = budget.status();
  if (!other.ok() && error.empty()) {
    error = other.message();
    mine = -1;
  }
  return mine;
}

int Refuse(MPI_Comm comm, const std::string& error) {
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  if (!error.empty() || me == 0) {
    Say(me, !error.empty() ? error
                           : "the ranks disagree on TIERFLOW_RMA_COHERENCE or "
                             "TIERFLOW_RMA_HOST_SPLIT: give every rank the same settings");
  }
  PMPI_Comm_call_errhandler(comm, MPI_ERR_ARG);
  return MPI_ERR_ARG;
}

// This rank's count of the ranks of `comm` on its host, once OnThisNode(comm) has answered;
// INT_MAX when unknown (no attribute could be kept), which never counts as one per host.
int RanksOnThisHost(MPI_Comm comm, bool here) {
  int n = INT_MAX;
  if (here) {
    PMPI_Comm_size(comm, &n);
  } else if (MPI_Comm node = KeptNodeCommunicator(comm); node != MPI_COMM_NULL) {
    PMPI_Comm_size(node, &n);
  }
  return n;
}

constexpr const char* kOnePerHostReason =
    "its ranks are on different hosts, one per host, and no rank asked for a pool "
    "(TIERFLOW_RMA_POOL) at the first window over this communicator: nothing to share";

// Windows across hosts, none holding two of their ranks, no rank asking for a pool: the
// library has nothing to add. Kept on the communicator, so that later windows over it go to
// the MPI without a collective of the library's (the decision stands while it lives).
void LeaveToTheMpi(MPI_Comm comm) {
  if (const int keyval = NodeKeyval(); keyval != MPI_KEYVAL_INVALID) {
    PMPI_Comm_set_attr(comm, keyval, reinterpret_cast<void*>(kOnePerHost));  // frees the split
  }
  PassThroughReason(comm, "window creation", kOnePerHostReason);
}

// Whether every rank of `comm` is on this node and gave arguments the library takes, and the
// coherence mode every rank asked for (with what a window across hosts needs, in `agreed`), in
// one collective: the ranks agree even when one rank's arguments are wrong, so they all go
// the same way (the MPI underneath then reports it). A mode nobody knows or ranks that
// disagree are MPI_ERR_ARG through the communicator's error handler, on one node or across
// hosts.
int Agree(MPI_Comm comm, bool valid, MPI_Info info, bool& accelerate, bool& span,
          SpanAgreement& agreed) {
  accelerate = span = false;
  if (reinterpret_cast<std::uintptr_t>(CachedSplit(comm)) == kOnePerHost) {
    PassThroughReason(comm, "window creation", kOnePerHostReason);
    return MPI_SUCCESS;
  }
  std::string error;
  Result<int> budget = 0;
  const int mine = FromEnvironment(agreed.mode, error, budget);
  // OnThisNode first: it may be collective, so every rank calls it, even one whose arguments
  // are wrong. Its answer is the same on every rank.
  const bool here = OnThisNode(comm);
  const int room =
      budget.ok() && HeldCommunicators() + (here ? kHeldOnNode : kHeldAcrossHosts) <= *budget;
  const int per_host = RanksOnThisHost(comm, here);
  const int in[8] = {valid ? 1 : 0, mine,
                     -mine,         room,
                     -per_host,     PoolAsked() ? -1 : 0,
                     ReachKnown(),  NeverLocked(info) ? 1 : 0};
  int out[8] = {};
  PMPI_Allreduce(in, out, 8, MPI_INT, MPI_MIN, comm);
  agreed.pool_asked = out[5] == -1;
  agreed.reach = out[6];
  agreed.no_locks = out[7] == 1;
  if (out[0] == 0) return MPI_SUCCESS;  // the MPI underneath reports the arguments
  if (out[1] != -out[2] || out[1] < 0) return Refuse(comm, error);
  agreed.split_always = out[1] / kSplitStep == 1;
  if (!here && out[4] == -1 && out[5] == 0) {
    LeaveToTheMpi(comm);
    return MPI_SUCCESS;
  }
  if (out[3] == 0) {
    PassThroughReason(comm, "window creation",
                      fmt::format("the library holds as many communicators for its windows as "
                                  "TIERFLOW_RMA_COMMUNICATORS allows ({} here, {} held) on some "
                                  "rank: the MPI's remaining context ids are left to the "
                                  "program (raise it if the MPI has more to spare)",
                                  *budget, HeldCommunicators()));
    return MPI_SUCCESS;
  }
  accelerate = here;
  span = !here;  // a window across hosts (rma/mpi/pooled.h)
  return MPI_SUCCESS;
}

}  // namespace

std::unique_ptr<Window> NewWindowState(MPI_Comm comm, int flavor, int disp_unit, MPI_Aint size,
                                       Coherence mode) {
  auto w = std::make_unique<Window>();
  w->coherence = mode;
  PMPI_Comm_rank(comm, &w->me);
  PMPI_Comm_size(comm, &w->ranks);
  PMPI_Comm_dup(comm, &w->comm);
  HoldCommunicators(kHeldOnNode);
  PMPI_Comm_group(comm, &w->group);
  w->flavor = flavor;
  w->model = mode == Coherence::kCoherent ? MPI_WIN_UNIFIED : MPI_WIN_SEPARATE;
  w->seen.assign(w->ranks, 0);
  w->lock.assign(w->ranks, 0);
  w->dirty.assign(w->ranks, {});
  w->attr_disp_unit = disp_unit;
  w->attr_size = size;
  return w;
}

namespace {

// The synchronisation words' bytes, whole cache lines: the ledger follows them.
std::size_t WordBytes(int ranks) { return (WindowSync::Bytes(ranks) + 63) / 64 * 64; }

}  // namespace

std::size_t ControlBytes(int ranks, Coherence mode) {
  return WordBytes(ranks) + (mode == Coherence::kCoherent ? 0 : WriteLedger::Bytes(ranks));
}

void UseControl(Window& w, std::byte* control) {
  if (w.coherence != Coherence::kCoherent) w.ledger = WriteLedger(control + WordBytes(w.ranks));
  const bool over = Oversubscribed(w.ranks);
  w.sync = std::make_unique<WindowSync>(control, w.ranks, w.me, over ? 64 : 20000, over ? 1000 : 0,
                                        WordsIn(w.coherence), KeptWordHooks());
}

namespace {

// The window's state and its synchronisation words (a segment of their own); nullptr, on
// every rank alike, when the ranks cannot share memory.
std::unique_ptr<Window> NewWindow(MPI_Comm comm, int flavor, int disp_unit, MPI_Aint size,
                                  Coherence mode) {
  std::unique_ptr<Window> w = NewWindowState(comm, flavor, disp_unit, size, mode);
  Result<SharedSegment> control = MakeShared(comm, w->me, ControlBytes(w->ranks, mode));
  if (!control.ok()) {
    PassThroughReason(comm, "window", control.status().message());
    DropWindow(std::move(w));
    return nullptr;
  }
  w->control = std::move(*control);
  UseControl(*w, w->control.data());
  return w;
}

}  // namespace

void SimulateAllocated(Window& w) {
  const std::vector<std::byte*> pub = w.base;
  w.local.assign(pub[w.me], pub[w.me] + w.size[w.me]);
  w.base[w.me] = w.local.data();
  StartSimulation(w, pub);
}

void DropWindow(std::unique_ptr<Window> w) {
  if (w->group != MPI_GROUP_NULL) PMPI_Group_free(&w->group);
  if (w->comm != MPI_COMM_NULL) {
    PMPI_Comm_free(&w->comm);
    HoldCommunicators(-kHeldOnNode);
  }
}

Offer OfferOf(void* base, MPI_Aint size, int disp_unit) {
  Offer mine;
  mine.size = static_cast<std::uint64_t>(size);
  mine.disp_unit = static_cast<std::uint32_t>(disp_unit);
  mine.pid = getpid();
  mine.address = reinterpret_cast<std::uint64_t>(base);
  return mine;
}

// The sizes, displacement units, processes, addresses and offload thresholds of every rank.
std::vector<Offer> Exchange(const Window& w, Offer mine) {
  mine.offload_min = OffloadThreshold();
  std::vector<Offer> all(w.ranks);
  PMPI_Allgather(&mine, sizeof(Offer), MPI_BYTE, all.data(), sizeof(Offer), MPI_BYTE, w.comm);
  return all;
}

// Keeps what every rank offered: sizes, displacement units, processes, addresses; the ranks'
// largest offload threshold, so that they all offload the same transfers.
void Record(Window& w, const std::vector<Offer>& all) {
  for (const Offer& o : all) {
    w.size.push_back(o.size);
    w.disp_unit.push_back(o.disp_unit);
    w.pid.push_back(o.pid);
    w.address.push_back(o.address);
    w.offload_min = std::max(w.offload_min, o.offload_min);
  }
  if (OffloadThreshold() == 0) w.offload_min = 0;  // no engine here
}

namespace {

// What TIERFLOW_RMA_VERBOSE=1 prints about an accelerated window.
std::string Describe(const Window& w) {
  int remote = 0;
  for (int r = 0; r < w.ranks; ++r) remote += w.base[r] == nullptr && w.size[r] > 0;
  const std::string offload =
      w.offload_min == 0 ? ""
                         : fmt::format(
                               "; puts and gets of {} bytes and more offloaded (the ranks' largest "
                               "threshold)",
                               w.offload_min);
  return fmt::format(
      "{} window of {} ranks accelerated: {}{}",
      w.flavor == MPI_WIN_FLAVOR_ALLOCATE ? "MPI_Win_allocate" : "MPI_Win_create", w.ranks,
      w.pool != nullptr
          ? fmt::format("its ranks span hosts; every rank's memory and the synchronisation words "
                        "are in the pool {} ({} coherence)",
                        w.pool->path(), CoherenceName(w.coherence))
      : remote == 0 ? std::string("every rank's memory mapped here")
                    : fmt::format("{} rank(s) reached with process_vm copies (their memory is "
                                  "neither from MPI_Alloc_mem nor whole pages of private memory)",
                                  remote),
      offload);
}

// What both creations start with: nullptr and MPI_SUCCESS in `rc` when the window stays with
// the MPI underneath (arguments it will refuse itself, no shared memory), or, with `span`, is
// split across hosts (rma/mpi/hybrid.h); an error in `rc`, already reported, for a coherence
// mode the ranks do not agree on.
std::unique_ptr<Window> Begin(MPI_Comm comm, int flavor, int disp_unit, MPI_Aint size,
                              MPI_Info info, int& rc, bool& span, SpanAgreement& agreed) {
  span = false;
  if (comm == MPI_COMM_NULL) return nullptr;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) return nullptr;  // the same on every rank: no collective needed to agree
  bool accelerate = false;
  rc = Agree(comm, size >= 0 && disp_unit > 0, info, accelerate, span, agreed);
  if (!accelerate) return nullptr;
  std::unique_ptr<Window> w = NewWindow(comm, flavor, disp_unit, size, agreed.mode);
  if (w == nullptr) return nullptr;
  // The same CPU on every rank of a node: every rank fails alike.
  if (Status s = w->sync->CheckInstructions(); !s.ok()) {
    Say(w->me, "TIERFLOW_RMA_COHERENCE=noncoherent cannot work on this CPU: " + s.message());
    DropWindow(std::move(w));
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    rc = MPI_ERR_OTHER;
    return nullptr;
  }
  PrepareOffload(w->me, w->ranks);  // before the ranks exchange their thresholds
  return w;
}

// The window the MPI holds underneath serves names, attributes, error handlers and info (every
// other call on an accelerated window stays here): over the same memory, except for a single
// rank, where it is an allocated window of no bytes. Open MPI 4.1 has no one-sided component
// for a created window of one process (osc/rdma needs a transport between processes, osc/sm
// serves allocated memory only), so MPI_Win_create fails there, and MPI_Win_allocate would
// fail with the library that succeeds without it.
int CreateUnderneath(const Window& w, void* base, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  if (w.ranks == 1) {
    void* unused = nullptr;
    return PMPI_Win_allocate(0, w.attr_disp_unit, info, comm, &unused, win);
  }
  return PMPI_Win_create(base, w.attr_size, w.attr_disp_unit, info, comm, win);
}

}  // namespace

// The MPI's window; then the window is found by every RMA call.
int Finish(std::unique_ptr<Window> w, void* base, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  // A pool's ranks may be in other PID namespaces: their leases say whether they live.
  if (w->pool == nullptr) w->sync->SetPid(w->me, getpid());
  const int rc = CreateUnderneath(*w, base, info, comm, win);
  if (rc != MPI_SUCCESS) {
    DropWindow(std::move(w));
    return rc;
  }
  w->win = *win;
  if (Verbose()) Say(w->me, Describe(*w));
  AddWindow(w.release());  // owned by the registry until MPI_Win_free
  return MPI_SUCCESS;
}

void PassThroughReason(MPI_Comm comm, const char* call, const std::string& why) {
  if (!Verbose()) return;
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  Say(me, fmt::format("{}: left to the MPI underneath: {}", call, why));
}

namespace {

// The Alloc_mem segment holding [p, p+n), with p's offset in it; pid 0 when there is none.
// It is openable by the window's other ranks until Unexpose.
std::pair<SegmentName, std::uint64_t> AllocatedSegment(const void* p, std::uint64_t n) {
  std::lock_guard lock(g_alloc_mu);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = Holding(a, n);
  if (it == g_alloc.end() || !it->second.SetOpenable(true).ok()) return {};
  return {it->second.name(), a - it->first};
}

// The window's ranks have opened the Alloc_mem segment at `p`: closed to others again.
void Unexpose(const void* p) {
  std::lock_guard lock(g_alloc_mu);
  auto it = Holding(reinterpret_cast<std::uintptr_t>(p), 0);
  if (it == g_alloc.end()) return;
  if (Status s = it->second.SetOpenable(false); !s.ok()) {
    Say(-1, s.message() + ": this MPI_Alloc_mem memory stays open to the user's processes");
  }
}

}  // namespace

}  // namespace tierflow::rma

using namespace tierflow;
using namespace tierflow::rma;

extern "C" int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                                void* baseptr, MPI_Win* win) {
  return Guarded("MPI_Win_allocate", [&]() -> int {
    int rc = MPI_SUCCESS;
    bool span = false;
    SpanAgreement agreed;
    std::unique_ptr<Window> w =
        Begin(comm, MPI_WIN_FLAVOR_ALLOCATE, disp_unit, size, info, rc, span, agreed);
    if (rc != MPI_SUCCESS) return rc;
    if (span) return SpanAllocate(size, disp_unit, info, comm, agreed, baseptr, win);
    if (!w) return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
    const Coherence mode = w->coherence;
    const std::vector<Offer> all = Exchange(*w, OfferOf(nullptr, size, disp_unit));
    std::vector<std::uint64_t> offset(w->ranks);
    std::uint64_t total = 0;
    if (!Layout(all, offset, total)) return TooLarge(std::move(w), comm, all);
    Result<SharedSegment> memory = MakeShared(w->comm, w->me, total);
    if (!memory.ok()) {
      PassThroughReason(comm, "MPI_Win_allocate", memory.status().message());
      DropWindow(std::move(w));
      return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
    }
    w->memory.push_back(std::move(*memory));
    for (int r = 0; r < w->ranks; ++r) w->base.push_back(w->memory[0].data() + offset[r]);
    Record(*w, all);
    if (mode == Coherence::kSimulated) SimulateAllocated(*w);
    void* base = w->base[w->me];
    if (int rc = Finish(std::move(w), base, info, comm, win); rc != MPI_SUCCESS) return rc;
    *static_cast<void**>(baseptr) = base;  // only for a window made: a failed call leaves it
    return MPI_SUCCESS;
  });
}

namespace {

// This rank's window memory as a segment the others can map: MPI_Alloc_mem memory is one
// already; whole pages are shared in place; anything else is offered to process_vm only. A
// rank alone in its window (on one node, or alone on its host in a window across hosts) has
// no one to share with: its memory stays as it is.
void OfferMemory(Window& w, void* base, std::uint64_t size, Offer& mine) {
  std::tie(mine.segment, mine.offset) = AllocatedSegment(base, size);
  if (mine.segment.pid != 0 || size == 0 || w.ranks == 1) return;
  Result<SharedSegment> s = SharedSegment::ShareInPlace(base, size);
  if (!s.ok()) {
    if (Verbose()) Say(w.me, "window memory not shared in place: " + s.status().message());
    return;
  }
  mine.segment = s->name();
  mine.offset = 0;
  w.memory.push_back(std::move(*s));
}

// Simulated coherence: the public copy is a memfd of its own, filled from the program's memory,
// which stays private.
void OfferPublicCopy(Window& w, void* base, std::uint64_t size, Offer& mine) {
  Result<SharedSegment> s = SharedSegment::Create(size);
  if (!s.ok()) return;
  if (size > 0) std::memcpy(s->data(), base, size);
  mine.segment = s->name();
  mine.offset = 0;
  w.memory.push_back(std::move(*s));
}

// Every rank's memory is mapped here (the simulation copies it).
bool AllMapped(const Window& w) {
  bool ok = true;
  for (int r = 0; r < w.ranks; ++r) ok = ok && (w.size[r] == 0 || w.base[r] != nullptr);
  return AllTrue(w.comm, ok);
}

// MPICH moves a few bytes in 0.4-1.0 µs through its own shared-memory queues, faster than
// one process_vm system call (about 1.6 µs with the library's synchronisation); Open MPI 4.1
// takes 1.5-2 µs, and fails some of MPICH's RMA tests that the library passes on such windows.
#if defined(MPICH_VERSION)
constexpr bool kMpiSmallTransfersBeatProcessVm = true;
#else
constexpr bool kMpiSmallTransfersBeatProcessVm = false;
#endif

// The rank whose window leaves the whole window to the MPI underneath, or -1: a window smaller
// than a page and not in shared memory (a few bytes of the heap, as OSU's benchmarks make for
// every size below 4 KiB) would cost a system call per transfer, where the MPI is faster -
// unless the ranks outnumber the CPUs, where MPICH's spinning waits cost milliseconds per
// epoch and the library's sleeping ones microseconds. Every rank decides alike from what all
// offered.
int TinyUnmappedRank(const Window& w, const std::vector<Offer>& all) {
  // Alone in its window a rank reaches only its own memory, directly.
  if (!kMpiSmallTransfersBeatProcessVm || w.ranks == 1 || Oversubscribed(w.ranks)) return -1;
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].segment.pid == 0 && all[r].size > 0 && all[r].size < page) {
      return static_cast<int>(r);
    }
  }
  return -1;
}

// Maps what the others offered, or checks process_vm reaches them; false (on every rank
// alike) when some rank's memory can be reached neither way.
bool Reach(Window& w, const std::vector<Offer>& all) {
  bool ok = true;
  w.base.assign(w.ranks, nullptr);
  for (int r = 0; r < w.ranks && ok; ++r) {
    const Offer& o = all[r];
    if (r == w.me) {
      w.base[r] = reinterpret_cast<std::byte*>(o.address);
    } else if (o.size == 0) {
      continue;
    } else {
      if (o.segment.pid != 0) {
        Result<SharedSegment> s = SharedSegment::Open(o.segment);
        if (s.ok()) {
          w.base[r] = s->data() + o.offset;
          w.memory.push_back(std::move(*s));
          continue;
        }
        if (Verbose()) Say(w.me, fmt::format("rank {}: {}", r, s.status().message()));
      }
      ok = CanReadProcess(o.pid, reinterpret_cast<const void*>(o.address));
    }
  }
  return AllTrue(w.comm, ok);
}

}  // namespace

extern "C" int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info,
                              MPI_Comm comm, MPI_Win* win) {
  return Guarded("MPI_Win_create", [&]() -> int {
    int rc = MPI_SUCCESS;
    bool span = false;
    SpanAgreement agreed;
    std::unique_ptr<Window> w =
        Begin(comm, MPI_WIN_FLAVOR_CREATE, disp_unit, size, info, rc, span, agreed);
    if (rc != MPI_SUCCESS) return rc;
    if (span) return SpanCreate(base, size, disp_unit, info, comm, agreed, win);
    if (!w) return PMPI_Win_create(base, size, disp_unit, info, comm, win);
    const Coherence mode = w->coherence;
    Offer mine = OfferOf(base, size, disp_unit);
    if (mode == Coherence::kSimulated) {
      OfferPublicCopy(*w, base, static_cast<std::uint64_t>(size), mine);
    } else {
      OfferMemory(*w, base, static_cast<std::uint64_t>(size), mine);
    }
    // However the creation ends, once every rank has opened it (or given up on it), an
    // MPI_Alloc_mem segment offered here is closed to other processes again.
    struct Reclose {
      const void* base;
      bool offered;
      ~Reclose() {
        if (offered) Unexpose(base);
      }
    } reclose{base, mine.segment.pid != 0 && mode != Coherence::kSimulated};
    const std::vector<Offer> all = Exchange(*w, mine);
    if (const int tiny = TinyUnmappedRank(*w, all); tiny >= 0) {
      PassThroughReason(comm, "MPI_Win_create",
                        fmt::format("rank {}'s window is {} bytes of memory that is not shared: a "
                                    "process_vm copy per transfer costs more than this MPI's own "
                                    "small transfers (use MPI_Alloc_mem or MPI_Win_allocate)",
                                    tiny, all[tiny].size));
      DropWindow(std::move(w));
      return PMPI_Win_create(base, size, disp_unit, info, comm, win);
    }
    Record(*w, all);
    std::byte* own_public = w->memory.empty() ? nullptr : w->memory[0].data();
    const bool reached = Reach(*w, all) && (mode != Coherence::kSimulated || AllMapped(*w));
    // Every rank has opened the others' memfds: their descriptors can go.
    for (SharedSegment& s : w->memory) s.MarkMapped();
    if (reached) {
      if (mode == Coherence::kSimulated) {
        std::vector<std::byte*> pub = w->base;
        pub[w->me] = own_public;
        StartSimulation(*w, pub);
      }
      return Finish(std::move(w), base, info, comm, win);
    }
    PassThroughReason(
        comm, "MPI_Win_create",
        "some rank's window memory is neither from MPI_Alloc_mem nor private whole pages, "
        "and the kernel refuses process_vm_readv between the ranks (ptrace rules: "
        "Yama ptrace_scope, another user); allocate it with MPI_Alloc_mem or use "
        "MPI_Win_allocate");
    DropWindow(std::move(w));
    return PMPI_Win_create(base, size, disp_unit, info, comm, win);
  });
}

#if MPI_VERSION >= 4
// The large-count forms differ only in the type of disp_unit.
extern "C" int MPI_Win_allocate_c(MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm,
                                  void* baseptr, MPI_Win* win) {
  return Guarded("MPI_Win_allocate_c", [&]() -> int {
    if (disp_unit <= 0 || disp_unit > INT_MAX) {
      return PMPI_Win_allocate_c(size, disp_unit, info, comm, baseptr, win);
    }
    return MPI_Win_allocate(size, static_cast<int>(disp_unit), info, comm, baseptr, win);
  });
}

extern "C" int MPI_Win_create_c(void* base, MPI_Aint size, MPI_Aint disp_unit, MPI_Info info,
                                MPI_Comm comm, MPI_Win* win) {
  return Guarded("MPI_Win_create_c", [&]() -> int {
    if (disp_unit <= 0 || disp_unit > INT_MAX) {
      return PMPI_Win_create_c(base, size, disp_unit, info, comm, win);
    }
    return MPI_Win_create(base, size, static_cast<int>(disp_unit), info, comm, win);
  });
}
#endif

extern "C" int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  return Guarded("MPI_Alloc_mem", [&]() -> int {
    if (size < 0) return PMPI_Alloc_mem(size, info, baseptr);
    if (static_cast<std::size_t>(size) <= kSmallAlloc) {
      std::lock_guard lock(g_alloc_mu);
      if (std::byte* p = TakeSmall(static_cast<std::size_t>(size)); p != nullptr) {
        *static_cast<void**>(baseptr) = p;
        return MPI_SUCCESS;
      }
    }
    Result<SharedSegment> s = SharedSegment::Create(static_cast<std::size_t>(size));
    // Its descriptor stays open for the windows to come: closed to other processes meanwhile.
    if (!s.ok() || !s->SetOpenable(false).ok()) return PMPI_Alloc_mem(size, info, baseptr);
    void* p = s->data();
    {
      std::lock_guard lock(g_alloc_mu);
      g_alloc.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(*s));
    }
    *static_cast<void**>(baseptr) = p;
    return MPI_SUCCESS;
  });
}

extern "C" int MPI_Free_mem(void* base) {
  return Guarded("MPI_Free_mem", [&]() -> int {
    {
      std::lock_guard lock(g_alloc_mu);
      if (auto small = g_small.find(reinterpret_cast<std::uintptr_t>(base));
          small != g_small.end()) {
        g_free[small->second].push_back(static_cast<std::byte*>(base));
        g_small.erase(small);
        return MPI_SUCCESS;
      }
      const auto a = reinterpret_cast<std::uintptr_t>(base);
      if (auto it = Holding(a, 1); it != g_alloc.end()) {
        if (g_chunks.count(it->first) != 0 || it->first != a) {
          // Inside a segment of ours but not a live allocation: freed twice, or never ours.
          if (Verbose()) {
            int me = 0;
            PMPI_Comm_rank(MPI_COMM_WORLD, &me);
            Say(me, fmt::format("MPI_Free_mem({}): not a live MPI_Alloc_mem block", base));
          }
          return MPI_ERR_ARG;
        }
        g_alloc.erase(it);
        return MPI_SUCCESS;
      }
    }
    return PMPI_Free_mem(base);
  });
}

extern "C" int MPI_Win_free(MPI_Win* win) {
  return Guarded("MPI_Win_free", [&]() -> int {
    Window* w = win != nullptr ? FindWindow(*win) : nullptr;
    if (w == nullptr) {
      if (win != nullptr && FindHybrid(*win) != nullptr) return HybridFree(win);
      return PMPI_Win_free(win);
    }
    // Collective like the free itself: every rank fails when one has an epoch open, instead of
    // the others waiting for it forever.
    const bool open = w->started || w->posted || w->locks_held > 0 || w->lock_all;
    if (!AllTrue(w->comm, !open)) {
      return Fail(*w, Misuse::kEpochOpen,
                  open ? "MPI_Win_free with an epoch open (start, post, lock or lock_all)"
                       : "MPI_Win_free while another rank has an epoch open on the window");
    }
    // Nobody may touch this rank's memory or words once it unmaps them, this rank's engine
    // included.
    const int drained = DrainOffloaded(*w, "MPI_Win_free");
    if (Verbose() && w->offloaded_copies != 0) {
      Say(w->me, fmt::format("window freed: {} puts and gets offloaded ({} bytes)",
                             w->offloaded_copies, w->offloaded_bytes));
    }
    PMPI_Barrier(w->comm);
    RemoveWindow(*win);
    const int rc = PMPI_Win_free(win);
    DropWindow(std::unique_ptr<Window>(w));
    return drained != MPI_SUCCESS ? drained : rc;
  });
}

extern "C" int MPI_Win_get_attr(MPI_Win win, int keyval, void* value, int* flag) {
  return Guarded("MPI_Win_get_attr", [&]() -> int {
    Window* w = FindWindow(win);
    if (w == nullptr) {
      if (Hybrid* h = FindHybrid(win)) return HybridAttr(*h, keyval, value, flag);
      return PMPI_Win_get_attr(win, keyval, value, flag);
    }
    void* out = nullptr;
    if (keyval == MPI_WIN_BASE) {
      out = w->base[w->me];  // the address the program was given (its private copy when simulated)
    } else if (keyval == MPI_WIN_SIZE) {
      out = &w->attr_size;
    } else if (keyval == MPI_WIN_DISP_UNIT) {
      out = &w->attr_disp_unit;
    } else if (keyval == MPI_WIN_CREATE_FLAVOR) {
      out = &w->flavor;
    } else if (keyval == MPI_WIN_MODEL) {
      out = &w->model;
    } else {
      return PMPI_Win_get_attr(win, keyval, value, flag);
    }
    *static_cast<void**>(value) = out;
    *flag = 1;
    return MPI_SUCCESS;
  });
}
