// SPDX-License-Identifier: Apache-2.0
// Many threads submitting, waiting (every mode), polling and taking callbacks on shared
// engines; run under TSan by `make test`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/engine_fixture.h"
#include "testing/threads.h"
#include "tierflow/copy_policy.h"

namespace tierflow {
namespace {

using testkit::MakeCpuEngine;

TEST(Concurrency, ManyThreadsSubmitAndWait) {
  CpuEngineOptions o;
  o.inline_max_bytes = 8 << 10;
  o.min_piece_bytes = 16 << 10;
  auto e = MakeCpuEngine(o);
  constexpr int kThreads = 8, kIters = 150;
  std::atomic<int> failures{0}, callbacks{0}, expected_callbacks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<unsigned char> src(256 << 10), dst(256 << 10);
      for (auto& c : src) c = static_cast<unsigned char>(rng());
      for (int i = 0; i < kIters; ++i) {
        std::size_t n = 1 + rng() % src.size();
        std::memset(dst.data(), 0, n);
        SubmitOptions so;
        if (i % 3 == 0) {
          expected_callbacks.fetch_add(1);
          so.callback = [&](const Completion& c) { callbacks.fetch_add(c.status.ok() ? 1 : 1000); };
        }
        Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), n), std::move(so));
        if (!h.ok()) {
          failures.fetch_add(1);
          continue;
        }
        Status s;
        switch (i % 5) {
          case 0:
            s = h->Wait(WaitMode::kSpin);
            break;
          case 1:
            s = h->Wait(WaitMode::kYield);
            break;
          case 2:
            s = h->Wait(WaitMode::kBlock);
            break;
          case 3:
            while (!h->done()) std::this_thread::yield();
            s = h->status();
            break;
          default:
            s = h->Wait();
            break;
        }
        if (!s.ok() || std::memcmp(dst.data(), src.data(), n) != 0) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(callbacks.load(), expected_callbacks.load());
  EXPECT_EQ(e->stats().in_flight, 0u);
}

TEST(Concurrency, HandlesWaitedByOtherThreads) {
  auto e = MakeCpuEngine();
  std::vector<unsigned char> src(4 << 20, 9), dst(4 << 20);
  for (int round = 0; round < 20; ++round) {
    Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
    ASSERT_TRUE(h.ok());
    std::vector<std::thread> waiters;
    std::atomic<int> ok{0};
    for (int w = 0; w < 4; ++w) {
      waiters.emplace_back([&, w] {
        if (h->Wait(w % 2 ? WaitMode::kBlock : WaitMode::kAdaptive).ok()) ok.fetch_add(1);
      });
    }
    for (auto& t : waiters) t.join();
    EXPECT_EQ(ok.load(), 4);
  }
}

