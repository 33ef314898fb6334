// SPDX-License-Identifier: Apache-2.0
// The offloading cache: sharing, sub-ranges, weak wait/access, invalidation, memory pressure,
// allocation policy, dirty entries, and a regression test for each deadlock the thesis found.
#include "tierflow/cache.h"

#include <linux/idxd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/engine_fixture.h"
#include "testing/manual_engine.h"
#include "testing/random_bytes.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/node_arena.h"
#include "tierflow/uring_engine.h"

namespace tierflow {
namespace {

using testkit::MakeCpuEngine;
using testkit::ManualEngine;
using testkit::RandomBytes;
using testkit::ThisSystem;

std::unique_ptr<OffloadCache> MakeCache(CacheConfig c) {
  Result<std::unique_ptr<OffloadCache>> r = OffloadCache::Create(ThisSystem(), std::move(c));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

CacheNodeStats Node0(const OffloadCache& c) { return c.stats().front(); }

CacheEntry Take(Result<CacheEntry> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : CacheEntry();
}

class CpuCache : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = MakeCpuEngine();
    CacheConfig c;
    c.engines = {engine_.get()};
    c.capacity[0] = 64 << 20;
    c.arena_chunk = 16 << 20;
    cache_ = MakeCache(c);
  }
  std::unique_ptr<CpuEngine> engine_;
  std::unique_ptr<OffloadCache> cache_;
};

TEST_F(CpuCache, FirstAccessFillsLaterAccessesShareTheEntry) {
  auto src = RandomBytes(1 << 20, 1);
  CacheEntry a = Take(cache_->Access(src.data(), src.size()));
  ASSERT_TRUE(a.Wait().ok());
  EXPECT_TRUE(a.cached());
  EXPECT_NE(a.data(), src.data());
  EXPECT_EQ(std::memcmp(a.data(), src.data(), src.size()), 0);
  CacheEntry b = Take(cache_->Access(src.data(), src.size()));
  EXPECT_EQ(b.data(), a.data());
  CacheNodeStats s = Node0(*cache_);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.bytes_filled, src.size());
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes_used, src.size());
  EXPECT_EQ(s.tier, ThisSystem().node(0)->kind);
}

TEST_F(CpuCache, SubRangeIsServedFromTheContainingEntry) {
  auto src = RandomBytes(2 << 20, 2);
  CacheEntry whole = Take(cache_->Access(src.data(), 1 << 20));
  ASSERT_TRUE(whole.Wait().ok());
  CacheEntry part = Take(cache_->Access(src.data() + 1000, 5000));
  ASSERT_TRUE(part.Wait().ok());
  EXPECT_EQ(part.data(), static_cast<const char*>(whole.data()) + 1000);
  EXPECT_EQ(part.source(), src.data() + 1000);
  EXPECT_EQ(part.size(), 5000u);
  EXPECT_EQ(Node0(*cache_).misses, 1u);
  // Overlapping without containment: an entry of its own.
  CacheEntry beyond = Take(cache_->Access(src.data() + (1 << 20) - 100, 200));
  EXPECT_EQ(Node0(*cache_).misses, 2u);
  ASSERT_TRUE(beyond.Wait().ok());
}

TEST_F(CpuCache, InvalidateRemovesEveryOverlappingEntry) {
  auto src = RandomBytes(4 << 20, 3);
  const char* p = reinterpret_cast<const char*>(src.data());
  for (std::size_t off : {std::size_t{0}, std::size_t{2} << 20, std::size_t{3} << 20}) {
    ASSERT_TRUE(Take(cache_->Access(p + off, 1 << 20)).Wait().ok());
  }
  Result<std::size_t> n = cache_->Invalidate(p + 900000, (2 << 20) + 1000 - 900000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u) << "[0,1M) and [2M,3M) overlap the range; [3M,4M) does not";
  EXPECT_FALSE(cache_->WeakAccess(p, 1 << 20).valid());
  EXPECT_FALSE(cache_->WeakAccess(p + (2 << 20), 1 << 20).valid());
  EXPECT_TRUE(cache_->WeakAccess(p + (3 << 20), 1 << 20).valid());
  EXPECT_EQ(*cache_->Invalidate(p + (3 << 20), 0), 1u) << "size 0: the entry starting there";
  EXPECT_EQ(Node0(*cache_).entries, 0u);
  EXPECT_EQ(Node0(*cache_).bytes_used, 0u);
}

