// SPDX-License-Identifier: Apache-2.0
// The CPU engine's cut of an operation into pieces, and the held piece's bias: every byte in
// exactly one piece whatever the bias, the number of pieces unchanged, the held piece growing
// with the bias, and the bias moving only after enough waits one way.
#include "cpu/split_shape.h"

#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>

namespace tierflow::cpu {
namespace {

SplitShape EvenCut(std::size_t size, std::size_t piece) {
  SplitShape w;
  w.size = size;
  w.piece = piece;
  return w;
}

// A bias of `steps` (votes that the waiter finished first, or last when negative).
HeldPieceBias Biased(int steps) {
  HeldPieceBias b;
  for (int i = 0; i < HeldPieceBias::kVotes * (steps < 0 ? -steps : steps); ++i) {
    b.Vote(/*last=*/steps < 0);
  }
  return b;
}

// The pieces tile [0, size) in order, and there are as many as the even cut has.
void ExpectTiles(const SplitShape& w, std::uint64_t pieces) {
  ASSERT_EQ(PieceCount(w), pieces) << "size " << w.size << " piece " << w.piece;
  std::size_t next = 0;
  for (std::uint64_t i = 0; i < pieces; ++i) {
    const PieceBounds b = BoundsOf(w, i);
    ASSERT_EQ(b.offset, next) << "piece " << i << " of size " << w.size;
    ASSERT_GT(b.size, 0u) << "piece " << i << " of size " << w.size;
    next += b.size;
  }
  ASSERT_EQ(next, w.size);
}

TEST(SplitShape, EvenCutTilesTheOperation) {
  ExpectTiles(EvenCut(256 << 10, 128 << 10), 2);
  ExpectTiles(EvenCut((1 << 20) + 4096, 256 << 10), 5);  // the last one short
  ExpectTiles(EvenCut(70 << 10, 64 << 10), 2);
}

TEST(SplitShape, EveryBiasKeepsThePiecesAndTilesTheOperation) {
  const std::size_t sizes[] = {64 << 10,        256 << 10, (256 << 10) + 4096 + 64, 1 << 20,
                               (1 << 20) + 777, 3 << 20,   (64 << 20) + 12345};
  for (std::size_t size : sizes) {
    for (std::size_t piece : {std::size_t{4096}, std::size_t{64 << 10}, size / 2, size / 3 + 1}) {
      if (piece == 0 || (size + piece - 1) / piece > 4096) continue;
      const std::uint64_t pieces = PieceCount(EvenCut(size, piece));
      for (int steps = -HeldPieceBias::kMaxSteps; steps <= HeldPieceBias::kMaxSteps; ++steps) {
        SplitShape w = EvenCut(size, piece);
        Biased(steps).Cut(w);
        ExpectTiles(w, pieces);
      }
    }
  }
}

TEST(SplitShape, TheHeldPieceFollowsTheBias) {
  constexpr std::size_t kSize = 256 << 10, kPiece = 128 << 10;
  std::size_t previous = 0;
  for (int steps = -HeldPieceBias::kMaxSteps; steps <= HeldPieceBias::kMaxSteps; ++steps) {
    SplitShape w = EvenCut(kSize, kPiece);
    const HeldPieceBias b = Biased(steps);
    b.Cut(w);
    const std::size_t held = BoundsOf(w, PieceCount(w) - 1).size;
    EXPECT_GT(held, previous) << steps;  // one step is 2 KiB of a 128 KiB piece
    EXPECT_NEAR(static_cast<double>(held) / kPiece, b.scale(), 1.0 / HeldPieceBias::kSteps);
    previous = held;
  }
  EXPECT_EQ(previous, kPiece + kPiece / 4);  // the most: a quarter more
  // Three pieces: the held one takes what the other two give up, equally.
  SplitShape three = EvenCut(384 << 10, 128 << 10);
  Biased(-8).Cut(three);
  EXPECT_EQ(BoundsOf(three, 0).size, BoundsOf(three, 1).size);
  EXPECT_EQ(BoundsOf(three, 2).size, (384u << 10) - 2 * BoundsOf(three, 0).size);
  EXPECT_LT(BoundsOf(three, 2).size, 128u << 10);
}

TEST(SplitShape, NoBiasWhereTheCutCannotMove) {
  SplitShape one = EvenCut(100 << 10, 128 << 10);  // a single piece: nothing is held
  Biased(HeldPieceBias::kMaxSteps).Cut(one);
  EXPECT_EQ(one.piece, 128u << 10);
  SplitShape tiny = EvenCut(4096, 2048);  // a step would be less than a cache line
  Biased(HeldPieceBias::kMaxSteps).Cut(tiny);
  EXPECT_EQ(tiny.piece, 2048u);
  EXPECT_FALSE(tiny.last_takes_rest);
}

TEST(SplitShape, TheBiasMovesAfterEnoughVotesOneWayAndStopsAtItsBounds) {
  HeldPieceBias b;
  for (int i = 0; i < 100; ++i) b.Vote(i % 2 == 0);  // finishing first and last by turns
  EXPECT_EQ(b.scale(), 1.0);
  for (int i = 0; i < HeldPieceBias::kVotes - 1; ++i) b.Vote(false);
  EXPECT_EQ(b.scale(), 1.0);
  b.Vote(false);
  EXPECT_EQ(b.scale(), 1.0 + 1.0 / HeldPieceBias::kSteps);
  for (int i = 0; i < 1000; ++i) b.Vote(false);
  EXPECT_EQ(b.scale(), 1.25);
  for (int i = 0; i < 1000; ++i) b.Vote(true);
  EXPECT_EQ(b.scale(), 0.75);
}

}  // namespace
}  // namespace tierflow::cpu
