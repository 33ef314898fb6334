#include "tierflow/cache.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include <fmt/format.h>

#include "cache/address_index.h"
#include "cache/arena.h"
#include "cache/hold_table.h"
#include "cache/reader_lock.h"
#include "common/futex.h"
#include "tierflow/buffer.h"

namespace tierflow {
namespace {

// Entry phases, in a futex word. Claimed: in the cache, fill not yet submitted; submitted: the
// fill handle is set; the last three are final.
enum Phase : std::uint32_t { kClaimed, kSubmitted, kReady, kFailed, kNoRoom };
bool IsFinal(std::uint32_t p) { return p >= kReady; }

// Hit counters per thread slot: two threads hitting the cache must not share a counter line.
constexpr std::size_t kCounterSlots = 16;
struct alignas(64) HitCounters {
  std::atomic<std::uint64_t> hits{0}, late_hits{0};
};
std::size_t CounterSlot() { return cache::ThreadSlot() % kCounterSlots; }

}  // namespace

// What entries share with the cache, kept alive by both: an entry may outlive its cache.
struct CacheShared {
  const Topology* topology = nullptr;
  CacheConfig config;
  struct Node {
    int id = -1;
    std::atomic<std::size_t> capacity{0};
    std::atomic<bool> capacity_known{false};  // set on first use when not configured
    std::unique_ptr<cache::NodeArena> arena;  // default allocator
    std::atomic<std::uint64_t> used{0}, entries{0}, peak{0};
    std::atomic<std::uint64_t> misses{0}, not_cached{0}, failed_fills{0}, evictions{0},
        invalidations{0}, write_backs{0}, bytes_filled{0};
    HitCounters hit[kCounterSlots];
  };
  std::vector<std::unique_ptr<Node>> nodes;  // indexed by OS node index (null where none)
  cache::HoldTables holds;                   // hits' holds on entries, per thread slot
  // Fills submitted and not finished, entries in the cache or not (a futex word: WaitForFills
  // sleeps until it is 0).
  std::atomic<std::uint32_t> fills_in_flight{0};
  void FillDone() {
    if (fills_in_flight.fetch_sub(1, std::memory_order_acq_rel) == 1) FutexWake(&fills_in_flight, INT_MAX);
  }

  Node* NodeOf(int id) const {
    return id >= 0 && static_cast<std::size_t>(id) < nodes.size() ? nodes[id].get() : nullptr;
  }
  void* Allocate(Node& n, std::size_t size, Status* error) {
    if (config.allocator.allocate) {
      void* p = config.allocator.allocate(size, n.id);
      if (p == nullptr) *error = Status::OutOfMemory("the cache's allocator returned null");
      return p;
    }
    return n.arena->Allocate(size, error);
  }
  void Free(Node& n, void* p, std::size_t size) {
    if (config.allocator.free) {
      config.allocator.free(p, size, n.id);
    } else {
      n.arena->Free(p, size);
    }
  }
};

namespace detail {

struct alignas(64) CacheEntryState {
  // Read by every hit; written once per phase change. Kept off the reference count's line,
  // which hits on other cores write.
  std::atomic<std::uint32_t> phase{kClaimed};
  std::atomic<bool> dirty{false};
  std::atomic<std::uint64_t> last_use{0};
  std::shared_ptr<CacheShared> shared;
  CacheShared::Node* node = nullptr;
  const char* src = nullptr;
  std::size_t size = 0;
  std::size_t charged = 0;  // bytes counted against the node's capacity
  char* mem = nullptr;
  Handle fill;              // set before phase becomes kSubmitted, never changed afterwards
  Status status;            // written before a final phase is published
  // CacheEntry holders + the cache + a fill in flight.
  alignas(64) std::atomic<std::uint32_t> refs{0};

