// SPDX-License-Identifier: Apache-2.0
#include "tierflow/cpu_engine.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "testing/busy_worker.h"
#include "testing/engine_fixture.h"
#include "testing/fixture_topology.h"
#include "testing/random_bytes.h"
#include "tierflow/buffer.h"

namespace tierflow {
namespace {

using testkit::BusyWorker;
using testkit::MakeCpuEngine;
using testkit::ThisSystem;

std::vector<unsigned char> Pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<unsigned char>((i * 131 + seed * 7) ^ (i >> 9));
  return v;
}

TEST(CpuEngine, CreateErrors) {
  Result<Topology> xeon = testkit::FixtureTopology("xeon-max-9468-snc4-flat.xml");
  ASSERT_TRUE(xeon.ok());
  CpuEngineOptions o;
  o.node = 8;
  Result<std::unique_ptr<CpuEngine>> hbm = CpuEngine::Create(*xeon, o);
  ASSERT_FALSE(hbm.ok());
  EXPECT_NE(hbm.status().message().find("has no CPUs"), std::string::npos);
  EXPECT_NE(hbm.status().message().find("nearest CPU node 0"), std::string::npos);
  o.node = 0;
  Result<std::unique_ptr<CpuEngine>> foreign = CpuEngine::Create(*xeon, o);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("running system"), std::string::npos);

