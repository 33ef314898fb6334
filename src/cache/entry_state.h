// SPDX-License-Identifier: Apache-2.0
// An offloading-cache entry's shared state and the per-node bookkeeping it is charged to.
// Internal to src/cache.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cache/reader_lock.h"
#include "tierflow/handle.h"
#include "tierflow/node_arena.h"
#include "tierflow/status.h"

namespace tierflow::cache {

// Entry phases, in a futex word. Claimed: in the cache, fill not yet submitted; submitted: the
// fill handle is set; the last three are final.
enum Phase : std::uint32_t { kClaimed, kSubmitted, kReady, kFailed, kNoRoom };
inline bool IsFinal(std::uint32_t p) { return p >= kReady; }

// Hit counters per thread slot: two threads hitting the cache must not share a counter line.
constexpr std::size_t kCounterSlots = 16;
struct alignas(64) HitCounters {
  std::atomic<std::uint64_t> hits{0}, late_hits{0};
};
inline std::size_t CounterSlot() { return ThreadSlot() % kCounterSlots; }

// One NUMA node as the cache uses it: capacity, memory and counters.
struct NodeState {
  int id = -1;
  std::atomic<std::size_t> capacity{0};
  std::atomic<bool> capacity_known{false};  // set on first use when not configured
  std::unique_ptr<NodeArena> arena;         // the default allocator
  std::atomic<std::uint64_t> used{0}, entries{0}, peak{0};
  // Bytes kept by entries in the cache's pool for the next entry of their size (cache/core.h:
  // EntryPool); not in `used`, but within the capacity together with it.
  std::atomic<std::uint64_t> pooled{0};
  // `entries` and `misses` change under the cache's exclusive lock only (cache/core.h: Bump).
  std::atomic<std::uint64_t> misses{0}, not_cached{0}, evictions{0}, invalidations{0},
      write_backs{0};
  // Counted as fills complete, on the engine's threads: off the line that misses write.
  alignas(64) std::atomic<std::uint64_t> bytes_filled{0}, failed_fills{0};
  HitCounters hit[kCounterSlots];
};

struct Core;

}  // namespace tierflow::cache

namespace tierflow::detail {

// Three cache lines, 64-byte aligned (dirty_seq's alignment): what hits read, then what
// modifications and the index use, then the fill's handle, status and the reference count,
// which the fill's completion writes together.
struct CacheEntryState {
  // --- What a hit reads, on one cache line (the entry starts one: the alignment of dirty_seq
  // below makes the whole entry 64-byte aligned). Hits write none of it but last_use, and that
  // only when the clock has moved. A hit read the range from a second line before.
  // Written once per phase change. Kept off the reference count's line, which hits on other
  // cores write.
  std::atomic<std::uint32_t> phase{cache::kClaimed};
  // Threads asleep on `phase` (AwaitFill): a phase change makes the futex system call only
  // when there is one, instead of twice for every miss.
  std::atomic<std::uint32_t> sleepers{0};
  // The hold tables hits have held this entry in (cache/hold_table.h): set when a hit first
  // claims a word in a table, then only read.
  std::atomic<std::uint32_t> hold_tables{0};
  const char* src = nullptr;
  std::size_t size = 0;
  char* mem = nullptr;
  cache::NodeState* node = nullptr;
  std::atomic<std::uint64_t> last_use{0};
  // --- The rest.
  // Modifications: MarkDirty counts them in dirty_seq; a completed write-back raises clean_seq
  // to the count it had read before copying, a discard to the count now. The entry is dirty
  // while they differ, so a MarkDirty that comes during a write-back keeps it dirty.
  alignas(64) std::atomic<std::uint64_t> dirty_seq{0};
  std::atomic<std::uint64_t> clean_seq{0};
  // In the cache's index. Changed only under the cache's exclusive lock, so that a reader
  // holding the shared lock sees it stable (MarkDirty relies on that).
  std::atomic<bool> indexed{false};
  // 1 while a write-back of this entry is in flight (a futex word). Write-backs of one entry
  // run one at a time: two copies of the same memory in flight could complete out of order,
  // an older snapshot landing last over a newer one that already counted as clean.
  std::atomic<std::uint32_t> writing_back{0};
  std::shared_ptr<cache::Core> core;
  CacheEntryState* index_next = nullptr;  // the cache index's list (cache/entry_index.h)
  std::size_t charged = 0;                // bytes counted against the node's capacity
  std::size_t mem_bytes = 0;              // what the allocator gave `mem` for (it gets it back)
  Handle fill;    // set before phase becomes kSubmitted, never changed afterwards
  Status status;  // written before a final phase is published
  // CacheEntry holders + the cache + a fill or write-back in flight.
  std::atomic<std::uint32_t> refs{0};

  bool ready() const { return phase.load(std::memory_order_acquire) == cache::kReady; }
  bool dirty() const {
    // clean_seq first: it never passes dirty_seq, so a stale pair can only err towards dirty.
    const std::uint64_t clean = clean_seq.load(std::memory_order_acquire);
    return dirty_seq.load(std::memory_order_acquire) != clean;
  }
  // The modifications up to `seq` are in the source now.
  void CleanUpTo(std::uint64_t seq) {
    std::uint64_t cur = clean_seq.load(std::memory_order_relaxed);
    while (cur < seq && !clean_seq.compare_exchange_weak(cur, seq, std::memory_order_acq_rel)) {
    }
  }
  void Ref() { refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref();  // frees the memory and the state with the last reference
  // Publishes a final phase (status first) and wakes every waiter.
  void Finish(cache::Phase p, Status s);
  // Moves the phase from kClaimed to kSubmitted (false: it was final already) and wakes the
  // waiters.
  bool MarkSubmitted();
  // Waits until the fill has finished and returns its status. Fair: every waiter waits on the
  // fill itself, none depends on another thread (the submitter included) to wait first.
  const Status& AwaitFill() const;
};

}  // namespace tierflow::detail
