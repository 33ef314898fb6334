// SPDX-License-Identifier: Apache-2.0
#include "tierflow/cache.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <shared_mutex>

#include <fmt/format.h>

#include "cache/core.h"
#include "common/futex.h"
#include "tierflow/buffer.h"

namespace tierflow {

using cache::Core;
using detail::CacheEntryState;

// --- CacheEntry ------------------------------------------------------------------------------

CacheEntry::CacheEntry(CacheEntryState* state, const char* src, std::size_t size, void* hold)
    : state_(state), hold_(hold), src_(src), size_(size) {}

void CacheEntry::Release() {
  if (state_ == nullptr) return;
  auto* w = static_cast<cache::HoldTables::Word*>(hold_);
  if (w == nullptr || !cache::HoldTables::Release(w, state_)) state_->Unref();
  state_ = nullptr;
  hold_ = nullptr;
}

CacheEntry::CacheEntry(const CacheEntry& o) : state_(o.state_), src_(o.src_), size_(o.size_) {
  if (state_ == nullptr) return;
  auto* w = static_cast<cache::HoldTables::Word*>(o.hold_);
  if (w != nullptr && cache::HoldTables::Add(w, state_)) {
    hold_ = w;  // the copy shares the word: the count stays above 0 while either holds
  } else {
    state_->Ref();
  }
}
CacheEntry& CacheEntry::operator=(const CacheEntry& o) {
  if (this != &o) {
    CacheEntry copy(o);
    *this = std::move(copy);
  }
  return *this;
}
CacheEntry::CacheEntry(CacheEntry&& o) noexcept
    : state_(std::exchange(o.state_, nullptr)),
      hold_(std::exchange(o.hold_, nullptr)),
      src_(o.src_),
      size_(o.size_) {}
CacheEntry& CacheEntry::operator=(CacheEntry&& o) noexcept {
  if (this != &o) {
    Release();
    state_ = std::exchange(o.state_, nullptr);
    hold_ = std::exchange(o.hold_, nullptr);
    src_ = o.src_;
    size_ = o.size_;
  }
  return *this;
}
CacheEntry::~CacheEntry() { Release(); }

bool CacheEntry::cached() const { return state_ != nullptr && state_->ready(); }

const void* CacheEntry::data() const {
  if (!cached()) return src_;
  return state_->mem + (src_ - state_->src);
}

void* CacheEntry::mutable_data() const {
  if (!cached()) return nullptr;
  return state_->mem + (src_ - state_->src);
}

int CacheEntry::node() const { return state_ != nullptr ? state_->node->id : -1; }

bool CacheEntry::WeakWait() const {
  if (state_ == nullptr) return true;
  std::uint32_t p = state_->phase.load(std::memory_order_acquire);
  if (cache::IsFinal(p)) return true;
  // The fill's completion callback publishes the final phase before the handle reports done.
  return p == cache::kSubmitted && state_->fill.done();
}

Status CacheEntry::Wait() const {
  if (state_ == nullptr) {
    return Status::InvalidArgument(
        "empty cache entry: use the entry returned by OffloadCache::Access");
  }
  return state_->AwaitFill();
}

Status CacheEntry::MarkDirty() const {
  if (state_ == nullptr) return Status::InvalidArgument("empty cache entry: nothing to mark dirty");
  if (!cached()) {
    return Status::InvalidArgument(
        "MarkDirty of an entry that is not cached (its fill is running, failed or found no "
        "room): there is no cached copy to modify (mutable_data() is null) and data() is the "
        "source itself; nothing was marked");
  }
  return state_->core->MarkDirty(state_);
}

bool CacheEntry::dirty() const { return state_ != nullptr && state_->dirty(); }

Result<Handle> CacheEntry::WriteBack() const {
  if (state_ == nullptr) return Status::InvalidArgument("empty cache entry: nothing to write back");
  if (!cached()) {
    return Status::InvalidArgument(
        "write back of an entry that is not cached (filling, failed or no room): its data is "
        "the source already");
  }
  // The copy changes the source: other entries holding these bytes must go, as for a
  // modification (and one made without MarkDirty is recorded now).
  if (Status s = state_->core->MarkDirty(state_); !s.ok()) return s;
  return state_->core->SubmitWriteBack(state_);
}

// --- OffloadCache ----------------------------------------------------------------------------

struct [[gnu::visibility("hidden")]] OffloadCache::Impl {
  std::shared_ptr<Core> core;

