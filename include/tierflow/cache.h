// SPDX-License-Identifier: Apache-2.0
// The offloading cache (Fürst thesis, chapters 4-5): Access(src, size) returns a shared entry
// whose copy into a faster tier an engine (DSA, CPU, ...) fills asynchronously.
//
//  - The first access of a range allocates space on the node the placement policy chooses and
//    submits the fill through the engines the copy policy chooses; every later access,
//    including concurrent first accesses from many threads, gets the same entry: one fill.
//  - An access to a sub-range of a cached entry is served from that entry (data() points into
//    it). Ranges that overlap without containment get entries of their own.
//  - CacheEntry::Wait returns when the fill is complete; any number of threads may wait, none
//    depends on another (not on the thread that submitted). WeakWait checks once. data() is
//    the cached copy once complete, otherwise — filling, failed, or not cached for lack of room
//    — the source: reading data() is always correct.
//  - Memory: each node has a capacity; a fill that does not fit evicts unreferenced entries,
//    least recently used first; if that is not enough the access reports "not cached" (data()
//    is the source) and the cache stays within its capacity. An entry's memory is freed when it
//    has left the cache and its last CacheEntry is gone, never before: the cache then keeps it
//    for its next entry of that size on that node (no longer in bytes_used, but within the
//    capacity together with it) and gives it back to the allocator when another size needs the
//    room, and when the cache is destroyed.
//  - Mutable data (the dirty-data contract): modify an entry through mutable_data(), then call
//    MarkDirty(). From the moment MarkDirty returns ok until the modification is written back
//    (WriteBack, Invalidate/Clear with kWriteBack, an access that needs the range, or the
//    cache's destruction) or explicitly discarded (kDiscard), the cache keeps it: a dirty entry
//    is never evicted or flushed, Invalidate/Clear with kRefuse refuse it, and no path copies
//    anything but a complete cached copy over a source.
//      * An Access returns data that includes every modification acknowledged (MarkDirty
//        returned ok) before it: a range inside a dirty entry is served from that entry; a
//        range that only overlaps one is filled after that entry has been written back.
//      * Marking an entry dirty (or writing it back) takes every other entry overlapping its
//        range out of the cache, because their copies no longer match. Holders keep such
//        entries readable: a CacheEntry you hold is the data as of its fill plus what was
//        modified through it, not a live view of modifications made through other entries.
//      * An entry that has left the cache (Invalidate, Clear, a modification through an
//        overlapping entry, the cache's destruction) can no longer be marked dirty or written
//        back: MarkDirty and WriteBack say so, and the modification is not acknowledged.
//      * Modifications made while a write-back of the same entry runs need another MarkDirty
//        afterwards (the entry then stays dirty); the cache never merges two entries' bytes.
//
// Thread safety: every member of OffloadCache and CacheEntry may be called from any thread.
// A hit takes no exclusive lock and writes no cache line shared with other readers of other
// entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "tierflow/copy_policy.h"
#include "tierflow/engine.h"
#include "tierflow/export.h"
#include "tierflow/topology.h"

