// SPDX-License-Identifier: Apache-2.0
// The operations beyond copy/move/fill/compare — compare-pattern, dualcast, CRC-32C, cache
// flush — on every engine that offers them, across piece boundaries and in batches.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32c.h"
#include "testing/engine_fixture.h"
#include "testing/random_bytes.h"
#include "tierflow/dsa_engine.h"

namespace tierflow {
namespace {

using tierflow::testkit::MakeCpuEngine;
using tierflow::testkit::RandomBytes;

struct FreeDeleter {
  void operator()(unsigned char* p) const { std::free(p); }
};
// Page-aligned, so that the test controls where a range starts within its page.
std::unique_ptr<unsigned char[], FreeDeleter> AlignedBuffer(std::size_t n) {
  const std::size_t rounded = (n + 4095) / 4096 * 4096;
  return std::unique_ptr<unsigned char[], FreeDeleter>(
      static_cast<unsigned char*>(std::aligned_alloc(4096, rounded)));
}

struct EngineConfig {
  std::string name;
  std::function<std::unique_ptr<Engine>()> make;
};

std::unique_ptr<Engine> DsaOnModel(bool instant, bool batches) {
  DsaModelConfig c;
  c.instant = instant;
  c.max_transfer_size = 64 << 10;  // many pieces per operation
  Result<std::shared_ptr<DsaDeviceModel>> m = DsaDeviceModel::Create(c);
  if (!m.ok()) return nullptr;
  DsaEngineOptions o;
  o.use_batches = batches;
  Result<std::unique_ptr<DsaEngine>> e = DsaEngine::CreateOnModel(*m, 0, o);
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<EngineConfig> Configs() {
  return {
      {"cpu", [] { return MakeCpuEngine(); }},
      {"cpu_small_pieces",
       [] {
         CpuEngineOptions o;
         o.inline_max_bytes = 1024;
         o.min_piece_bytes = 4096;
         o.max_piece_bytes = 8192;
         return MakeCpuEngine(o);
       }},
      {"dsa_model_instant", [] { return DsaOnModel(true, true); }},
      {"dsa_model_threads", [] { return DsaOnModel(false, true); }},
      {"dsa_model_no_batches", [] { return DsaOnModel(false, false); }},
  };
}

class DataOps : public ::testing::TestWithParam<EngineConfig> {
 protected:
  void SetUp() override {
    engine_ = GetParam().make();
    ASSERT_NE(engine_, nullptr);
  }
  Completion Run(const Operation& op) {
    Result<Handle> h = engine_->Submit(op);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    if (!h.ok()) return {};
    EXPECT_TRUE(h->Wait().ok()) << h->status().ToString();
    return h->result();
  }
  std::unique_ptr<Engine> engine_;
};

const std::size_t kSizes[] = {1, 7, 4095, 64 << 10, (1 << 20) + 333, 3 << 20};

TEST_P(DataOps, Crc32cOfWholeRangeWhateverThePieces) {
  for (std::size_t n : kSizes) {
    auto data = RandomBytes(n, static_cast<unsigned>(n));
    for (std::uint32_t seed : {0u, 0x9abcdef0u}) {
      Completion c = Run(Operation::Crc32c(data.data(), n, seed));
      EXPECT_EQ(c.crc, Crc32c(seed, data.data(), n)) << n << " seed " << seed;
      EXPECT_EQ(c.bytes_completed, n);
    }
  }
}

TEST_P(DataOps, ComparePatternFindsTheFirstDifferingByte) {
  const std::uint64_t pattern = 0x1122334455667788ull;
  for (std::size_t n : kSizes) {
    std::vector<unsigned char> buf(n + 3);
    unsigned char* p = buf.data() + 3;  // not 8-byte aligned
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(pattern >> (8 * (i % 8)));
    Completion same = Run(Operation::ComparePattern(p, pattern, n));
    EXPECT_TRUE(same.equal) << n;
    for (std::size_t at : {std::size_t{0}, n / 2 + 3, n - 1}) {
      if (at >= n) continue;
      p[at] ^= 0x40;
      Completion diff = Run(Operation::ComparePattern(p, pattern, n));
      EXPECT_FALSE(diff.equal) << n << " at " << at;
      EXPECT_EQ(diff.first_difference, at) << n;
      p[at] ^= 0x40;
    }
  }
}

TEST_P(DataOps, DualcastWritesBothDestinations) {
  for (std::size_t n : kSizes) {
    auto src = RandomBytes(n, 5);
    // Same offset within a page (what DSA's dualcast needs) and a different one.
    for (std::size_t shift : {std::size_t{0}, std::size_t{100}}) {
      auto a = AlignedBuffer(n + 4096), b = AlignedBuffer(n + 4096 + shift);
      Completion c = Run(Operation::Dualcast(a.get(), b.get() + shift, src.data(), n));
      EXPECT_EQ(c.bytes_completed, n);
      EXPECT_EQ(std::memcmp(a.get(), src.data(), n), 0) << n << " shift " << shift;
      EXPECT_EQ(std::memcmp(b.get() + shift, src.data(), n), 0) << n << " shift " << shift;
    }
  }
}

TEST_P(DataOps, MaintenanceKeepsTheDataAndWorksOnReadOnlyPages) {
  const std::size_t n = (1 << 20) + 100;
  auto data = RandomBytes(n, 9);
  auto copy = data;
  for (Operation op :
       {Operation::WriteBack(data.data() + 3, n - 3), Operation::Invalidate(data.data(), n),
        Operation::WriteBackInvalidate(data.data() + 1, n - 1)}) {
    Completion c = Run(op);
    EXPECT_EQ(c.bytes_completed, op.size) << OpKindName(op.kind);
    EXPECT_EQ(data, copy) << OpKindName(op.kind);
  }
  void* ro = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  std::memset(ro, 7, 1 << 16);
  ASSERT_EQ(mprotect(ro, 1 << 16, PROT_READ), 0);
  EXPECT_EQ(Run(Operation::WriteBack(ro, 1 << 16)).bytes_completed, std::uint64_t{1} << 16);
  EXPECT_EQ(Run(Operation::Invalidate(ro, 1 << 16)).bytes_completed, std::uint64_t{1} << 16);
  munmap(ro, 1 << 16);
}

TEST_P(DataOps, BatchOfMixedKinds) {
  const std::size_t n = 200000;
  auto src = RandomBytes(n, 11);
  std::vector<unsigned char> d1(n), d2(n), d3(n);
  std::vector<unsigned char> pat(n);
  for (std::size_t i = 0; i < n; ++i) pat[i] = static_cast<unsigned char>(0xabu);
  std::vector<Operation> ops = {
      Operation::Copy(d1.data(), src.data(), n),
      Operation::Dualcast(d2.data(), d3.data(), src.data(), n),
      Operation::Crc32c(src.data(), n, 42),
      Operation::ComparePattern(pat.data(), 0xababababababababull, n),
  };
  Result<Handle> h = engine_->SubmitBatch(ops);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
  Completion c = h->result();
  EXPECT_EQ(c.crc, Crc32c(42, src.data(), n));
  EXPECT_TRUE(c.equal);
  EXPECT_EQ(c.bytes_completed, 4 * n);
  EXPECT_EQ(d1, src);
  EXPECT_EQ(d2, src);
  EXPECT_EQ(d3, src);
}

TEST_P(DataOps, BadInputIsRefusedWithTheReason) {
  std::vector<unsigned char> a(8192), b(8192);
  auto expect_error = [&](const Result<Handle>& r, const char* words) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  expect_error(engine_->Submit(Operation::Dualcast(a.data(), a.data() + 100, b.data(), 4096)),
               "dst and dst2 overlap by 3996 bytes");
  expect_error(engine_->Submit(Operation::Dualcast(a.data(), b.data(), a.data() + 10, 4096)),
               "dst and src overlap");
  expect_error(engine_->Submit(Operation::Dualcast(a.data(), nullptr, b.data(), 4096)),
               "dst2 is null");
  expect_error(engine_->Submit(Operation::Crc32c(nullptr, 10)), "src is null");
  expect_error(engine_->Submit(Operation::ComparePattern(a.data(), 0, 0)), "size 0");
  expect_error(engine_->Submit(Operation::WriteBack(nullptr, 64)), "dst is null");
  expect_error(engine_->Submit(Operation::Invalidate(a.data(), 0)), "size 0");
  std::vector<Operation> two_crcs = {Operation::Crc32c(a.data(), 10),
                                     Operation::Crc32c(b.data(), 10)};
  expect_error(engine_->SubmitBatch(two_crcs), "batch member 1: a batch's handle reports one CRC");
  Operation drain_with_buffer = Operation::Drain();
  drain_with_buffer.dst = a.data();
  Result<Handle> d = engine_->Submit(drain_with_buffer);
  ASSERT_FALSE(d.ok());
  if (engine_->capabilities().ops & OpBit(OpKind::kDrain)) {
    EXPECT_NE(d.status().message().find("drain takes no buffers"), std::string::npos);
    std::vector<Operation> drain_in_batch = {Operation::Copy(a.data(), b.data(), 10),
                                             Operation::Drain()};
    expect_error(engine_->SubmitBatch(drain_in_batch), "submit it on its own");
  } else {
    EXPECT_EQ(d.status().code(), StatusCode::kUnsupported);
    Result<Handle> plain = engine_->Submit(Operation::Drain());
    ASSERT_FALSE(plain.ok());
    EXPECT_NE(plain.status().message().find("wait on the handles"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, DataOps, ::testing::ValuesIn(Configs()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tierflow
