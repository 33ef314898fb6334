// SPDX-License-Identifier: Apache-2.0
// WakeWord: a wake-up names the sleepers it is for by their bits; sleepers it does not name stay
// asleep, and a plain Wake still reaches every one.
#include "common/futex.h"

#include <atomic>
#include <climits>
#include <thread>

#include <gtest/gtest.h>

#include "testing/threads.h"

namespace tierflow {
namespace {

// A thread that sleeps on `word` with `bits` until released, counting its returns from
// SleepUnless.
class Sleeper {
 public:
  Sleeper(WakeWord& word, std::uint32_t bits) : word_(word), bits_(bits) {
    thread_ = std::thread([this] {
      tid_.store(testkit::ThisThreadId());
      while (!released_.load()) {
        word_.SleepUnless([this] { return released_.load(); }, bits_);
        returns_.fetch_add(1);
      }
    });
  }
  ~Sleeper() {
    Release();
    word_.Wake();
    thread_.join();
  }

  // Waits until the thread sleeps in the kernel; false after 10 s.
  bool AwaitAsleep() const {
    while (tid_.load() == 0) std::this_thread::yield();
    return testkit::AwaitThreadAsleep(tid_.load());
  }
  void Release() { released_.store(true); }
  int returns() const { return returns_.load(); }

 private:
  WakeWord& word_;
  const std::uint32_t bits_;
  std::atomic<int> tid_{0};
  std::atomic<bool> released_{false};
  std::atomic<int> returns_{0};
  std::thread thread_;
};

// Both asleep in the kernel: a wake-up then returns only those it names.
::testing::AssertionResult BothAsleep(const Sleeper& a, const Sleeper& b) {
  if (a.AwaitAsleep() && b.AwaitAsleep()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "a sleeper was not asleep after 10 s";
}

TEST(WakeWord, WakeReachesOnlyTheSleepersItNames) {
  WakeWord word;
  Sleeper a(word, 1u << 0), b(word, 1u << 1);
  ASSERT_TRUE(BothAsleep(a, b));
  a.Release();
  word.WakeAfterSeqCstPublish(INT_MAX, 1u << 0);
  while (a.returns() == 0) std::this_thread::yield();
  // b was asleep in the kernel when the wake-up came: only a wake-up that names it returns it.
  EXPECT_EQ(b.returns(), 0);
  ASSERT_TRUE(b.AwaitAsleep());
  b.Release();
  word.WakeAfterSeqCstPublish(INT_MAX, (1u << 1) | (1u << 5));
  while (b.returns() == 0) std::this_thread::yield();
}

TEST(WakeWord, PlainWakeReachesEverySleeper) {
  WakeWord word;
  Sleeper a(word, 1u << 3), b(word, 1u << 30);
  ASSERT_TRUE(BothAsleep(a, b));
  a.Release();
  b.Release();
  word.WakeAfterSeqCstPublish();
  while (a.returns() == 0 || b.returns() == 0) std::this_thread::yield();
}

TEST(WakeWord, NoSystemCallAndNoLostWakeUpWithoutSleepers) {
  WakeWord word;
  word.WakeAfterSeqCstPublish(1, 1u << 2);  // nobody sleeps: returns at once
  bool checked = false;
  word.SleepUnless([&] { return checked = true; }, 1u << 2);  // work is there: no sleep
  EXPECT_TRUE(checked);
}

}  // namespace
}  // namespace tierflow
