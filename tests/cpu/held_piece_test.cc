// The piece of a split operation that the CPU engine keeps for the waiting thread (the held
// piece) is cut larger as that thread keeps finishing before the workers
// (CpuEngine::held_piece_scale; the arithmetic both ways: split_shape_test). The workers are
// made the slower side with the destination: the half they write is discarded before every
// copy, so writing it faults in fresh pages, which takes far longer than the other half (and
// a machine busy with other work only slows the workers more: they must be scheduled to
// start, while the waiter is already running). The other way cannot be arranged as surely:
// a worker delayed by the scheduler finishes last whatever the waiter's half costs.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/engine_fixture.h"
#include "tierflow/cpu_engine.h"

namespace tierflow {
namespace {

using testing::MakeCpuEngine;
using testing::NodeCpus;
using testing::PinnedToCpu;

constexpr std::size_t kSize = 1 << 20;  // two pieces of 512 KiB over two workers

std::vector<unsigned char> Pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<unsigned char>((i * 151 + seed * 13) ^ (i >> 11));
  }
  return v;
}

// An anonymous mapping whose pages can be given back between copies.
class Destination {
 public:
  explicit Destination(std::size_t n) : n_(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~Destination() {
    if (data_ != nullptr) munmap(data_, n_);
  }
  Destination(const Destination&) = delete;
  Destination& operator=(const Destination&) = delete;
  unsigned char* data() const { return data_; }
  // The bytes [offset, offset + n) fault in fresh pages when next written.
  void Discard(std::size_t offset, std::size_t n) const {
    ASSERT_EQ(madvise(data_ + offset, n, MADV_DONTNEED), 0);
  }

 private:
  std::size_t n_;
  unsigned char* data_ = nullptr;
};

// Copies `times` times, discarding the workers' half of the destination (the first: the
// waiter keeps the last piece) before each copy; every copy must be exact.
void CopyWithSlowWorkers(CpuEngine& e, const Destination& dst, int times) {
  const std::vector<unsigned char> src = Pattern(kSize, 1);
  for (int i = 0; i < times; ++i) {
    dst.Discard(0, kSize / 2);
    Result<Handle> h = e.Submit(Operation::Copy(dst.data(), src.data(), kSize));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(h->Wait(WaitMode::kSpin).ok());
    ASSERT_EQ(h->bytes_completed(), kSize);
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), kSize), 0) << "copy " << i;
  }
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

TEST(HeldPiece, GrowsWhileTheWorkersAreSlowerAndEverySplitStaysExact) {
  const std::vector<int> cpus = NodeCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs: one for the waiter, one for a worker";
  // The waiter on the first CPU: its piece goes to the worker on the second one.
  PinnedToCpu pinned(cpus[0]);
  CpuEngineOptions o;
  o.workers = 2;
  auto e = MakeCpuEngine(o);
  CpuEngineOptions whole;
  whole.inline_max_bytes = 4 << 20;  // runs each operation in one piece, on the caller
  auto unsplit = MakeCpuEngine(whole);
  ASSERT_TRUE(e && unsplit);
  Destination dst(kSize);
  ASSERT_NE(dst.data(), nullptr);
  EXPECT_EQ(e->held_piece_scale(), 1.0);

  // The workers' half is slow: the waiter finishes first and is given more.
  CopyWithSlowWorkers(*e, dst, 300);
  EXPECT_GT(e->held_piece_scale(), 1.1);
  EXPECT_LE(e->held_piece_scale(), 1.25);
  EveryKindSplitsExactly(*e, *unsplit);

  // What one thread learnt is its own; another engine starts even.
  double elsewhere = 0;
  std::thread([&] { elsewhere = e->held_piece_scale(); }).join();
  EXPECT_EQ(elsewhere, 1.0);
  EXPECT_EQ(unsplit->held_piece_scale(), 1.0);
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
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), src.size()))->Wait().ok());
  }
  EXPECT_EQ(dst, src);
  EXPECT_GT(e->state().pieces_by_waiters, 200u);
  EXPECT_EQ(e->held_piece_scale(), 1.0);
}

}  // namespace
}  // namespace tierflow