  void Ref() { refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (mem != nullptr) {
      shared->Free(*node, mem, size);
      node->used.fetch_sub(charged, std::memory_order_relaxed);
    }
    delete this;
  }
  // Publishes a final phase (status first) and wakes every waiter.
  void Finish(Phase p, Status s) {
    status = std::move(s);
    phase.store(p, std::memory_order_release);
    FutexWake(&phase, INT_MAX);
  }
};

}  // namespace detail

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
    : state_(std::exchange(o.state_, nullptr)), hold_(std::exchange(o.hold_, nullptr)),
      src_(o.src_), size_(o.size_) {}
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

bool CacheEntry::cached() const {
  return state_ != nullptr && state_->phase.load(std::memory_order_acquire) == kReady;
}

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
  if (IsFinal(p)) return true;
  // The fill's completion callback publishes the final phase before the handle reports done.
  return p == kSubmitted && state_->fill.done();
}

Status CacheEntry::Wait() const {
  if (state_ == nullptr) {
    return Status::Invalid("empty cache entry: use the entry returned by OffloadCache::Access");
  }
  for (;;) {
    const std::uint32_t p = state_->phase.load(std::memory_order_acquire);
    if (IsFinal(p)) return state_->status;
    if (p == kSubmitted) {
      // Every waiter waits on the fill itself: nobody depends on another thread (the
      // submitter included) to wait first. The callback sets the final phase before the
      // handle reports completion.
      (void)state_->fill.Wait(state_->shared->config.wait_mode);
      continue;
    }
    FutexWait(&state_->phase, kClaimed);  // until the submitter publishes the fill
  }
}

void CacheEntry::MarkDirty() const {
  if (state_ != nullptr) state_->dirty.store(true, std::memory_order_release);
}
bool CacheEntry::dirty() const {
  return state_ != nullptr && state_->dirty.load(std::memory_order_acquire);
}

namespace {

Result<Handle> SubmitWriteBack(CacheEntryState* e) {
  CacheShared& sh = *e->shared;
  Result<int> src_node = NodeOfAddress(e->src);
  const int to = src_node.ok() ? *src_node : e->node->id;
  Result<std::vector<CopyPart>> plan =
      PlanCopy(sh.config.copy_policy, *sh.topology, sh.config.engines, e->node->id, to, e->size);
  if (!plan.ok()) return plan.status();
  SubmitOptions so;
  e->Ref();
  so.callback = [e](const Completion& c) {
    if (c.status.ok()) {
      e->dirty.store(false, std::memory_order_release);
      e->node->write_backs.fetch_add(1, std::memory_order_relaxed);
    }
    e->Unref();
  };
  Result<Handle> h = SubmitParts(Operation::Copy(const_cast<char*>(e->src), e->mem, e->size),
                                 *plan, std::move(so));
  if (!h.ok()) e->Unref();  // the callback will not run
  return h;
}

}  // namespace

Result<Handle> CacheEntry::WriteBack() const {
  if (state_ == nullptr) return Status::Invalid("empty cache entry: nothing to write back");
  if (!cached()) {
    return Status::Invalid(
        "write back of an entry that is not cached (filling, failed or no room): its data is "
        "the source already");
  }
  return SubmitWriteBack(state_);
}

// --- OffloadCache ----------------------------------------------------------------------------

struct OffloadCache::Impl {
  std::shared_ptr<CacheShared> shared;
  // Entries by source start address. Readers (hits) share it; inserting and removing is
  // exclusive. max_size bounds the backward search for entries overlapping a range.
  mutable cache::ReaderLock lock;
  std::map<std::uintptr_t, CacheEntryState*> entries;
  cache::AddressIndex<CacheEntryState> by_start;  // the same entries, by exact start
  // The same entries by size class (class c: sizes in [2^c, 2^(c+1))): an entry of class c
  // that contains p starts within 2^(c+1) bytes below p, so a containment search walks back
  // only over entries of that class in that window, not over every smaller entry in between.
  static constexpr int kClasses = 64;
  std::array<std::map<std::uintptr_t, CacheEntryState*>, kClasses> by_class;
  std::uint64_t classes_used = 0;  // bit c: by_class[c] is not empty
  std::size_t max_size = 0;
  std::atomic<std::uint64_t> tick{1};  // advanced on every miss: the LRU clock

  static int ClassOf(std::size_t size) { return 63 - __builtin_clzll(size); }

