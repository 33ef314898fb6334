// SPDX-License-Identifier: Apache-2.0
#include "rma/range_set.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <set>
#include <vector>

#include "rma/write_ledger.h"

namespace tierflow::rma {
namespace {

using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

TEST(RangeSet, MergesOverlappingAndAdjacentRanges) {
  RangeSet s;
  s.Add(10, 20);
  s.Add(30, 40);
  s.Add(20, 25);  // adjacent to the first
  s.Add(5, 5);    // empty: nothing
  EXPECT_EQ(s.ranges(), (Ranges{{10, 25}, {30, 40}}));
  s.Add(0, 12);   // before and into the first
  s.Add(24, 31);  // bridges the two
  EXPECT_EQ(s.ranges(), (Ranges{{0, 40}}));
  EXPECT_EQ(s.bytes(), 40u);
  s.Clear();
  EXPECT_TRUE(s.empty());
}

// Against a set of bytes: every byte added is covered, no other, ranges sorted and apart.
TEST(RangeSet, CoversExactlyTheBytesAddedInAnyOrder) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    RangeSet s;
    std::set<std::uint64_t> bytes;
    for (int i = 0; i < 40; ++i) {
      const std::uint64_t b = rng() % 2000, e = b + rng() % 50;
      s.Add(b, e);
      for (std::uint64_t x = b; x < e; ++x) bytes.insert(x);
    }
    std::set<std::uint64_t> covered;
    std::uint64_t last_end = 0;
    for (std::size_t i = 0; i < s.ranges().size(); ++i) {
      const auto& [b, e] = s.ranges()[i];
      ASSERT_LT(b, e);
      if (i > 0) {
        ASSERT_GT(b, last_end) << "ranges touch or overlap";
      }
      last_end = e;
      for (std::uint64_t x = b; x < e; ++x) covered.insert(x);
    }
    EXPECT_EQ(covered, bytes);
  }
}

TEST(RangeSet, BeyondItsLimitKeepsTheHull) {
  RangeSet s;
  for (std::uint64_t i = 0; i <= RangeSet::kMaxRanges; ++i) s.Add(i * 10, i * 10 + 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s.ranges().front(), std::make_pair(std::uint64_t{0}, RangeSet::kMaxRanges * 10 + 1));
}

// The ledger in shared memory: two processes note ranges for one owner, which collects both.
TEST(WriteLedger, OwnersCollectWhatOthersNoted) {
  const std::size_t bytes = WriteLedger::Bytes(3);
  void* area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(area, MAP_FAILED);
  WriteLedger ledger(static_cast<std::byte*>(area));
  RangeSet mine;
  mine.Add(0, 64);
  mine.Add(4096, 8192);
  const pid_t child = fork();
  if (child == 0) {
    RangeSet theirs;
    theirs.Add(100, 200);
    WriteLedger(static_cast<std::byte*>(area)).Record(2, 1, theirs);
    _exit(0);
  }
  ledger.Record(2, 1, mine);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  RangeSet got;
  ASSERT_TRUE(ledger.Collect(2, 1, got));
  EXPECT_EQ(got.ranges(), (Ranges{{0, 64}, {100, 200}, {4096, 8192}}));
  RangeSet other;  // another slot and another owner saw nothing
  ASSERT_TRUE(ledger.Collect(2, 0, other));
  ASSERT_TRUE(ledger.Collect(1, 1, other));
  EXPECT_TRUE(other.empty());
  ledger.Reset(2, 1);
  RangeSet after;
  ASSERT_TRUE(ledger.Collect(2, 1, after));
  EXPECT_TRUE(after.empty());
  munmap(area, bytes);
}

TEST(WriteLedger, ASlotThatOverflowsSaysSo) {
  std::vector<std::byte> area(WriteLedger::Bytes(1));
  WriteLedger ledger(area.data());
  RangeSet many;
  for (std::uint64_t i = 0; i < WriteLedger::kRangesPerSlot; ++i) many.Add(i * 10, i * 10 + 1);
  ledger.Record(0, 0, many);  // exactly full
  RangeSet got;
  EXPECT_TRUE(ledger.Collect(0, 0, got));
  EXPECT_EQ(got.size(), WriteLedger::kRangesPerSlot);
  RangeSet one;
  one.Add(1 << 20, (1 << 20) + 8);
  ledger.Record(0, 0, one);
  EXPECT_FALSE(ledger.Collect(0, 0, got)) << "a full slot must report its overflow";
}

}  // namespace
}  // namespace tierflow::rma
