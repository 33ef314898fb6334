// SPDX-License-Identifier: Apache-2.0
// What the offloading cache and its entries share: configuration, nodes, the index and its
// lock. Entries may outlive their cache, so both hold the core. Internal to src/cache.
//
// The dirty-data invariant (see cache.h for the contract it gives users): an entry in the
// index that is dirty overlaps no other entry in the index. MarkDirty removes the entries
// overlapping the one it marks; an access that would create an entry overlapping a dirty one
// writes that one back first. So the source plus the dirty entries is always the latest
// data, and a write-back never copies bytes over modifications made through another entry.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cache/entry_index.h"
#include "cache/entry_state.h"
#include "cache/hold_table.h"
#include "cache/reader_lock.h"
#include "tierflow/cache.h"

namespace tierflow::cache {

// The cache's entries, recycled: a miss takes one (exclusive lock held, so one taker at a time)
// and the last reference to an entry gives it back from any thread, without a lock. A new
// entry from malloc cost a miss about 200 instructions and writes to lines not in the cache;
// a recycled one is usually still there. Entries in the pool keep their reference to the core
// (a miss then copies no shared pointer), so the cache's destructor closes the pool: that
// deletes them, and entries given back later (held past the cache) are deleted instead. Holds
// at most the most entries the cache had at once.
// A pooled entry also keeps its memory (counted in its node's `pooled`, not `used`): the next
// miss of that size on that node takes entry and memory together, without the allocator (the
// arena's call cost a miss of 4 KiB about 70 ns: more than the rest of the insertion). Memory
// of another size or node goes back to the allocator when the miss takes the entry, all of a
// node's when its capacity needs the room (ReleaseMemory), and all of it at Close.
class EntryPool {
 public:
  using Entry = detail::CacheEntryState;
  EntryPool() = default;
  EntryPool(const EntryPool&) = delete;
  EntryPool& operator=(const EntryPool&) = delete;
  ~EntryPool();
  // An entry as constructed, except that one from the pool holds the core already and may
  // hold memory (mem, mem_bytes, charged on `node`, counted as pooled). The cache's exclusive
  // lock is held; not after Close.
  Entry* Take();
  // An entry whose last reference is gone, reset to constructed apart from its core and its
  // memory (its fill handle and status released). Thread-safe. After Close it is deleted,
  // its memory freed.
  void Give(Entry* e);
  // Frees the memory of the pooled entries on `node` (all nodes: null). Exclusive lock held.
  void ReleaseMemory(const NodeState* node);
  // Frees the memory an entry holds without using it (taken from the pool, or being deleted).
  static void ReleaseMemoryOf(Entry* e);
  // The cache is going: deletes the pooled entries, and from now on Give deletes. Once.
  void Close();

 private:
  static void Discard(Entry* e);        // memory freed, entry deleted
  std::atomic<Entry*> given_{nullptr};  // linked through index_next, pushed by Give
  Entry* spare_ = nullptr;              // taken from given_ in one exchange, used by Take
};

// Adds to a counter that changes only under the cache's exclusive lock (readers may read it
// at any time): a plain load and store, not an atomic read-modify-write, which waits for the
// store buffer to drain (a miss made a dozen of them).
inline void Bump(std::atomic<std::uint64_t>& counter, std::int64_t by) {
  counter.store(counter.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(by),
                std::memory_order_relaxed);
}

struct Core {
  using Entry = detail::CacheEntryState;