  // A hit: the entry gains a holder and is marked used (only if the LRU clock moved, so that
  // hits on a hot entry do not keep writing its line). Either side of the lock held.
  CacheEntry Hit(CacheEntryState * e, const char* src, std::size_t size) {
    cache::HoldTables::Word* hold = core->holds.Acquire(cache::ThreadSlot(), e, e->hold_tables);
    if (hold == nullptr) e->Ref();
    const std::uint64_t now = core->tick.load(std::memory_order_relaxed);
    if (e->last_use.load(std::memory_order_relaxed) != now) {
      e->last_use.store(now, std::memory_order_relaxed);
    }
    cache::HitCounters& c = e->node->hit[cache::CounterSlot()];
    (e->ready() ? c.hits : c.late_hits).fetch_add(1, std::memory_order_relaxed);
    return CacheEntry(e, src, size, hold);
  }

  int DefaultPlacement(int src_node) const {
    const Topology& t = *core->topology;
    if (src_node < 0) src_node = t.nodes().front().os_index;
    Result<const NumaNode*> hbm = t.NearestOfKind(src_node, TierKind::kHbm);
    if (hbm.ok()) return (*hbm)->os_index;
    const NumaNode* n = t.node(src_node);
    if (n == nullptr) return src_node;
    return n->has_cpus() ? n->os_index : n->near_cpu_node;
  }

  // Where a miss goes: the node the placement picks, and the source's node (-1 when unknown;
  // asked of the kernel only when the placement or the copy policy uses it).
  Result<cache::NodeState*> Place(const void* src, std::size_t size, int* from) const {
    const CacheConfig& cfg = core->config;
    const bool need_from = !cfg.placement || cfg.copy_policy.kind == PolicyKind::kPushPull ||
                           cfg.copy_policy.kind == PolicyKind::kAuto;
    Result<int> src_node = need_from ? NodeOfAddress(src) : Result<int>(-1);
    *from = src_node.ok() ? *src_node : -1;
    const int to = cfg.placement ? cfg.placement(src, size, *from) : DefaultPlacement(*from);
    cache::NodeState* node = core->NodeOf(to);
    if (node == nullptr) {
      return Status::NotFound(
          fmt::format("the placement policy chose node {} for [{}, +{}), "
                      "which this system does not have",
                      to, src, size));
    }
    return node;
  }

  // Under the exclusive lock: a hit found meanwhile, or nothing in the way of a new entry
  // (a failed one is dropped to be retried; dirty ones overlapping the range are written back,
  // so that the new entry's fill reads their modifications).
  // `searched`: the index version at which the caller found nothing containing the range
  // (kNotSearched if it did not look), so that an unchanged index is not searched again.
  static constexpr std::uint64_t kNotSearched = ~std::uint64_t{0};
  Result<CacheEntryState*> ClearTheWayLocked(std::unique_lock<cache::ReaderLock> & held,
                                             std::uintptr_t p, std::size_t size,
                                             std::uint64_t searched) {
    for (;;) {
      const bool known_absent = core->index.version() == searched;
      searched = kNotSearched;  // the lock may be let go below: look again next time
      if (CacheEntryState* found = known_absent ? nullptr : core->index.FindContaining(p, size)) {
        if (found->phase.load(std::memory_order_acquire) != cache::kFailed) return found;
        core->RemoveLocked(found);
      }
      if (!core->dirty_used.load(std::memory_order_relaxed)) return nullptr;
      bool dirty = false;
      core->index.ForEachOverlapping(p, size,
                                     [&](CacheEntryState* e) { dirty = dirty || e->dirty(); });
      if (!dirty) return nullptr;
      if (Status s = core->CleanLocked(held, p, size, false); !s.ok()) {
        return Status(
            s.code(),
            fmt::format(
                "cache access [{}, +{}) overlaps a modified entry whose write-back failed (the "
                "range is not cached; the modification is kept): {}",
                reinterpret_cast<const void*>(p), size, s.message()));
      }
    }  // the lock may have been let go: look again
  }