  o = {};
  o.node = 99;
  EXPECT_EQ(CpuEngine::Create(ThisSystem(), o).status().code(), StatusCode::kNotFound);
  o = {};
  o.workers = -1;
  EXPECT_EQ(CpuEngine::Create(ThisSystem(), o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.min_piece_bytes = 1000;
  EXPECT_EQ(CpuEngine::Create(ThisSystem(), o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.queue_capacity = 0;
  EXPECT_EQ(CpuEngine::Create(ThisSystem(), o).status().code(), StatusCode::kInvalidArgument);
  o.queue_capacity = std::size_t{1} << 40;  // would not fit in memory
  Result<std::unique_ptr<CpuEngine>> huge = CpuEngine::Create(ThisSystem(), o);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("use 1.."), std::string::npos) << huge.status().message();
  o.queue_capacity = 1000;
  Result<std::unique_ptr<CpuEngine>> rounded = CpuEngine::Create(ThisSystem(), o);
  ASSERT_TRUE(rounded.ok()) << rounded.status().ToString();
  EXPECT_EQ((*rounded)->stats().queue_capacity, 1024u) << "rounded up to a power of two";
  if (!__builtin_cpu_supports("avx512f")) {
    o = {};
    o.isa = CpuIsa::kAvx512;
    Result<std::unique_ptr<CpuEngine>> e = CpuEngine::Create(ThisSystem(), o);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(e.status().message().find("lacks avx512"), std::string::npos);
  }
}

// Issue 12, item 10: a TIERFLOW_ISA that names no ISA used to be ignored silently.
TEST(CpuEngine, UnknownTierflowIsaIsAnError) {
  for (const char* bad : {"avx1024", "AVX2", "sse"}) {
    setenv("TIERFLOW_ISA", bad, 1);
    Result<std::unique_ptr<CpuEngine>> e = CpuEngine::Create(ThisSystem(), {});
    unsetenv("TIERFLOW_ISA");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(std::string("TIERFLOW_ISA=") + bad), std::string::npos);
    EXPECT_NE(e.status().message().find("avx512, avx2 or baseline"), std::string::npos)
        << e.status().message();
  }
  setenv("TIERFLOW_ISA", "baseline", 1);
  Result<std::unique_ptr<CpuEngine>> baseline = CpuEngine::Create(ThisSystem(), {});
  unsetenv("TIERFLOW_ISA");
  ASSERT_TRUE(baseline.ok());
  EXPECT_EQ((*baseline)->isa(), CpuIsa::kBaseline);
  EXPECT_EQ((*baseline)->streaming_isa(), CpuIsa::kBaseline) << "named: used for every copy";
  setenv("TIERFLOW_ISA", "", 1);  // empty: unset
  EXPECT_TRUE(CpuEngine::Create(ThisSystem(), {}).ok());
  unsetenv("TIERFLOW_ISA");
}

// Issue 17: with no ISA named, each kind of copy gets the kernel measured fastest on this CPU,
// once per process; an ISA named in the options is used for both.
TEST(CpuEngine, AutoIsaIsMeasuredPerKindOfCopy) {
  const kernels::MeasuredKernelChoice m = kernels::MeasuredKernels();
  EXPECT_TRUE(kernels::IsaSupported(m.cached));
  EXPECT_TRUE(kernels::IsaSupported(m.streaming));
  EXPECT_NE(m.cached, CpuIsa::kAuto);
  const kernels::MeasuredKernelChoice again = kernels::MeasuredKernels();
  EXPECT_EQ(again.cached, m.cached);
  EXPECT_EQ(again.streaming, m.streaming);
  EXPECT_EQ(again.streaming_prefetch, m.streaming_prefetch);
  auto e = MakeCpuEngine();
  EXPECT_EQ(e->isa(), m.cached);
  EXPECT_EQ(e->streaming_isa(), m.streaming);
  CpuEngineOptions o;
  o.isa = CpuIsa::kBaseline;
  auto named = MakeCpuEngine(o);
  EXPECT_EQ(named->isa(), CpuIsa::kBaseline);
  EXPECT_EQ(named->streaming_isa(), CpuIsa::kBaseline);
  // Both kernels copy correctly at the sizes that pick them (below and above the threshold).
  o = {};
  o.nt_threshold_bytes = 1 << 16;
  auto split = MakeCpuEngine(o);
  for (std::size_t n : {std::size_t{(1 << 16) - 64}, std::size_t{(1 << 16) + 100}}) {
    auto src = testkit::RandomBytes(n, static_cast<unsigned>(n));
    std::vector<unsigned char> dst(n);
    Result<Handle> h = split->Submit(Operation::Copy(dst.data(), src.data(), n));
    ASSERT_TRUE(h.ok()) << h.status().message();
    ASSERT_TRUE(h->Wait().ok());
    EXPECT_EQ(dst, src) << n;
  }
}

// The workers stay in the parent at fork(): the child's engine starts its own on the next
// submission (a blocking wait would otherwise sleep forever), and queued parts of the
// parent's operations are cancelled there.
TEST(CpuEngine, ForkChildStartsItsOwnWorkers) {
  CpuEngineOptions o;
  o.workers = 1;
  o.inline_max_bytes = 0;  // everything goes to the worker
  o.waiter_runs_pieces = false;
  auto e = MakeCpuEngine(o);
  const std::size_t n = 4 << 20;
  std::vector<unsigned char> src(n, 0x3c), dst(n), dst2(n);
  ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), n))->Wait().ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);  // a hang shows as a signal, not as a stuck test
    Result<Handle> h = e->Submit(Operation::Copy(dst2.data(), src.data(), n));
    int rc = !h.ok() ? 1 : !h->Wait(WaitMode::kBlock).ok() ? 2 : dst2 != src ? 3 : 0;
    std::_Exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(e->Submit(Operation::Copy(dst2.data(), src.data(), n))->Wait().ok());
  EXPECT_EQ(dst2, src);
}

TEST(CpuEngine, CapabilitiesAndDefaults) {
  auto e = MakeCpuEngine();
  ASSERT_TRUE(e);
  const EngineCapabilities& c = e->capabilities();
  EXPECT_EQ(c.name, "cpu");
  EXPECT_EQ(c.ops, kDataOps);
  EXPECT_FALSE(c.is_model);
  EXPECT_EQ(e->workers(), static_cast<int>(ThisSystem().node(0)->cpus.size()));
  if (ThisSystem().caches().l3_bytes != 0) {
    EXPECT_EQ(e->nt_threshold_bytes(), ThisSystem().caches().l3_bytes * 3 / 4);
  }
}