  const Topology* topology = nullptr;
  CacheConfig config;
  std::vector<std::unique_ptr<NodeState>> nodes;  // indexed by OS node index (null where none)
  HoldTables holds;                               // hits' holds on entries, per thread slot
  // Fills and write-backs submitted, and finished (entries indexed or not): the difference is
  // in flight. Two counts on two lines, each written by one side only: submitting threads
  // count starts, the engine's threads count completions (a futex word: WaitForCopies sleeps
  // on it). One count written by both moved its line between the cores on every miss.
  alignas(64) std::atomic<std::uint32_t> copies_started{0};
  alignas(64) std::atomic<std::uint32_t> copies_done{0};
  std::atomic<std::uint32_t> copy_sleepers{0};  // threads asleep in WaitForCopies
  // Raised as CopyDone's last access to the core: once it equals copies_started, no completion
  // touches the core any more (see WaitForCopiesToLeave).
  std::atomic<std::uint32_t> copies_left{0};
  // Some entry was marked dirty once: from then on, misses look for dirty entries they overlap.
  alignas(64) std::atomic<bool> dirty_used{false};
  std::atomic<std::uint64_t> tick{1};  // advanced on every miss: the LRU clock
  // Hits and MarkDirty take it shared; inserting and removing entries take it exclusively.
  alignas(64) mutable ReaderLock lock;
  EntryIndex index;  // under `lock`
  EntryPool entries;

  NodeState* NodeOf(int id) const {
    return id >= 0 && static_cast<std::size_t>(id) < nodes.size() ? nodes[id].get() : nullptr;
  }
  void* Allocate(NodeState& n, std::size_t size, Status* error);
  void Free(NodeState& n, void* p, std::size_t size);
  void CopyStarted() { copies_started.fetch_add(1, std::memory_order_acq_rel); }
  // A copy finished. A completion that has dropped its entry may call this without holding
  // the core: the cache's destructor waits for it (WaitForCopiesToLeave).
  void CopyDone();
  void WaitForCopies() const;
  // WaitForCopies, and then until every CopyDone has returned: after this, the core can go.
  void WaitForCopiesToLeave() const;

  // --- the index; the exclusive lock is held ------------------------------------------------
  void IndexLocked(Entry* e);
  // Takes the entry out of the index and drops the cache's reference; holders keep it.
  void RemoveLocked(Entry* e);
  // Every entry (all), or those overlapping [p, p+n) (n 0: those starting at p).
  std::vector<Entry*> TargetsLocked(std::uintptr_t p, std::size_t n, bool all) const;
  // Memory for `e`, an entry just taken from the pool, to cache `size` bytes on `node`,
  // evicting as needed: the entry's own if it has memory of that size there (otherwise that
  // goes back to the allocator), or new. Sets e->mem, mem_bytes and charged and charges the
  // node; false and why not when there is no room (e then holds no memory).
  bool MakeRoomLocked(NodeState& node, Entry* e, std::size_t size, Status* why);

  // --- dirty data -----------------------------------------------------------------------------
  // Records a modification of a cached entry (see CacheEntry::MarkDirty).
  Status MarkDirty(Entry* e);
  // Copies a complete cached copy back to its source; the entry counts as clean up to the
  // modifications recorded before the copy started, once it has completed.
  Result<Handle> SubmitWriteBack(Entry* e);
  // Writes back every dirty entry among the targets (see TargetsLocked). Returns with `held`
  // locked and no target dirty, or with the first write-back error. Copies run outside the
  // lock at first, so hits go on meanwhile; if entries keep being marked dirty, a last round
  // runs under the lock, where no MarkDirty can come between.
  Status CleanLocked(std::unique_lock<ReaderLock>& held, std::uintptr_t p, std::size_t n, bool all);
  // Invalidate and Clear.
  Result<std::size_t> Remove(std::uintptr_t p, std::size_t n, bool all, DirtyEntries dirty);

 private:
  bool EvictLocked(NodeState& node, std::size_t need, bool one_more);
  bool Reusable(const Entry& e, const NodeState& node, std::size_t size) const;
  // Memory from the allocator for e, within the capacity: false when it has none to give.
  bool AllocateLocked(NodeState& node, Entry* e, std::size_t size, Status* why);
  Status WriteBackAll(const std::vector<Entry*>& entries);
};

}  // namespace tierflow::cache
