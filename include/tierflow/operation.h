// What an engine is asked to do. Operations are plain values: building one performs no
// validation and no allocation; Engine::Submit validates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tierflow {

enum class OpKind : std::uint8_t {
  kCopy,     // dst <- src; the ranges must not overlap (use kMove)
  kMove,     // dst <- src; overlapping ranges are fine (memmove semantics)
  kFill,     // dst <- the 8-byte pattern repeated; the last copy may be cut short
  kCompare,  // compare src with src2; the handle reports equality and the first difference
};
std::string_view OpKindName(OpKind kind);

// Bit mask of OpKinds, for capabilities.
constexpr std::uint32_t OpBit(OpKind k) { return 1u << static_cast<unsigned>(k); }
constexpr std::uint32_t kAllOps =
    OpBit(OpKind::kCopy) | OpBit(OpKind::kMove) | OpBit(OpKind::kFill) | OpBit(OpKind::kCompare);

struct Operation {
  OpKind kind = OpKind::kCopy;
  void* dst = nullptr;
  const void* src = nullptr;
  const void* src2 = nullptr;   // second input of kCompare
  std::size_t size = 0;
  std::uint64_t pattern = 0;    // kFill, little-endian: byte i of dst is byte (i % 8) of pattern
  // Hint: leave the destination in the last-level cache because it is read soon (DSA: the
  // cache-control flag; CPU engine: no streaming stores). Off: large copies bypass the cache.
  bool keep_in_cache = false;

  static Operation Copy(void* dst, const void* src, std::size_t size) {
    return {OpKind::kCopy, dst, src, nullptr, size, 0};
  }
  static Operation Move(void* dst, const void* src, std::size_t size) {
    return {OpKind::kMove, dst, src, nullptr, size, 0};
  }
  static Operation Fill(void* dst, std::uint64_t pattern, std::size_t size) {
    return {OpKind::kFill, dst, nullptr, nullptr, size, pattern};
  }
  static Operation Compare(const void* a, const void* b, std::size_t size) {
    return {OpKind::kCompare, nullptr, a, b, size, 0};
  }
};

}  // namespace tierflow