TEST_F(CpuCache, WeakAccessNeverSubmits) {
  auto src = RandomBytes(100000, 4);
  EXPECT_FALSE(cache_->WeakAccess(src.data(), src.size()).valid());
  EXPECT_EQ(Node0(*cache_).misses, 0u);
  ASSERT_TRUE(Take(cache_->Access(src.data(), src.size())).Wait().ok());
  CacheEntry w = cache_->WeakAccess(src.data(), src.size());
  ASSERT_TRUE(w.valid());
  EXPECT_TRUE(w.cached());
}

TEST_F(CpuCache, EntryMemoryLivesAsLongAsAHolder) {
  auto src = RandomBytes(1 << 20, 5);
  CacheEntry held = Take(cache_->Access(src.data(), src.size()));
  ASSERT_TRUE(held.Wait().ok());
  ASSERT_EQ(*cache_->Invalidate(src.data(), src.size()), 1u);
  EXPECT_EQ(std::memcmp(held.data(), src.data(), src.size()), 0) << "still readable";
  EXPECT_EQ(Node0(*cache_).bytes_used, src.size()) << "freed with the last holder";
  CacheEntry copy = held;
  held = CacheEntry();
  EXPECT_EQ(std::memcmp(copy.data(), src.data(), src.size()), 0);
  copy = CacheEntry();
  EXPECT_EQ(Node0(*cache_).bytes_used, 0u);
  // An entry may outlive its cache.
  CacheEntry survivor = Take(cache_->Access(src.data(), src.size()));
  ASSERT_TRUE(survivor.Wait().ok());
  cache_.reset();
  EXPECT_EQ(std::memcmp(survivor.data(), src.data(), src.size()), 0);
}

// A cache destroyed while its fills are still with a worker, its entries held past it: the
// destructor waits until every fill's completion has let go of the cache's core (a completion
// drops its entry first and then counts the copy done, holding no reference of its own), and
// the entries read the right bytes afterwards. In the rounds that hold no entry, the last
// completion frees the core: under the sanitizers this catches one touching it after that.
TEST(CacheLifetime, DestroyedWithFillsInFlightWhileItsEntriesOutliveIt) {
  CpuEngineOptions o;
  o.inline_max_bytes = 0;  // every fill goes to a worker
  o.waiter_runs_pieces = false;
  auto engine = MakeCpuEngine(o);
  const std::vector<unsigned char> src = RandomBytes(64 * 4096, 5);
  for (int round = 0; round < 40; ++round) {
    CacheConfig c;
    c.engines = {engine.get()};
    c.capacity[0] = 4 << 20;
    auto cache = MakeCache(c);
    ASSERT_NE(cache, nullptr);
    std::vector<CacheEntry> held;
    for (std::size_t i = 0; i < 64; ++i) {
      Result<CacheEntry> e = cache->Access(src.data() + i * 4096, 4096);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      if (round % 2 == 0) held.push_back(std::move(e).value());  // odd rounds hold none
    }
    cache.reset();
    for (std::size_t i = 0; i < held.size(); ++i) {
      ASSERT_TRUE(held[i].Wait().ok());
      ASSERT_EQ(std::memcmp(held[i].data(), held[i].source(), 4096), 0) << "round " << round;
    }
  }
}

// Hits hold entries through per-thread tables (no shared write); invalidation converts those
// holds to references, so a held entry stays readable until its last holder lets go, on any
// thread, and no memory is lost or freed early.
TEST_F(CpuCache, HoldsFromHitsSurviveInvalidationAndMoveBetweenThreads) {
  auto src = RandomBytes(256 << 10, 9);
  ASSERT_TRUE(Take(cache_->Access(src.data(), src.size())).Wait().ok());
  CacheEntry hit = Take(cache_->Access(src.data(), src.size()));  // a table hold
  CacheEntry copy = hit;
  EXPECT_EQ(cache_->DropUnused(), 0u) << "held through the table";
  ASSERT_EQ(*cache_->Invalidate(src.data(), src.size()), 1u);
  EXPECT_EQ(std::memcmp(hit.data(), src.data(), src.size()), 0);
  std::thread other([moved = std::move(copy), &src]() mutable {
    EXPECT_EQ(std::memcmp(moved.data(), src.data(), src.size()), 0);
    moved = CacheEntry();  // released on another thread
  });
  other.join();
  EXPECT_EQ(Node0(*cache_).bytes_used, NodeArena::Round(src.size()));
  CacheEntry copy_after = hit;  // a copy made after the conversion
  hit = CacheEntry();
  EXPECT_EQ(std::memcmp(copy_after.data(), src.data(), src.size()), 0);
  copy_after = CacheEntry();
  EXPECT_EQ(Node0(*cache_).bytes_used, 0u) << "freed with the last holder";

  // Many holds at once from one thread: beyond what its table takes, holds fall back to the
  // shared count; all are released and nothing leaks.
  std::vector<unsigned char> many(20000 * 64, 3);
  std::vector<CacheEntry> held;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < 20000; ++i)
      held.push_back(Take(cache_->Access(many.data() + i * 64, 64)));
  }
  cache_->WaitForFills();
  EXPECT_EQ(cache_->DropUnused(), 0u);
  ASSERT_TRUE(cache_->Clear().ok());
  for (std::size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(std::memcmp(held[i].data(), many.data() + (i % 20000) * 64, 64), 0) << i;
  }
  held.clear();
  EXPECT_EQ(Node0(*cache_).bytes_used, 0u);
}