  // A new entry for [src, src+size) on `node`: indexed with its memory, or outside the cache
  // reading its source when there is no room. Exclusive lock held.
  CacheEntryState* ClaimLocked(cache::NodeState & node, const char* src, std::size_t size) {
    CacheEntryState* e = core->entries.Take();
    if (e->core == nullptr) e->core = core;  // new; a recycled one holds it still
    Status why;
    const bool room = core->MakeRoomLocked(node, e, size, &why);
    e->node = &node;
    e->src = src;
    e->size = size;
    if (!room) {
      node.not_cached.fetch_add(1, std::memory_order_relaxed);
      e->refs.store(1, std::memory_order_relaxed);
      e->Finish(cache::kNoRoom, std::move(why));
      return e;
    }
    e->refs.store(3, std::memory_order_relaxed);  // the caller, the cache, the fill
    cache::Bump(node.misses, 1);
    // Misses advance the clock under the exclusive lock only: no atomic increment needed.
    const std::uint64_t now = core->tick.load(std::memory_order_relaxed) + 1;
    core->tick.store(now, std::memory_order_relaxed);
    e->last_use.store(now, std::memory_order_relaxed);
    core->IndexLocked(e);
    return e;
  }

  // The fill's copy, on the configured engines by the copy policy.
  Result<Handle> StartFill(CacheEntryState * e, int from) const {
    const CacheConfig& cfg = core->config;
    SubmitOptions so;
    so.callback = [e](const Completion& c) { FillCompleted(e, c.status); };
    const Operation op = Operation::Copy(e->mem, e->src, e->size);
    // One engine and the single policy: nothing to plan (the common configuration; planning
    // allocates).
    if (cfg.engines.size() == 1 && cfg.copy_policy.kind == PolicyKind::kSingle) {
      return cfg.engines.front()->Submit(op, std::move(so));
    }
    const int to = e->node->id;
    Result<std::vector<CopyPart>> plan = PlanFill(cfg.copy_policy, *core->topology, cfg.engines,
                                                  e->src, from >= 0 ? from : to, to, e->size);
    if (!plan.ok()) return plan.status();
    return plan->size() == 1 ? plan->front().engine->Submit(op, std::move(so))
                             : SubmitParts(op, *plan, std::move(so));
  }

  // Submits the fill of a claimed entry (outside the lock). Until the handle is published,
  // waiters sleep on the phase word.
  void SubmitFill(CacheEntryState * e, int from) {
    core->CopyStarted();
    Result<Handle> fill = StartFill(e, from);
    if (!fill.ok()) {
      e->node->failed_fills.fetch_add(1, std::memory_order_relaxed);
      e->Finish(cache::kFailed, Status(fill.status().code(),
                                       "cache fill could not be submitted, reading the source: " +
                                           fill.status().message()));
      e->Unref();  // the fill's reference
      core->CopyDone();
      return;
    }
    e->fill = std::move(*fill);
    (void)e->MarkSubmitted();  // false: the fill completed inside Submit, the phase is final
  }

