// SPDX-License-Identifier: Apache-2.0
// The cache's index of entries (src/cache/entry_index.h) against a brute-force model: random
// insertions and erasures of entries of many size classes, some starting at the same address,
// some overlapping, after each of which every query (containing, overlapping, starting at,
// all) must give what a scan of the live entries gives.
#include "cache/entry_index.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tierflow::cache {
namespace {

using Entry = detail::CacheEntryState;

std::uintptr_t Start(const Entry* e) { return reinterpret_cast<std::uintptr_t>(e->src); }

// What FindContaining promises: the largest entry starting at p if it holds n bytes, else,
// class by class from the smallest, the containing entry with the latest (start, size).
const Entry* ModelContaining(const std::vector<Entry*>& live, std::uintptr_t p, std::size_t n) {
  const Entry* at = nullptr;
  for (const Entry* e : live) {
    if (Start(e) == p && (at == nullptr || e->size > at->size)) at = e;
  }
  if (at != nullptr && at->size >= n) return at;
  std::array<const Entry*, 64> best{};  // per size class, in one scan of the live entries
  for (const Entry* e : live) {
    if (Start(e) > p || Start(e) + e->size < p + n) continue;
    const Entry*& b = best[static_cast<std::size_t>(63 - __builtin_clzll(e->size))];
    if (b == nullptr || Start(e) > Start(b) || (Start(e) == Start(b) && e->size > b->size)) b = e;
  }
  for (const Entry* b : best) {
    if (b != nullptr) return b;
  }
  return nullptr;
}

std::set<const Entry*> ModelOverlapping(const std::vector<Entry*>& live, std::uintptr_t p,
                                        std::size_t n) {
  std::set<const Entry*> out;
  for (const Entry* e : live) {
    if (n == 0 ? Start(e) == p : Start(e) < p + n && Start(e) + e->size > p) out.insert(e);
  }
  return out;
}

class EntryIndexModel : public ::testing::Test {
 protected:
  // An entry for [base + off, +size), not indexed yet.
  Entry* Make(std::uintptr_t off, std::size_t size) {
    pool_.push_back(std::make_unique<Entry>());
    Entry* e = pool_.back().get();
    e->src = reinterpret_cast<const char*>(kBase + off);
    e->size = size;
    return e;
  }
  void Check(std::mt19937_64& rng) {
    std::set<const Entry*> all;
    index_.ForEach([&](Entry* e) { ASSERT_TRUE(all.insert(e).second) << "visited twice"; });
    ASSERT_EQ(all, std::set<const Entry*>(live_.begin(), live_.end()));
    ASSERT_EQ(index_.empty(), live_.empty());
    for (int q = 0; q < 40; ++q) {
      std::uintptr_t p = kBase + rng() % kSpan;
      if (!live_.empty() && q % 3 == 0) p = Start(live_[rng() % live_.size()]) + (q % 2);
      const std::size_t n = q % 5 == 0 ? 0 : 1 + rng() % (std::size_t{1} << (rng() % 20));
      if (n > 0) {
        ASSERT_EQ(index_.FindContaining(p, n), ModelContaining(live_, p, n))
            << "p+" << p - kBase << " n=" << n;
      }
      std::set<const Entry*> seen;
      index_.ForEachOverlapping(p, n, [&](Entry* e) { seen.insert(e); });
      ASSERT_EQ(seen, ModelOverlapping(live_, p, n)) << "p+" << p - kBase << " n=" << n;
    }
  }
  static constexpr std::uintptr_t kBase = std::uintptr_t{1} << 40;
  static constexpr std::uintptr_t kSpan = std::uintptr_t{1} << 24;
  EntryIndex index_;
  std::vector<Entry*> live_;
  std::vector<std::unique_ptr<Entry>> pool_;
};

TEST_F(EntryIndexModel, RandomInsertionsAndErasuresAnswerAsAScanDoes) {
  std::mt19937_64 rng(17);
  for (int step = 0; step < 3000; ++step) {
    if (live_.empty() || rng() % 3 != 0) {
      const int cls = static_cast<int>(rng() % 21);  // 1 B .. 2 MiB
      const std::size_t size = (std::size_t{1} << cls) + rng() % (std::size_t{1} << cls);
      // Starts cluster on a few addresses so that entries share starts and blocks.
      std::uintptr_t off = (rng() % 64) * 4096 + (rng() % 4 == 0 ? rng() % 4096 : 0);
      if (rng() % 8 == 0 && !live_.empty()) off = Start(live_[rng() % live_.size()]) - kBase;
      bool duplicate = false;  // the cache never indexes two entries of one (start, size)
      for (const Entry* e : live_)
        duplicate = duplicate || (Start(e) == kBase + off && e->size == size);
      if (duplicate) continue;
      Entry* e = Make(off, size);
      index_.Insert(e);
      live_.push_back(e);
    } else {
      const std::size_t i = rng() % live_.size();
      index_.Erase(live_[i]);
      live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (step % 10 == 0) {
      ASSERT_NO_FATAL_FAILURE(Check(rng));
    }
  }
  while (!live_.empty()) {
    index_.Erase(live_.back());
    live_.pop_back();
    ASSERT_NO_FATAL_FAILURE(Check(rng));
  }
}

TEST_F(EntryIndexModel, VersionChangesWithEveryInsertAndErase) {
  Entry* e = Make(0, 4096);
  const std::uint64_t v0 = index_.version();
  index_.Insert(e);
  const std::uint64_t v1 = index_.version();
  EXPECT_NE(v0, v1);
  (void)index_.FindContaining(kBase, 1);
  EXPECT_EQ(index_.version(), v1) << "a search is not a change";
  index_.Erase(e);
  EXPECT_NE(index_.version(), v1);
}

}  // namespace
}  // namespace tierflow::cache