namespace tierflow {

namespace detail {
struct CacheEntryState;
}

// What Invalidate does with an entry that was marked dirty.
enum class DirtyEntries : std::uint8_t {
  kRefuse,     // fail with an error naming the dirty range (the default: no data is lost)
  kWriteBack,  // copy the entry back to its source first (waits for that copy)
  kDiscard,    // drop the modifications
};

struct CacheAllocator {
  // Returns `size` bytes on NUMA node `node` (64-byte aligned), or null when there is none.
  std::function<void*(std::size_t size, int node)> allocate;
  std::function<void(void* p, std::size_t size, int node)> free;
};

struct CacheConfig {
  // Engines that fill entries (and write them back): a source some engine reads directly (a
  // file registered with a storage engine) is filled by that engine, other sources by the
  // memory engines as the copy policy divides them (PlanFill); e.g. a DsaFleet's engines plus
  // a CPU engine with PolicyKind::kAuto, plus an IoUringEngine for column files. Required.
  std::vector<Engine*> engines;
  // Default: PolicyKind::kSingle (the destination node's engine). How a fill is divided over
  // the memory engines.
  CopyPolicy copy_policy;
  // The node an entry of [src, src+size) is cached on. Default: the HBM node nearest to the
  // source's node; without HBM, the source's node if it has CPUs (DRAM), else its nearest CPU
  // node (CXL, NVM: cache in DRAM).
  std::function<int(const void* src, std::size_t size, int src_node)> placement;
  // Bytes the cache may use per node; nodes not listed: half of the node's free memory when
  // the node is first used.
  std::map<int, std::size_t> capacity;
  // Default: a prefaulted arena per node, growing in `arena_chunk` steps (default 64 MiB) up
  // to the capacity. Larger steps: fewer allocations, more memory taken ahead of need.
  CacheAllocator allocator;
  std::size_t arena_chunk = std::size_t{64} << 20;
  // Take the capacity of each node listed in `capacity` from the kernel in Create (prefaulted arena
  // chunks), so that no fill during the run waits for the kernel to fault pages in (page faults
  // during fills turn hits into late hits). Create fails when a node cannot give it, and with a
  // user allocator (which reserves on its own).
  // Default false.
  bool reserve_capacity = false;
  // Default kBlock: how CacheEntry::Wait waits. kBlock burns no core; kSpin and kAdaptive
  // return sooner after the fill, at the price of a busy core.
  WaitMode wait_mode = WaitMode::kBlock;
};

struct CacheNodeStats {
  int node = -1;
  TierKind tier = TierKind::kUnknown;  // what kind of memory the node is
  std::uint64_t hits = 0;              // found complete
  std::uint64_t late_hits = 0;         // found while its fill was still running
  std::uint64_t misses = 0;            // submitted a fill
  std::uint64_t not_cached = 0;        // no room even after eviction: served from the source
  std::uint64_t failed_fills = 0;      // the engine reported an error: served from the source
  std::uint64_t evictions = 0;
  std::uint64_t invalidations = 0;
  std::uint64_t write_backs = 0;
  std::uint64_t bytes_filled = 0;
  std::uint64_t bytes_used = 0;  // held by entries now
  std::uint64_t peak_bytes = 0;  // the most held at once
  std::uint64_t capacity = 0;
  std::uint64_t entries = 0;
};

class TIERFLOW_EXPORT CacheEntry {
 public:
  CacheEntry() = default;  // empty: valid() is false
  CacheEntry(const CacheEntry& other);
  CacheEntry& operator=(const CacheEntry& other);
  CacheEntry(CacheEntry&& other) noexcept;
  CacheEntry& operator=(CacheEntry&& other) noexcept;
  ~CacheEntry();

  bool valid() const { return state_ != nullptr; }
  // The range this entry was asked for (a sub-range of the cached one on a sub-range hit).
  const void* source() const { return src_; }
  std::size_t size() const { return size_; }
  // Where to read the range: the cached copy once complete, else the source.
  const void* data() const;
  void* mutable_data() const;  // the cached copy to modify (then MarkDirty); null unless cached()
  // The cached copy is complete and usable.
  bool cached() const;
  // Waits until the fill has finished (fairly: any waiting thread may see it complete) and
  // returns its status: ok, the engine's error (data() is the source), or kUnsupported when
  // the range was not cached for lack of room.
  Status Wait() const;
  // Checks once: true when the fill has finished (successfully or not).
  bool WeakWait() const;
  int node() const;  // where the copy lives

  // Acknowledges a modification of the cached copy (made through mutable_data()): from now on
  // the cache writes it back or refuses to drop it (see the dirty-data contract above).
  // Other entries overlapping this one leave the cache. Errors (nothing is marked, the
  // modification is not acknowledged): an empty entry; not cached (filling, failed, no room:
  // there is no copy to modify); the entry has left the cache (the message says how).
  Status MarkDirty() const;
  // Modifications acknowledged and not yet written back or discarded.
  bool dirty() const;
  // Copies the cached range back to the source through the cache's engines (recording a
  // modification first, as MarkDirty does); the entry is clean once that copy has completed,
  // unless MarkDirty was called again meanwhile. Errors: those of MarkDirty; the copy's
  // error through the handle (a source that is not writable, for example), with the entry
  // still dirty.
  Result<Handle> WriteBack() const;

