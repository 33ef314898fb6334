// SPDX-License-Identifier: Apache-2.0
// How the CPU engine cuts one operation into pieces (see CpuEngine::SplitWork), and how the
// piece it keeps for the waiting thread (the held piece, the last one) grows or shrinks with
// that thread's pace (HeldPieceBias).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tierflow/operation.h"

namespace tierflow::cpu {

// What the pieces of a split operation are cut from: its description less the engine, which
// a mailbox carries on the line of its state word (see CpuEngine::Impl::Mailbox).
struct [[gnu::visibility("hidden")]] SplitShape {
  char* dst = nullptr;
  const char* src = nullptr;
  // The operation's third operand: the pattern (fill, pattern compare), the second source
  // (compare) or the second destination (dualcast). Split operations are exclusive, so
  // Submission::offset_base is 0 and not kept.
  std::uintptr_t extra = 0;
  std::size_t size = 0;
  std::size_t piece = 0;  // every piece but the last is this long
  OpKind kind = OpKind::kCopy;
  bool nt = false;
  bool keep_in_cache = false;
  // The last piece runs to the end of the operation and is `piece` bytes or longer (a held
  // piece cut larger: HeldPieceBias); otherwise it is what is left, at most `piece`.
  bool last_takes_rest = false;
  std::uint32_t generation = 0;  // as in the claims word
};

// How many pieces the operation that w describes is cut into.
inline std::uint64_t PieceCount(const SplitShape& w) {
  return w.last_takes_rest ? w.size / w.piece : (w.size + w.piece - 1) / w.piece;
}

struct PieceBounds {
  std::size_t offset = 0;
  std::size_t size = 0;
};

// Where piece `index` (< PieceCount(w)) lies in the operation. Runs for every piece, so it
// finds the last one without dividing: only the last has less than two pieces' bytes left.
inline PieceBounds BoundsOf(const SplitShape& w, std::uint64_t index) {
  const std::size_t offset = index * w.piece;
  const std::size_t left = w.size - offset;
  const bool rest = w.last_takes_rest && left < 2 * w.piece;
  return {offset, rest ? left : std::min(w.piece, left)};
}

// The held piece's size relative to an even cut, learnt from which side finished last: a
// waiter that keeps finishing first (the workers still copying) gets a larger piece, one that
// keeps finishing last a smaller one. Cut evenly, the side that finished first idles for the
// difference, which is large where the waiter's CPU and the workers' run at different speeds
// for a while (as a VM's vCPUs do) and is never zero: the waiter starts only after posting
// the workers' pieces (docs/architecture.md, "The held piece's size"). It moves a step
// (1/kSteps of a piece) after kVotes more waits one way than the other, up to kMaxSteps either
// way, so that a balanced pair, finishing first and last by turns, seldom moves the cut (each
// move sends the bytes at the cut to the other core's cache).
// Not thread-safe: the CPU engine keeps one per thread and engine.
class HeldPieceBias {
 public:
  static constexpr std::int32_t kSteps = 64;
  static constexpr std::int32_t kMaxSteps = 16;
  static constexpr std::int32_t kVotes = 4;
  static constexpr std::size_t kGrain = 64;  // pieces stay multiples of a cache line

  // The waiter ran the held piece; `last`: the operation had no other part outstanding then.
  void Vote(bool last) {
    votes_ += last ? -1 : 1;
    if (votes_ == kVotes || votes_ == -kVotes) {
      steps_ = std::clamp(steps_ + (votes_ > 0 ? 1 : -1), -kMaxSteps, kMaxSteps);
      votes_ = 0;
    }
  }

  // The held piece's size over an even cut's, as Cut would make it (before rounding).
  double scale() const { return 1.0 + static_cast<double>(steps_) / kSteps; }

  // Moves w's cut so that its last piece is larger (or smaller) by steps() / kSteps of a
  // piece; the other pieces stay equal and their number unchanged. Leaves w as it is where
  // the cut cannot move that far without changing the number of pieces.
  void Cut(SplitShape& w) const {
    if (steps_ == 0) return;
    const std::uint64_t pieces = PieceCount(w);
    const std::size_t step = w.piece / kSteps / kGrain * kGrain;
    if (pieces < 2 || step == 0) return;
    const auto others = static_cast<std::size_t>(pieces - 1);
    const auto held = static_cast<std::int64_t>(w.size - others * w.piece);  // cut evenly
    const std::int64_t target = held + std::int64_t{steps_} * static_cast<std::int64_t>(step);
    if (target <= 0 || static_cast<std::uint64_t>(target) >= w.size) return;
    SplitShape cut = w;
    cut.piece = (w.size - static_cast<std::size_t>(target)) / others / kGrain * kGrain;
    if (cut.piece == 0) return;
    cut.last_takes_rest = w.size - others * cut.piece > cut.piece;
    if (PieceCount(cut) == pieces) w = cut;
  }

 private:
  std::int32_t steps_ = 0;
  std::int32_t votes_ = 0;
};

}  // namespace tierflow::cpu
