// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/pooled.h"

#include <sys/random.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rma/mpi/coherence.h"
#include "rma/mpi/create.h"
#include "rma/mpi/hybrid.h"
#include "rma/mpi/offload.h"
#include "rma/mpi/reach.h"
#include "tierflow/coherence.h"
#include "tierflow/size.h"

namespace tierflow::rma {

namespace {

// Each rank's finding, the worst of which every rank acts on.
enum Verdict : int { kNoPool = 0, kUse = 1, kFallBack = 2, kNoSpace = 3, kRefused = 4 };

struct Settings {
  std::string path;
  PoolOptions options;
};

Result<Settings> SettingsFromEnvironment() {
  Settings s;
  s.path = std::getenv("TIERFLOW_RMA_POOL");
  if (s.path.front() != '/') {
    return Status::InvalidArgument(fmt::format(
        "TIERFLOW_RMA_POOL={} is not an absolute path: every host must name the same file, "
        "whatever its working directory",
        s.path));
  }
  if (const char* v = std::getenv("TIERFLOW_RMA_POOL_SIZE"); v != nullptr && *v != '\0') {
    Result<std::uint64_t> size = ParseSize(v);
    if (!size.ok() || *size < Pool::kMinimumBytes) {
      return Status::InvalidArgument(fmt::format(
          "TIERFLOW_RMA_POOL_SIZE={} is not a pool size: give at least 4MiB, as 1GiB or "
          "1073741824{}",
          v, size.ok() ? "" : " (" + size.status().message() + ")"));
    }
    s.options.create_size = *size;
  }
  Result<std::uint64_t> lease =
      NumberFromEnvironment("TIERFLOW_RMA_POOL_LEASE_MS", PoolOptions().lease_ms, 100, 3600 * 1000,
                            "a lease", "milliseconds");
  if (!lease.ok()) return lease.status();
  s.options.lease_ms = *lease;
  return s;
}

// One pool per process, opened by its first window across hosts and kept (with its lease)
// until the process ends; a failure is tried again by the next window.
std::mutex g_mu;
std::shared_ptr<Pool>* g_pool = new std::shared_ptr<Pool>();  // never destroyed: ranks may
                                                              // exit with windows open

Result<std::shared_ptr<Pool>> ProcessPool(const Settings& s) {
  std::lock_guard lock(g_mu);
  if (*g_pool != nullptr && (*g_pool)->path() == s.path) return *g_pool;
  Result<std::shared_ptr<Pool>> pool = Pool::Open(s.path, s.options);
  if (pool.ok()) *g_pool = *pool;
  return pool;
}

// This rank's finding about TIERFLOW_RMA_POOL, with the reason when it is not kUse or kNoPool.
Verdict OpenHere(std::shared_ptr<Pool>& pool, std::string& why) {
  if (!PoolAsked()) return kNoPool;
  Result<Settings> settings = SettingsFromEnvironment();
  if (!settings.ok()) {
    why = settings.status().message();
    return kRefused;
  }
  Result<std::shared_ptr<Pool>> p = ProcessPool(*settings);
  if (!p.ok()) {
    why = p.status().message();
    const StatusCode c = p.status().code();
    return c == StatusCode::kIoError || c == StatusCode::kOutOfMemory ? kFallBack : kRefused;
  }
  pool = *p;
  return kUse;
}

// Whether every rank maps the memory rank 0 maps (not a copy of the file, not another file at
// the same path on another host): rank 0 writes a random word into its lease slot, the others
// read it back.
bool SameMemory(MPI_Comm comm, int me, Pool& pool, std::string& why) {
  struct Probe {
    std::uint64_t pool_id, value;
    PoolLease lease;
  } probe{pool.id(), 0, pool.lease()};
  if (me == 0) {
    if (getrandom(&probe.value, sizeof(probe.value), 0) != sizeof(probe.value)) probe.value = 1;
    probe.value |= 1;
    pool.WriteProbe(probe.value);
  }
  PMPI_Bcast(&probe, sizeof(probe), MPI_BYTE, 0, comm);
  const bool same = probe.pool_id == pool.id() && pool.ReadProbe(probe.lease) == probe.value;
  if (!same) {
    why = fmt::format(
        "the pool {} here is not the memory rank 0 maps ({}): every host must map the same "
        "device or file (a shared CXL device, a file on memory all hosts share), not a copy",
        pool.path(), probe.pool_id == pool.id() ? "a copy of it" : "another pool");
  }
  return AllTrue(comm, same);
}

// The pool's mode: a pool is taken to be non-coherent unless the program says otherwise.
Coherence PoolMode(Coherence asked) {
  const char* v = std::getenv("TIERFLOW_RMA_COHERENCE");
  return v == nullptr || *v == '\0' ? Coherence::kNoncoherent : asked;
}

// Every rank's finding, agreed: the worst of them, with kRefused when the ranks do not all set
// TIERFLOW_RMA_POOL, do not agree on the pool's mode, or do not map the same memory. Each rank
// that found the problem says it (always for a refusal, with TIERFLOW_RMA_VERBOSE for a
// fallback). `mode`: the pool's coherence mode (PoolMode).
Verdict Decide(MPI_Comm comm, Coherence& mode, std::shared_ptr<Pool>& pool) {
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  std::string why;
  const Verdict mine = OpenHere(pool, why);
  mode = PoolMode(mode);
  const int m = static_cast<int>(mode);
  const int in[4] = {mine, -static_cast<int>(mine), m, -m};
  int out[4] = {};
  PMPI_Allreduce(in, out, 4, MPI_INT, MPI_MAX, comm);
  auto worst = static_cast<Verdict>(out[0]);
  if (-out[1] == kNoPool && worst != kNoPool) {
    if (mine != kNoPool && why.empty()) {
      why =
          "TIERFLOW_RMA_POOL is set on some ranks of the window only: set it on every rank, or "
          "on none";
    }
    worst = kRefused;
  } else if (worst == kUse && out[2] != -out[3]) {
    if (me == 0) {
      why =
          "the ranks disagree on the pool's coherence (TIERFLOW_RMA_COHERENCE is unset on some "
          "ranks, which makes a pool noncoherent): give every rank the same mode";
    }
    worst = kRefused;
  }
  if (worst == kUse && !SameMemory(comm, me, *pool, why)) worst = kRefused;
  if (!why.empty() && (worst == kRefused || Verbose())) {
    Say(me, (worst == kRefused ? "window refused: " : "window left out of the pool: ") + why);
  }
  return worst;
}

// Another process's allocation, held here, with whatever lines of an earlier allocation at the
// same addresses this CPU still caches dropped (a non-coherent pool).
Result<PoolRegion> AttachFresh(Pool& pool, const PoolRef& ref) {
  Result<PoolRegion> r = pool.Attach(ref);
  if (r.ok()) (void)Invalidate(r->data(), r->size());
  return r;
}

// Rank 0's part of ShareAllocation: the allocation, zero-filled and written back if asked.
Result<PoolRegion> AllocateFirst(Pool& pool, std::uint64_t bytes, bool zero) {
  Result<PoolRegion> r = pool.Allocate(bytes);
  if (r.ok() && zero) {
    std::memset(r->data(), 0, r->size());
    (void)WriteBack(r->data(), r->size());
  }
  return r;
}

// Rank 0's allocation of `bytes`, held by every rank (w.pooled's next element); kNoSpace with
// rank 0's reason when the pool lacks the room, kFallBack when some rank cannot hold it.
Verdict ShareAllocation(Window& w, std::uint64_t bytes, bool zero, std::string& why) {
  struct {
    PoolRef ref;
    int ok;
  } msg{};
  Result<PoolRegion> r = Status::NotFound("not allocated");
  if (w.me == 0) {
    r = AllocateFirst(*w.pool, bytes, zero);
    msg.ok = r.ok() ? 1 : 0;
    if (r.ok()) msg.ref = r->ref();
  }
  PMPI_Bcast(&msg, sizeof(msg), MPI_BYTE, 0, w.comm);
  if (msg.ok == 0) {
    if (w.me == 0) why = r.status().message();
    return kNoSpace;
  }
  if (w.me != 0) {
    r = AttachFresh(*w.pool, msg.ref);
    if (!r.ok()) why = r.status().message();
  }
  const bool all = AllTrue(w.comm, r.ok());
  if (r.ok()) w.pooled.push_back(std::move(*r));
  return all ? kUse : kFallBack;
}

// The window could not be made in the pool: nothing of it is left, and every rank fails.
int Unmade(std::unique_ptr<Window> w, Verdict v, const std::string& why) {
  if (!why.empty()) Say(w->me, "window refused: " + why);
  MPI_Comm comm = MPI_COMM_NULL;
  PMPI_Comm_dup(w->comm, &comm);
  DropWindow(std::move(w));
  const int code = v == kNoSpace ? MPI_ERR_NO_MEM : MPI_ERR_OTHER;
  PMPI_Comm_call_errhandler(comm, code);
  PMPI_Comm_free(&comm);
  return code;
}

// A window's state with its synchronisation words in the pool; nullptr with the error in `rc`.
std::unique_ptr<Window> NewPoolWindow(MPI_Comm comm, int flavor, int disp_unit, MPI_Aint size,
                                      Coherence mode, std::shared_ptr<Pool> pool, int& rc) {
  std::unique_ptr<Window> w = NewWindowState(comm, flavor, disp_unit, size, mode);
  w->pool = std::move(pool);
  std::string why;
  if (Verdict v = ShareAllocation(*w, ControlBytes(w->ranks, mode), true, why); v != kUse) {
    rc = Unmade(std::move(w), v, why);
    return nullptr;
  }
  UseControl(*w, w->pooled[0].data());
  if (Status s = w->sync->CheckInstructions(); !s.ok()) {
    rc = Unmade(std::move(w), kRefused,
                "a non-coherent pool cannot be maintained on this CPU: " + s.message());
    return nullptr;
  }
  w->sync->SetWakeInterval(1);
  PrepareOffload(w->me, w->ranks);  // before the ranks exchange their thresholds
  return w;
}

// Waits on the window end with an error once a rank stops renewing its lease on the pool.
void Watch(Window& w, const std::vector<Offer>& all) {
  std::vector<PoolLease> leases;
  for (const Offer& o : all) leases.push_back(o.lease);
  w.sync->SetPeerCheck([pool = w.pool, leases](int rank) { return !pool->Alive(leases[rank]); });
}

Offer PoolOffer(const Window& w, void* base, MPI_Aint size, int disp_unit) {
  Offer mine = OfferOf(base, size, disp_unit);
  mine.lease = w.pool->lease();
  return mine;
}

int PoolAllocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, Coherence mode,
                 std::shared_ptr<Pool> pool, void* baseptr, MPI_Win* win) {
  int rc = MPI_SUCCESS;
  std::unique_ptr<Window> w =
      NewPoolWindow(comm, MPI_WIN_FLAVOR_ALLOCATE, disp_unit, size, mode, std::move(pool), rc);
  if (w == nullptr) return rc;
  const std::vector<Offer> all = Exchange(*w, PoolOffer(*w, nullptr, size, disp_unit));
  std::vector<std::uint64_t> offset(w->ranks);
  std::uint64_t total = 0;
  if (!Layout(all, offset, total)) return TooLarge(std::move(w), comm, all);
  std::string why;
  if (Verdict v = ShareAllocation(*w, total, false, why); v != kUse) {
    return Unmade(std::move(w), v, why);
  }
  for (int r = 0; r < w->ranks; ++r) w->base.push_back(w->pooled[1].data() + offset[r]);
  Record(*w, all);
  Watch(*w, all);
  if (mode == Coherence::kSimulated) SimulateAllocated(*w);
  void* base = w->base[w->me];
  if (rc = Finish(std::move(w), base, info, comm, win); rc != MPI_SUCCESS) return rc;
  *static_cast<void**>(baseptr) = base;
  return MPI_SUCCESS;
}

// This rank's window memory into an allocation of its own: moved there in place, or (simulated)
// copied there as its public copy. kFallBack when the memory cannot move (not whole pages of
// private memory), kNoSpace when the pool lacks the room.
Verdict PlaceOwn(Window& w, void* base, MPI_Aint size, Offer& mine, std::string& why) {
  if (size == 0) return kUse;
  Result<PoolRegion> r = w.pool->Allocate(static_cast<std::uint64_t>(size));
  if (!r.ok()) {
    why = r.status().message();
    return kNoSpace;
  }
  const auto n = static_cast<std::size_t>(size);
  if (w.coherence == Coherence::kSimulated) {
    std::memcpy(r->data(), base, n);
  } else if (Status s = r->MapOver(base, n); !s.ok()) {
    why = fmt::format(
        "this rank's window memory cannot move into the pool ({}): use "
        "MPI_Win_allocate, or whole pages of private memory",
        s.message());
    return kFallBack;
  } else if (w.coherence == Coherence::kNoncoherent) {
    (void)WriteBack(base, n);  // the other hosts read it from the pool before any epoch
  }
  mine.pooled = r->ref();
  w.pooled.push_back(std::move(*r));
  return kUse;
}

// The other ranks' allocations held here; `pub`: every rank's public copy (simulated).
bool AttachOthers(Window& w, const std::vector<Offer>& all, void* base,
                  std::vector<std::byte*>& pub) {
  bool ok = true;
  w.base.assign(w.ranks, nullptr);
  pub.assign(w.ranks, nullptr);
  for (int r = 0; r < w.ranks && ok; ++r) {
    if (r == w.me) {
      w.base[r] = static_cast<std::byte*>(base);
      if (all[r].size > 0) pub[r] = w.pooled[1].data();
      continue;
    }
    if (all[r].size == 0) continue;
    Result<PoolRegion> region = AttachFresh(*w.pool, all[r].pooled);
    ok = region.ok();
    if (!ok) break;
    w.base[r] = pub[r] = region->data();
    w.pooled.push_back(std::move(*region));
  }
  return AllTrue(w.comm, ok);
}

// MPI_Win_create in the pool; `fell_back` (nothing made, no error) when some rank's memory
// cannot move there.
int PoolCreate(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
               Coherence mode, std::shared_ptr<Pool> pool, MPI_Win* win, bool& fell_back) {
  int rc = MPI_SUCCESS;
  std::unique_ptr<Window> w =
      NewPoolWindow(comm, MPI_WIN_FLAVOR_CREATE, disp_unit, size, mode, std::move(pool), rc);
  if (w == nullptr) return rc;
  Offer mine = PoolOffer(*w, base, size, disp_unit);
  std::string why;
  const int placed = PlaceOwn(*w, base, size, mine, why);
  int worst = placed;
  PMPI_Allreduce(&placed, &worst, 1, MPI_INT, MPI_MAX, w->comm);
  if (worst == kNoSpace) return Unmade(std::move(w), kNoSpace, placed == kNoSpace ? why : "");
  const std::vector<Offer> all = Exchange(*w, mine);
  std::vector<std::byte*> pub;
  fell_back = worst == kFallBack || !AttachOthers(*w, all, base, pub);
  if (fell_back) {
    if (Verbose() && !why.empty()) Say(w->me, "window left out of the pool: " + why);
    DropWindow(std::move(w));  // memory moved into the pool moves back
    return MPI_SUCCESS;
  }
  Record(*w, all);
  Watch(*w, all);
  if (mode == Coherence::kSimulated) StartSimulation(*w, pub);
  return Finish(std::move(w), base, info, comm, win);
}

// Decide, with a refusal reported through the communicator's error handler: MPI_SUCCESS with
// the verdict in `v`, or the error code. Where no rank asked for a pool, the ranks have nothing
// more to agree on about one: no pool, without a collective.
int Agreed(MPI_Comm comm, const SpanAgreement& agreed, Coherence& pooled,
           std::shared_ptr<Pool>& pool, Verdict& v) {
  pooled = agreed.mode;
  v = kNoPool;
  if (!agreed.pool_asked) return MPI_SUCCESS;
  v = Decide(comm, pooled, pool);
  if (v != kRefused) return MPI_SUCCESS;
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

}  // namespace

bool PoolAsked() {
  const char* path = std::getenv("TIERFLOW_RMA_POOL");
  return path != nullptr && *path != '\0';
}

int SpanAllocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                 const SpanAgreement& agreed, void* baseptr, MPI_Win* win) {
  std::shared_ptr<Pool> pool;
  Coherence pooled;
  Verdict v;
  if (int rc = Agreed(comm, agreed, pooled, pool, v); rc != MPI_SUCCESS) return rc;
  if (v == kUse) return PoolAllocate(size, disp_unit, info, comm, pooled, pool, baseptr, win);
  std::string why;
  if (!SplitAllocated(comm, agreed, why)) {
    PassThroughReason(comm, "MPI_Win_allocate", why);
    return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
  }
  if (Verbose()) {
    int me = 0;
    PMPI_Comm_rank(comm, &me);
    Say(me, "MPI_Win_allocate: " + why);
  }
  return HybridAllocate(size, disp_unit, info, comm, baseptr, win);
}

int SpanCreate(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
               const SpanAgreement& agreed, MPI_Win* win) {
  std::shared_ptr<Pool> pool;
  Coherence pooled;
  Verdict v;
  if (int rc = Agreed(comm, agreed, pooled, pool, v); rc != MPI_SUCCESS) return rc;
  if (v == kUse) {
    bool fell_back = false;
    const int rc = PoolCreate(base, size, disp_unit, info, comm, pooled, pool, win, fell_back);
    if (!fell_back) return rc;
  }
  return HybridCreate(base, size, disp_unit, info, comm, win);
}

}  // namespace tierflow::rma
