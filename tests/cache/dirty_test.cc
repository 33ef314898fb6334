// SPDX-License-Identifier: Apache-2.0
// The offloading cache's dirty-data contract (cache.h): no acknowledged modification is lost,
// no source byte changes except by a write-back of a complete cached copy, and an access sees
// every modification acknowledged before it. One regression test per defect of issue 12
// (items 1-4), then races of MarkDirty against Clear/Invalidate.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/concurrent_modification.h"
#include "testing/engine_fixture.h"
#include "testing/manual_engine.h"
#include "testing/random_bytes.h"
#include "tierflow/cache.h"
#include "tierflow/uring_engine.h"

namespace tierflow {
namespace {

using testkit::MakeCpuEngine;
using testkit::ManualEngine;
using testkit::RandomBytes;
using testkit::ThisSystem;

std::unique_ptr<OffloadCache> MakeCache(Engine* engine, std::size_t capacity = 64 << 20) {
  CacheConfig c;
  c.engines = {engine};
  c.capacity[0] = capacity;
  c.arena_chunk = 16 << 20;
  Result<std::unique_ptr<OffloadCache>> r = OffloadCache::Create(ThisSystem(), std::move(c));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

CacheEntry Filled(OffloadCache& cache, const void* src, std::size_t size) {
  Result<CacheEntry> r = cache.Access(src, size);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->Wait().ok());
  EXPECT_TRUE(r->cached());
  return std::move(r).value();
}

unsigned char* Bytes(const CacheEntry& e) { return static_cast<unsigned char*>(e.mutable_data()); }
const unsigned char* Read(const CacheEntry& e) {
  return static_cast<const unsigned char*>(e.data());
}

// Bytes of `now` that differ from `before`, apart from the positions listed.
std::size_t ChangedExcept(const std::vector<unsigned char>& now,
                          const std::vector<unsigned char>& before,
                          std::initializer_list<std::size_t> expected) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (now[i] != before[i] && std::find(expected.begin(), expected.end(), i) == expected.end())
      ++n;
  }
  return n;
}

class CacheDirty : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = MakeCpuEngine();
    cache_ = MakeCache(engine_.get());
  }
  std::unique_ptr<CpuEngine> engine_;
  std::unique_ptr<OffloadCache> cache_;
};

// Item 1: a larger access with the same start used to replace the dirty entry, and its
// modification never reached the source.
TEST_F(CacheDirty, ALargerAccessWithTheSameStartKeepsTheModification) {
  auto src = RandomBytes(64 << 10, 1);
  const auto original = src;
  {
    CacheEntry small = Filled(*cache_, src.data(), 4096);
    Bytes(small)[100] ^= 0xff;
    ASSERT_TRUE(small.MarkDirty().ok());
  }
  CacheEntry big = Filled(*cache_, src.data(), 8192);
  EXPECT_EQ(Read(big)[100], original[100] ^ 0xff)
      << "the larger entry is filled after the write-back";
  EXPECT_EQ(src[100], original[100] ^ 0xff);
  ASSERT_TRUE(cache_->Invalidate(src.data(), 8192, DirtyEntries::kWriteBack).ok());
  EXPECT_EQ(src[100], original[100] ^ 0xff);
  EXPECT_EQ(ChangedExcept(src, original, {100}), 0u);
}

TEST_F(CacheDirty, AHeldSmallerEntryStaysWritableBesideALargerOne) {
  auto src = RandomBytes(64 << 10, 2);
  const auto original = src;
  CacheEntry small = Filled(*cache_, src.data(), 4096);
  Bytes(small)[10] ^= 0xff;
  ASSERT_TRUE(small.MarkDirty().ok());
  CacheEntry big = Filled(*cache_, src.data(), 8192);
  EXPECT_EQ(Read(big)[10], original[10] ^ 0xff);
  EXPECT_FALSE(small.dirty()) << "written back before the larger fill";

  // The smaller entry is still in the cache: a second modification is acknowledged, and the
  // larger entry, now stale, leaves the cache.
  Bytes(small)[20] ^= 0xff;
  ASSERT_TRUE(small.MarkDirty().ok());
  EXPECT_FALSE(cache_->WeakAccess(src.data(), 8192).valid());
  Status stale = big.MarkDirty();
  EXPECT_FALSE(stale.ok());
  EXPECT_NE(stale.message().find("left the cache"), std::string::npos) << stale.message();
  EXPECT_FALSE(big.WriteBack().ok()) << "a stale copy never goes over the source";

  Result<std::size_t> refused = cache_->Invalidate(src.data(), 8192);
  ASSERT_FALSE(refused.ok()) << "kRefuse sees the dirty entry";
  ASSERT_TRUE(cache_->Clear(DirtyEntries::kWriteBack).ok());
  EXPECT_EQ(src[10], original[10] ^ 0xff);
  EXPECT_EQ(src[20], original[20] ^ 0xff);
  EXPECT_EQ(ChangedExcept(src, original, {10, 20}), 0u);
}

