// SPDX-License-Identifier: Apache-2.0
#include "tierflow/noncoherent_memory.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tierflow {
namespace {

// No randomness: only what the agents do moves lines.
std::unique_ptr<NoncoherentMemory> Quiet(std::size_t line = 64, bool discards = false) {
  NoncoherentMemory::Options o;
  o.size = 8 * line;
  o.line_size = line;
  o.eviction_rate = 0;
  o.prefetch_rate = 0;
  o.drain_rate = 0;
  o.invalidate_discards = discards;
  auto m = NoncoherentMemory::Create(o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

std::uint64_t L(NoncoherentMemory& m, int cpu, std::size_t off) { return m.Load(cpu, off).value(); }

TEST(NoncoherentMemory, StoresStayInTheCacheUntilWrittenBackAndComplete) {
  auto m = Quiet();
  ASSERT_TRUE(m->Store(0, 0, 7).ok());
  EXPECT_EQ(L(*m, 1, 0), 0u) << "not written back";
  EXPECT_EQ(m->DeviceLoad(0).value(), 0u);
  ASSERT_TRUE(m->WriteBack(0, 0, 8).ok());
  EXPECT_EQ(m->DeviceLoad(0).value(), 0u) << "written back, not landed";
  EXPECT_EQ(L(*m, 0, 0), 7u) << "the writer sees its own store";
  ASSERT_TRUE(m->Complete(0).ok());
  EXPECT_EQ(m->DeviceLoad(0).value(), 7u);
  EXPECT_EQ(L(*m, 1, 0), 0u) << "cpu 1 still holds its stale line";
  ASSERT_TRUE(m->Invalidate(1, 0, 8).ok());
  EXPECT_EQ(L(*m, 1, 0), 7u);
}

TEST(NoncoherentMemory, DroppedLineRefillsFromItsOwnPendingWriteBack) {
  auto m = Quiet();
  ASSERT_TRUE(m->Store(0, 8, 5).ok());
  ASSERT_TRUE(m->WriteBackInvalidate(0, 8, 8).ok());
  EXPECT_EQ(L(*m, 0, 8), 5u) << "a core sees its own write-back before it lands";
  EXPECT_EQ(m->DeviceLoad(8).value(), 0u);
}

TEST(NoncoherentMemory, WholeLineWriteBackCarriesStaleBytes) {
  auto m = Quiet();
  ASSERT_TRUE(m->Store(0, 0, 1).ok());  // cpu 0 caches the line (word 1 still 0)
  ASSERT_TRUE(m->DeviceStore(8, 9).ok());
  ASSERT_TRUE(m->WriteBack(0, 0, 8).ok());
  ASSERT_TRUE(m->Complete(0).ok());
  EXPECT_EQ(m->DeviceLoad(8).value(), 0u) << "cpu 0's stale copy of word 1 overwrote the device's";
}

TEST(NoncoherentMemory, InvalidateWritesBackPartialEdgeLines) {
  for (bool discards : {false, true}) {
    auto m = Quiet(64, discards);
    ASSERT_TRUE(m->Store(0, 0, 11).ok());    // line 0, outside the range [56, 136)
    ASSERT_TRUE(m->Store(0, 64, 22).ok());   // line 1, wholly inside
    ASSERT_TRUE(m->Store(0, 136, 33).ok());  // line 2, outside the range
    ASSERT_TRUE(m->Invalidate(0, 56, 80).ok());
    ASSERT_TRUE(m->Complete(0).ok());
    EXPECT_EQ(m->DeviceLoad(0).value(), 11u) << "edge line kept, discards " << discards;
    EXPECT_EQ(m->DeviceLoad(136).value(), 33u) << "edge line kept, discards " << discards;
    EXPECT_EQ(m->DeviceLoad(64).value(), discards ? 0u : 22u);
    EXPECT_EQ(m->stats().dirty_discarded, discards ? 1u : 0u);
  }
}

TEST(NoncoherentMemory, FenceOrdersWriteBacks) {
  // Without a fence the second write-back may land first; with one, never.
  int overtaken_without = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    for (bool fence : {false, true}) {
      NoncoherentMemory::Options o;
      o.seed = seed;
      o.eviction_rate = 0;
      o.prefetch_rate = 0;
      o.drain_rate = 1;
      auto m = std::move(NoncoherentMemory::Create(o)).value();
      ASSERT_TRUE(m->Store(0, 0, 1).ok());
      ASSERT_TRUE(m->WriteBack(0, 0, 8).ok());
      if (fence) {
        ASSERT_TRUE(m->Fence(0).ok());
      }
      ASSERT_TRUE(m->Store(0, 64, 2).ok());
      ASSERT_TRUE(m->WriteBack(0, 64, 8).ok());
      ASSERT_TRUE(m->Load(1, 128).ok());  // one access: one write-back lands
      const bool overtaken = m->DeviceLoad(64).value() == 2 && m->DeviceLoad(0).value() == 0;
      if (fence) {
        EXPECT_FALSE(overtaken) << "seed " << seed;
      }
      overtaken_without += !fence && overtaken;
    }
  }
  EXPECT_GT(overtaken_without, 0);
}

TEST(NoncoherentMemory, RandomnessIsSeededAndHappens) {
  auto run = [](std::uint64_t seed) {
    NoncoherentMemory::Options o;
    o.seed = seed;
    o.eviction_rate = 0.2;
    o.prefetch_rate = 0.2;
    auto m = std::move(NoncoherentMemory::Create(o)).value();
    std::vector<std::uint64_t> seen;
    for (int i = 0; i < 500; ++i) {
      EXPECT_TRUE(m->Store(i % 2, (i * 8) % 4096, i).ok());
      seen.push_back(m->Load((i + 1) % 2, (i * 24) % 4096).value());
    }
    const auto s = m->stats();
    EXPECT_GT(s.evictions, 0u);
    EXPECT_GT(s.prefetches, 0u);
    EXPECT_GT(s.write_backs, 0u);
    return seen;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

// Agents may be threads: a producer and a consumer thread pass 2000 values through one slot
// with the protocol's write-backs, fence and invalidates, while the memory evicts and
// prefetches at random.
TEST(NoncoherentMemory, ThreadsAsAgents) {
  NoncoherentMemory::Options o;
  o.size = 256;
  o.eviction_rate = 0.05;
  o.prefetch_rate = 0.05;
  auto m = std::move(NoncoherentMemory::Create(o)).value();
  constexpr std::uint64_t kValues = 2000;
  std::thread producer([&] {
    for (std::uint64_t i = 1; i <= kValues; ++i) {
      do {  // wait until the consumer has taken the previous value
        ASSERT_TRUE(m->Invalidate(0, 64, 8).ok());
      } while (m->Load(0, 64).value() != i - 1);
      ASSERT_TRUE(m->Store(0, 128, i * 3).ok());
      ASSERT_TRUE(m->WriteBack(0, 128, 8).ok());
      ASSERT_TRUE(m->Fence(0).ok());
      ASSERT_TRUE(m->Store(0, 0, i).ok());
      ASSERT_TRUE(m->WriteBack(0, 0, 8).ok());
    }
  });
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 1; i <= kValues; ++i) {
    do {
      ASSERT_TRUE(m->Invalidate(1, 0, 8).ok());
    } while (m->Load(1, 0).value() != i);
    ASSERT_TRUE(m->Invalidate(1, 128, 8).ok());
    wrong += m->Load(1, 128).value() != i * 3;
    ASSERT_TRUE(m->Store(1, 64, i).ok());
    ASSERT_TRUE(m->WriteBack(1, 64, 8).ok());
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
}

TEST(NoncoherentMemory, BadInputNamesTheProblem) {
  NoncoherentMemory::Options o;
  o.line_size = 48;
  auto bad = NoncoherentMemory::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line_size 48 is not a power of two"), std::string::npos);
  o.line_size = 64;
  o.cpus = 0;
  EXPECT_NE(NoncoherentMemory::Create(o).status().message().find("cpus 0"), std::string::npos);
  o.cpus = 2;
  o.drain_rate = 1.5;
  EXPECT_NE(NoncoherentMemory::Create(o).status().message().find("drain_rate 1.5"),
            std::string::npos);
  auto m = Quiet();
  EXPECT_NE(m->Load(2, 0).status().message().find("cpu 2 does not exist; use 0 to 1"),
            std::string::npos);
  EXPECT_NE(m->Load(0, 4).status().message().find("not 8-byte aligned"), std::string::npos);
  EXPECT_NE(m->WriteBack(0, 500, 100).message().find("outside the memory's 512 bytes"),
            std::string::npos);
  EXPECT_FALSE(m->DeviceStore(512, 1).ok());
  EXPECT_FALSE(m->Invalidate(0, ~std::size_t{0}, 2).ok());
}

}  // namespace
}  // namespace tierflow
