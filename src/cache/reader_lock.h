// A reader-writer lock whose readers do not share a cache line: each reader announces itself in
// one of kSlots padded counters (chosen by thread), so that cache hits on two cores do not
// bounce one lock word between them, as std::shared_mutex's reader count does. Writers (cache
// misses that insert, invalidation, eviction) are rare: a writer takes a mutex, raises the
// writer flag and waits until every slot is empty. Readers that see the flag step back and
// wait for the writer; a writer cannot starve readers for long, since each writer section is
// short. Not recursive.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "common/cpu_relax.h"

namespace tierflow::cache {

// A small number per thread, handed out in order of first use: threads spread over per-thread
// slots without colliding until there are more threads than slots. (Hashing thread ids does
// not spread: they are addresses of equally aligned thread descriptors.)
// Plain constinit thread-local data: a thread_local with a dynamic initializer is read through
// a guard of first use, and a hit asks for its slot three times.
struct ThreadSlots {
  static inline std::atomic<std::size_t> next{0};
  static inline constinit thread_local std::size_t mine = SIZE_MAX;
};

inline std::size_t ThreadSlot() {
  std::size_t slot = ThreadSlots::mine;
  if (slot == SIZE_MAX) [[unlikely]] {
    slot = ThreadSlots::next.fetch_add(1, std::memory_order_relaxed) % (SIZE_MAX / 2);
    ThreadSlots::mine = slot;
  }
  return slot;
}

class ReaderLock {
 public:
  static constexpr std::size_t kSlots = 16;

  void lock_shared() {
    std::atomic<std::uint32_t>& slot = slots_[Slot()].readers;
    for (;;) {
      slot.fetch_add(1, std::memory_order_seq_cst);
      if (!writer_.load(std::memory_order_seq_cst)) return;
      slot.fetch_sub(1, std::memory_order_release);
      while (writer_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
  }
  void unlock_shared() { slots_[Slot()].readers.fetch_sub(1, std::memory_order_release); }

  void lock() {
    writers_.lock();
    writer_.store(true, std::memory_order_seq_cst);
    for (auto& s : slots_) {
      for (unsigned spins = 0; s.readers.load(std::memory_order_seq_cst) != 0; ++spins) {
        if (spins < 64) {
          CpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() {
    writer_.store(false, std::memory_order_release);
    writers_.unlock();
  }

 private:
  static std::size_t Slot() { return ThreadSlot() % kSlots; }
  struct alignas(64) PaddedCount {
    std::atomic<std::uint32_t> readers{0};
  };
  PaddedCount slots_[kSlots];
  alignas(64) std::atomic<bool> writer_{false};
  std::mutex writers_;
};

}  // namespace tierflow::cache