TEST(Concurrency, SplitCopiesOverTwoEnginesFromManyThreads) {
  auto a = MakeCpuEngine();
  auto b = MakeCpuEngine();
  std::vector<Engine*> engines = {a.get(), b.get()};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<unsigned char> src(1 << 20, static_cast<unsigned char>(t + 1)), dst(1 << 20);
      for (int i = 0; i < 20; ++i) {
        std::vector<CopyPart> parts = {{engines[0], 0, 512 << 10},
                                       {engines[1], 512 << 10, 512 << 10}};
        Result<Handle> h = SubmitParts(Operation::Copy(dst.data(), src.data(), src.size()), parts);
        if (!h.ok() || !h->Wait().ok() || dst != src) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// Split operations back to back keep the workers polling, so submissions hand pieces to their
// mailboxes directly: every kind, every way of waiting (callbacks alone included, where the
// held piece needs a worker), pinned workers (posts skip the worker on the submitter's CPU) and
// unpinned, more workers than CPUs.
void SplitsBackToBack(CpuEngineOptions o) {
  o.min_piece_bytes = 64 << 10;
  auto e = MakeCpuEngine(o);
  constexpr std::size_t kMax = 512 << 10;
  std::mt19937 rng(7);
  std::vector<unsigned char> src(kMax), other(kMax), dst(kMax), dst2(kMax);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  std::atomic<int> callbacks{0};
  for (int i = 0; i < 600; ++i) {
    const std::size_t n = (128 << 10) + rng() % (kMax - (128 << 10));
    std::memcpy(other.data(), src.data(), n);
    other[n - 1 - rng() % n] ^= 1;
    const Operation ops[] = {Operation::Copy(dst.data(), src.data(), n),
                             Operation::Dualcast(dst.data(), dst2.data(), src.data(), n),
                             Operation::Compare(src.data(), other.data(), n),
                             Operation::Fill(dst.data(), 0x1122334455667788ULL, n)};
    const Operation& op = ops[i % 4];
    SubmitOptions so;
    const bool callback_only = i % 5 == 4;
    if (callback_only) so.callback = [&](const Completion& c) { callbacks += c.status.ok(); };
    Result<Handle> h = e->Submit(op, std::move(so));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    if (callback_only) {
      while (!h->done()) std::this_thread::yield();  // runs no piece itself
    } else {
      const WaitMode modes[] = {WaitMode::kAdaptive, WaitMode::kSpin, WaitMode::kBlock,
                                WaitMode::kYield};
      ASSERT_TRUE(h->Wait(modes[i % 4]).ok()) << i;
    }
    ASSERT_EQ(h->bytes_completed(), n) << i;
    if (op.kind == OpKind::kCompare) {
      ASSERT_FALSE(h->result().equal) << i;
      ASSERT_EQ(std::memcmp(src.data(), other.data(), h->result().first_difference), 0) << i;
    } else if (op.kind == OpKind::kFill) {
      for (std::size_t k = 0; k < n; k += 4093) ASSERT_EQ(dst[k], 0x88 - 0x11 * (k % 8)) << k;
    } else {
      ASSERT_EQ(std::memcmp(dst.data(), src.data(), n), 0) << i;
      if (op.kind == OpKind::kDualcast) {
        ASSERT_EQ(std::memcmp(dst2.data(), src.data(), n), 0) << i;
      }
    }
  }
  EXPECT_EQ(callbacks.load(), 120);
  const EngineStats st = e->stats();
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.pieces_failed + st.pieces_cancelled, 0u);
}

TEST(Concurrency, SplitsBackToBackPinned) { SplitsBackToBack({}); }

TEST(Concurrency, SplitsBackToBackUnpinnedMoreWorkersThanCpus) {
  CpuEngineOptions o;
  o.pin = false;
  o.workers = 5;
  SplitsBackToBack(o);
}

// 900 split copies of 256 KiB from this thread, waited with kBlock (the waiter runs no piece),
// kAdaptive, or not at all (a callback); each is checked.
void SplitsWaitedEveryWay(CpuEngine& e) {
  std::vector<unsigned char> src(256 << 10), dst(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7);
  std::atomic<int> callbacks{0};
  for (int i = 0; i < 900; ++i) {
    std::memset(dst.data(), 0, dst.size());
    SubmitOptions so;
    if (i % 3 == 2) so.callback = [&](const Completion& c) { callbacks += c.status.ok(); };
    Result<Handle> h = e.Submit(Operation::Copy(dst.data(), src.data(), src.size()), std::move(so));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    if (i % 3 == 2) {
      while (!h->done()) std::this_thread::yield();  // runs no piece itself
    } else {
      ASSERT_TRUE(h->Wait(i % 3 == 0 ? WaitMode::kBlock : WaitMode::kAdaptive).ok()) << i;
    }
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), dst.size()), 0) << i;
  }
  EXPECT_EQ(callbacks.load(), 300);
}

