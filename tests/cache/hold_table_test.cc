// SPDX-License-Identifier: Apache-2.0
// The per-thread hold tables under the cache's hits: holds, copies, releases, conversion to
// shared references, and the fallback when a table has no room.
#include "cache/hold_table.h"

#include <vector>

#include <gtest/gtest.h>

namespace tierflow::cache {
namespace {

struct alignas(64) Fake {
  HoldTables::TableMask tables{0};  // as an entry keeps it
  char bytes[60];
};

TEST(HoldTables, HoldCopyReleaseAndDetach) {
  HoldTables t;
  Fake a, b;
  HoldTables::Word* w = t.Acquire(3, &a, a.tables);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(t.Held(&a, a.tables));
  EXPECT_FALSE(t.Held(&b, b.tables));
  EXPECT_EQ(t.Acquire(3, &a, a.tables), w)
      << "a second hit of the same thread slot shares the word";
  EXPECT_TRUE(HoldTables::Add(w, &a));  // a copy
  EXPECT_TRUE(HoldTables::Release(w, &a));
  EXPECT_TRUE(HoldTables::Release(w, &a));
  EXPECT_TRUE(t.Held(&a, a.tables)) << "one hold left";
  long shared = 0;
  t.Detach(&a, a.tables, [&](long n) { shared += n; });
  EXPECT_EQ(shared, 1) << "the remaining hold became a shared reference";
  EXPECT_FALSE(t.Held(&a, a.tables));
  EXPECT_FALSE(HoldTables::Release(w, &a)) << "its holder must drop the shared reference";
  EXPECT_FALSE(HoldTables::Add(w, &a)) << "a copy after the conversion takes a shared reference";
  HoldTables::Word* wb = t.Acquire(3, &b, b.tables);
  ASSERT_NE(wb, nullptr);
  EXPECT_TRUE(HoldTables::Release(wb, &b));
  EXPECT_FALSE(t.Held(&b, b.tables)) << "a word with count 0 holds nothing";
  long none = 0;
  t.Detach(&b, b.tables, [&](long n) { none += n; });
  EXPECT_EQ(none, 0);
}

TEST(HoldTables, HoldsInSeveralTablesAreAllFoundAndDetached) {
  HoldTables t;
  Fake a;
  EXPECT_EQ(a.tables.load(), 0u);
  EXPECT_FALSE(t.Held(&a, a.tables));
  for (std::size_t table : {0u, 5u, 31u, 37u}) ASSERT_NE(t.Acquire(table, &a, a.tables), nullptr);
  EXPECT_EQ(a.tables.load(), (1u << 0) | (1u << 5) | (1u << 31)) << "37 is table 5 again";
  long shared = 0;
  t.Detach(&a, a.tables, [&](long n) { shared += n; });
  EXPECT_EQ(shared, 4) << "every hold in every table it was held in";
  EXPECT_FALSE(t.Held(&a, a.tables));
}

TEST(HoldTables, NoRoomFallsBackToTheSharedCount) {
  HoldTables t;
  std::vector<Fake> entries(100000);
  std::size_t in_table = 0, fallback = 0;
  for (Fake& f : entries) (t.Acquire(0, &f, f.tables) != nullptr ? in_table : fallback)++;
  EXPECT_GT(in_table, 1000u);
  EXPECT_GT(fallback, 0u) << "one table holds at most kWords holds";
  EXPECT_LE(in_table, HoldTables::kWords);
  HoldTables::TableMask unused{0};
  EXPECT_EQ(t.Acquire(0, reinterpret_cast<void*>(std::uintptr_t{1} << 50), unused), nullptr)
      << "addresses above 2^48 do not fit a word";
}

}  // namespace
}  // namespace tierflow::cache
