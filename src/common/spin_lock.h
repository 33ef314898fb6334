// SPDX-License-Identifier: Apache-2.0
// A lock for critical sections of a few dozen instructions that threads on other cores take
// often (the CPU engine's queue of pieces). Unlike std::mutex, a thread that finds it held does
// not sleep in the kernel, and unlocking is a plain store: a contended std::mutex costs a
// futex wait on one side and a futex wake on the other, each longer than the section.
// A waiter yields its core now and then, so a holder preempted on the same core can finish.
// BasicLockable (std::lock_guard works). Not recursive; not fair.
#pragma once

#include <sched.h>

#include <atomic>

#include "common/cpu_relax.h"

namespace tierflow {

class SpinLock {
 public:
  void lock() {
    for (unsigned spins = 1; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {  // wait without writing the line
        if (spins++ % 128 == 0) {
          sched_yield();
        } else {
          CpuRelax();
        }
      }
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

  // For a child process after fork(): whatever thread held it does not exist there.
  void ResetInChild() { locked_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace tierflow