  // The entry containing [p, p+n), or null. Caller holds the lock (either mode).
  CacheEntryState* FindContaining(std::uintptr_t p, std::size_t n) const {
    if (CacheEntryState* e = by_start.Find(p); e != nullptr && e->size >= n) return e;
    for (std::uint64_t bits = classes_used; bits != 0; bits &= bits - 1) {
      const int c = __builtin_ctzll(bits);
      if (c < 63 && (std::size_t{2} << c) <= n) continue;  // too small to contain n bytes
      const std::uintptr_t window = c < 63 ? std::uintptr_t{2} << c : UINTPTR_MAX;
      const auto& m = by_class[c];
      auto it = m.upper_bound(p);
      while (it != m.begin()) {
        --it;
        if (p - it->first >= window) break;
        if (it->first + it->second->size >= p + n) return it->second;
      }
    }
    return nullptr;
  }
  void IndexLocked(std::uintptr_t p, CacheEntryState* e) {
    entries.emplace(p, e);
    by_start.Insert(p, e);
    const int c = ClassOf(e->size);
    by_class[c].emplace(p, e);
    classes_used |= std::uint64_t{1} << c;
    max_size = std::max(max_size, e->size);
  }

  // Removes an entry from the map (exclusive lock held) and drops the cache's reference.
  void RemoveLocked(std::map<std::uintptr_t, CacheEntryState*>::iterator it) {
    CacheEntryState* e = it->second;
    by_start.Erase(it->first);
    const int c = ClassOf(e->size);
    by_class[c].erase(it->first);
    if (by_class[c].empty()) classes_used &= ~(std::uint64_t{1} << c);
    entries.erase(it);
    e->node->entries.fetch_sub(1, std::memory_order_relaxed);
    // Holders in the per-thread tables now keep the entry through its shared count.
    shared->holds.Detach(e, [e](long n) {
      if (n >= 0) {
        e->refs.fetch_add(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
      } else {
        e->refs.fetch_sub(static_cast<std::uint32_t>(-n), std::memory_order_relaxed);
      }
    });
    e->Unref();
  }

  // Evicts unreferenced, finished, clean entries of `node`, least recently used first, until
  // `need` more bytes fit in its capacity (or, with `one_more`, at least one entry). Exclusive
  // lock held. Returns whether anything was evicted.
  bool EvictLocked(CacheShared::Node& node, std::size_t need, bool one_more) {
    std::vector<std::pair<std::uint64_t, std::uintptr_t>> victims;
    for (const auto& [key, e] : entries) {
      if (e->node != &node || e->refs.load(std::memory_order_acquire) != 1 ||
          !IsFinal(e->phase.load(std::memory_order_acquire)) ||
          e->dirty.load(std::memory_order_acquire)) {
        continue;
      }
      victims.emplace_back(e->last_use.load(std::memory_order_relaxed), key);
    }
    std::sort(victims.begin(), victims.end());
    bool any = false;
    for (const auto& [use, key] : victims) {
      const bool fits = node.used.load(std::memory_order_relaxed) + need <=
                        node.capacity.load(std::memory_order_relaxed);
      if (fits && (!one_more || any)) break;
      auto it = entries.find(key);
      if (shared->holds.Held(it->second)) continue;  // a hit holds it through its table
      RemoveLocked(it);
      node.evictions.fetch_add(1, std::memory_order_relaxed);
      any = true;
    }
    return any;
  }

  // Room for `size` bytes on `node`, evicting as needed: the memory, or null and why not.
  char* MakeRoomLocked(CacheShared::Node& node, std::size_t size, std::size_t charged,
                       Status* why) {
    if (!node.capacity_known.load(std::memory_order_relaxed)) {
      Result<NodeMemory> m = QueryNodeMemory(node.id);
      node.capacity.store(m.ok() ? m->free_bytes / 2 : 0, std::memory_order_relaxed);
      node.capacity_known.store(true, std::memory_order_relaxed);
    }
    const std::size_t capacity = node.capacity.load(std::memory_order_relaxed);
    if (charged > capacity) {
      *why = Status::Unsupported(fmt::format(
          "not cached: {} bytes exceed the cache's capacity on node {} ({} bytes)", size,
          node.id, capacity));
      return nullptr;
    }
    if (node.used.load(std::memory_order_relaxed) + charged > capacity) {
      EvictLocked(node, charged, false);
    }
    for (;;) {
      if (node.used.load(std::memory_order_relaxed) + charged <= capacity) {
        Status error;
        void* p = shared->Allocate(node, size, &error);
        if (p != nullptr) {
          const std::uint64_t now = node.used.fetch_add(charged, std::memory_order_relaxed) + charged;
          if (now > node.peak.load(std::memory_order_relaxed)) node.peak.store(now, std::memory_order_relaxed);
          return static_cast<char*>(p);
        }
        *why = error;
      } else {
        *why = Status::Unsupported(fmt::format(
            "not cached: node {} holds {} of its {} bytes in entries that are in use, dirty "
            "or still filling", node.id, node.used.load(), capacity));
      }
      // Fragmented, or the node itself is short of memory: evict one more and try again.
      if (!EvictLocked(node, charged, true)) {
        *why = Status(why->code(), fmt::format("not cached: {}", why->message()));
        return nullptr;
      }
    }
  }

  // A finished, clean or chosen entry may go; writes back dirty ones when asked. Collects the
  // entries overlapping [p, p+n) (n 0: starting at p). Exclusive lock held.
  std::vector<std::uintptr_t> OverlappingLocked(std::uintptr_t p, std::size_t n) const {
    std::vector<std::uintptr_t> keys;
    if (n == 0) {
      if (entries.count(p) != 0) keys.push_back(p);
      return keys;
    }
    auto it = entries.lower_bound(p > max_size ? p - max_size : 0);
    for (; it != entries.end() && it->first < p + n; ++it) {
      if (it->first + it->second->size > p) keys.push_back(it->first);
    }
    return keys;
  }

  // The keys Remove works on: every entry, or those overlapping [p, p+n). Lock held.
  std::vector<std::uintptr_t> TargetsLocked(std::uintptr_t p, std::size_t n, bool all) const {
    if (!all) return OverlappingLocked(p, n);
    std::vector<std::uintptr_t> keys;
    for (const auto& kv : entries) keys.push_back(kv.first);
    return keys;
  }

  Result<std::size_t> Remove(std::uintptr_t p, std::size_t n, bool all, DirtyEntries dirty) {
    // Dirty entries first, outside the lock: a write-back is a copy, and hits must go on.
    std::vector<CacheEntryState*> dirty_entries;  // each with a reference taken
    {
      std::lock_guard guard(lock);
      for (std::uintptr_t k : TargetsLocked(p, n, all)) {
        CacheEntryState* e = entries.at(k);
        if (!e->dirty.load(std::memory_order_acquire)) continue;
        if (dirty == DirtyEntries::kRefuse) {
          return Status::Invalid(fmt::format(
              "the cached copy of [{}, +{}) is dirty (modified, not written back): invalidate "
              "with DirtyEntries::kWriteBack to keep the changes or kDiscard to drop them",
              static_cast<const void*>(e->src), e->size));
        }
        e->Ref();
        dirty_entries.push_back(e);
      }
    }
    Status failed;
    if (dirty == DirtyEntries::kWriteBack) {
      for (CacheEntryState* e : dirty_entries) {
        Result<Handle> h = SubmitWriteBack(e);
        Status s = h.ok() ? h->Wait() : h.status();
        if (!s.ok() && failed.ok()) failed = s;
      }
    }
    for (CacheEntryState* e : dirty_entries) e->Unref();
    if (!failed.ok()) {
      return Status(failed.code(), "writing a dirty entry back failed; nothing was invalidated: " +
                                       failed.message());
    }
    std::lock_guard guard(lock);
    const std::vector<std::uintptr_t> keys = TargetsLocked(p, n, all);
    for (std::uintptr_t k : keys) {
      auto it = entries.find(k);
      it->second->node->invalidations.fetch_add(1, std::memory_order_relaxed);
      RemoveLocked(it);
    }
    return keys.size();
  }

  // A hit: the entry gains a holder and is marked used (only if the LRU clock moved, so that
  // hits on a hot entry do not keep writing its line).
  CacheEntry Hit(CacheEntryState* e, const char* src, std::size_t size) {
    cache::HoldTables::Word* hold = shared->holds.Acquire(cache::ThreadSlot(), e);
    if (hold == nullptr) e->Ref();
    const std::uint64_t now = tick.load(std::memory_order_relaxed);
    if (e->last_use.load(std::memory_order_relaxed) != now) {
      e->last_use.store(now, std::memory_order_relaxed);
    }
    HitCounters& c = e->node->hit[CounterSlot()];
    (e->phase.load(std::memory_order_acquire) == kReady ? c.hits : c.late_hits)
        .fetch_add(1, std::memory_order_relaxed);
    return CacheEntry(e, src, size, hold);
  }

  int DefaultPlacement(int src_node) const {
    const Topology& t = *shared->topology;
    if (src_node < 0) src_node = t.nodes().front().os_index;
    Result<const NumaNode*> hbm = t.NearestOfKind(src_node, TierKind::kHbm);
    if (hbm.ok()) return (*hbm)->os_index;
    const NumaNode* n = t.node(src_node);
    if (n == nullptr) return src_node;
    return n->has_cpus() ? n->os_index : n->near_cpu_node;
  }
};

Result<std::unique_ptr<OffloadCache>> OffloadCache::Create(const Topology& topology,
                                                           CacheConfig config) {
  if (config.engines.empty()) {
    return Status::Invalid("the cache needs at least one engine to fill entries (CacheConfig::engines)");
  }
  for (Engine* e : config.engines) {
    if (e == nullptr) return Status::Invalid("CacheConfig::engines holds a null engine");
  }
  if (static_cast<bool>(config.allocator.allocate) != static_cast<bool>(config.allocator.free)) {
    return Status::Invalid("CacheAllocator needs both allocate and free (or neither, for the "
                           "default prefaulted arena)");
  }
  if (config.reserve_capacity && config.allocator.allocate) {
    return Status::Invalid("reserve_capacity reserves the default arena's memory; with your own "
                           "CacheAllocator, reserve in the allocator instead");
  }
  if (config.arena_chunk < (std::size_t{1} << 20)) {
    return Status::Invalid("arena_chunk below 1 MiB: use at least 1 MiB");
  }
  if (!topology.is_this_system()) {
    return Status::Invalid("the cache allocates memory: give it the topology of this system "
                           "(Topology::Discover), not one read from a file");
  }
  auto shared = std::make_shared<CacheShared>();
  shared->topology = &topology;
  int max_id = 0;
  for (const NumaNode& n : topology.nodes()) max_id = std::max(max_id, n.os_index);
  shared->nodes.resize(static_cast<std::size_t>(max_id) + 1);
  for (const NumaNode& n : topology.nodes()) {
    auto node = std::make_unique<CacheShared::Node>();
    node->id = n.os_index;
    if (!config.allocator.allocate) {
      node->arena = std::make_unique<cache::NodeArena>(n.os_index, config.arena_chunk);
    }
    shared->nodes[n.os_index] = std::move(node);
  }
  for (const auto& [id, bytes] : config.capacity) {
    CacheShared::Node* node = shared->NodeOf(id);
    if (node == nullptr) {
      return Status::NotFound(fmt::format("cache capacity given for node {}, which this system "
                                          "does not have", id));
    }
    node->capacity.store(bytes);
    node->capacity_known.store(true);
    if (config.reserve_capacity && node->arena != nullptr) {
      if (Status s = node->arena->Reserve(bytes); !s.ok()) {
        return Status(s.code(), fmt::format("reserving the cache capacity of node {} ({} bytes): {}",
                                            id, bytes, s.message()));
      }
    }
  }
  shared->config = std::move(config);
  auto impl = std::make_unique<Impl>();
  impl->shared = std::move(shared);
  return std::unique_ptr<OffloadCache>(new OffloadCache(std::move(impl)));
}

OffloadCache::OffloadCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

OffloadCache::~OffloadCache() {
  WaitForFills();
  std::lock_guard lock(impl_->lock);
  while (!impl_->entries.empty()) impl_->RemoveLocked(impl_->entries.begin());
}

Result<CacheEntry> OffloadCache::Access(const void* src, std::size_t size) {
  return Access(src, size, nullptr);
}

Result<CacheEntry> OffloadCache::Access(const void* src, std::size_t size, bool* missed) {
  Impl& m = *impl_;
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  if (src == nullptr) return Status::Invalid("cache access of a null source");
  if (size == 0) return Status::Invalid("cache access of 0 bytes: nothing to cache");
  if (size > UINTPTR_MAX - p) {
    return Status::Invalid(fmt::format("cache access [{}, +{}) wraps around the address space",
                                       src, size));
  }
  const char* s = static_cast<const char*>(src);
  {
    std::shared_lock lock(m.lock);
    CacheEntryState* e = m.FindContaining(p, size);
    if (e != nullptr && e->phase.load(std::memory_order_acquire) != kFailed) return m.Hit(e, s, size);
  }
  // A miss: where to, and from where (outside the lock: a system call, a user function). The
  // source's node is asked of the kernel only when the placement or the copy policy uses it.
  const CacheConfig& cfg = m.shared->config;
  const bool need_from = !cfg.placement || cfg.copy_policy.kind == PolicyKind::kPushPull ||
                         cfg.copy_policy.kind == PolicyKind::kAuto;
  Result<int> src_node = need_from ? NodeOfAddress(src) : Result<int>(-1);
  const int from = src_node.ok() ? *src_node : -1;
  const int to = m.shared->config.placement ? m.shared->config.placement(src, size, from)
                                            : m.DefaultPlacement(from);
  CacheShared::Node* node = m.shared->NodeOf(to);
  if (node == nullptr) {
    return Status::NotFound(fmt::format("the placement policy chose node {} for [{}, +{}), "
                                        "which this system does not have", to, src, size));
  }
  const std::size_t charged = cache::NodeArena::Round(size);
  CacheEntryState* e = nullptr;
  {
    std::lock_guard lock(m.lock);
    if (CacheEntryState* found = m.FindContaining(p, size)) {
      if (found->phase.load(std::memory_order_acquire) != kFailed) return m.Hit(found, s, size);
      m.RemoveLocked(m.entries.find(reinterpret_cast<std::uintptr_t>(found->src)));  // retry it
    }
    Status why;
    char* mem = m.MakeRoomLocked(*node, size, charged, &why);
    e = new CacheEntryState;
    e->shared = m.shared;
    e->node = node;
    e->src = s;
    e->size = size;
    if (mem == nullptr) {
      // Not cached: an entry outside the cache that reads from the source.
      node->not_cached.fetch_add(1, std::memory_order_relaxed);
      e->refs.store(1, std::memory_order_relaxed);
      e->Finish(kNoRoom, std::move(why));
      return CacheEntry(e, s, size);
    }
    e->mem = mem;
    e->charged = charged;
    e->refs.store(3, std::memory_order_relaxed);  // the caller, the cache, the fill
    e->last_use.store(m.tick.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (m.entries.count(p) != 0) {
      // Another entry starts here but does not contain the range: the new, larger one
      // replaces it in the index (the old one stays valid for its holders).
      m.RemoveLocked(m.entries.find(p));
    }
    m.IndexLocked(p, e);
    node->entries.fetch_add(1, std::memory_order_relaxed);
  }
  node->misses.fetch_add(1, std::memory_order_relaxed);
  if (missed != nullptr) *missed = true;
  // Submit outside the lock. Until the handle is published, waiters sleep on the phase word.
  // One engine and the single policy: nothing to plan (the common configuration; planning
  // allocates).
  Result<std::vector<CopyPart>> plan =
      cfg.engines.size() == 1 && cfg.copy_policy.kind == PolicyKind::kSingle
          ? Result<std::vector<CopyPart>>(std::vector<CopyPart>{{cfg.engines.front(), 0, size}})
          : PlanFill(cfg.copy_policy, *m.shared->topology, cfg.engines, src, from >= 0 ? from : to,
                     to, size);
  Result<Handle> fill = plan.status();
  m.shared->fills_in_flight.fetch_add(1, std::memory_order_acq_rel);
  if (plan.ok()) {
    SubmitOptions so;
    so.callback = [e](const Completion& c) {
      if (c.status.ok()) {
        e->node->bytes_filled.fetch_add(e->size, std::memory_order_relaxed);
        e->Finish(kReady, Status::Ok());
      } else {
        e->node->failed_fills.fetch_add(1, std::memory_order_relaxed);
        e->Finish(kFailed, Status(c.status.code(), "cache fill failed, reading the source: " +
                                                       c.status.message()));
      }
      std::shared_ptr<CacheShared> shared = e->shared;  // the entry may go with its reference
      e->Unref();
      shared->FillDone();
    };
    const Operation op = Operation::Copy(e->mem, src, size);
    fill = plan->size() == 1 ? plan->front().engine->Submit(op, std::move(so))
                             : SubmitParts(op, *plan, std::move(so));
  }
  if (!fill.ok()) {
    node->failed_fills.fetch_add(1, std::memory_order_relaxed);
    e->Finish(kFailed, Status(fill.status().code(),
                              "cache fill could not be submitted, reading the source: " +
                                  fill.status().message()));
    e->Unref();  // the fill's reference
    m.shared->FillDone();
    return CacheEntry(e, s, size);
  }
  e->fill = std::move(*fill);
  std::uint32_t expected = kClaimed;
  if (e->phase.compare_exchange_strong(expected, kSubmitted, std::memory_order_acq_rel)) {
    FutexWake(&e->phase, INT_MAX);
  }  // else the fill completed inside SubmitParts and the phase is final already
  return CacheEntry(e, s, size);
}

CacheEntry OffloadCache::WeakAccess(const void* src, std::size_t size) {
  Impl& m = *impl_;
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  if (src == nullptr || size == 0 || size > UINTPTR_MAX - p) return {};
  std::shared_lock lock(m.lock);
  CacheEntryState* e = m.FindContaining(p, size);
  if (e == nullptr || e->phase.load(std::memory_order_acquire) == kFailed) return {};
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

Result<std::size_t> OffloadCache::Invalidate(const void* src, std::size_t size, DirtyEntries dirty) {
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  if (src == nullptr) return Status::Invalid("invalidate of a null source");
  if (size > UINTPTR_MAX - p) return Status::Invalid("invalidate range wraps around the address space");
  return impl_->Remove(p, size, /*all=*/false, dirty);
}

std::size_t OffloadCache::Flush() {
  Impl& m = *impl_;
  std::lock_guard lock(m.lock);
  std::size_t n = 0;
  for (auto it = m.entries.begin(); it != m.entries.end();) {
    CacheEntryState* e = it->second;
    auto next = std::next(it);
    if (e->refs.load(std::memory_order_acquire) == 1 &&
        IsFinal(e->phase.load(std::memory_order_acquire)) &&
        !e->dirty.load(std::memory_order_acquire) && !m.shared->holds.Held(e)) {
      m.RemoveLocked(it);
      ++n;
    }
    it = next;
  }
  return n;
}

Result<std::size_t> OffloadCache::Clear(DirtyEntries dirty) {
  return impl_->Remove(0, 0, /*all=*/true, dirty);
}

void OffloadCache::WaitForFills() const {
  // Counted, not looked up: a fill whose entry was already invalidated still reads its source.
  std::atomic<std::uint32_t>& n = impl_->shared->fills_in_flight;
  for (std::uint32_t v = n.load(std::memory_order_acquire); v != 0; v = n.load(std::memory_order_acquire)) {
    FutexWait(&n, v);
  }
}

std::vector<CacheNodeStats> OffloadCache::stats() const {
  std::vector<CacheNodeStats> out;
  for (const auto& n : impl_->shared->nodes) {
    if (!n) continue;
    CacheNodeStats s;
    s.node = n->id;
    if (const NumaNode* t = impl_->shared->topology->node(n->id)) s.tier = t->kind;
    for (const HitCounters& c : n->hit) {
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
  for (const auto& n : impl_->shared->nodes) {
    if (!n) continue;
    for (HitCounters& c : n->hit) {
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
