// SPDX-License-Identifier: Apache-2.0
// A bounded multi-producer, multi-consumer queue of work pieces for the CPU engine's workers: a
// ring of cells, each with a sequence number that says whether it holds a piece (the bounded
// queue of D. Vyukov). No allocation after construction.
//
// What each side writes decides what a hand-off costs between cores. Producers write only the
// cells and their own position (under a lock of their own: producers are the submitting
// threads, usually one, so the lock's line stays in its core); consumers write only their
// position and the cells they empty. An idle worker polls the cell at the consumers' position,
// so a push waits for that one line (its sequentially consistent store) and the worker gets it
// in one transfer; with one lock for both sides, a push first waited for the lock's line, which
// every polling worker had pulled to its core, and then for the slot's.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>

#include "common/prefetch.h"
#include "common/spin_lock.h"
#include "tierflow/engine_module.h"
#include "tierflow/operation.h"

namespace tierflow::cpu {

struct Piece {
  OpRef state;
  OpKind kind = OpKind::kCopy;
  bool nt = false;
  bool overlapping = false;  // a move whose ranges overlap: memmove as one piece
  bool keep_in_cache = false;
  // A ticket: no bytes of its own; whoever pops it runs pieces of the operation described in
  // the state's engine area until none is left (see CpuEngine's SplitWork). `generation` tells
  // whether that operation is still the one the ticket was issued for.
  bool ticket = false;
  std::uint32_t generation = 0;
  char* dst = nullptr;
  const char* src = nullptr;
  const char* src2 = nullptr;
  char* dst2 = nullptr;
  std::size_t size = 0;
  std::size_t offset = 0;         // of this piece within its operation (fill phase, compare offset)
  std::size_t tail = 0;           // bytes of the operation after this piece (CRC combination)
  std::uint64_t report_base = 0;  // added to compare differences (Submission::offset_base)
  std::uint64_t pattern = 0;
};

class TaskQueue {
 public:
  static constexpr std::size_t kMaxCapacity = std::size_t{1} << 24;

  // capacity: 1..kMaxCapacity, rounded up to a power of two.
  explicit TaskQueue(std::size_t capacity)
      : mask_(std::bit_ceil(std::clamp<std::size_t>(capacity, 1, kMaxCapacity)) - 1),
        cells_(new Cell[mask_ + 1]) {
    Reset();
  }

  // False when full.
  bool TryPush(const Piece& p) { return TryPushCopies(p, 1) == 1; }
  // Up to n copies of p; returns how many fitted. Each is published with a sequentially
  // consistent store (the engine's wake-up protocol pairs it with the sleeper's check).
  std::size_t TryPushCopies(const Piece& p, std::size_t n) {
    std::lock_guard lock(push_lock_);
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    std::size_t k = 0;
    for (; k < n; ++k) {
      Cell& c = cells_[(tail + k) & mask_];
      // Not yet emptied by the consumer that took its last piece: full.
      if (c.seq.load(std::memory_order_acquire) != tail + k) break;
      c.piece = p;
    }
    for (std::size_t i = 0; i < k; ++i) {
      cells_[(tail + i) & mask_].seq.store(tail + i + 1, std::memory_order_seq_cst);
    }
    tail_.store(tail + k, std::memory_order_relaxed);
    return k;
  }

  bool TryPop(Piece& out) {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const std::size_t seq = c.seq.load(std::memory_order_acquire);
      const auto lag = static_cast<std::ptrdiff_t>(seq - (pos + 1));
      if (lag < 0) return false;  // empty
      if (lag > 0) {              // another consumer took it: look again
        pos = head_.load(std::memory_order_relaxed);
        continue;
      }
      PrefetchForRead(reinterpret_cast<const char*>(&c) + 64);  // the piece's second line
      if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        out = c.piece;
        c.seq.store(pos + mask_ + 1, std::memory_order_release);  // free for the lap after
        return true;
      }
    }
  }

  std::size_t size() const {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    return tail > head ? tail - head : 0;
  }
  std::size_t capacity() const { return mask_ + 1; }
  // Whether the next cell to pop is empty (sequentially consistent, as the pushes).
  bool empty() const {
    const std::size_t pos = head_.load(std::memory_order_seq_cst);
    return cells_[pos & mask_].seq.load(std::memory_order_seq_cst) != pos + 1;
  }

  // fork(): producers are held out across it (no half-published cell in the child). The child
  // pops what it can and then calls ResetInChild: a cell that a consumer thread (not copied
  // into the child) had taken but not yet emptied would otherwise stay taken for good.
  void LockForFork() { push_lock_.lock(); }
  void UnlockAfterFork() { push_lock_.unlock(); }
  void ResetInChild() {
    push_lock_.ResetInChild();
    Reset();
  }

 private:
  struct alignas(64) Cell {
    std::atomic<std::size_t> seq{0};  // pos: free for the push at pos; pos + 1: holds a piece
    Piece piece;
  };

  void Reset() {
    for (std::size_t i = 0; i <= mask_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }

  // Read by both sides, never written after construction: a line that stays in every cache.
  alignas(64) const std::size_t mask_;
  const std::unique_ptr<Cell[]> cells_;
  alignas(64) SpinLock push_lock_;                // producers' line
  std::atomic<std::size_t> tail_{0};              // written under push_lock_; atomic for size()
  alignas(64) std::atomic<std::size_t> head_{0};  // consumers' line
};

}  // namespace tierflow::cpu