// Item 3: MarkDirty of an entry without a complete cached copy used to be accepted, and
// kWriteBack then copied the unfilled buffer over the source.
TEST(CacheDirtyNotCached, FailedRunningAndRoomlessEntriesAreNeverWrittenBack) {
  ManualEngine engine;
  auto cache = MakeCache(&engine, 1 << 20);
  auto src = RandomBytes(64 << 10, 3);
  const auto original = src;

  CacheEntry failed = *cache->Access(src.data(), src.size());
  engine.CompleteNext(StatusCode::kFailed, "injected");
  ASSERT_FALSE(failed.Wait().ok());
  Status s = failed.MarkDirty();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not cached"), std::string::npos) << s.message();
  EXPECT_FALSE(failed.dirty());
  EXPECT_TRUE(cache->Invalidate(src.data(), src.size(), DirtyEntries::kWriteBack).ok());
  EXPECT_EQ(src, original);

  CacheEntry running = *cache->Access(src.data(), src.size());
  ASSERT_EQ(engine.pending(), 1u);
  EXPECT_FALSE(running.MarkDirty().ok());
  EXPECT_FALSE(running.WriteBack().ok());
  std::thread clear([&] { EXPECT_TRUE(cache->Clear(DirtyEntries::kWriteBack).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine.pending(), 1u) << "nothing but the fill was submitted";
  engine.CompleteNext();  // Clear waits for the fill of the entry it removes
  clear.join();
  EXPECT_EQ(src, original);

  std::vector<unsigned char> big(2 << 20, 7);
  CacheEntry no_room = *cache->Access(big.data(), big.size());
  EXPECT_EQ(no_room.Wait().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(no_room.MarkDirty().ok());
  EXPECT_TRUE(cache->Clear(DirtyEntries::kWriteBack).ok());
  EXPECT_FALSE(CacheEntry().MarkDirty().ok());
}

// Item 4: entries A=[0,8192) and B=[4096,+8192); B is modified and written back; an access
// that falls only inside A used to read A's old bytes.
TEST_F(CacheDirty, AWrittenBackModificationIsSeenByAccessesOfOverlappingRanges) {
  auto src = RandomBytes(16 << 10, 4);
  const auto original = src;
  CacheEntry a = Filled(*cache_, src.data(), 8192);
  CacheEntry b = Filled(*cache_, src.data() + 4096, 8192);
  Bytes(b)[0] ^= 0xff;  // source byte 4096
  ASSERT_TRUE(b.MarkDirty().ok());
  EXPECT_FALSE(cache_->WeakAccess(src.data(), 8192).valid()) << "A left the cache";
  Result<Handle> wb = b.WriteBack();
  ASSERT_TRUE(wb.ok());
  ASSERT_TRUE(wb->Wait().ok());
  CacheEntry inside_a = Filled(*cache_, src.data() + 2048, 4096);
  EXPECT_EQ(Read(inside_a)[4096 - 2048], original[4096] ^ 0xff);
  EXPECT_EQ(Read(a)[4096], original[4096]) << "a held entry keeps the copy it was filled with";
  EXPECT_FALSE(a.MarkDirty().ok());
  EXPECT_EQ(ChangedExcept(src, original, {4096}), 0u);
}

// The same without the explicit write-back: the access writes B back before its own fill.
TEST_F(CacheDirty, AnAccessOverlappingADirtyEntryWritesItBackFirst) {
  auto src = RandomBytes(16 << 10, 5);
  const auto original = src;
  CacheEntry b = Filled(*cache_, src.data() + 4096, 8192);
  Bytes(b)[1] ^= 0xff;
  ASSERT_TRUE(b.MarkDirty().ok());
  CacheEntry a = Filled(*cache_, src.data(), 8192);
  EXPECT_EQ(Read(a)[4097], original[4097] ^ 0xff);
  EXPECT_FALSE(b.dirty());
  EXPECT_EQ(src[4097], original[4097] ^ 0xff);
  // A write-back without MarkDirty counts as a modification of B: A leaves the cache.
  Bytes(b)[2] ^= 0xff;
  Result<Handle> wb = b.WriteBack();
  ASSERT_TRUE(wb.ok());
  ASSERT_TRUE(wb->Wait().ok());
  EXPECT_FALSE(cache_->WeakAccess(src.data(), 8192).valid());
  EXPECT_EQ(Read(Filled(*cache_, src.data(), 8192))[4098], original[4098] ^ 0xff);
  EXPECT_EQ(ChangedExcept(src, original, {4097, 4098}), 0u);
}

TEST_F(CacheDirty, TheCacheWritesDirtyEntriesBackWhenDestroyed) {
  auto src = RandomBytes(16 << 10, 6);
  const auto original = src;
  CacheEntry e = Filled(*cache_, src.data(), src.size());
  Bytes(e)[5] ^= 0xff;
  ASSERT_TRUE(e.MarkDirty().ok());
  cache_.reset();
  EXPECT_EQ(src[5], original[5] ^ 0xff);
  EXPECT_FALSE(e.MarkDirty().ok()) << "the entry outlived its cache: nothing tracks it";
  EXPECT_FALSE(e.WriteBack().ok());
}

// Item 5 through the cache: writing a modified entry back to a read-only column file used
// to crash the process in a CPU engine worker.
TEST(CacheDirtyFaults, WriteBackToAReadOnlySourceFailsAndKeepsTheModification) {
  auto data = RandomBytes(64 << 10, 7);
  char name[] = "/tmp/tierflow-readonly-column-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  Result<MappedFile> column = MappedFile::Open(name);
  ASSERT_TRUE(column.ok());
  auto engine = MakeCpuEngine();
  auto cache = MakeCache(engine.get());
  CacheEntry e = Filled(*cache, column->data(), data.size());
  Bytes(e)[3] ^= 0xff;
  ASSERT_TRUE(e.MarkDirty().ok());
  Result<Handle> wb = e.WriteBack();
  ASSERT_TRUE(wb.ok());
  Status s = wb->Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
  EXPECT_TRUE(e.dirty()) << "the modification is kept";
  Result<std::size_t> n = cache->Invalidate(column->data(), data.size(), DirtyEntries::kWriteBack);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("nothing was invalidated"), std::string::npos);
  EXPECT_FALSE(cache->Clear(DirtyEntries::kWriteBack).ok());
  Result<CacheEntry> larger = cache->Access(column->data(), data.size() + 1);
  ASSERT_FALSE(larger.ok()) << "it would be filled without the modification";
  EXPECT_NE(larger.status().message().find("write-back failed"), std::string::npos);
  EXPECT_TRUE(cache->WeakAccess(column->data(), data.size()).valid());
  EXPECT_EQ(Read(e)[3], data[3] ^ 0xff);
  ASSERT_TRUE(cache->Clear(DirtyEntries::kDiscard).ok());
  EXPECT_EQ(std::memcmp(column->data(), data.data(), data.size()), 0);
  std::remove(name);
}

// --- races of MarkDirty against Clear and Invalidate (item 2) --------------------------------

// One thread modifies a word per range and marks the entry dirty; another clears the cache
// with kRefuse (falling back to kWriteBack when refused) or kWriteBack. Every acknowledged
// value reaches the source, and no other byte changes.
void ClearRace(DirtyEntries first_choice) {
  auto engine = MakeCpuEngine();
  auto cache = MakeCache(engine.get());
  constexpr std::size_t kRanges = 64, kWords = 512;
  std::vector<std::uint64_t> src(kRanges * kWords);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = 0xA5A5000000000000ull | i;
  const auto original = src;
  std::vector<std::uint64_t> acked(kRanges, 0), written(kRanges, 0);
  std::atomic<bool> stop{false}, enough{false};
  std::thread marker([&] {
    for (std::uint64_t v = 1; v <= 20000 || !enough.load(); ++v) {
      const std::size_t r = v % kRanges;
      Result<CacheEntry> e = cache->Access(&src[r * kWords], kWords * 8);
      ASSERT_TRUE(e.ok());
      if (!e->Wait().ok() || !e->cached()) continue;
      testkit::ConcurrentStore(e->mutable_data(), v);
      written[r] = v;
      if (e->MarkDirty().ok()) acked[r] = v;
    }
    stop = true;
  });
  // Until the race has come up often enough (or 5 s have passed, on a loaded machine).
  std::uint64_t refused = 0, cleared = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!stop.load()) {
    if (refused + cleared >= 1000 || std::chrono::steady_clock::now() > deadline) enough = true;
    Result<std::size_t> n = cache->Clear(first_choice);
    if (n.ok()) {
      cleared += *n;
      continue;
    }
    ++refused;
    ASSERT_TRUE(cache->Clear(DirtyEntries::kWriteBack).ok());
  }
  marker.join();
  ASSERT_TRUE(cache->Clear(DirtyEntries::kWriteBack).ok());
  for (std::size_t r = 0; r < kRanges; ++r) {
    const std::uint64_t now = src[r * kWords];
    if (acked[r] == 0) {
      EXPECT_TRUE(now == original[r * kWords] || now <= written[r]) << r;
    } else {
      EXPECT_GE(now, acked[r]) << "range " << r << ": an acknowledged modification was lost";
      EXPECT_LE(now, written[r]) << r;
    }
    for (std::size_t w = 1; w < kWords; ++w)
      ASSERT_EQ(src[r * kWords + w], original[r * kWords + w]);
  }
  EXPECT_GT(first_choice == DirtyEntries::kRefuse ? refused : cleared, 0u)
      << "the race never came up";
}

TEST(CacheDirtyRace, ClearWithRefuseNeverDropsAnAcknowledgedModification) {
  ClearRace(DirtyEntries::kRefuse);
}

TEST(CacheDirtyRace, ClearWithWriteBackNeverDropsAnAcknowledgedModification) {
  ClearRace(DirtyEntries::kWriteBack);
}

}  // namespace
}  // namespace tierflow
