// SPDX-License-Identifier: Apache-2.0
#include "tierflow/handle.h"

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/manual_engine.h"

namespace tierflow {
namespace {

using testkit::ManualEngine;

TEST(Handle, EmptyHandleReportsInsteadOfCrashing) {
  Handle h;
  EXPECT_FALSE(h.valid());
  EXPECT_FALSE(h.done());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Wait().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.Wait(WaitMode::kBlock).message().find("empty handle"), std::string::npos);
  EXPECT_EQ(h.bytes_completed(), 0u);
  EXPECT_EQ(h.result().status.code(), StatusCode::kInvalidArgument);
}

TEST(Handle, PendingThenDoneAndWaitTwice) {
  ManualEngine e;
  char src[64] = "hello", dst[64] = {};
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, sizeof src));
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->done());
  EXPECT_EQ(h->status().code(), StatusCode::kPending);
  EXPECT_EQ(h->result().status.code(), StatusCode::kPending);
  e.CompleteNext();
  EXPECT_TRUE(h->done());
  EXPECT_TRUE(h->Wait().ok());
  EXPECT_TRUE(h->Wait().ok()) << "waiting twice returns the same status";
  EXPECT_EQ(h->bytes_completed(), sizeof src);
  EXPECT_STREQ(dst, "hello");
  Handle moved = std::move(*h);
  EXPECT_FALSE(h->valid());
  EXPECT_TRUE(moved.Wait().ok());
}

TEST(Handle, EveryWaitModeWakesUp) {
  for (WaitMode mode : {WaitMode::kSpin, WaitMode::kYield, WaitMode::kBlock, WaitMode::kAdaptive}) {
    ManualEngine e;
    char src[8] = {}, dst[8];
    Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8));
    ASSERT_TRUE(h.ok());
    std::thread completer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      e.CompleteNext();
    });
    EXPECT_TRUE(h->Wait(mode).ok());
    completer.join();
  }
}

TEST(Handle, ManyBlockedWaitersAllWake) {
  ManualEngine e;
  char src[8] = {}, dst[8];
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8));
  ASSERT_TRUE(h.ok());
  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 6; ++i) {
    waiters.emplace_back([&] {
      if (h->Wait(WaitMode::kBlock).ok()) woke.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(woke.load(), 0);
  e.CompleteNext();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woke.load(), 6);
}

TEST(Handle, FailureCarriesTheMessage) {
  ManualEngine e;
  char src[8] = {}, dst[8];
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8));
  ASSERT_TRUE(h.ok());
  e.CompleteNext(StatusCode::kFailed, "device said no");
  Status s = h->Wait();
  EXPECT_EQ(s.code(), StatusCode::kFailed);
  EXPECT_EQ(s.message(), "device said no");
}

TEST(Handle, BatchCompletesWhenAllMembersHave) {
  ManualEngine e;
  char src[32] = {}, dst[32];
  std::vector<Operation> ops = {Operation::Copy(dst, src, 8), Operation::Copy(dst + 8, src + 8, 8),
                                Operation::Copy(dst + 16, src + 16, 16)};
  Result<Handle> h = e.SubmitBatch(ops);
  ASSERT_TRUE(h.ok());
  e.CompleteNext();
  e.CompleteNext();
  EXPECT_FALSE(h->done());
  EXPECT_EQ(h->bytes_completed(), 16u);
  e.CompleteNext();
  EXPECT_TRUE(h->Wait().ok());
  EXPECT_EQ(h->bytes_completed(), 32u);
}

TEST(Handle, FirstFailureWinsInABatch) {
  ManualEngine e;
  char src[16] = {}, dst[16];
  std::vector<Operation> ops = {Operation::Copy(dst, src, 8), Operation::Copy(dst + 8, src + 8, 8)};
  Result<Handle> h = e.SubmitBatch(ops);
  ASSERT_TRUE(h.ok());
  e.CompleteNext(StatusCode::kFailed, "first");
  e.CompleteNext(StatusCode::kCancelled, "second");
  EXPECT_EQ(h->Wait().message(), "first");
}

TEST(Handle, CallbackRunsOnceBeforeWaitReturns) {
  ManualEngine e;
  char src[8] = {}, dst[8];
  std::atomic<int> calls{0};
  std::uint64_t seen_bytes = 0;
  SubmitOptions opts;
  opts.callback = [&](const Completion& c) {
    calls.fetch_add(1);
    seen_bytes = c.bytes_completed;
  };
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8), std::move(opts));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(calls.load(), 0);
  e.CompleteNext();
  EXPECT_TRUE(h->Wait().ok());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(seen_bytes, 8u);
}

TEST(Handle, ThrowingCallbackIsCountedAndHarmless) {
  ManualEngine e;
  char src[8] = {}, dst[8];
  SubmitOptions opts;
  opts.callback = [](const Completion&) { throw std::runtime_error("boom"); };
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8), std::move(opts));
  ASSERT_TRUE(h.ok());
  e.CompleteNext();
  EXPECT_TRUE(h->Wait().ok());
  EXPECT_EQ(e.stats().callback_errors, 1u);
}

TEST(Handle, WaitingFromOwnCallbackIsRefused) {
  ManualEngine e;
  char src[8] = {}, dst[8];
  Handle* self = nullptr;
  Status inner;
  SubmitOptions opts;
  opts.callback = [&](const Completion&) { inner = self->Wait(WaitMode::kBlock); };
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8), std::move(opts));
  ASSERT_TRUE(h.ok());
  self = &h.value();
  e.CompleteNext();
  EXPECT_EQ(inner.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(inner.message().find("own completion callback"), std::string::npos);
  EXPECT_TRUE(h->Wait().ok());
}

TEST(Handle, DroppingTheHandleEarlyStillCompletes) {
  ManualEngine e;
  char src[8] = {1}, dst[8] = {};
  std::atomic<bool> called{false};
  SubmitOptions opts;
  opts.callback = [&](const Completion& c) { called = c.status.ok(); };
  { Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8), std::move(opts)); }
  e.CompleteNext();
  EXPECT_TRUE(called.load());
  EXPECT_EQ(dst[0], 1);
}

TEST(Handle, EnqueueFailureReturnsErrorAndNoCallback) {
  ManualEngine e;
  e.refuse_ = true;
  char src[8] = {}, dst[8];
  bool called = false;
  SubmitOptions opts;
  opts.callback = [&](const Completion&) { called = true; };
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, 8), std::move(opts));
  EXPECT_EQ(h.status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(called);
}

TEST(CompletionCallback, MovesAndResets) {
  int hits = 0;
  CompletionCallback a = [&hits](const Completion&) { ++hits; };
  CompletionCallback b = std::move(a);
  EXPECT_FALSE(static_cast<bool>(a));
  b(Completion{});
  EXPECT_EQ(hits, 1);
  b.Reset();
  EXPECT_FALSE(static_cast<bool>(b));
  auto shared = std::make_shared<int>(0);
  {
    CompletionCallback c = [shared](const Completion&) { ++*shared; };
    EXPECT_EQ(shared.use_count(), 2);
  }
  EXPECT_EQ(shared.use_count(), 1) << "captures are destroyed with the callback";
}

}  // namespace
}  // namespace tierflow