std::unique_ptr<CpuEngine> PinnedWorkers(int workers, bool waiter_runs_pieces = true) {
  CpuEngineOptions o;
  o.workers = workers;  // pinned to the node's first CPUs
  o.waiter_runs_pieces = waiter_runs_pieces;
  o.min_piece_bytes = 64 << 10;
  // One worker: pieces of 64 KiB, so that a split has pieces beyond the held one.
  if (workers == 1) o.max_piece_bytes = 64 << 10;
  return MakeCpuEngine(o);
}

// The submitting thread on the CPU of a worker: each split's first piece goes to the other
// worker's mailbox and the ticket for the held piece to the mailbox of the worker beside the
// submitter while that worker polls, which runs it only when the submitter sleeps (kBlock) or
// yields, or the next operation replaces it; a worker there that finds nothing left sleeps
// and is not woken for held pieces. Every operation completes, whether its waiter helps,
// sleeps, or there is none (callbacks), with waiters that run pieces and without, and the
// engine is destroyed with a ticket left in a mailbox.
class SplitsFromTheCpuOfAWorker : public ::testing::TestWithParam<bool> {};

TEST_P(SplitsFromTheCpuOfAWorker, CompleteWhoeverWaits) {
  const std::vector<int> cpus = testkit::NodeCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  testkit::PinnedToCpu pinned(cpus[1]);
  auto e = PinnedWorkers(2, /*waiter_runs_pieces=*/GetParam());
  SplitsWaitedEveryWay(*e);
  EXPECT_EQ(e->stats().in_flight, 0u);
  EXPECT_EQ(e->stats().pieces_cancelled, 0u);
}

INSTANTIATE_TEST_SUITE_P(WaiterRunsPieces, SplitsFromTheCpuOfAWorker, ::testing::Bool());

// The worker beside a submitting thread (pinned to its CPU) could run only by taking turns
// with that thread, whose waiter runs the held piece there. It takes the tickets left in its
// mailbox while it polls; once one finds nothing left (the waiter ran the piece), it sleeps,
// resting, and split operations from that CPU do not wake it again, whether their waiters
// help or block. The other worker gets the pieces.
TEST(Concurrency, SplitsLeaveTheWorkerOnTheSubmittersCpuAsleep) {
  const std::vector<int> cpus = testkit::NodeCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  CpuEngineOptions o;
  o.workers = 2;
  o.min_piece_bytes = 64 << 10;
  // Created before this thread is pinned: its workers do not start out on this thread's CPU
  // alone (a thread inherits its creator's CPUs), so the one pinned there is the worker beside.
  auto e = MakeCpuEngine(o);
  testkit::PinnedToCpu pinned(cpus[1]);
  const int beside = testkit::AwaitThreadPinnedTo(cpus[1]);
  ASSERT_NE(beside, 0) << "no worker pinned to CPU " << cpus[1];
  std::vector<unsigned char> src(256 << 10), dst(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13);
  auto copy = [&](WaitMode mode) {
    std::memset(dst.data(), 0, dst.size());
    Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(h->Wait(mode).ok());
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), dst.size()), 0);
  };
  // Copies back to back until the worker beside rests: asleep through twenty copies (one that
  // merely sleeps for want of work is woken by the first of them).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (long last = -1;;) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the worker beside never rested";
    for (int i = 0; i < 20; ++i) copy(WaitMode::kAdaptive);
    const long now = testkit::ThreadState(beside) == 'S' ? testkit::ContextSwitchesOf(beside) : -1;
    if (now >= 0 && now == last) break;
    last = now;
  }
  const long switches = testkit::ContextSwitchesOf(beside);
  for (int i = 0; i < 300; ++i) copy(i % 2 == 0 ? WaitMode::kAdaptive : WaitMode::kBlock);
  EXPECT_EQ(testkit::ContextSwitchesOf(beside), switches) << "the worker beside was woken";
  EXPECT_EQ(e->stats().in_flight, 0u);
}