TEST_F(CpuCache, DirtyEntriesNeedAChoice) {
  auto src = RandomBytes(64 << 10, 6);
  auto original = src;
  CacheEntry e = Take(cache_->Access(src.data(), src.size()));
  ASSERT_TRUE(e.Wait().ok());
  static_cast<unsigned char*>(e.mutable_data())[10] ^= 0xff;
  ASSERT_TRUE(e.MarkDirty().ok());
  Result<std::size_t> refused = cache_->Invalidate(src.data(), src.size());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("dirty"), std::string::npos);
  EXPECT_NE(refused.status().message().find("kWriteBack"), std::string::npos);
  EXPECT_EQ(cache_->DropUnused(), 0u) << "a dirty entry is not dropped";
  ASSERT_TRUE(cache_->Invalidate(src.data(), src.size(), DirtyEntries::kWriteBack).ok());
  EXPECT_EQ(src[10], original[10] ^ 0xff) << "written back";

  CacheEntry f = Take(cache_->Access(src.data(), src.size()));
  ASSERT_TRUE(f.Wait().ok());
  static_cast<unsigned char*>(f.mutable_data())[20] ^= 0xff;
  ASSERT_TRUE(f.MarkDirty().ok());
  ASSERT_TRUE(cache_->Invalidate(src.data(), src.size(), DirtyEntries::kDiscard).ok());
  EXPECT_EQ(src[20], original[20]) << "discarded";

  CacheEntry g = Take(cache_->Access(src.data(), src.size()));
  ASSERT_TRUE(g.Wait().ok());
  static_cast<unsigned char*>(g.mutable_data())[30] ^= 0xff;
  ASSERT_TRUE(g.MarkDirty().ok());
  Result<Handle> wb = g.WriteBack();
  ASSERT_TRUE(wb.ok());
  ASSERT_TRUE(wb->Wait().ok());
  EXPECT_EQ(src[30], original[30] ^ 0xff);
  EXPECT_FALSE(g.dirty());
  EXPECT_EQ(Node0(*cache_).write_backs, 2u);
}

TEST_F(CpuCache, PrefetchSubmitsWithoutHolding) {
  auto a = RandomBytes(100000, 7), b = RandomBytes(100000, 8);
  std::vector<std::pair<const void*, std::size_t>> ranges = {{a.data(), a.size()},
                                                             {b.data(), b.size()}};
  Result<std::size_t> n = cache_->Prefetch(ranges);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(*cache_->Prefetch(ranges), 0u) << "already cached";
  CacheEntry e = cache_->WeakAccess(a.data(), a.size());
  ASSERT_TRUE(e.valid());
  ASSERT_TRUE(e.Wait().ok());
  EXPECT_EQ(std::memcmp(e.data(), a.data(), a.size()), 0);
  cache_->WaitForFills();  // b's fill reads b, which goes out of scope next
  CacheEntry f = cache_->WeakAccess(b.data(), b.size());
  EXPECT_TRUE(f.cached());
}

