// SPDX-License-Identifier: Apache-2.0
// The CPU engine's queue of pieces (src/cpu/task_queue.h): bounded, every piece popped exactly
// once with what was pushed, by any number of producers and consumers, across many laps of
// its ring; a child after fork() starts from a clean ring. Run under TSan by `make test`.
#include "cpu/task_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tierflow::cpu {
namespace {

Piece Numbered(std::size_t n) {
  Piece p;
  p.size = n;
  p.offset = ~n;  // a second field, to see a piece is not torn
  return p;
}

TEST(TaskQueue, CapacityIsRoundedUpToAPowerOfTwoAndBoundsThePushes) {
  TaskQueue q(5);
  EXPECT_EQ(q.capacity(), 8u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.TryPushCopies(Numbered(1), 3), 3u);
  EXPECT_EQ(q.TryPushCopies(Numbered(2), 10), 5u) << "only 5 cells were left";
  EXPECT_FALSE(q.TryPush(Numbered(3)));
  EXPECT_EQ(q.size(), 8u);
  Piece p;
  for (std::size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(q.TryPop(p));
    EXPECT_EQ(p.size, i < 3 ? 1u : 2u) << "first in, first out for one producer";
  }
  EXPECT_FALSE(q.TryPop(p));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(TaskQueue(1).capacity(), 1u);
}

TEST(TaskQueue, EveryPieceIsPoppedOnceAcrossManyLapsWithManyProducersAndConsumers) {
  TaskQueue q(16);  // small: the ring wraps thousands of times
  constexpr std::size_t kProducers = 3, kConsumers = 3, kEach = 20000;
  std::vector<std::atomic<int>> seen(kProducers * kEach);
  std::atomic<std::size_t> popped{0};
  std::atomic<bool> torn{false};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kProducers; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < kEach;) {
        const std::size_t n = t * kEach + i;
        if (q.TryPush(Numbered(n))) {
          ++i;
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::size_t t = 0; t < kConsumers; ++t) {
    threads.emplace_back([&] {
      Piece p;
      while (popped.load() < kProducers * kEach) {
        if (!q.TryPop(p)) {
          std::this_thread::yield();
          continue;
        }
        if (p.offset != ~p.size || p.size >= seen.size()) {
          torn = true;
        } else {
          seen[p.size].fetch_add(1);
        }
        popped.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(torn.load());
  for (std::size_t n = 0; n < seen.size(); ++n) ASSERT_EQ(seen[n].load(), 1) << "piece " << n;
  EXPECT_TRUE(q.empty());
}

TEST(TaskQueue, ResetInChildFreesACellTakenButNotEmptied) {
  TaskQueue q(4);
  ASSERT_EQ(q.TryPushCopies(Numbered(7), 4), 4u);
  Piece p;
  ASSERT_TRUE(q.TryPop(p));
  // What a child sees when a consumer of the parent was between taking a cell and emptying
  // it cannot be staged without a fork; ResetInChild must leave a ring that takes a full
  // load again whatever state it was in.
  q.LockForFork();
  q.ResetInChild();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.TryPushCopies(Numbered(8), 8), 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(q.TryPop(p));
    EXPECT_EQ(p.size, 8u);
  }
}

}  // namespace
}  // namespace tierflow::cpu
