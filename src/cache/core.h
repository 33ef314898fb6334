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
class EntryPool {
 public:
  using Entry = detail::CacheEntryState;
  EntryPool() = default;
  EntryPool(const EntryPool&) = delete;
  EntryPool& operator=(const EntryPool&) = delete;
  ~EntryPool();
  // An entry as constructed, except that one from the pool holds the core already. The
  // cache's exclusive lock is held; not after Close.
  Entry* Take();
  // An entry whose last reference is gone, reset to constructed apart from its core (its fill
  // handle and status released). Thread-safe. After Close it is deleted.
  void Give(Entry* e);
  // The cache is going: deletes the pooled entries, and from now on Give deletes. Once.
  void Close();

 private:
  std::atomic<Entry*> given_{nullptr};  // linked through index_next, pushed by Give
  Entry* spare_ = nullptr;              // taken from given_ in one exchange, used by Take
};

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
  // Room for `charged` bytes on `node`, evicting as needed: the memory, or null and why not.
  char* MakeRoomLocked(NodeState& node, std::size_t size, std::size_t charged, Status* why);

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
  Status WriteBackAll(const std::vector<Entry*>& entries);
};

}  // namespace tierflow::cache
