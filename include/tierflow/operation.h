// SPDX-License-Identifier: Apache-2.0
// What an engine is asked to do. Operations are plain values: building one performs no
// validation and no allocation; Engine::Submit validates. Thread-safety: values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tierflow/export.h"

namespace tierflow {

enum class OpKind : std::uint8_t {
  kCopy,            // dst <- src; the ranges must not overlap (use kMove)
  kMove,            // dst <- src; overlapping ranges are fine (memmove semantics)
  kFill,            // dst <- the 8-byte pattern repeated; the last copy may be cut short
  kCompare,         // compare src with src2; the handle reports equality and the first difference
  kComparePattern,  // compare src with the 8-byte pattern repeated (as kFill would write it)
  kDualcast,        // dst <- src and dst2 <- src; no two of the three ranges may overlap
  kCrc32c,          // CRC-32C (Castagnoli, as iSCSI/ext4/DSA) of src, continuing from crc_seed
  // Coherence maintenance of dst's cache lines (tierflow/coherence.h says what each means).
  // The engine runs the instruction kAuto picks and completes the operation only after the
  // lines have reached memory (Complete), so waiting on the handle is the Complete. dst is
  // never written.
  kWriteBack,            // write dirty lines back; they may stay cached
  kInvalidate,           // drop the lines (dirty ones are written back first, never lost)
  kWriteBackInvalidate,  // write back and drop
  kDrain,                // no buffers: completes once every operation submitted to the same engine
                         // before it has completed (engines that keep a queue of their own)
};
TIERFLOW_EXPORT std::string_view OpKindName(OpKind kind);

// Bit mask of OpKinds, for capabilities.
constexpr std::uint32_t OpBit(OpKind k) { return 1u << static_cast<unsigned>(k); }
constexpr OpKind kLastOpKind = OpKind::kDrain;
constexpr std::uint32_t kAllOps = (OpBit(kLastOpKind) << 1) - 1;
// The kinds that act on data (all but kDrain).
constexpr std::uint32_t kDataOps = kAllOps & ~OpBit(OpKind::kDrain);
// The coherence maintenance kinds.
constexpr std::uint32_t kMaintenanceOps =
    OpBit(OpKind::kWriteBack) | OpBit(OpKind::kInvalidate) | OpBit(OpKind::kWriteBackInvalidate);
constexpr bool IsMaintenance(OpKind k) { return (OpBit(k) & kMaintenanceOps) != 0; }

struct Operation {
  OpKind kind = OpKind::kCopy;
  void* dst = nullptr;
  const void* src = nullptr;
  const void* src2 = nullptr;  // second input of kCompare
  std::size_t size = 0;
  // kFill, kComparePattern; little-endian: byte i of the range is byte (i % 8) of pattern.
  std::uint64_t pattern = 0;
  // Hint: leave the destination in the last-level cache because it is read soon (DSA: the
  // cache-control flag; CPU engine: no streaming stores). Off: large copies bypass the cache.
  bool keep_in_cache = false;
  void* dst2 = nullptr;        // kDualcast: the second destination
  std::uint32_t crc_seed = 0;  // kCrc32c: the CRC of the bytes before src (0: none)

  static Operation Copy(void* dst, const void* src, std::size_t size) {
    return Make(OpKind::kCopy, dst, src, nullptr, size);
  }
  static Operation Move(void* dst, const void* src, std::size_t size) {
    return Make(OpKind::kMove, dst, src, nullptr, size);
  }
  static Operation Fill(void* dst, std::uint64_t pattern, std::size_t size) {
    Operation op = Make(OpKind::kFill, dst, nullptr, nullptr, size);
    op.pattern = pattern;
    return op;
  }
  static Operation Compare(const void* a, const void* b, std::size_t size) {
    return Make(OpKind::kCompare, nullptr, a, b, size);
  }
  static Operation ComparePattern(const void* src, std::uint64_t pattern, std::size_t size) {
    Operation op = Make(OpKind::kComparePattern, nullptr, src, nullptr, size);
    op.pattern = pattern;
    return op;
  }
  static Operation Dualcast(void* dst, void* dst2, const void* src, std::size_t size) {
    Operation op = Make(OpKind::kDualcast, dst, src, nullptr, size);
    op.dst2 = dst2;
    return op;
  }
  static Operation Crc32c(const void* src, std::size_t size, std::uint32_t seed = 0) {
    Operation op = Make(OpKind::kCrc32c, nullptr, src, nullptr, size);
    op.crc_seed = seed;
    return op;
  }
  static Operation WriteBack(const void* range, std::size_t size) {
    return Make(OpKind::kWriteBack, const_cast<void*>(range), nullptr, nullptr, size);
  }
  static Operation Invalidate(const void* range, std::size_t size) {
    return Make(OpKind::kInvalidate, const_cast<void*>(range), nullptr, nullptr, size);
  }
  static Operation WriteBackInvalidate(const void* range, std::size_t size) {
    return Make(OpKind::kWriteBackInvalidate, const_cast<void*>(range), nullptr, nullptr, size);
  }
  static Operation Drain() { return Make(OpKind::kDrain, nullptr, nullptr, nullptr, 0); }

 private:
  static Operation Make(OpKind kind, void* dst, const void* src, const void* src2,
                        std::size_t size) {
    Operation op;
    op.kind = kind;
    op.dst = dst;
    op.src = src;
    op.src2 = src2;
    op.size = size;
    return op;
  }
};

}  // namespace tierflow