 private:
  friend class OffloadCache;
  CacheEntry(detail::CacheEntryState* state, const char* src, std::size_t size,
             void* hold = nullptr);
  void Release();
  detail::CacheEntryState* state_ = nullptr;
  void* hold_ = nullptr;  // the per-thread hold word, or null: a reference on the shared count
  const char* src_ = nullptr;
  std::size_t size_ = 0;
};

class TIERFLOW_EXPORT OffloadCache {
 public:
  // Errors: no engines, a capacity for a node the topology lacks, an allocator with only one of
  // allocate/free, a copy policy CheckCopyPolicy refuses. `topology` must describe this system
  // and outlive the cache.
  static Result<std::unique_ptr<OffloadCache>> Create(const Topology& topology, CacheConfig config);
  // Waits for fills in flight (they read the sources), writes dirty entries back and waits for
  // that (a write-back that fails here cannot be reported, and its modifications are lost:
  // call Clear(DirtyEntries::kWriteBack) first to see errors), frees what no CacheEntry
  // holds; entries still held keep their memory until released. The engines must outlive the
  // cache.
  ~OffloadCache();
  OffloadCache(const OffloadCache&) = delete;
  OffloadCache& operator=(const OffloadCache&) = delete;

  // The entry for [src, src+size): an existing one that contains it, or a new one whose fill is
  // submitted now (after writing back dirty entries the range overlaps, and waiting for that).
  // Errors (nothing cached, nothing submitted): null src, size 0, a range that wraps, a
  // placement outside the topology, a failed write-back of an overlapping dirty entry (which
  // stays dirty). Lack of room is not an error: the entry then reads from the source and
  // Wait() says why.
  Result<CacheEntry> Access(const void* src, std::size_t size);
  // An existing entry only: never submits. Empty entry (valid() false) when none.
  CacheEntry WeakAccess(const void* src, std::size_t size);
  // Submits fills for the ranges without waiting or holding their entries. Returns how many
  // fills were submitted (ranges already cached count 0); the first error stops it. The
  // sources must stay valid until the fills finish (WaitForFills, or Access + Wait).
  Result<std::size_t> Prefetch(std::span<const std::pair<const void*, std::size_t>> ranges);

  // Removes every entry overlapping [src, src+size) (size 0: the entries starting at src).
  // Dirty entries follow `dirty`: with kRefuse the first dirty one fails the call and nothing
  // is removed; with kWriteBack they are written back first (entries marked dirty while that
  // runs are written back too) and a failed write-back fails the call with nothing removed
  // and the modifications kept; kDiscard drops the modifications. The check and the removal
  // are atomic with respect to MarkDirty: a MarkDirty that returned ok before is honoured, and
  // one that comes after finds the entry gone and says so. Fills of removed entries still in
  // flight are waited for: once the call returns, no engine reads the range for them (the
  // source may change). Returns how many entries were removed.
  Result<std::size_t> Invalidate(const void* src, std::size_t size,
                                 DirtyEntries dirty = DirtyEntries::kRefuse);
  // Drops every entry no CacheEntry holds and whose fill has finished, freeing its memory
  // (dirty ones are kept: they hold the only copy of their modifications). Returns how many.
  std::size_t DropUnused();
  // Drops every entry from the cache (held ones stay valid for their holders); dirty entries
  // follow `dirty` as in Invalidate.
  Result<std::size_t> Clear(DirtyEntries dirty = DirtyEntries::kRefuse);

  // Waits until every fill and write-back submitted before the call has finished (including
  // fills of entries invalidated meanwhile: they still read their sources).
  void WaitForFills() const;

  std::vector<CacheNodeStats> stats() const;
  // Starts the counters over, to measure one phase (e.g. one query of many): counts go to 0,
  // each node's peak to its bytes in use now; bytes used, entries and capacities stay.
  void ResetStats();

 private:
  struct Impl;
  explicit OffloadCache(std::unique_ptr<Impl> impl);
  // Access, and whether it created the entry (a miss that submitted its fill).
  Result<CacheEntry> Access(const void* src, std::size_t size, bool* missed);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
