// SPDX-License-Identifier: Apache-2.0
// FaultInjectingEngine: failures, refusals, delays and split operations around any engine,
// seeded; and the offloading cache kept correct through all of them.
#include "testing/fault_injection.h"

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32c.h"
#include "testing/engine_fixture.h"
#include "testing/random_bytes.h"
#include "tierflow/cache.h"

namespace tierflow {
namespace {

using testkit::FaultInjectingEngine;
using testkit::FaultPlan;
using testkit::FaultStats;

using testkit::MakeCpuEngine;
using testkit::RandomBytes;
using testkit::ThisSystem;

std::unique_ptr<FaultInjectingEngine> Wrap(Engine& inner, FaultPlan plan) {
  Result<std::unique_ptr<FaultInjectingEngine>> e = FaultInjectingEngine::Create(inner, plan);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

Status RunOp(Engine& e, const Operation& op, Completion* out = nullptr) {
  Result<Handle> h = e.Submit(op);
  if (!h.ok()) return h.status();
  Status s = h->Wait();
  if (out != nullptr) *out = h->result();
  return s;
}

TEST(FaultInjectingEngine, FailsRefusesAndThenPassesThrough) {
  auto cpu = MakeCpuEngine();
  auto src = RandomBytes(1 << 16, 1);
  std::vector<unsigned char> dst(src.size());
  FaultPlan fail;
  fail.fail = 1;
  fail.max_faults = 1;
  auto e = Wrap(*cpu, fail);
  EXPECT_EQ(e->capabilities().name, "faulty cpu");
  Status s = RunOp(*e, Operation::Copy(dst.data(), src.data(), src.size()));
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("injected failure"), std::string::npos) << s.message();
  EXPECT_EQ(dst, std::vector<unsigned char>(src.size())) << "untouched";
  ASSERT_TRUE(RunOp(*e, Operation::Copy(dst.data(), src.data(), src.size())).ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(e->fault_stats().failed, 1u);
  EXPECT_EQ(e->stats().pieces_failed, 1u);

  FaultPlan refuse;
  refuse.refuse = 1;
  auto r = Wrap(*cpu, refuse);
  Result<Handle> h = r->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(h.status().message().find("injected refusal"), std::string::npos);
  EXPECT_EQ(r->stats().ops_submitted, 0u);

  FaultPlan bad;
  bad.fail = 1.5;
  EXPECT_FALSE(FaultInjectingEngine::Create(*cpu, bad).ok());
}

// Split operations run as two submissions: copies, fills (pattern phase), compares (the offset
// of the first difference) and CRCs (not split) still come out right.
TEST(FaultInjectingEngine, SplitAndDelayedOperationsGiveTheSameResults) {
  auto cpu = MakeCpuEngine();
  FaultPlan plan;
  plan.split = 1;
  plan.delay = 0.5;
  plan.delay_us = 50;
  auto e = Wrap(*cpu, plan);
  const std::size_t n = 100003;
  auto a = RandomBytes(n, 2);
  std::vector<unsigned char> b(n);
  ASSERT_TRUE(RunOp(*e, Operation::Copy(b.data(), a.data(), n)).ok());
  EXPECT_EQ(a, b);
  std::vector<unsigned char> f(n);
  ASSERT_TRUE(RunOp(*e, Operation::Fill(f.data(), 0x0807060504030201ull, n)).ok());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(f[i], static_cast<unsigned char>(1 + i % 8)) << i;
  b[n - 10] ^= 1;
  Completion c;
  ASSERT_TRUE(RunOp(*e, Operation::Compare(a.data(), b.data(), n), &c).ok());
  EXPECT_FALSE(c.equal);
  EXPECT_EQ(c.first_difference, n - 10) << "in the second half, counted from the start";
  ASSERT_TRUE(RunOp(*e, Operation::Crc32c(a.data(), n, 77), &c).ok());
  EXPECT_EQ(c.crc, Crc32c(77, a.data(), n));
  EXPECT_GE(e->fault_stats().split, 3u);
  EXPECT_GT(e->fault_stats().delayed, 0u);
  EXPECT_EQ(e->stats().in_flight, 0u);
}

TEST(FaultInjectingEngine, TheSameSeedGivesTheSameFaults) {
  auto cpu = MakeCpuEngine();
  std::vector<char> a(4096, 1), b(4096);
  auto pattern = [&](std::uint64_t seed) {
    FaultPlan plan;
    plan.fail = 0.3;
    plan.seed = seed;
    auto e = Wrap(*cpu, plan);
    std::vector<bool> failed;
    for (int i = 0; i < 64; ++i)
      failed.push_back(!RunOp(*e, Operation::Copy(b.data(), a.data(), 4096)).ok());
    return failed;
  };
  EXPECT_EQ(pattern(5), pattern(5));
  EXPECT_NE(pattern(5), pattern(6));
}

// The cache through an engine that fails, splits and delays fills and write-backs: every read
// is right, every acknowledged modification reaches the source (or its write-back reports the
// failure and the entry stays dirty).
TEST(FaultInjectingEngine, TheCacheStaysCorrectThroughFaults) {
  auto cpu = MakeCpuEngine();
  FaultPlan plan;
  plan.fail = 0.1;
  plan.split = 0.3;
  plan.delay = 0.2;
  plan.delay_us = 20;
  plan.seed = 3;
  auto faulty = Wrap(*cpu, plan);
  CacheConfig c;
  c.engines = {faulty.get()};
  c.capacity[0] = 1 << 20;
  auto cache = OffloadCache::Create(ThisSystem(), c);
  ASSERT_TRUE(cache.ok());
  constexpr std::size_t kChunk = 16 << 10, kChunks = 64;
  auto data = RandomBytes(kChunk * kChunks, 4);
  std::vector<unsigned char> expected = data;
  std::mt19937 rng(9);
  std::uint64_t failed_writes = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::size_t k = rng() % kChunks;
    Result<CacheEntry> e = (*cache)->Access(&data[k * kChunk], kChunk);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    (void)e->Wait();  // a failed fill reads the source
    ASSERT_EQ(std::memcmp(e->data(), &expected[k * kChunk], kChunk), 0) << "chunk " << k;
    if (e->cached() && rng() % 4 == 0) {
      const std::size_t at = rng() % kChunk;
      static_cast<unsigned char*>(e->mutable_data())[at] ^= 0x5a;
      ASSERT_TRUE(e->MarkDirty().ok());
      expected[k * kChunk + at] ^= 0x5a;
      if (rng() % 2 == 0) {
        Result<Handle> wb = e->WriteBack();
        ASSERT_TRUE(wb.ok()) << wb.status().ToString();
        if (!wb->Wait().ok()) {
          ++failed_writes;
          EXPECT_TRUE(e->dirty()) << "a failed write-back keeps the modification";
        }
      }
    }
  }
  // Write everything back; injected failures make some rounds fail: retry until none is left.
  for (int round = 0; round < 100 && !(*cache)->Clear(DirtyEntries::kWriteBack).ok(); ++round) {
  }
  ASSERT_TRUE((*cache)->Clear(DirtyEntries::kRefuse).ok()) << "nothing dirty is left";
  EXPECT_EQ(data, expected);
  EXPECT_GT(faulty->fault_stats().failed, 0u);
  EXPECT_GT(faulty->fault_stats().split, 0u);
  EXPECT_GT((*cache)->stats().front().failed_fills, 0u);
  std::printf("failed write-backs retried: %llu\n", static_cast<unsigned long long>(failed_writes));
}

}  // namespace
}  // namespace tierflow
