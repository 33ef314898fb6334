// SPDX-License-Identifier: Apache-2.0
// The piece of a split operation that the CPU engine keeps for the waiting thread (the held
// piece) is cut larger as that thread keeps finishing it before the operation is done
// (CpuEngineInternal::HeldPieceScale; the arithmetic both ways and the votes: split_shape_test).
// Made certain, not left to the scheduler, by holding every worker busy: the waiter then runs
// the held piece first with the other still untaken, every time.
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_engine_internal.h"
#include "testing/busy_worker.h"
#include "testing/engine_fixture.h"
#include "tierflow/cpu_engine.h"

namespace tierflow {
namespace {

using testkit::BusyWorker;
using testkit::MakeCpuEngine;

constexpr std::size_t kSize = 1 << 20;  // two pieces of 512 KiB over two workers

std::vector<unsigned char> Pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<unsigned char>((i * 151 + seed * 13) ^ (i >> 11));
  }
  return v;
}

// With the cut moved, every kind that splits still covers each byte once: a copy, a fill and
// a compare whose one difference lies just past the even cut, a CRC against an unsplit one.
void EveryKindSplitsExactly(CpuEngine& e, CpuEngine& unsplit) {
  constexpr std::size_t kOdd = kSize + 4096 + 64;  // still two pieces; the held one longer
  const std::vector<unsigned char> src = Pattern(kOdd, 3);
  std::vector<unsigned char> dst(kOdd), filled(kOdd), other = src;
  other[kOdd / 2 + 100] ^= 1;
  ASSERT_TRUE(e.Submit(Operation::Copy(dst.data(), src.data(), kOdd))->Wait().ok());
  EXPECT_EQ(dst, src);
  const std::uint64_t pattern = 0x1122334455667788ULL;
  ASSERT_TRUE(e.Submit(Operation::Fill(filled.data(), pattern, kOdd))->Wait().ok());
  for (std::size_t i = 0; i < kOdd; ++i) {
    ASSERT_EQ(filled[i], static_cast<unsigned char>(pattern >> (8 * (i % 8)))) << i;
  }
  Result<Handle> cmp = e.Submit(Operation::Compare(src.data(), other.data(), kOdd));
  ASSERT_TRUE(cmp.ok() && cmp->Wait().ok());
  EXPECT_FALSE(cmp->result().equal);
  EXPECT_EQ(cmp->result().first_difference, kOdd / 2 + 100);
  Result<Handle> crc = e.Submit(Operation::Crc32c(src.data(), kOdd, 7));
  Result<Handle> ref = unsplit.Submit(Operation::Crc32c(src.data(), kOdd, 7));
  ASSERT_TRUE(crc.ok() && ref.ok() && crc->Wait().ok() && ref->Wait().ok());
  EXPECT_EQ(crc->result().crc, ref->result().crc);
}

TEST(HeldPiece, GrowsWhileTheWaiterFinishesFirstAndEverySplitStaysExact) {
  CpuEngineOptions o;
  o.workers = 2;
  auto e = MakeCpuEngine(o);
  CpuEngineOptions whole;
  whole.inline_max_bytes = 4 << 20;  // runs each operation in one piece, on the caller
  auto unsplit = MakeCpuEngine(whole);
  ASSERT_TRUE(e && unsplit);
  EXPECT_EQ(CpuEngineInternal::HeldPieceScale(*e), 1.0);
  const std::vector<unsigned char> src = Pattern(kSize, 1);
  std::vector<unsigned char> dst(kSize);
  {
    BusyWorker first(*e), second(*e);
    for (int i = 0; i < 100; ++i) {  // 100 waits that finish first: 25 steps, past the most
      std::fill(dst.begin(), dst.end(), 0);
      ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), kSize))->Wait().ok());
      ASSERT_EQ(dst, src) << "copy " << i;
    }
  }
  EXPECT_EQ(CpuEngineInternal::HeldPieceScale(*e), 1.25);
  // The workers free again, the larger held piece beside theirs.
  EveryKindSplitsExactly(*e, *unsplit);

  // What one thread learnt is its own; another engine starts even.
  double elsewhere = 0;
  std::thread([&] { elsewhere = CpuEngineInternal::HeldPieceScale(*e); }).join();
  EXPECT_EQ(elsewhere, 1.0);
  EXPECT_EQ(CpuEngineInternal::HeldPieceScale(*unsplit), 1.0);
}

// Cut into more pieces than there are workers, the waiter takes pieces from the claims word
// after its held one, and finishing that one first says nothing of its pace.
TEST(HeldPiece, OperationsWithMorePiecesThanWorkersTeachNothing) {
  CpuEngineOptions o;
  o.workers = 2;
  o.min_piece_bytes = o.max_piece_bytes = 512 << 10;
  auto e = MakeCpuEngine(o);
  ASSERT_TRUE(e);
  const std::vector<unsigned char> src = Pattern(4 << 20, 5);  // eight pieces
  std::vector<unsigned char> dst(src.size());
  {
    BusyWorker first(*e), second(*e);  // the waiter runs every piece, the held one first
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), src.size()))->Wait().ok());
    }
  }
  EXPECT_EQ(dst, src);
  EXPECT_GE(e->stats().pieces_by_waiters, 800u);
  EXPECT_EQ(CpuEngineInternal::HeldPieceScale(*e), 1.0);
}

}  // namespace
}  // namespace tierflow
