// SPDX-License-Identifier: Apache-2.0
// The cache's reader-writer lock: writers exclude readers and each other (several writers
// queue on the writer word and sleep there), readers share, and the slots readers used are
// the ones a writer waits on.
#include "cache/reader_lock.h"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tierflow::cache {
namespace {

TEST(ReaderLock, WritersExcludeReadersAndEachOther) {
  ReaderLock lock;
  // Written only under the exclusive side; readers check that a writer never runs beside them.
  long a = 0, b = 0;
  std::atomic<int> inside_writers{0}, torn{0}, overlaps{0};
  constexpr int kWriters = 3, kReaders = 3, kRounds = 20000;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::unique_lock held(lock);
        if (inside_writers.fetch_add(1) != 0) overlaps.fetch_add(1);
        ++a;
        ++b;
        inside_writers.fetch_sub(1);
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::shared_lock held(lock);
        if (a != b || inside_writers.load() != 0) torn.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "two writers held the lock at once";
  EXPECT_EQ(torn.load(), 0) << "a reader ran beside a writer";
  EXPECT_EQ(a, long{kWriters} * kRounds);
}

TEST(ReaderLock, AWriterWaitsForAReaderOfAnySlot) {
  ReaderLock lock;
  std::atomic<bool> reading{false}, release{false}, written{false};
  // A reader on a thread of its own (its own slot), holding the lock until told.
  std::thread reader([&] {
    std::shared_lock held(lock);
    reading = true;
    while (!release) std::this_thread::yield();
  });
  while (!reading) std::this_thread::yield();
  std::thread writer([&] {
    std::unique_lock held(lock);
    written = true;
  });
  for (int i = 0; i < 1000; ++i) std::this_thread::yield();
  EXPECT_FALSE(written.load()) << "the writer went in beside a reader";
  release = true;
  reader.join();
  writer.join();
  EXPECT_TRUE(written.load());
}

}  // namespace
}  // namespace tierflow::cache
