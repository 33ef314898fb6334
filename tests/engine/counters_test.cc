// SPDX-License-Identifier: Apache-2.0
// Every engine keeps the same counters (Engine::stats(), tierflow/engine_module.h) and means the
// same by them (issue 13): after the same workload on each engine, the operations, bytes,
// pieces, failures and callback errors add up, and nothing is left in flight.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/engine_fixture.h"
#include "testing/random_bytes.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_model.h"
#include "tierflow/engine_module.h"
#include "tierflow/uring_engine.h"

namespace tierflow {
namespace {

using testkit::MakeCpuEngine;
using testkit::RandomBytes;

constexpr std::size_t kOps = 8;
constexpr std::size_t kBytes = 256 << 10;

// The source of every workload: a file mapping, which every engine can read (the io_uring
// engine only reads registered files).
class SourceFile {
 public:
  SourceFile() : data_(RandomBytes(kOps * kBytes, 11)) {
    const int fd = mkstemp(name_);
    if (fd < 0 || write(fd, data_.data(), data_.size()) != static_cast<ssize_t>(data_.size())) {
      std::abort();
    }
    close(fd);
    Result<MappedFile> m = MappedFile::Open(name_);
    if (!m.ok()) std::abort();
    map_ = std::move(*m);
  }
  ~SourceFile() { std::remove(name_); }
  const std::byte* data() const { return map_.data(); }
  const MappedFile& map() const { return map_; }
  const std::vector<unsigned char>& bytes() const { return data_; }

