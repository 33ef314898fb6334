// SPDX-License-Identifier: Apache-2.0
// How a split operation of the CPU engine is described and its pieces claimed: private to the
// cpu component.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>

#include "common/prefetch.h"
#include "cpu/split_shape.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/engine_module.h"

namespace tierflow {
namespace cpu {
inline constexpr std::size_t kPieceAlign = 4096;
}  // namespace cpu

// A single operation cut into equal pieces that workers and the waiting thread take by index.
// The description lives in the operation's scratch area (OpRef::scratch) and the pieces are
// handed out through its claims word (OpRef::claims), so taking one needs no queue; the queue only
// carries tickets that send workers to the operation. The first pieces go instead, one each, to
// workers found polling their mailboxes (Impl::Mailbox): they run it without the claims word.
//
// piece_claims = [generation:24 | back:20 | front:20]: pieces [front, back) are still untaken.
// Workers take from the front, the waiting thread from the back, so in a loop of same-sized
// operations each participant tends to copy the bytes it copied last time (still in its
// core's cache). The generation changes with every split operation on the state, so a ticket
// left in the queue after its operation finished (the waiter took the last piece) takes
// nothing from a later operation on the same state. The next generation comes from the copy
// kept in the description, not from the claims word, which a worker reading a ticket may have
// pulled to its core (a load from there stalls the submitter for a transfer of the line). Even
// if a generation repeated while a ticket sat in the queue (wrapped at 24 bits, or the scratch
// area last used by another engine), whoever takes a piece runs it with that operation's own
// description and engine, so the piece is still done correctly and exactly once.
//
// When there are two pieces or more and waiting threads run pieces, the last is held for the
// waiter: it takes it first, through a word of its own (HeldWord), without contending with
// the workers for the claims word that the first of them has usually pulled to its core by
// then; workers take it only once the claims word has no piece left (the waiter may never
// come, or wait without helping). The description fills the scratch area's first line, the
// held piece is in its second, which workers do not touch until then.

struct [[gnu::visibility("hidden")]] CpuEngine::SplitWork {
  cpu::SplitShape shape;
  Impl* engine = nullptr;
  // Cut into no more pieces than there are workers, so that the waiter and the workers have
  // one piece each and which of them finishes last says who is slower (CutHeldPiece).
  bool one_each = false;

  static constexpr int kIndexBits = 20;
  static constexpr std::uint64_t kMaxPieces = (std::uint64_t{1} << kIndexBits) - 1;
  static constexpr std::uint64_t kIndexMask = kMaxPieces;
  static constexpr std::uint32_t kGenerationMask = (1u << 24) - 1;

  static std::uint64_t Pack(std::uint32_t generation, std::uint64_t front, std::uint64_t back) {
    return std::uint64_t{generation} << (2 * kIndexBits) | back << kIndexBits | front;
  }
  static std::uint32_t GenerationOf(std::uint64_t claims) {
    return static_cast<std::uint32_t>(claims >> (2 * kIndexBits));
  }

  static SplitWork& Of(OpRef s) { return *std::launder(reinterpret_cast<SplitWork*>(s.scratch())); }

  // Claims one piece of the operation of `generation`; false when none is left (or the state
  // has moved on to another operation).
  static bool Take(OpRef s, std::uint32_t generation, bool from_back, std::uint64_t& index) {
    std::atomic<std::uint64_t>& claims = s.claims();
    // Usually last written by another participant's core: ask for it owned, so the
    // compare-and-swap does not wait for a second transfer after the load's shared copy.
    PrefetchForWrite(&claims);
    std::uint64_t cur = claims.load(std::memory_order_acquire);
    for (;;) {
      std::uint64_t front = cur & kIndexMask;
      std::uint64_t back = (cur >> kIndexBits) & kIndexMask;
      if (GenerationOf(cur) != generation || front >= back) return false;
      std::uint64_t want =
          from_back ? Pack(generation, front, back - 1) : Pack(generation, front + 1, back);
      if (claims.compare_exchange_weak(cur, want, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        index = from_back ? back - 1 : front;
        return true;
      }
    }
  }

  // The held piece: HeldWord = generation << 1 | 1 while piece HeldIndex of that operation is
  // untaken. Raw words in the scratch area's second line (never re-created with the
  // description, so a stale ticket may read them at any time).
  static std::atomic_ref<std::uint32_t> HeldWord(OpRef s) {
    return std::atomic_ref<std::uint32_t>(
        *std::launder(reinterpret_cast<std::uint32_t*>(static_cast<char*>(s.scratch()) + 64)));
  }
  static void Hold(OpRef s, std::uint32_t generation, std::uint64_t index) {
    std::memcpy(static_cast<char*>(s.scratch()) + 72, &index, sizeof index);
    HeldWord(s).store(generation << 1 | 1, std::memory_order_release);
  }
  static bool TakeHeld(OpRef s, std::uint32_t generation, std::uint64_t & index) {
    std::atomic_ref<std::uint32_t> word = HeldWord(s);
    std::uint32_t held = generation << 1 | 1;
    if (word.load(std::memory_order_acquire) != held ||
        !word.compare_exchange_strong(held, generation << 1, std::memory_order_acq_rel)) {
      return false;
    }
    std::memcpy(&index, static_cast<const char*>(s.scratch()) + 72, sizeof index);
    return true;
  }
  // A piece of the operation of `generation` for a worker: from the claims word, else the held
  // piece.
  static bool TakeForWorker(OpRef s, std::uint32_t generation, std::uint64_t & index) {
    return Take(s, generation, /*from_back=*/false, index) || TakeHeld(s, generation, index);
  }
};

}  // namespace tierflow