// Two submitting threads, one on each of two CPUs: each posts pieces to the mailbox where
// the other leaves its tickets, so tickets are replaced by the other thread's pieces before
// they are taken; the posted workers' look for what is left keeps every operation going.
// With one worker, the thread on its CPU posts nothing, and its ticket must not be one that
// the other thread's piece may replace: nothing else would run its operation's pieces.
class ConcurrencyWorkers : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrencyWorkers, SplitsFromTwoCpusWithTicketsReplaced) {
  const std::vector<int> cpus = testkit::NodeCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  auto e = PinnedWorkers(GetParam());
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      testkit::PinnedToCpu pinned(cpus[static_cast<std::size_t>(t)]);
      SplitsWaitedEveryWay(*e);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(e->stats().in_flight, 0u);
  EXPECT_EQ(e->stats().pieces_cancelled, 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, ConcurrencyWorkers, ::testing::Values(1, 2));

// Destroying the engine while split operations are handed to polling workers: every operation
// completes (with its bytes copied) or is cancelled, none hangs. Operations in flight together
// write destinations of their own (two writing the same bytes at once would be the caller's
// race).
TEST(Concurrency, EngineDestroyedWhilePiecesArePosted) {
  constexpr std::size_t kOps = 8;
  std::vector<unsigned char> src(256 << 10, 3);
  std::vector<std::vector<unsigned char>> dst(kOps, std::vector<unsigned char>(src.size()));
  for (int round = 0; round < 50; ++round) {
    std::vector<Handle> handles;
    {
      CpuEngineOptions o;
      o.workers = 3;
      o.min_piece_bytes = 64 << 10;
      auto e = MakeCpuEngine(o);
      for (std::size_t i = 0; i < kOps; ++i) {
        std::fill(dst[i].begin(), dst[i].end(), 0);
        Result<Handle> h = e->Submit(Operation::Copy(dst[i].data(), src.data(), src.size()));
        ASSERT_TRUE(h.ok());
        handles.push_back(std::move(*h));
      }
    }
    for (std::size_t i = 0; i < kOps; ++i) {
      Status s = handles[i].Wait(WaitMode::kBlock);
      ASSERT_TRUE(s.ok() || s.code() == StatusCode::kCancelled) << s.ToString();
      if (s.ok()) {
        ASSERT_EQ(std::memcmp(dst[i].data(), src.data(), src.size()), 0) << i;
      }
    }
  }
}

class ConcurrencyWaitMode : public ::testing::TestWithParam<WaitMode> {};

// Waiters that run pieces themselves (every mode but kBlock) race with the destructor for the
// pieces still queued: each piece must run once or be cancelled once, and the destructor must
// not return while a waiter is still inside a piece.
TEST_P(ConcurrencyWaitMode, EngineDestroyedWhileOtherThreadsWait) {
  const WaitMode mode = GetParam();
  for (int round = 0; round < 5; ++round) {
    std::vector<unsigned char> src(16 << 20, 1), dst(16 << 20);
    std::vector<Handle> handles;
    {
      CpuEngineOptions o;
      o.workers = 1;
      o.min_piece_bytes = o.max_piece_bytes = 1 << 20;
      auto e = MakeCpuEngine(o);
      for (int i = 0; i < 4; ++i) {
        Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
        ASSERT_TRUE(h.ok());
        handles.push_back(std::move(*h));
      }
      std::thread waiter([&] {
        for (Handle& h : handles) {
          Status s = h.Wait(mode);
          EXPECT_TRUE(s.ok() || s.code() == StatusCode::kCancelled) << s.ToString();
          if (s.ok()) {
            EXPECT_EQ(h.bytes_completed(), src.size());
          }
        }
      });
      e.reset();
      waiter.join();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ConcurrencyWaitMode,
                         ::testing::Values(WaitMode::kBlock, WaitMode::kAdaptive, WaitMode::kSpin),
                         [](const auto& info) {
                           switch (info.param) {
                             case WaitMode::kBlock:
                               return std::string("Block");
                             case WaitMode::kAdaptive:
                               return std::string("Adaptive");
                             default:
                               return std::string("Spin");
                           }
                         });

}  // namespace
}  // namespace tierflow