TEST(CpuEngine, ValidationErrorsNameTheProblem) {
  auto e = MakeCpuEngine();
  std::vector<char> a(8192), b(8192);
  struct Case {
    Operation op;
    const char* text;
  } cases[] = {
      {Operation::Copy(nullptr, a.data(), 16), "dst is null"},
      {Operation::Copy(b.data(), nullptr, 16), "src is null"},
      {Operation::Copy(b.data(), a.data(), 0), "size 0"},
      {Operation::Copy(a.data() + 10, a.data(), 100), "overlap by 90 bytes"},
      {Operation::Copy(reinterpret_cast<void*>(16), a.data(), 16), "first page"},
      {Operation::Copy(reinterpret_cast<void*>(~std::uintptr_t{0} - 100), a.data(), 16),
       "user space"},
      {Operation::Copy(b.data(), a.data(), std::size_t{1} << 41), "exceeds engine 'cpu' limit"},
      {Operation::Compare(a.data(), nullptr, 16), "src2 is null"},
      {Operation::Fill(nullptr, 1, 16), "dst is null"},
  };
  for (const Case& c : cases) {
    Result<Handle> h = e->Submit(c.op);
    ASSERT_FALSE(h.ok()) << c.text;
    EXPECT_NE(h.status().message().find(c.text), std::string::npos) << h.status().message();
  }
  Operation bad_kind = Operation::Copy(b.data(), a.data(), 16);
  bad_kind.kind = static_cast<OpKind>(42);
  EXPECT_EQ(e->Submit(bad_kind).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->stats().ops_submitted, 0u) << "rejected operations are not submitted";
}

TEST(CpuEngine, UnmappedMemoryIsAnErrorAtSubmitOrCompletion) {
  // Everything that maps memory (buffers, worker stacks) is created before the hole is made, so
  // nothing can reuse its address.
  auto e = MakeCpuEngine();
  CpuEngineOptions o;
  o.check_mappings = MappingCheck::kHandedOff;
  auto checked = MakeCpuEngine(o);
  o.check_mappings = MappingCheck::kAll;
  auto strict = MakeCpuEngine(o);
  const std::size_t n = 1 << 20;
  std::vector<char> src(n);
  void* hole = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  munmap(hole, n);
  // By default the copy runs and its handle reports the fault, naming the range.
  Result<Handle> faulted = e->Submit(Operation::Copy(hole, src.data(), n));
  ASSERT_TRUE(faulted.ok()) << faulted.status().message();
  const Status s = faulted->Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("destination"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not mapped"), std::string::npos) << s.message();
  Result<Handle> h = checked->Submit(Operation::Copy(hole, src.data(), n));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("not (entirely) mapped"), std::string::npos);
  // Small (inline) operations are checked only when asked for.
  Result<Handle> small = strict->Submit(Operation::Copy(hole, src.data(), 64));
  ASSERT_FALSE(small.ok());
}

TEST(CpuEngine, BatchErrors) {
  auto e = MakeCpuEngine();
  std::vector<char> a(64), b(64);
  EXPECT_NE(e->SubmitBatch({}).status().message().find("empty batch"), std::string::npos);
  std::vector<Operation> ops = {Operation::Copy(b.data(), a.data(), 8),
                                Operation::Copy(b.data(), a.data(), 0)};
  Result<Handle> h = e->SubmitBatch(ops);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("batch member 1"), std::string::npos);
  std::vector<Operation> many(e->capabilities().max_batch + 1,
                              Operation::Copy(b.data(), a.data(), 8));
  EXPECT_NE(e->SubmitBatch(many).status().message().find("exceeds"), std::string::npos);
}

class CpuEngineOps : public ::testing::TestWithParam<std::size_t> {};  // inline_max_bytes

