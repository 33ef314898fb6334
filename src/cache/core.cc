// SPDX-License-Identifier: Apache-2.0
#include "cache/core.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include <fmt/format.h>

#include "common/futex.h"
#include "tierflow/buffer.h"

namespace tierflow {

namespace detail {

void CacheEntryState::Unref() {
  if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (mem != nullptr) {
    node->used.fetch_sub(charged, std::memory_order_relaxed);
    node->pooled.fetch_add(charged, std::memory_order_relaxed);
  }
  // Back to the pool as new, but still holding the core: the next miss takes it without an
  // atomic increment of the core's count, which cost a miss a transfer of that line. The
  // cache's destructor closes the pool, which lets the entries (and their references) go.
  // The memory stays with the entry for the next miss of its size (see EntryPool).
  std::shared_ptr<cache::Core> owner = std::move(core);
  cache::NodeState* on = node;
  char* kept = mem;
  const std::size_t bytes = mem_bytes, kept_charged = charged;
  this->~CacheEntryState();
  auto* fresh = new (this) CacheEntryState;
  fresh->core = std::move(owner);
  if (kept != nullptr) {
    fresh->node = on;
    fresh->mem = kept;
    fresh->mem_bytes = bytes;
    fresh->charged = kept_charged;
  }
  cache::Core* c = fresh->core.get();
  c->entries.Give(fresh);
}

// The phase is published and `sleepers` read in seq_cst order, and AwaitFill counts itself in
// `sleepers` before it sleeps (the kernel checks the phase again): either the waiter sees the
// new phase, or the publisher sees the waiter and wakes it.
void CacheEntryState::Finish(cache::Phase p, Status s) {
  status = std::move(s);
  phase.store(p, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) FutexWake(&phase, INT_MAX);
}

bool CacheEntryState::MarkSubmitted() {
  std::uint32_t expected = cache::kClaimed;
  if (!phase.compare_exchange_strong(expected, cache::kSubmitted, std::memory_order_seq_cst)) {
    return false;
  }
  if (sleepers.load(std::memory_order_seq_cst) != 0) FutexWake(&phase, INT_MAX);
  return true;
}

const Status& CacheEntryState::AwaitFill() const {
  for (;;) {
    const std::uint32_t p = phase.load(std::memory_order_acquire);
    if (cache::IsFinal(p)) return status;
    if (p == cache::kSubmitted) {
      // The callback sets the final phase before the handle reports completion.
      (void)fill.Wait(core->config.wait_mode);
      continue;
    }
    auto& self = const_cast<CacheEntryState&>(*this);
    self.sleepers.fetch_add(1, std::memory_order_seq_cst);
    FutexWait(&self.phase, cache::kClaimed);  // until submitted
    self.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace detail

namespace cache {

namespace {
// given_ once the cache is gone: entries given back then are deleted.
EntryPool::Entry* const kPoolClosed =
    reinterpret_cast<EntryPool::Entry*>(alignof(EntryPool::Entry));
}  // namespace

EntryPool::~EntryPool() { Close(); }

void EntryPool::Close() {
  Entry* lists[] = {std::exchange(spare_, nullptr),
                    given_.exchange(kPoolClosed, std::memory_order_acq_rel)};
  for (Entry* e : lists) {
    while (e != nullptr && e != kPoolClosed) Discard(std::exchange(e, e->index_next));
  }
}

void EntryPool::Discard(Entry* e) {
  ReleaseMemoryOf(e);
  delete e;  // drops its reference to the core, perhaps the last: touch nothing after
}

void EntryPool::ReleaseMemoryOf(Entry* e) {
  if (e->mem == nullptr) return;
  e->node->pooled.fetch_sub(e->charged, std::memory_order_relaxed);
  e->core->Free(*e->node, e->mem, e->mem_bytes);
  e->mem = nullptr;
  e->mem_bytes = 0;
  e->charged = 0;
}

void EntryPool::ReleaseMemory(const NodeState* node) {
  Entry* given = given_.exchange(nullptr, std::memory_order_acquire);
  if (spare_ == nullptr) {
    spare_ = given;
  } else if (given != nullptr) {
    Entry* last = spare_;
    while (last->index_next != nullptr) last = last->index_next;
    last->index_next = given;
  }
  for (Entry* e = spare_; e != nullptr; e = e->index_next) {
    if (node == nullptr || e->node == node) ReleaseMemoryOf(e);
  }
}

EntryPool::Entry* EntryPool::Take() {
  if (spare_ == nullptr) spare_ = given_.exchange(nullptr, std::memory_order_acquire);
  if (spare_ == nullptr) return new Entry;
  Entry* e = std::exchange(spare_, spare_->index_next);
  e->index_next = nullptr;
  return e;
}

void EntryPool::Give(Entry* e) {
  Entry* head = given_.load(std::memory_order_relaxed);
  do {
    if (head == kPoolClosed) {
      Discard(e);
      return;
    }
    e->index_next = head;
  } while (
      !given_.compare_exchange_weak(head, e, std::memory_order_release, std::memory_order_relaxed));
}

namespace {

std::string RangeText(const detail::CacheEntryState* e) {
  return fmt::format("[{}, +{})", static_cast<const void*>(e->src), e->size);
}

// Write-backs of one entry run one at a time (see CacheEntryState::writing_back).
void BeginWriteBack(detail::CacheEntryState* e) {
  for (std::uint32_t busy = 0; !e->writing_back.compare_exchange_weak(
           busy, 1, std::memory_order_acquire, std::memory_order_relaxed);
       busy = 0) {
    if (busy != 0) FutexWait(&e->writing_back, busy);  // until the one in flight completes
  }
}

// Waits until no write-back of the entry is in flight.
void AwaitWriteBack(detail::CacheEntryState* e) {
  for (std::uint32_t busy = e->writing_back.load(std::memory_order_acquire); busy != 0;
       busy = e->writing_back.load(std::memory_order_acquire)) {
    FutexWait(&e->writing_back, busy);
  }
}

void EndWriteBack(detail::CacheEntryState* e) {
  e->writing_back.store(0, std::memory_order_release);
  FutexWake(&e->writing_back, INT_MAX);
}

}  // namespace

void* Core::Allocate(NodeState& n, std::size_t size, Status* error) {
  if (config.allocator.allocate) {
    void* p = config.allocator.allocate(size, n.id);
    if (p == nullptr) *error = Status::OutOfMemory("the cache's allocator returned null");
    return p;
  }
  return n.arena->Allocate(size, error);
}

void Core::Free(NodeState& n, void* p, std::size_t size) {
  if (config.allocator.free) {
    config.allocator.free(p, size, n.id);
  } else {
    n.arena->Free(p, size);
  }
}

void Core::CopyDone() {
  // As for an entry's phase (Finish): the count rises and the sleepers are read in seq_cst
  // order, the waiter counts itself before it sleeps.
  copies_done.fetch_add(1, std::memory_order_seq_cst);
  if (copy_sleepers.load(std::memory_order_seq_cst) != 0) FutexWake(&copies_done, INT_MAX);
  copies_left.fetch_add(1, std::memory_order_release);  // the last access to the core
}

void Core::WaitForCopiesToLeave() const {
  WaitForCopies();
  const std::uint32_t started = copies_started.load(std::memory_order_acquire);
  while (copies_left.load(std::memory_order_acquire) != started)
    sched_yield();  // a few instructions
}

void Core::WaitForCopies() const {
  // Counted, not looked up: a fill whose entry was already invalidated still reads its source.
  // Completions are read before starts: equal counts then mean that nothing started before
  // this call is still in flight (a copy completes after it starts).
  auto& done = const_cast<std::atomic<std::uint32_t>&>(copies_done);
  auto& sleepers = const_cast<std::atomic<std::uint32_t>&>(copy_sleepers);
  for (;;) {
    const std::uint32_t d = done.load(std::memory_order_acquire);
    if (copies_started.load(std::memory_order_acquire) == d) return;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    FutexWait(&done, d);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

// --- the index -------------------------------------------------------------------------------

void Core::IndexLocked(Entry* e) {
  index.Insert(e);
  e->indexed.store(true, std::memory_order_relaxed);
  Bump(e->node->entries, 1);
}

void Core::RemoveLocked(Entry* e) {
  index.Erase(e);
  e->indexed.store(false, std::memory_order_relaxed);
  Bump(e->node->entries, -1);
  // Holders in the per-thread tables now keep the entry through its shared count.
  holds.Detach(e, e->hold_tables, [e](long n) {
    if (n >= 0) {
      e->refs.fetch_add(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    } else {
      e->refs.fetch_sub(static_cast<std::uint32_t>(-n), std::memory_order_relaxed);
    }
  });
  e->Unref();
}

std::vector<Core::Entry*> Core::TargetsLocked(std::uintptr_t p, std::size_t n, bool all) const {
  std::vector<Entry*> out;
  auto add = [&out](Entry* e) { out.push_back(e); };
  if (all) {
    index.ForEach(add);
  } else {
    index.ForEachOverlapping(p, n, add);
  }
  // In address order, as the caller would expect (the index keeps no order): write-backs go
  // out in that order and an error names the first entry in the way.
  std::sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) {
    return a->src != b->src ? std::less<>()(a->src, b->src) : a->size < b->size;
  });
  return out;
}

// Evicts unreferenced, finished, clean entries of `node`, least recently used first, until
// `need` more bytes fit in its capacity (or, with `one_more`, at least one entry). Returns
// whether anything was evicted.
bool Core::EvictLocked(NodeState& node, std::size_t need, bool one_more) {
  std::vector<std::pair<std::uint64_t, Entry*>> victims;
  index.ForEach([&](Entry* e) {
    if (e->node != &node || e->refs.load(std::memory_order_acquire) != 1 ||
        !IsFinal(e->phase.load(std::memory_order_acquire)) || e->dirty()) {
      return;
    }
    victims.emplace_back(e->last_use.load(std::memory_order_relaxed), e);
  });
  std::sort(victims.begin(), victims.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : std::less<>()(a.second->src, b.second->src);
  });
  bool any = false;
  for (const auto& [use, e] : victims) {
    const bool fits = node.used.load(std::memory_order_relaxed) + need <=
                      node.capacity.load(std::memory_order_relaxed);
    if (fits && (!one_more || any)) break;
    if (holds.Held(e, e->hold_tables)) continue;  // a hit holds it through its table
    RemoveLocked(e);
    node.evictions.fetch_add(1, std::memory_order_relaxed);
    any = true;
  }
  return any;
}

bool Core::Reusable(const Entry& e, const NodeState& node, std::size_t size) const {
  // A user's allocator gets back the size it was asked for; the arena rounds.
  return e.node == &node &&
         (config.allocator.allocate ? e.mem_bytes == size : e.charged == NodeArena::Round(size));
}

bool Core::AllocateLocked(NodeState& node, Entry* e, std::size_t size, Status* why) {
  const std::size_t charged = NodeArena::Round(size);
  const std::size_t capacity = node.capacity.load(std::memory_order_relaxed);
  // The pool's memory and the entries' together stay within the capacity.
  if (node.used.load(std::memory_order_relaxed) + node.pooled.load(std::memory_order_relaxed) +
          charged >
      capacity) {
    entries.ReleaseMemory(&node);
  }
  void* p = Allocate(node, size, why);
  if (p == nullptr && node.pooled.load(std::memory_order_relaxed) != 0) {
    entries.ReleaseMemory(&node);  // fragmented by what the pool holds
    p = Allocate(node, size, why);
  }
  if (p == nullptr) return false;
  e->mem = static_cast<char*>(p);
  e->mem_bytes = size;
  e->charged = charged;
  node.pooled.fetch_add(charged, std::memory_order_relaxed);  // charged below, as a reuse
  return true;
}

bool Core::MakeRoomLocked(NodeState& node, Entry* e, std::size_t size, Status* why) {
  if (e->mem != nullptr && !Reusable(*e, node, size)) EntryPool::ReleaseMemoryOf(e);
  if (!node.capacity_known.load(std::memory_order_relaxed)) {
    Result<NodeMemory> m = QueryNodeMemory(node.id);
    node.capacity.store(m.ok() ? m->free_bytes / 2 : 0, std::memory_order_relaxed);
    node.capacity_known.store(true, std::memory_order_relaxed);
  }
  const std::size_t charged = NodeArena::Round(size);
  const std::size_t capacity = node.capacity.load(std::memory_order_relaxed);
  if (charged > capacity) {
    EntryPool::ReleaseMemoryOf(e);
    *why = Status::Unsupported(
        fmt::format("not cached: {} bytes exceed the cache's capacity on node {} ({} bytes)", size,
                    node.id, capacity));
    return false;
  }
  if (node.used.load(std::memory_order_relaxed) + charged > capacity) {
    EvictLocked(node, charged, false);
  }
  for (;;) {
    if (node.used.load(std::memory_order_relaxed) + charged <= capacity) {
      if (e->mem != nullptr || AllocateLocked(node, e, size, why)) {
        node.pooled.fetch_sub(charged, std::memory_order_relaxed);
        const std::uint64_t now = node.used.fetch_add(charged, std::memory_order_relaxed) + charged;
        if (now > node.peak.load(std::memory_order_relaxed))
          node.peak.store(now, std::memory_order_relaxed);
        return true;
      }
    } else {
      *why = Status::Unsupported(fmt::format(
          "not cached: node {} holds {} of its {} bytes in entries that are in use, dirty "
          "or still filling",
          node.id, node.used.load(), capacity));
    }
    // Fragmented, or the node itself is short of memory: evict one more and try again.
    if (!EvictLocked(node, charged, true)) {
      EntryPool::ReleaseMemoryOf(e);
      *why = Status(why->code(), fmt::format("not cached: {}", why->message()));
      return false;
    }
  }
}

// --- dirty data ------------------------------------------------------------------------------

Status Core::MarkDirty(Entry* e) {
  dirty_used.store(true, std::memory_order_relaxed);  // published to misses by the lock below
  const auto p = reinterpret_cast<std::uintptr_t>(e->src);
  auto left = [e] {
    return Status::InvalidArgument(fmt::format(
        "the entry for {} has left the cache (Invalidate, Clear, a modification through an "
        "overlapping entry, or the cache's destruction): its copy is no longer kept in step "
        "with the source, so a modification of it cannot be tracked or written back; Access "
        "the range again and modify the new entry",
        RangeText(e)));
  };
  {
    std::shared_lock held(lock);
    if (!e->indexed.load(std::memory_order_relaxed)) return left();
    bool alone = true;
    index.ForEachOverlapping(p, e->size, [&](Entry* o) { alone = alone && o == e; });
    if (alone) {
      e->dirty_seq.fetch_add(1, std::memory_order_acq_rel);
      return Status::Ok();
    }
  }
  // Other entries hold copies of some of these bytes: they would be stale once the
  // modification is written back, so they leave the cache (their holders keep them).
  std::lock_guard held(lock);
  if (!e->indexed.load(std::memory_order_relaxed)) return left();
  std::vector<Entry*> others = TargetsLocked(p, e->size, false);
  std::erase(others, e);
  for (Entry* o : others) {
    if (o->dirty()) {
      return Status::InvalidArgument(fmt::format(
          "the entry for {} overlaps {}, which holds modifications not written back: write "
          "that entry back (or invalidate it) first",
          RangeText(e), RangeText(o)));
    }
  }
  for (Entry* o : others) {
    // A fill still reading the source must finish before a write-back can change it (its
    // holders get the data as of their access, not a mix). Fills need no lock to complete.
    (void)o->AwaitFill();
    o->node->invalidations.fetch_add(1, std::memory_order_relaxed);
    RemoveLocked(o);
  }
  e->dirty_seq.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

Result<Handle> Core::SubmitWriteBack(Entry* e) {
  if (!e->ready()) {  // only a complete cached copy may ever go over the source
    return Status::InvalidArgument(fmt::format(
        "write back of {}: the entry is not cached (its fill is running, failed or found no "
        "room), so there is no copy to write back and data() is the source already",
        RangeText(e)));
  }
  Result<int> src_node = NodeOfAddress(e->src);
  const int to = src_node.ok() ? *src_node : e->node->id;
  Result<std::vector<CopyPart>> plan =
      PlanCopy(config.copy_policy, *topology, config.engines, e->node->id, to, e->size);
  if (!plan.ok()) return plan.status();
  BeginWriteBack(e);
  if (!e->dirty()) {
    // A write-back that completed meanwhile copied every recorded modification (or they were
    // discarded); copying again could land after the entry has left the cache, over bytes
    // that entries created since then have written back.
    EndWriteBack(e);
    return Handle::Completed();
  }
  const std::uint64_t seq = e->dirty_seq.load(std::memory_order_acquire);
  SubmitOptions so;
  e->Ref();
  CopyStarted();
  so.callback = [e, seq](const Completion& c) {
    std::shared_ptr<Core> core = e->core;  // the entry may go with its reference
    if (c.status.ok()) {
      e->CleanUpTo(seq);
      e->node->write_backs.fetch_add(1, std::memory_order_relaxed);
    }
    EndWriteBack(e);
    e->Unref();
    core->CopyDone();
  };
  Result<Handle> h = SubmitParts(Operation::Copy(const_cast<char*>(e->src), e->mem, e->size), *plan,
                                 std::move(so));
  if (!h.ok()) {  // the callback will not run
    EndWriteBack(e);
    e->Unref();
    CopyDone();
  }
  return h;
}

Status Core::WriteBackAll(const std::vector<Entry*>& entries) {
  std::vector<Handle> handles;
  Status failed;
  for (Entry* e : entries) {
    Result<Handle> h = SubmitWriteBack(e);
    if (h.ok()) {
      handles.push_back(std::move(*h));
    } else if (failed.ok()) {
      failed = h.status();
    }
  }
  for (Handle& h : handles) {
    Status s = h.Wait(config.wait_mode);
    if (!s.ok() && failed.ok()) failed = s;
  }
  for (Entry* e : entries) e->Unref();
  return failed;
}

Status Core::CleanLocked(std::unique_lock<ReaderLock>& held, std::uintptr_t p, std::size_t n,
                         bool all) {
  constexpr int kRoundsOutsideLock = 2;
  for (int round = 0;; ++round) {
    std::vector<Entry*> dirty = TargetsLocked(p, n, all);
    std::erase_if(dirty, [](Entry* e) { return !e->dirty(); });
    if (dirty.empty()) return Status::Ok();
    for (Entry* e : dirty) e->Ref();
    const bool under_lock = round >= kRoundsOutsideLock;
    if (!under_lock) held.unlock();
    Status s = WriteBackAll(dirty);
    if (!under_lock) held.lock();
    if (!s.ok()) return s;
  }
}

Result<std::size_t> Core::Remove(std::uintptr_t p, std::size_t n, bool all, DirtyEntries dirty) {
  std::unique_lock held(lock);
  if (dirty == DirtyEntries::kWriteBack) {
    if (Status s = CleanLocked(held, p, n, all); !s.ok()) {
      return Status(s.code(),
                    "writing a dirty entry back failed; nothing was invalidated and "
                    "the modifications are kept: " +
                        s.message());
    }
  }
  const std::vector<Entry*> targets = TargetsLocked(p, n, all);
  if (dirty == DirtyEntries::kRefuse) {
    for (Entry* e : targets) {
      if (!e->dirty()) continue;
      return Status::InvalidArgument(fmt::format(
          "the cached copy of {} is dirty (modified, not written back): invalidate with "
          "DirtyEntries::kWriteBack to keep the changes or kDiscard to drop them",
          RangeText(e)));
    }
  }
  for (Entry* e : targets) {
    // Once the call returns, no fill of a removed entry still reads the range: the caller may
    // change the source, and a later write-back must not race a fill reading it.
    (void)e->AwaitFill();
    if (dirty == DirtyEntries::kDiscard) {
      e->CleanUpTo(e->dirty_seq.load(std::memory_order_acquire));
      // A write-back already running must land before the range can be cached anew.
      AwaitWriteBack(e);
    }
    e->node->invalidations.fetch_add(1, std::memory_order_relaxed);
    RemoveLocked(e);
  }
  return targets.size();
}

}  // namespace cache
}  // namespace tierflow
