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
  void WakeAfterSeqCstPublish(int n = INT_MAX) {
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
    generation_.fetch_add(1, std::memory_order_seq_cst);
    FutexWake(&generation_, n);
  }

  // Sleeps until a Wake, unless has_work() (checked after announcing the sleep) is true.
  template <typename HasWork>
  void SleepUnless(HasWork&& has_work) {
    const std::uint32_t g = generation_.load(std::memory_order_seq_cst);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (!has_work()) FutexWait(&generation_, g);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }

 private:
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<std::uint32_t> sleepers_{0};
};

}  // namespace tierflow