TEST_P(CpuEngineOps, CopyMoveFillCompare) {
  CpuEngineOptions o;
  o.inline_max_bytes = GetParam();
  o.min_piece_bytes = 64 << 10;
  auto e = MakeCpuEngine(o);
  const std::size_t n = (3 << 20) + 123;
  auto src = Pattern(n, 1);
  std::vector<unsigned char> dst(n);
  ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), n))->Wait().ok());
  EXPECT_EQ(dst, src);

  // Overlapping moves in both directions.
  std::vector<unsigned char> buf = Pattern(n + 4097, 2), ref = buf;
  ASSERT_TRUE(e->Submit(Operation::Move(buf.data() + 4097, buf.data(), n))->Wait().ok());
  std::memmove(ref.data() + 4097, ref.data(), n);
  EXPECT_EQ(buf, ref);
  ASSERT_TRUE(e->Submit(Operation::Move(buf.data(), buf.data() + 33, n))->Wait().ok());
  std::memmove(ref.data(), ref.data() + 33, n);
  EXPECT_EQ(buf, ref);

  // Fill with an 8-byte pattern from an unaligned start.
  const std::uint64_t pat = 0x0807060504030201ull;
  ASSERT_TRUE(e->Submit(Operation::Fill(dst.data() + 3, pat, n - 3))->Wait().ok());
  for (std::size_t i = 0; i < n - 3; i += 9973) ASSERT_EQ(dst[3 + i], (i % 8) + 1) << i;
  EXPECT_EQ(dst[n - 1], ((n - 4) % 8) + 1);

  // Compare: equal, then a difference far in.
  std::vector<unsigned char> a = Pattern(n, 5), b = a;
  Result<Handle> eq = e->Submit(Operation::Compare(a.data(), b.data(), n));
  ASSERT_TRUE(eq->Wait().ok());
  EXPECT_TRUE(eq->result().equal);
  b[n - 17] ^= 1;
  b[n - 5] ^= 1;
  Result<Handle> ne = e->Submit(Operation::Compare(a.data(), b.data(), n));
  ASSERT_TRUE(ne->Wait().ok());
  EXPECT_FALSE(ne->result().equal);
  EXPECT_EQ(ne->result().first_difference, n - 17);
  EXPECT_EQ(ne->result().bytes_completed, n);
}