TEST_F(CpuCache, BadInputIsRefused) {
  std::vector<char> v(100);
  EXPECT_EQ(cache_->Access(nullptr, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cache_->Access(v.data(), 0).status().message().find("0 bytes"), std::string::npos);
  EXPECT_NE(cache_->Access(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100)
                .status()
                .message()
                .find("wraps"),
            std::string::npos);
  EXPECT_FALSE(cache_->Invalidate(nullptr, 1).ok());
  EXPECT_FALSE(CacheEntry().Wait().ok());
  EXPECT_FALSE(CacheEntry().WriteBack().ok());

  CacheConfig none;
  EXPECT_NE(OffloadCache::Create(ThisSystem(), none).status().message().find("at least one engine"),
            std::string::npos);
  CacheConfig half;
  half.engines = {engine_.get()};
  half.allocator.allocate = [](std::size_t, int) -> void* { return nullptr; };
  EXPECT_NE(
      OffloadCache::Create(ThisSystem(), half).status().message().find("both allocate and free"),
      std::string::npos);
  CacheConfig far;
  far.engines = {engine_.get()};
  far.capacity[99] = 1 << 20;
  EXPECT_EQ(OffloadCache::Create(ThisSystem(), far).status().code(), StatusCode::kNotFound);
  CacheConfig bad_policy;  // refused at creation, not at the first fill
  bad_policy.engines = {engine_.get()};
  bad_policy.copy_policy.weights[0] = -1;
  EXPECT_NE(OffloadCache::Create(ThisSystem(), bad_policy).status().message().find("weight -1"),
            std::string::npos);
  CacheConfig nowhere;
  nowhere.engines = {engine_.get()};
  nowhere.placement = [](const void*, std::size_t, int) { return 42; };
  auto c = MakeCache(nowhere);
  Result<CacheEntry> r = c->Access(v.data(), v.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 42"), std::string::npos);
}

// The engine for a fill follows the source's tier: a column file registered with the storage
// engine is read from the file (io_uring), memory is copied by a memory engine.
TEST(CachePlanner, FileBackedSourcesAreFilledByTheStorageEngine) {
  auto data = RandomBytes(1 << 20, 80);
  char name[] = "/tmp/tierflow-cache-column-XXXXXX";
  int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  Result<MappedFile> column = MappedFile::Open(name);
  ASSERT_TRUE(column.ok());
  auto uring = IoUringEngine::Create();
  ASSERT_TRUE(uring.ok());
  ASSERT_TRUE((*uring)->RegisterFile(*column).ok());
  auto cpu = MakeCpuEngine();
  CacheConfig c;
  c.engines = {cpu.get(), uring->get()};
  c.capacity[0] = 8 << 20;
  auto cache = MakeCache(c);
  CacheEntry from_file = Take(cache->Access(column->data() + 4096, 512 << 10));
  ASSERT_TRUE(from_file.Wait().ok());
  EXPECT_EQ(std::memcmp(from_file.data(), data.data() + 4096, 512 << 10), 0);
  EXPECT_EQ((*uring)->ring_stats().ops, 1u);
  auto memory = RandomBytes(100000, 81);
  CacheEntry from_memory = Take(cache->Access(memory.data(), memory.size()));
  ASSERT_TRUE(from_memory.Wait().ok());
  EXPECT_EQ((*uring)->ring_stats().ops, 1u) << "memory goes to the CPU engine";
  EXPECT_EQ(cpu->stats().ops_submitted, 1u);
  // Only a storage engine, and a source it does not hold: nothing can fill it; the entry
  // reads the source and says why.
  CacheConfig only_storage;
  only_storage.engines = {uring->get()};
  only_storage.copy_policy.kind = PolicyKind::kPushPull;  // a plan is made
  auto c2 = MakeCache(only_storage);
  CacheEntry orphan = Take(c2->Access(memory.data(), memory.size()));
  Status why = orphan.Wait();
  EXPECT_NE(why.message().find("no memory engine"), std::string::npos) << why.message();
  EXPECT_EQ(orphan.data(), memory.data());
  cache.reset();
  c2.reset();
  std::remove(name);
}

// --- memory pressure -----------------------------------------------------------------------

TEST(CacheMemory, EvictsLeastRecentlyUsedAndNeverExceedsCapacity) {
  auto engine = MakeCpuEngine();
  CacheConfig c;
  c.engines = {engine.get()};
  c.capacity[0] = 3 << 20;
  c.arena_chunk = 1 << 20;
  auto cache = MakeCache(c);
  std::vector<std::vector<unsigned char>> src;
  for (int i = 0; i < 5; ++i) src.push_back(RandomBytes(1 << 20, 10 + i));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Take(cache->Access(src[i].data(), 1 << 20)).Wait().ok());
  ASSERT_TRUE(Take(cache->Access(src[0].data(), 1 << 20)).Wait().ok());  // 0 used again
  ASSERT_TRUE(Take(cache->Access(src[3].data(), 1 << 20)).Wait().ok());  // evicts 1
  EXPECT_TRUE(cache->WeakAccess(src[0].data(), 1 << 20).valid());
  EXPECT_FALSE(cache->WeakAccess(src[1].data(), 1 << 20).valid()) << "least recently used";
  EXPECT_TRUE(cache->WeakAccess(src[2].data(), 1 << 20).valid());
  CacheNodeStats s = Node0(*cache);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_LE(s.bytes_used, s.capacity);
  EXPECT_EQ(s.peak_bytes, std::uint64_t{3} << 20);
  EXPECT_EQ(s.capacity, std::uint64_t{3} << 20);

  // Every entry held: nothing can be evicted, the access is served from the source.
  std::vector<CacheEntry> held;
  for (int i : {0, 2, 3}) held.push_back(cache->WeakAccess(src[i].data(), 1 << 20));
  CacheEntry no_room = Take(cache->Access(src[4].data(), 1 << 20));
  EXPECT_FALSE(no_room.cached());
  EXPECT_EQ(no_room.data(), src[4].data());
  Status why = no_room.Wait();
  EXPECT_EQ(why.code(), StatusCode::kUnsupported);
  EXPECT_NE(why.message().find("not cached"), std::string::npos) << why.message();
  EXPECT_EQ(Node0(*cache).not_cached, 1u);
  EXPECT_LE(Node0(*cache).bytes_used, std::uint64_t{3} << 20);
  // Larger than the whole capacity.
  std::vector<unsigned char> big(4 << 20);
  CacheEntry too_big = Take(cache->Access(big.data(), big.size()));
  EXPECT_NE(too_big.Wait().message().find("exceed the cache's capacity"), std::string::npos);
  held.clear();
  EXPECT_EQ(cache->DropUnused(), 3u);
  EXPECT_EQ(Node0(*cache).bytes_used, 0u);
}

TEST(CacheMemory, ReservedCapacityIsTakenAtCreationAndStatsStartOver) {
  auto engine = MakeCpuEngine();
  CacheConfig c;
  c.engines = {engine.get()};
  c.capacity[0] = (3 << 20) + (512 << 10);  // not a multiple of the chunk: a smaller last chunk
  c.arena_chunk = 1 << 20;
  c.reserve_capacity = true;
  auto cache = MakeCache(c);
  std::vector<std::vector<unsigned char>> src;
  for (int i = 0; i < 4; ++i) src.push_back(RandomBytes(768 << 10, 40 + i));
  for (auto& s : src) ASSERT_TRUE(Take(cache->Access(s.data(), s.size())).Wait().ok());
  CacheNodeStats s = Node0(*cache);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.peak_bytes, 4u * (768 << 10));
  EXPECT_LE(s.bytes_used, s.capacity);

  // A second phase: entries stay, counters start over, the peak starts at what is in use.
  cache->ResetStats();
  s = Node0(*cache);
  EXPECT_EQ(s.misses + s.hits + s.bytes_filled + s.evictions, 0u);
  EXPECT_EQ(s.peak_bytes, s.bytes_used);
  EXPECT_EQ(s.entries, 4u);
  CacheEntry hit = Take(cache->Access(src[0].data(), src[0].size()));
  EXPECT_TRUE(hit.cached());
  EXPECT_EQ(std::memcmp(hit.data(), src[0].data(), src[0].size()), 0);
  EXPECT_EQ(Node0(*cache).hits, 1u);
  hit = CacheEntry();
  ASSERT_TRUE(cache->Clear().ok());
  cache->ResetStats();
  EXPECT_EQ(Node0(*cache).peak_bytes, 0u);

  // More than the node has: Create says so; and no reservation with a user allocator.
  CacheConfig huge = c;
  huge.capacity[0] = std::size_t{1} << 50;
  Result<std::unique_ptr<OffloadCache>> r = OffloadCache::Create(ThisSystem(), huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reserving the cache capacity of node 0"), std::string::npos)
      << r.status().message();
  CacheConfig own = c;
  own.allocator.allocate = [](std::size_t n, int) { return std::malloc(n); };
  own.allocator.free = [](void* p, std::size_t, int) { std::free(p); };
  r = OffloadCache::Create(ThisSystem(), own);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reserve in the allocator"), std::string::npos);
}

TEST(CacheMemory, UserAllocatorIsUsedAndBalanced) {
  auto engine = MakeCpuEngine();
  std::atomic<int> allocs{0}, frees{0};
  CacheConfig c;
  c.engines = {engine.get()};
  c.capacity[0] = 8 << 20;
  c.allocator.allocate = [&](std::size_t size, int node) -> void* {
    EXPECT_EQ(node, 0);
    ++allocs;
    return std::aligned_alloc(64, (size + 63) / 64 * 64);
  };
  c.allocator.free = [&](void* p, std::size_t, int) {
    ++frees;
    std::free(p);
  };
  {
    auto cache = MakeCache(c);
    auto src = RandomBytes(300000, 20);
    for (int i = 0; i < 3; ++i) {
      CacheEntry e = Take(cache->Access(src.data() + i * 100000, 100000));
      ASSERT_TRUE(e.Wait().ok());
      EXPECT_EQ(std::memcmp(e.data(), src.data() + i * 100000, 100000), 0);
    }
    EXPECT_EQ(allocs.load(), 3);
  }
  EXPECT_EQ(frees.load(), 3);
}

// An allocator that counts, and remembers the most bytes it had out at once.
struct CountingAllocator {
  std::atomic<int> allocs{0}, frees{0};
  std::atomic<std::size_t> out{0}, most{0};
  CacheAllocator Make() {
    return {[this](std::size_t size, int) -> void* {
              ++allocs;
              const std::size_t now = out += size;
              if (now > most) most = now;
              return std::aligned_alloc(64, (size + 63) / 64 * 64);
            },
            [this](void* p, std::size_t size, int) {
              ++frees;
              out -= size;
              std::free(p);
            }};
  }
};

TEST(CacheMemory, FreedEntriesLendTheirMemoryToTheNextOfTheirSizeWithinTheCapacity) {
  auto engine = MakeCpuEngine();
  CountingAllocator a;
  CacheConfig c;
  c.engines = {engine.get()};
  c.capacity[0] = 8 * 65536;
  c.allocator = a.Make();
  auto src = RandomBytes(8 * 65536, 21);
  {
    auto cache = MakeCache(c);
    auto fill_all = [&](std::size_t size, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) {
        CacheEntry e = Take(cache->Access(src.data() + i * size, size));
        ASSERT_TRUE(e.Wait().ok());
        ASSERT_TRUE(e.cached()) << "entry " << i << " of " << size << " bytes";
        EXPECT_EQ(std::memcmp(e.data(), src.data() + i * size, size), 0);
      }
    };
    fill_all(65536, 8);
    ASSERT_TRUE(cache->Clear().ok());
    EXPECT_EQ(Node0(*cache).bytes_used, 0u);
    EXPECT_EQ(a.frees.load(), 0);  // kept for the next entries of that size
    fill_all(65536, 8);
    EXPECT_EQ(a.allocs.load(), 8);  // the same memory, filled again
    ASSERT_TRUE(cache->Clear().ok());
    // Another size: the kept memory goes back as the capacity needs the room.
    fill_all(100000, 5);
    EXPECT_EQ(a.frees.load(), 8);
    EXPECT_EQ(a.allocs.load(), 13);
    EXPECT_LE(a.most.load(), c.capacity[0]);
    EXPECT_EQ(Node0(*cache).bytes_used, 5 * NodeArena::Round(100000));
  }
  EXPECT_EQ(a.frees.load(), a.allocs.load());
  EXPECT_EQ(a.out.load(), 0u);
}

