// SPDX-License-Identifier: Apache-2.0
// Sleeping on a 32-bit word (Linux futex), and a parking spot built on it for worker and
// completion threads.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace tierflow {

// Sleeps while *word == expected (returns at once if it already differs, or spuriously).
inline void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
          expected, nullptr, nullptr, 0);
}
// Wakes up to n threads sleeping on *word.
inline void FutexWake(std::atomic<std::uint32_t>* word, int n) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n,
          nullptr, nullptr, 0);
}
// The same with a bit set (never 0): a wake-up reaches only sleepers whose bits it shares.
inline void FutexWaitBits(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                          std::uint32_t bits) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
          expected, nullptr, nullptr, bits);
}
inline void FutexWakeBits(std::atomic<std::uint32_t>* word, int n, std::uint32_t bits) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG,
          n, nullptr, nullptr, bits);
}

// Where idle threads sleep until new work may be there. Wake costs no system call when nobody
// sleeps; a sleeper re-checks for work after announcing itself, so no wake-up is lost (both
// sides use sequentially consistent operations: the waker publishes work before Wake, the
// sleeper counts itself before looking).
class WakeWord {
 public:
  void Wake(int n = INT_MAX) {
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) FutexWake(&generation_, n);
  }
  // The same, for a waker whose work was published by a sequentially consistent store or
  // read-modify-write: that operation and the load of the sleeper count are then ordered
  // without the read-modify-write above (a locked instruction on x86, which waits for every
  // store before it), and the generation only needs to move for a sleeper this load sees.
  // Wakes only sleepers whose bits (SleepUnless) share one with `bits`. Those that do not may
  // still return from a sleep that began before this call (spuriously, for them).
  void WakeAfterSeqCstPublish(int n = INT_MAX, std::uint32_t bits = kAnyBits) {
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
    generation_.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeBits(&generation_, n, bits);
  }

  // Sleeps until a Wake (one that names any of `bits`, never 0), unless has_work() (checked
  // after announcing the sleep) is true.
  template <typename HasWork>
  void SleepUnless(HasWork&& has_work, std::uint32_t bits = kAnyBits) {
    const std::uint32_t g = generation_.load(std::memory_order_seq_cst);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (!has_work()) FutexWaitBits(&generation_, g, bits);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }

  static constexpr std::uint32_t kAnyBits = FUTEX_BITSET_MATCH_ANY;

 private:
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<std::uint32_t> sleepers_{0};
};

}  // namespace tierflow