TEST_P(CpuEngineOps, MixedBatch) {
  CpuEngineOptions o;
  o.inline_max_bytes = GetParam();
  auto e = MakeCpuEngine(o);
  auto src = Pattern(1 << 20, 9);
  std::vector<unsigned char> d1(1 << 20), d2(4096), d3(100);
  std::vector<Operation> ops = {Operation::Copy(d1.data(), src.data(), src.size()),
                                Operation::Fill(d2.data(), 0xababababababababull, d2.size()),
                                Operation::Copy(d3.data(), src.data() + 7, d3.size())};
  Result<Handle> h = e->SubmitBatch(ops);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_EQ(h->bytes_completed(), src.size() + 4096 + 100);
  EXPECT_EQ(d1, src);
  EXPECT_EQ(d2[4095], 0xab);
  EXPECT_EQ(0, std::memcmp(d3.data(), src.data() + 7, 100));
  EngineStats s = e->stats();
  EXPECT_EQ(s.ops_submitted, 3u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_GE(s.bytes_completed, src.size() + 4196);
}

INSTANTIATE_TEST_SUITE_P(InlineAndWorkers, CpuEngineOps,
                         ::testing::Values(0, 32 * 1024, 64u << 20));

TEST(CpuEngine, InlineVersusWorkersIsVisibleInState) {
  auto e = MakeCpuEngine();
  std::vector<char> a(1 << 20, 1), b(1 << 20);
  ASSERT_TRUE(e->Submit(Operation::Copy(b.data(), a.data(), 4096))->Wait().ok());
  EXPECT_EQ(e->stats().ops_inline, 1u);
  ASSERT_TRUE(e->Submit(Operation::Copy(b.data(), a.data(), a.size()))->Wait().ok());
  EngineStats s = e->stats();
  EXPECT_EQ(s.ops_inline, 1u);
  EXPECT_EQ(s.ops_submitted, 2u);
  EXPECT_GE(s.pieces_completed, 2u);
  EXPECT_EQ(s.queue_capacity, 4096u);
}

TEST(CpuEngine, NonTemporalPathCopiesCorrectly) {
  CpuEngineOptions o;
  o.nt_threshold_bytes = 4096;
  auto e = MakeCpuEngine(o);
  auto src = Pattern((8 << 20) + 77, 3);
  std::vector<unsigned char> dst(src.size());
  ASSERT_TRUE(e->Submit(Operation::Copy(dst.data() + 0, src.data(), src.size()))->Wait().ok());
  EXPECT_EQ(dst, src);
}

TEST(CpuEngine, DestroyWithOperationsInFlightCompletesOrCancels) {
  const std::size_t n = 8 << 20;
  Result<Buffer> src = Buffer::OnNode(0, n);
  ASSERT_TRUE(src.ok());
  std::vector<Result<Buffer>> dsts;
  std::vector<Handle> handles;
  std::atomic<int> callbacks{0};
  {
    CpuEngineOptions o;
    o.workers = 1;
    o.max_piece_bytes = 64 << 10;
    o.min_piece_bytes = 64 << 10;
    auto e = MakeCpuEngine(o);
    for (int i = 0; i < 16; ++i) {
      dsts.push_back(Buffer::OnNode(0, n));
      ASSERT_TRUE(dsts.back().ok());
    }
    for (int i = 0; i < 16; ++i) {
      SubmitOptions so;
      so.callback = [&](const Completion&) { callbacks.fetch_add(1); };
      Result<Handle> h = e->Submit(Operation::Copy(dsts[i]->data(), src->data(), n), std::move(so));
      ASSERT_TRUE(h.ok());
      handles.push_back(std::move(*h));
    }
  }  // engine destroyed here with most pieces still queued
  int cancelled = 0;
  for (Handle& h : handles) {
    ASSERT_TRUE(h.done()) << "every handle is complete once the engine is gone";
    Status s = h.Wait();
    if (s.code() == StatusCode::kCancelled) {
      ++cancelled;
      EXPECT_NE(s.message().find("destroyed"), std::string::npos);
      EXPECT_LT(h.bytes_completed(), n);
    } else {
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(h.bytes_completed(), n);
    }
  }
  EXPECT_EQ(callbacks.load(), 16);
  EXPECT_GT(cancelled, 0) << "16 x 8 MiB on one worker cannot all finish before destruction";
}

TEST(CpuEngine, CallbackOnWorkerMaySubmitMore) {
  auto e = MakeCpuEngine();
  std::vector<char> a(1 << 20, 3), b(1 << 20), c(1 << 20);
  std::atomic<bool> second_ok{false};
  SubmitOptions so;
  so.callback = [&](const Completion&) {
    Result<Handle> h = e->Submit(Operation::Copy(c.data(), b.data(), b.size()));
    second_ok = h.ok() && h->Wait().ok();
  };
  Result<Handle> h = e->Submit(Operation::Copy(b.data(), a.data(), a.size()), std::move(so));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_TRUE(second_ok.load());
  EXPECT_EQ(c, a);
}

TEST(CpuEngine, ThrowingCallbackOnWorkerIsCounted) {
  auto e = MakeCpuEngine();
  std::vector<char> a(1 << 20, 3), b(1 << 20);
  SubmitOptions so;
  so.callback = [](const Completion&) { throw 42; };
  Result<Handle> h = e->Submit(Operation::Copy(b.data(), a.data(), a.size()), std::move(so));
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_EQ(e->stats().callback_errors, 1u);
}

TEST(CpuEngine, WaiterRunsPiecesNoWorkerStarted) {
  CpuEngineOptions o;
  o.workers = 1;
  o.min_piece_bytes = o.max_piece_bytes = 64 << 10;
  auto e = MakeCpuEngine(o);
  BusyWorker busy(*e);
  auto src = Pattern((1 << 20) + 4096, 5);
  std::vector<unsigned char> dst(src.size());
  Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
  ASSERT_TRUE(h.ok());
  // The only worker is stuck in a callback: only the waiter can make progress.
  ASSERT_TRUE(h->Wait(WaitMode::kSpin).ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(h->bytes_completed(), src.size());
  EXPECT_EQ(e->stats().pieces_by_waiters, 17u);
}

TEST(CpuEngine, BlockingWaitLeavesPiecesToWorkers) {
  CpuEngineOptions o;
  o.workers = 1;
  auto e = MakeCpuEngine(o);
  auto busy = std::make_unique<BusyWorker>(*e);
  std::vector<unsigned char> src(1 << 20, 9), dst(1 << 20);
  Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
  ASSERT_TRUE(h.ok());
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_TRUE(h->Wait(WaitMode::kBlock).ok());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned.load()) << "a blocking wait must not run the copy itself";
  busy.reset();
  waiter.join();
  EXPECT_EQ(dst, src);
  EXPECT_EQ(e->stats().pieces_by_waiters, 0u);
}

TEST(CpuEngine, WaiterHelpCanBeTurnedOff) {
  CpuEngineOptions o;
  o.waiter_runs_pieces = false;
  auto e = MakeCpuEngine(o);
  std::vector<unsigned char> src(4 << 20, 2), dst(4 << 20);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        e->Submit(Operation::Copy(dst.data(), src.data(), src.size()))->Wait(WaitMode::kSpin).ok());
  }
  EXPECT_EQ(dst, src);
  EXPECT_EQ(e->stats().pieces_by_waiters, 0u);
}