TEST(CacheMemory, MemoryOfAnEntryHeldPastTheCacheIsFreedWithItsLastHolder) {
  auto engine = MakeCpuEngine();
  CountingAllocator a;
  CacheConfig c;
  c.engines = {engine.get()};
  c.capacity[0] = 1 << 20;
  c.allocator = a.Make();
  auto src = RandomBytes(3 * 4096, 22);
  CacheEntry kept;
  {
    auto cache = MakeCache(c);
    for (int i = 0; i < 3; ++i) {
      CacheEntry e = Take(cache->Access(src.data() + i * 4096, 4096));
      ASSERT_TRUE(e.Wait().ok());
      if (i == 1) kept = e;
    }
    ASSERT_TRUE(cache->Clear().ok());  // two entries back in the pool with their memory
  }
  EXPECT_EQ(a.frees.load(), 2);
  ASSERT_TRUE(kept.cached());
  EXPECT_EQ(std::memcmp(kept.data(), src.data() + 4096, 4096), 0);
  kept = CacheEntry();
  EXPECT_EQ(a.frees.load(), 3);
  EXPECT_EQ(a.out.load(), 0u);
}

// --- the thesis' deadlocks (§5.1.3) ---------------------------------------------------------

// An engine that holds a submission at its validation until the test opens the gate: the
// window between "the entry is in the cache" and "its fill is submitted".
class GatedEngine : public ManualEngine {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  std::atomic<int> arrived{0};

