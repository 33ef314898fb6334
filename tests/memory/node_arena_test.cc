// SPDX-License-Identifier: Apache-2.0
// NodeArena: blocks are aligned, on the node, disjoint and reused after Free (coalesced), a
// reservation is checked against the node's free memory, and bad nodes are errors.
#include "tierflow/node_arena.h"

#include <numaif.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tierflow {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;

TEST(NodeArena, BlocksAreAlignedDisjointAndOnTheNode) {
  NodeArena arena(0, kChunk);
  std::vector<std::pair<std::byte*, std::size_t>> blocks;
  for (std::size_t size : {1u, 63u, 64u, 65u, 4096u, 100000u}) {
    Status err;
    auto* p = static_cast<std::byte*>(arena.Allocate(size, &err));
    ASSERT_NE(p, nullptr) << err.ToString();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % NodeArena::kUnit, 0u);
    std::memset(p, static_cast<int>(size & 0xff), size);
    blocks.push_back({p, size});
  }
  std::sort(blocks.begin(), blocks.end());
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_GE(blocks[i].first, blocks[i - 1].first + NodeArena::Round(blocks[i - 1].second));
  }
  int node = -1;
  ASSERT_EQ(get_mempolicy(&node, nullptr, 0, blocks[0].first, MPOL_F_NODE | MPOL_F_ADDR), 0);
  EXPECT_EQ(node, 0);
  EXPECT_EQ(arena.reserved(), kChunk);  // all of them fit one chunk
}

TEST(NodeArena, FreedNeighboursCoalesceIntoTheWholeChunk) {
  NodeArena arena(0, kChunk);
  std::vector<void*> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(arena.Allocate(kChunk / 4, nullptr));
  for (void* p : quarters) ASSERT_NE(p, nullptr);
  // Freed out of order: every merge direction (with the following and the preceding block).
  for (int i : {1, 3, 0, 2}) arena.Free(quarters[static_cast<std::size_t>(i)], kChunk / 4);
  void* whole = arena.Allocate(kChunk, nullptr);
  EXPECT_EQ(whole, quarters[0]);  // the same chunk, in one piece again
  EXPECT_EQ(arena.reserved(), kChunk);
}

TEST(NodeArena, LargeBlocksGetAChunkOfTheirOwn) {
  NodeArena arena(0, kChunk);
  void* big = arena.Allocate(3 * kChunk + 1, nullptr);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(arena.reserved(), NodeArena::Round(3 * kChunk + 1));
}

TEST(NodeArena, ReserveTakesMemoryOnceAndRefusesMoreThanTheNodeHas) {
  NodeArena arena(0, kChunk);
  ASSERT_TRUE(arena.Reserve(kChunk * 5 / 2).ok());
  EXPECT_EQ(arena.reserved(), kChunk * 5 / 2);  // the last chunk only as large as needed
  ASSERT_TRUE(arena.Reserve(kChunk).ok());      // already there: nothing taken
  EXPECT_EQ(arena.reserved(), kChunk * 5 / 2);
  Result<NodeMemory> mem = QueryNodeMemory(0);
  ASSERT_TRUE(mem.ok());
  Status s = arena.Reserve(mem->total_bytes * 2);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.ToString();
  EXPECT_NE(s.message().find("smaller capacity"), std::string::npos) << s.message();
  EXPECT_EQ(arena.reserved(), kChunk * 5 / 2);  // nothing kept from the refused call
}

TEST(NodeArena, AMissingNodeIsAnErrorNotACrash) {
  NodeArena arena(4095, kChunk);
  Status err;
  EXPECT_EQ(arena.Allocate(64, &err), nullptr);
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(arena.Allocate(64, nullptr), nullptr);  // no error wanted: still no crash
  EXPECT_FALSE(arena.Reserve(kChunk).ok());
  EXPECT_EQ(arena.reserved(), 0u);
}

TEST(NodeArena, ForeignPointersAreIgnoredAndAZeroChunkStillWorks) {
  NodeArena arena(0, 0);  // taken as one 64-byte unit
  std::uint64_t local = 0;
  arena.Free(&local, sizeof local);
  void* p = arena.Allocate(1000, nullptr);
  ASSERT_NE(p, nullptr);
  arena.Free(p, 1000);
  EXPECT_EQ(arena.Allocate(1000, nullptr), p);
}

TEST(NodeArena, ConcurrentAllocationsNeverOverlap) {
  NodeArena arena(0, kChunk);
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t size = 64 + static_cast<std::size_t>((i * 37 + t) % 4000);
        auto* p = static_cast<unsigned char*>(arena.Allocate(size, nullptr));
        if (p == nullptr) {
          ++bad[static_cast<std::size_t>(t)];
          continue;
        }
        std::memset(p, t + 1, size);
        for (std::size_t k = 0; k < size; k += 61) {
          if (p[k] != t + 1) ++bad[static_cast<std::size_t>(t)];  // someone else's block
        }
        arena.Free(p, size);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace tierflow