 private:
  char name_[40] = "/tmp/tierflow-counters-XXXXXX";
  std::vector<unsigned char> data_;
  MappedFile map_;
};

struct Named {
  std::string name;
  std::unique_ptr<Engine> engine;
};

// The workload: kOps copies of kBytes, one of them with a callback that throws; then one
// copy to a read-only destination (a failure). Checks the counters after each part.
void Workload(Engine& e, const SourceFile& src) {
  SCOPED_TRACE(e.capabilities().name);
  std::vector<unsigned char> dst(kOps * kBytes);
  const EngineStats before = e.stats();
  for (std::size_t i = 0; i < kOps; ++i) {
    SubmitOptions o;
    if (i == 3) o.callback = [](const Completion&) { throw std::runtime_error("callback"); };
    Result<Handle> h = e.Submit(
        Operation::Copy(dst.data() + i * kBytes, src.data() + i * kBytes, kBytes), std::move(o));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(h->Wait().ok());
  }
  EXPECT_EQ(dst, src.bytes());
  EngineStats s = e.stats();
  EXPECT_EQ(s.ops_submitted - before.ops_submitted, kOps);
  EXPECT_EQ(s.bytes_completed - before.bytes_completed, kOps * kBytes);
  EXPECT_GE(s.pieces_completed - before.pieces_completed, kOps) << "at least a piece each";
  EXPECT_EQ(s.pieces_failed, before.pieces_failed);
  EXPECT_EQ(s.pieces_cancelled, before.pieces_cancelled);
  EXPECT_EQ(s.callback_errors - before.callback_errors, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  // (queued may still hold CPU engine tickets whose pieces the waiter took: they find nothing.)
  EXPECT_LE(s.queued, s.queue_capacity);
  EXPECT_GT(s.queue_capacity, 0u);

  void* ro = mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  Result<Handle> bad = e.Submit(Operation::Copy(ro, src.data(), kBytes));
  if (bad.ok()) {
    EXPECT_FALSE(bad->Wait().ok());
  }
  munmap(ro, kBytes);
  const EngineStats after = e.stats();
  if (bad.ok()) {
    EXPECT_EQ(after.ops_submitted, s.ops_submitted + 1);
    EXPECT_GT(after.pieces_failed, s.pieces_failed) << "the failed piece is counted";
    EXPECT_GE(after.pieces_completed - s.pieces_completed, after.pieces_failed - s.pieces_failed);
  } else {
    EXPECT_EQ(after.ops_submitted, s.ops_submitted) << "refused at submission: not accepted";
  }
  EXPECT_EQ(after.in_flight, 0u);
}

TEST(EngineCounters, EveryEngineCountsTheSameWorkloadAlike) {
  SourceFile src;
  std::vector<Named> engines;
  engines.push_back({"cpu", MakeCpuEngine()});
  CpuEngineOptions inline_all;
  inline_all.inline_max_bytes = kBytes;
  engines.push_back({"cpu inline", MakeCpuEngine(inline_all)});
  DsaModelConfig mc;
  mc.max_transfer_size = 64 << 10;  // several descriptors per copy
  Result<std::shared_ptr<DsaDeviceModel>> model = DsaDeviceModel::Create(mc);
  ASSERT_TRUE(model.ok());
  Result<std::unique_ptr<DsaEngine>> dsa = DsaEngine::CreateOnModel(*model, 0);
  ASSERT_TRUE(dsa.ok());
  engines.push_back({"dsa-model", std::move(*dsa)});
  IoUringEngineOptions uo;
  uo.max_read_bytes = 64 << 10;  // several reads per copy
  Result<std::unique_ptr<IoUringEngine>> uring = IoUringEngine::Create(uo);
  ASSERT_TRUE(uring.ok());
  ASSERT_TRUE((*uring)->RegisterFile(src.map()).ok());
  engines.push_back({"io_uring", std::move(*uring)});
  for (Named& n : engines) {
    SCOPED_TRACE(n.name);
    Workload(*n.engine, src);
  }
  // What a piece is on each (the failed copy included: kOps + 1 copies of 256 KiB).
  EXPECT_GE(engines[0].engine->stats().pieces_completed, 2 * kOps) << "the CPU engine split";
  EXPECT_EQ(engines[1].engine->stats().ops_inline, kOps + 1) << "every copy ran inline";
  EXPECT_EQ(engines[2].engine->stats().pieces_completed, 4 * (kOps + 1)) << "64 KiB descriptors";
  EXPECT_EQ(engines[3].engine->stats().pieces_completed, 4 * (kOps + 1)) << "64 KiB reads";
}

TEST(EngineCounters, SplittingOverEnginesCountsEachPart) {
  SourceFile src;
  auto a = MakeCpuEngine();
  auto b = MakeCpuEngine();
  std::vector<unsigned char> dst(2 * kBytes);
  const EnginePart parts[] = {{a.get(), 0, kBytes}, {b.get(), kBytes, kBytes}};
  Result<Handle> h =
      Engine::SubmitParts(Operation::Copy(dst.data(), src.data(), 2 * kBytes), parts);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(h->Wait().ok());
  for (Engine* e : {static_cast<Engine*>(a.get()), static_cast<Engine*>(b.get())}) {
    EXPECT_EQ(e->stats().ops_submitted, 1u);
    EXPECT_EQ(e->stats().bytes_completed, kBytes);
    EXPECT_EQ(e->stats().in_flight, 0u);
  }
}

// Each thread counts in a share of its own, and more threads than shares share them: totals
// stay exact either way, with counts raised on one thread and lowered on another, and threads
// that come after others ended (their shares given back) count as well.
TEST(EngineCounters, SharesAddUpAcrossMoreThreadsThanShares) {
  EngineCounters c;
  constexpr int kThreads = 2 * EngineCounters::kShares + 3;
  constexpr std::uint64_t kEach = 5000;
  auto raise_and_count = [&](int t) {
    for (std::uint64_t i = 0; i < kEach; ++i) {
      c.Add(EngineCounters::kInFlight);
      c.Add(EngineCounters::kBytesCompleted, static_cast<std::uint64_t>(t) + 1);
    }
  };
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(raise_and_count, t);
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(c.Total(EngineCounters::kInFlight), 2 * kThreads * kEach);
  EXPECT_EQ(c.Total(EngineCounters::kBytesCompleted),
            2 * kEach * (static_cast<std::uint64_t>(kThreads) * (kThreads + 1) / 2));
  // Lowered on other threads than raised: the sum of the shares returns to 0.
  std::vector<std::thread> lowerers;
  for (int t = 0; t < 4; ++t) {
    lowerers.emplace_back([&] { c.Sub(EngineCounters::kInFlight, kThreads * kEach / 2); });
  }
  for (std::thread& t : lowerers) t.join();
  EXPECT_EQ(c.Total(EngineCounters::kInFlight), 0u);
  EXPECT_EQ(c.Total(EngineCounters::kPiecesFailed), 0u) << "other counters untouched";
  c.Clear(EngineCounters::kBytesCompleted);
  EXPECT_EQ(c.Total(EngineCounters::kBytesCompleted), 0u);
  // A reading that saw a lowering but not its raise (both on other threads) says 0, not 2^64-1.
  std::thread([&] { c.Sub(EngineCounters::kInFlight, 3); }).join();
  EXPECT_EQ(c.Total(EngineCounters::kInFlight), 0u);
  std::thread([&] { c.Add(EngineCounters::kInFlight, 5); }).join();
  EXPECT_EQ(c.Total(EngineCounters::kInFlight), 2u);
}

}  // namespace
}  // namespace tierflow