 protected:
  Status CheckOperation(const Operation&) const override {
    ++const_cast<GatedEngine*>(this)->arrived;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    return Status::Ok();
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool open_ = false;
};

// 5.1.3.1 (initial invalid state) and 5.1.1's blocking scenario: T2 and T3 wait on an entry
// whose fill T1 has not submitted yet, and T1 never waits. They must complete anyway.
TEST(CacheDeadlocks, WaitersBeforeSubmissionAndASubmitterThatNeverWaits) {
  GatedEngine engine;
  CacheConfig c;
  c.engines = {&engine};
  c.capacity[0] = 8 << 20;
  auto cache = MakeCache(c);
  auto src = RandomBytes(64 << 10, 30);
  std::thread t1([&] { (void)Take(cache->Access(src.data(), src.size())); });  // never waits
  while (engine.arrived.load() == 0) std::this_thread::yield();
  std::atomic<int> done{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&] {
      CacheEntry e = Take(cache->Access(src.data(), src.size()));
      EXPECT_FALSE(e.WeakWait());
      EXPECT_EQ(e.data(), src.data()) << "not filled yet: the source";
      EXPECT_TRUE(e.Wait().ok());
      EXPECT_EQ(std::memcmp(e.data(), src.data(), src.size()), 0);
      ++done;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(done.load(), 0);
  engine.Open();
  t1.join();
  while (engine.pending() == 0) std::this_thread::yield();
  engine.CompleteNext();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(Node0(*cache).misses, 1u);
  EXPECT_EQ(Node0(*cache).late_hits, 2u);
}

// 5.1.3.2 (a losing duplicate destroyed immediately): concurrent first accesses submit one fill
// and no thread waits on a copy that was never submitted.
TEST(CacheDeadlocks, ConcurrentFirstAccessesSubmitOneFill) {
  auto engine = MakeCpuEngine();
  for (int round = 0; round < 20; ++round) {
    CacheConfig c;
    c.engines = {engine.get()};
    c.capacity[0] = 8 << 20;
    auto cache = MakeCache(c);
    auto src = RandomBytes(256 << 10, 40 + round);
    std::vector<std::thread> ts;
    std::atomic<bool> go{false};
    for (int i = 0; i < 8; ++i) {
      ts.emplace_back([&] {
        while (!go.load()) std::this_thread::yield();
        CacheEntry e = Take(cache->Access(src.data(), src.size()));
        EXPECT_TRUE(e.Wait().ok());
        EXPECT_EQ(std::memcmp(e.data(), src.data(), src.size()), 0);
      });
    }
    go = true;
    for (auto& t : ts) t.join();
    CacheNodeStats s = Node0(*cache);
    EXPECT_EQ(s.misses, 1u) << "round " << round;
    EXPECT_EQ(s.hits + s.late_hits, 7u);
  }
}

// 5.1.3.3 (a fill that fails): waiters return the error, data() is the source, and the next
// access submits a new fill instead of finding the failed entry forever.
TEST(CacheDeadlocks, FailedFillFallsBackToTheSourceAndIsRetried) {
  ManualEngine engine;
  CacheConfig c;
  c.engines = {&engine};
  c.capacity[0] = 8 << 20;
  auto cache = MakeCache(c);
  auto src = RandomBytes(64 << 10, 50);
  CacheEntry e = Take(cache->Access(src.data(), src.size()));
  std::thread waiter([&] {
    Status s = e.Wait();
    EXPECT_EQ(s.code(), StatusCode::kFailed);
    EXPECT_NE(s.message().find("cache fill failed"), std::string::npos) << s.message();
  });
  while (engine.pending() == 0) std::this_thread::yield();
  engine.CompleteNext(StatusCode::kFailed, "injected");
  waiter.join();
  EXPECT_FALSE(e.cached());
  EXPECT_EQ(e.data(), src.data());
  EXPECT_EQ(Node0(*cache).failed_fills, 1u);
  EXPECT_FALSE(cache->WeakAccess(src.data(), src.size()).valid()) << "a failed entry is not served";
  CacheEntry again = Take(cache->Access(src.data(), src.size()));
  engine.CompleteNext();
  ASSERT_TRUE(again.Wait().ok());
  EXPECT_TRUE(again.cached());
  EXPECT_EQ(Node0(*cache).misses, 2u);
  // A fill the engine refuses to take: the same fallback, at once.
  std::vector<unsigned char> other(4096, 1);
  engine.refuse_ = true;
  CacheEntry refused = Take(cache->Access(other.data(), other.size()));
  EXPECT_NE(refused.Wait().message().find("manual engine refuses"), std::string::npos);
  EXPECT_EQ(refused.data(), other.data());
}

// 5.1.3.4 (the missed update between two waiters, ABA): many waiters arriving at every moment
// of the completion all return.
TEST(CacheDeadlocks, ManyWaitersAroundTheCompletionAllReturn) {
  ManualEngine engine;
  CacheConfig c;
  c.engines = {&engine};
  c.capacity[0] = 64 << 20;
  auto cache = MakeCache(c);
  // Distinct live sources: a freed and reallocated source would be a stale hit (the cache
  // cannot know the memory changed hands; callers invalidate).
  std::vector<std::vector<unsigned char>> sources;
  for (int round = 0; round < 50; ++round) sources.push_back(RandomBytes(4096, 60 + round));
  for (int round = 0; round < 50; ++round) {
    const auto& src = sources[round];
    CacheEntry e = Take(cache->Access(src.data(), src.size()));
    ASSERT_EQ(engine.pending(), 1u);
    std::atomic<int> returned{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i) {
      ts.emplace_back([&, i] {
        if (i % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(50 * i));
        CacheEntry mine = cache->WeakAccess(src.data(), src.size());
        EXPECT_TRUE(mine.Wait().ok());
        ++returned;
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    engine.CompleteNext();
    for (auto& t : ts) t.join();
    EXPECT_EQ(returned.load(), 4);
  }
}

// --- stress: many threads, fills through the DSA model with injected faults and errors ----

TEST(CacheStress, RandomAccessInvalidateFlushEveryByteMatches) {
  DsaModelConfig mc;
  mc.max_transfer_size = 64 << 10;
  auto model = DsaDeviceModel::Create(mc);
  ASSERT_TRUE(model.ok());
  auto dsa = DsaEngine::CreateOnModel(*model, 0);
  ASSERT_TRUE(dsa.ok());
  constexpr int kRanges = 24;
  constexpr std::size_t kRange = 192 << 10;
  auto data = RandomBytes(kRanges * kRange, 70);  // outlives the cache, whose fills read it
  CacheConfig c;
  c.engines = {dsa->get()};
  c.capacity[0] = 2 << 20;  // smaller than the data: eviction and "not cached" happen
  c.arena_chunk = 1 << 20;
  auto cache = MakeCache(c);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> checked{0};
  auto worker = [&](unsigned seed) {
    std::mt19937 rng(seed);
    while (!stop.load()) {
      const int r = static_cast<int>(rng() % kRanges);
      const std::size_t off = rng() % 2 == 0 ? 0 : rng() % (kRange / 2);
      const std::size_t len = rng() % 2 == 0 ? kRange - off : 1 + rng() % (kRange - off);
      const unsigned char* src = data.data() + r * kRange + off;
      const int action = static_cast<int>(rng() % 100);
      if (action < 80) {
        CacheEntry e = Take(cache->Access(src, len));
        if (rng() % 2 == 0) {
          (void)e.Wait();
        } else {
          (void)e.WeakWait();
        }
        ASSERT_EQ(std::memcmp(e.data(), src, len), 0)
            << "range " << r << " +" << off << " len " << len;
        checked.fetch_add(1);
      } else if (action < 90) {
        ASSERT_TRUE(cache->Invalidate(src, len).ok());
      } else if (action < 95) {
        cache->DropUnused();
      } else {
        (*model)->InjectError(DSA_COMP_HW_ERR1, 1);
        (*model)->InjectPageFault(src + len / 2);
      }
    }
  };
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < 4; ++i) ts.emplace_back(worker, 100 + i);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (auto& t : ts) t.join();
  CacheNodeStats s = Node0(*cache);
  EXPECT_GT(checked.load(), 100u);
  EXPECT_GT(s.misses, 10u);
  EXPECT_GT(s.evictions + s.not_cached, 0u);
  EXPECT_GT(s.failed_fills, 0u) << "injected errors reached the cache";
  EXPECT_LE(s.bytes_used, s.capacity);
  ASSERT_TRUE(cache->Clear().ok());
  EXPECT_EQ(Node0(*cache).entries, 0u);
  cache->WaitForFills();  // fills of entries invalidated while in flight included
}

}  // namespace
}  // namespace tierflow