  static void FillCompleted(CacheEntryState * e, const Status& status) {
    if (status.ok()) {
      e->node->bytes_filled.fetch_add(e->size, std::memory_order_relaxed);
      e->Finish(cache::kReady, Status::Ok());
    } else {
      e->node->failed_fills.fetch_add(1, std::memory_order_relaxed);
      e->Finish(cache::kFailed, Status(status.code(), "cache fill failed, reading the source: " +
                                                          status.message()));
    }
    // The entry may go with its reference, and with it its hold on the core; the cache
    // cannot (its destructor waits for CopyDone to return), so a plain pointer keeps no line
    // that the misses write moving between cores.
    Core* core = e->core.get();
    e->Unref();
    core->CopyDone();
  }
};

namespace {

// The one check of a CacheConfig's own values and of the topology it is given: every refusal
// of Create that needs no node state.
Status SanitizeConfig(const Topology& topology, const CacheConfig& config) {
  if (config.engines.empty()) {
    return Status::InvalidArgument(
        "the cache needs at least one engine to fill entries (CacheConfig::engines)");
  }
  for (Engine* e : config.engines) {
    if (e == nullptr) return Status::InvalidArgument("CacheConfig::engines holds a null engine");
  }
  if (static_cast<bool>(config.allocator.allocate) != static_cast<bool>(config.allocator.free)) {
    return Status::InvalidArgument(
        "CacheAllocator needs both allocate and free (or neither, for the "
        "default prefaulted arena)");
  }
  if (config.reserve_capacity && config.allocator.allocate) {
    return Status::InvalidArgument(
        "reserve_capacity reserves the default arena's memory; with your own "
        "CacheAllocator, reserve in the allocator instead");
  }
  if (config.arena_chunk < (std::size_t{1} << 20)) {
    return Status::InvalidArgument("arena_chunk below 1 MiB: use at least 1 MiB");
  }
  if (!topology.is_this_system()) {
    return Status::InvalidArgument(
        "the cache allocates memory: give it the topology of this system "
        "(Topology::Discover), not one read from a file");
  }
  return CheckCopyPolicy(config.copy_policy);
}

}  // namespace

Result<std::unique_ptr<OffloadCache>> OffloadCache::Create(const Topology& topology,
                                                           CacheConfig config) {
  if (Status s = SanitizeConfig(topology, config); !s.ok()) return s;
  auto core = std::make_shared<Core>();
  core->topology = &topology;
  int max_id = 0;
  for (const NumaNode& n : topology.nodes()) max_id = std::max(max_id, n.os_index);
  core->nodes.resize(static_cast<std::size_t>(max_id) + 1);
  for (const NumaNode& n : topology.nodes()) {
    auto node = std::make_unique<cache::NodeState>();
    node->id = n.os_index;
    if (!config.allocator.allocate) {
      node->arena = std::make_unique<NodeArena>(n.os_index, config.arena_chunk);
    }
    core->nodes[n.os_index] = std::move(node);
  }
  for (const auto& [id, bytes] : config.capacity) {
    cache::NodeState* node = core->NodeOf(id);
    if (node == nullptr) {
      return Status::NotFound(
          fmt::format("cache capacity given for node {}, which this system "
                      "does not have",
                      id));
    }
    node->capacity.store(bytes);
    node->capacity_known.store(true);
    if (config.reserve_capacity && node->arena != nullptr) {
      if (Status s = node->arena->Reserve(bytes); !s.ok()) {
        return Status(s.code(),
                      fmt::format("reserving the cache capacity of node {} ({} bytes): {}", id,
                                  bytes, s.message()));
      }
    }
  }
  core->config = std::move(config);
  auto impl = std::make_unique<Impl>();
  impl->core = std::move(core);
  return std::unique_ptr<OffloadCache>(new OffloadCache(std::move(impl)));
}

OffloadCache::OffloadCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

OffloadCache::~OffloadCache() {
  Core& core = *impl_->core;
  core.WaitForCopiesToLeave();
  std::unique_lock held(core.lock);
  // Best effort: a write-back that fails here cannot be reported (Clear(kWriteBack) first).
  if (core.dirty_used.load(std::memory_order_relaxed)) (void)core.CleanLocked(held, 0, 0, true);
  for (CacheEntryState* e : core.TargetsLocked(0, 0, true)) core.RemoveLocked(e);
  held.unlock();
  core.entries.Close();  // the pooled entries hold the core: let them go
}

Result<CacheEntry> OffloadCache::Access(const void* src, std::size_t size) {
  return Access(src, size, nullptr);
}

Result<CacheEntry> OffloadCache::Access(const void* src, std::size_t size, bool* missed) {
  Impl& m = *impl_;
  Core& core = *m.core;
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  if (src == nullptr) return Status::InvalidArgument("cache access of a null source");
  if (size == 0) return Status::InvalidArgument("cache access of 0 bytes: nothing to cache");
  if (size > UINTPTR_MAX - p) {
    return Status::InvalidArgument(
        fmt::format("cache access [{}, +{}) wraps around the address space", src, size));
  }
  const char* s = static_cast<const char*>(src);
  std::uint64_t searched = Impl::kNotSearched;
  {
    std::shared_lock held(core.lock);
    CacheEntryState* e = core.index.FindContaining(p, size);
    if (e != nullptr && e->phase.load(std::memory_order_acquire) != cache::kFailed) {
      return m.Hit(e, s, size);
    }
    if (e == nullptr) searched = core.index.version();
  }
  int from = -1;
  Result<cache::NodeState*> node = m.Place(src, size, &from);
  if (!node.ok()) return node.status();
  CacheEntryState* e = nullptr;
  {
    std::unique_lock held(core.lock);
    Result<CacheEntryState*> found = m.ClearTheWayLocked(held, p, size, searched);
    if (!found.ok()) return found.status();
    if (*found != nullptr) return m.Hit(*found, s, size);
    e = m.ClaimLocked(**node, s, size);
  }
  if (e->phase.load(std::memory_order_relaxed) == cache::kNoRoom) return CacheEntry(e, s, size);
  if (missed != nullptr) *missed = true;
  m.SubmitFill(e, from);
  return CacheEntry(e, s, size);
}

CacheEntry OffloadCache::WeakAccess(const void* src, std::size_t size) {
  Impl& m = *impl_;
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  if (src == nullptr || size == 0 || size > UINTPTR_MAX - p) return {};
  std::shared_lock held(m.core->lock);
  CacheEntryState* e = m.core->index.FindContaining(p, size);
  if (e == nullptr || e->phase.load(std::memory_order_acquire) == cache::kFailed) return {};
  return m.Hit(e, static_cast<const char*>(src), size);
}

Result<std::size_t> OffloadCache::Prefetch(
    std::span<const std::pair<const void*, std::size_t>> ranges) {
  std::size_t submitted = 0;
  for (const auto& [src, size] : ranges) {
    bool missed = false;
    Result<CacheEntry> e = Access(src, size, &missed);
    if (!e.ok()) return e.status();
    submitted += missed ? 1 : 0;
  }
  return submitted;
}

Result<std::size_t> OffloadCache::Invalidate(const void* src, std::size_t size,
                                             DirtyEntries dirty) {
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  if (src == nullptr) return Status::InvalidArgument("invalidate of a null source");
  if (size > UINTPTR_MAX - p)
    return Status::InvalidArgument("invalidate range wraps around the address space");
  return impl_->core->Remove(p, size, /*all=*/false, dirty);
}

std::size_t OffloadCache::DropUnused() {
  Core& core = *impl_->core;
  std::lock_guard held(core.lock);
  std::vector<CacheEntryState*> idle = core.TargetsLocked(0, 0, true);
  std::erase_if(idle, [&core](CacheEntryState* e) {
    return e->refs.load(std::memory_order_acquire) != 1 ||
           !cache::IsFinal(e->phase.load(std::memory_order_acquire)) || e->dirty() ||
           core.holds.Held(e, e->hold_tables);
  });
  for (CacheEntryState* e : idle) core.RemoveLocked(e);
  return idle.size();
}

Result<std::size_t> OffloadCache::Clear(DirtyEntries dirty) {
  return impl_->core->Remove(0, 0, /*all=*/true, dirty);
}

void OffloadCache::WaitForFills() const { impl_->core->WaitForCopies(); }

std::vector<CacheNodeStats> OffloadCache::stats() const {
  std::vector<CacheNodeStats> out;
  const Core& core = *impl_->core;
  for (const auto& n : core.nodes) {
    if (!n) continue;
    CacheNodeStats s;
    s.node = n->id;
    if (const NumaNode* t = core.topology->node(n->id)) s.tier = t->kind;
    for (const cache::HitCounters& c : n->hit) {
      s.hits += c.hits.load(std::memory_order_relaxed);
      s.late_hits += c.late_hits.load(std::memory_order_relaxed);
    }
    s.misses = n->misses.load(std::memory_order_relaxed);
    s.not_cached = n->not_cached.load(std::memory_order_relaxed);
    s.failed_fills = n->failed_fills.load(std::memory_order_relaxed);
    s.evictions = n->evictions.load(std::memory_order_relaxed);
    s.invalidations = n->invalidations.load(std::memory_order_relaxed);
    s.write_backs = n->write_backs.load(std::memory_order_relaxed);
    s.bytes_filled = n->bytes_filled.load(std::memory_order_relaxed);
    s.bytes_used = n->used.load(std::memory_order_relaxed);
    s.peak_bytes = n->peak.load(std::memory_order_relaxed);
    s.capacity = n->capacity_known.load(std::memory_order_relaxed) ? n->capacity.load() : 0;
    s.entries = n->entries.load(std::memory_order_relaxed);
    out.push_back(s);
  }
  return out;
}

void OffloadCache::ResetStats() {
  std::lock_guard held(impl_->core->lock);  // misses change under it (cache::Bump)
  for (const auto& n : impl_->core->nodes) {
    if (!n) continue;
    for (cache::HitCounters& c : n->hit) {
      c.hits.store(0, std::memory_order_relaxed);
      c.late_hits.store(0, std::memory_order_relaxed);
    }
    for (auto* counter : {&n->misses, &n->not_cached, &n->failed_fills, &n->evictions,
                          &n->invalidations, &n->write_backs, &n->bytes_filled}) {
      counter->store(0, std::memory_order_relaxed);
    }
    n->peak.store(n->used.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
}

}  // namespace tierflow
