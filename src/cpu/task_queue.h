// A bounded multi-producer, multi-consumer queue of work pieces for the CPU engine's workers.
// A spin lock guards a fixed ring (no allocation after construction): a push or pop holds it for
// a copy of one piece; `size` is mirrored in an atomic so idle workers can poll without taking
// the lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "common/spin_lock.h"
#include "tierflow/engine_impl.h"
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

// Everything a push or a pop writes shares one cache line (the lock, the indices and the size
// idle workers poll), apart from the ring's slots: a hand-off moves that line once each way.
class alignas(64) TaskQueue {
 public:
  explicit TaskQueue(std::size_t capacity) : ring_(capacity) {}

  // False when full.
  bool TryPush(const Piece& p) {
    std::lock_guard lock(lock_);
    if (count_ == ring_.size()) return false;
    ring_[(head_ + count_) % ring_.size()] = p;
    ++count_;
    size_.store(count_, std::memory_order_seq_cst);
    return true;
  }
  bool TryPop(Piece& out) {
    if (size_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard lock(lock_);
    if (count_ == 0) return false;
    out = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    size_.store(count_, std::memory_order_seq_cst);
    return true;
  }
  std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  std::size_t capacity() const { return ring_.size(); }
  bool empty() const { return size_.load(std::memory_order_seq_cst) == 0; }

  // fork(): held across it, so the child's copy is consistent; the child's is released.
  void LockForFork() { lock_.lock(); }
  void UnlockAfterFork() { lock_.unlock(); }
  void ResetLockInChild() { lock_.ResetInChild(); }

 private:
  SpinLock lock_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::atomic<std::size_t> size_{0};
  std::vector<Piece> ring_;  // written only in its slots
};

}  // namespace tierflow::cpu