// The last piece of a split operation is held for a thread that waits on it; when nobody
// waits (the caller polls), the workers run it once the other pieces are taken. Every kind that
// splits keeps its third operand through the held piece (fill pattern, second source, second
// destination).
TEST(CpuEngine, HeldPieceRunsOnAWorkerWhenNobodyWaits) {
  CpuEngineOptions o;
  o.workers = 2;
  o.min_piece_bytes = o.max_piece_bytes = 256 << 10;
  auto e = MakeCpuEngine(o);
  constexpr std::size_t kSize = (1 << 20) + 4096;  // 5 pieces, the last one short
  auto src = Pattern(kSize, 7);
  std::vector<unsigned char> dst(kSize), dst2(kSize), filled(kSize), other = src;
  other[kSize - 10] ^= 1;  // differs in the held piece only
  const std::uint64_t pattern = 0x0123456789abcdefULL;
  const Operation ops[] = {Operation::Copy(dst.data(), src.data(), kSize),
                           Operation::Dualcast(dst.data(), dst2.data(), src.data(), kSize),
                           Operation::Fill(filled.data(), pattern, kSize),
                           Operation::Compare(src.data(), other.data(), kSize)};
  for (const Operation& op : ops) {
    Result<Handle> h = e->Submit(op);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    while (!h->done()) std::this_thread::yield();  // polls: never runs a piece itself
    ASSERT_TRUE(h->status().ok()) << OpKindName(op.kind);
    if (op.kind == OpKind::kCompare) {
      EXPECT_FALSE(h->result().equal);
      EXPECT_EQ(h->result().first_difference, kSize - 10);
    }
  }
  EXPECT_EQ(dst, src);
  EXPECT_EQ(dst2, src);
  for (std::size_t i = 0; i < kSize; ++i) {
    ASSERT_EQ(filled[i], static_cast<unsigned char>(pattern >> (8 * (i % 8)))) << i;
  }
  EXPECT_EQ(e->stats().pieces_by_waiters, 0u);
  EXPECT_EQ(e->stats().pieces_completed, 4u * 5u);
}

TEST(CpuEngine, QueueSmallerThanWork) {
  CpuEngineOptions o;
  o.queue_capacity = 2;
  o.min_piece_bytes = 64 << 10;
  o.max_piece_bytes = 64 << 10;
  auto e = MakeCpuEngine(o);
  auto src = Pattern(4 << 20, 4);
  std::vector<unsigned char> dst(src.size());
  ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), src.size()))->Wait().ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(e->stats().pieces_completed, 64u);
}

TEST(CpuIsa, NamesAndDetection) {
  EXPECT_EQ(*ParseCpuIsa("avx2"), CpuIsa::kAvx2);
  EXPECT_FALSE(ParseCpuIsa("sse9").ok());
  CpuIsa isa = DetectCpuIsa();
  EXPECT_NE(isa, CpuIsa::kAuto);
}

}  // namespace
}  // namespace tierflow
