// SPDX-License-Identifier: Apache-2.0
// How an engine registers parts (tierflow/engine_module.h): AddParts after earlier parts have
// completed, and AddFinalParts, which hands the submission guard to the parts so that the
// operation may complete before Enqueue returns.
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tierflow/engine.h"
#include "tierflow/engine_module.h"

namespace tierflow {
namespace {

// Runs `plan` inside Enqueue: the test decides how parts are registered and when (and on
// which thread) they complete. Each part completes with the bytes it is given.
class ScriptedEngine : public Engine {
 public:
  using Plan = std::function<void(const Operation&, Submission&)>;
  explicit ScriptedEngine(Plan plan) : plan_(std::move(plan)) {
    caps_.name = "scripted";
    caps_.ops = kAllOps;
    caps_.max_op_bytes = 1 << 30;
    caps_.max_batch = 1;
  }
  const EngineCapabilities& capabilities() const override { return caps_; }

 protected:
  Status Enqueue(std::span<const Operation> ops, Submission& s) override {
    plan_(ops[0], s);
    return Status::Ok();
  }

 private:
  EngineCapabilities caps_;
  Plan plan_;
};

// Completes one part of `bytes` on a thread of its own and waits for it.
void CompleteOnAnotherThread(OpRef op, std::uint64_t bytes) {
  std::thread([op, bytes] { op.CompletePart(bytes); }).join();
}

Operation CopyOf(std::vector<unsigned char>& dst, const std::vector<unsigned char>& src) {
  return Operation::Copy(dst.data(), src.data(), src.size());
}

TEST(Submission, AddFinalPartsCompletesBeforeEnqueueReturns) {
  std::vector<unsigned char> src(3000, 1), dst(3000);
  ScriptedEngine e([](const Operation& op, Submission& s) {
    s.AddFinalParts(3);
    for (int i = 0; i < 3; ++i) CompleteOnAnotherThread(s.op(), op.size / 3);
  });
  for (int round = 0; round < 200; ++round) {
    int calls = 0;
    SubmitOptions o;
    o.callback = [&](const Completion& c) {
      ++calls;
      EXPECT_EQ(c.bytes_completed, 3000u);
    };
    Result<Handle> h = e.Submit(CopyOf(dst, src), std::move(o));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_TRUE(h->done()) << "every part completed inside Enqueue";
    EXPECT_TRUE(h->Wait().ok());
    EXPECT_EQ(h->bytes_completed(), 3000u);
    EXPECT_EQ(calls, 1);
  }
}

TEST(Submission, AddFinalPartsRacingWithTheSubmitterKeepEveryHandleIntact) {
  std::vector<unsigned char> src(1 << 16, 2), dst(1 << 16);
  std::vector<std::thread> completers;
  std::mutex mu;
  ScriptedEngine e([&](const Operation& op, Submission& s) {
    s.AddFinalParts(2);
    std::lock_guard lock(mu);
    const OpRef ref = s.op();
    const std::uint64_t bytes = op.size;
    completers.emplace_back([ref, bytes] {
      ref.CompletePart(bytes / 2);
      ref.CompletePart(bytes - bytes / 2);
    });
  });
  // Handles kept alive while later operations reuse pooled states: a state released early
  // would be handed out again and report another operation's bytes.
  std::vector<Handle> handles;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 500; ++i) {
    const std::size_t n = 64 + i;
    Result<Handle> h = e.Submit(Operation::Copy(dst.data(), src.data(), n));
    ASSERT_TRUE(h.ok());
    handles.push_back(std::move(*h));
    sizes.push_back(n);
  }
  for (std::size_t i = 0; i < handles.size(); ++i) {
    ASSERT_TRUE(handles[i].Wait().ok());
    EXPECT_EQ(handles[i].bytes_completed(), sizes[i]) << "operation " << i;
  }
  std::lock_guard lock(mu);
  for (std::thread& t : completers) t.join();
}

TEST(Submission, AddPartsAfterEarlierPartsCompletedStillCounts) {
  std::vector<unsigned char> src(4096, 3), dst(4096);
  ScriptedEngine e([](const Operation& op, Submission& s) {
    s.AddParts(1);
    CompleteOnAnotherThread(s.op(), 1000);  // back to the guard alone
    s.AddParts(2);
    CompleteOnAnotherThread(s.op(), 500);  // one of the two still outstanding
    s.AddFinalParts(2);
    CompleteOnAnotherThread(s.op(), 500);
    CompleteOnAnotherThread(s.op(), 1000);
    CompleteOnAnotherThread(s.op(), op.size - 3000);
  });
  int calls = 0;
  SubmitOptions o;
  o.callback = [&](const Completion&) { ++calls; };
  Result<Handle> h = e.Submit(CopyOf(dst, src), std::move(o));
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->done());
  EXPECT_EQ(h->bytes_completed(), 4096u);
  EXPECT_EQ(calls, 1);
}

TEST(Submission, AddFinalPartsOnASharedSubmissionKeepsTheGuard) {
  // Over two engines each part's Submission is shared: the first engine's final parts must
  // not complete the operation while the second has not registered its own.
  std::vector<unsigned char> src(8192, 4), dst(8192);
  std::vector<OpRef> held;
  ScriptedEngine first([&](const Operation& op, Submission& s) {
    s.AddFinalParts(1);
    CompleteOnAnotherThread(s.op(), op.size);
  });
  ScriptedEngine second([&](const Operation&, Submission& s) {
    s.AddFinalParts(1);
    held.push_back(s.op());  // completed by the test after Submit returns
  });
  std::vector<EnginePart> parts = {{&first, 0, 4096}, {&second, 4096, 4096}};
  Result<Handle> h = Engine::SubmitParts(CopyOf(dst, src), parts);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_FALSE(h->done()) << "the second engine's part is still outstanding";
  ASSERT_EQ(held.size(), 1u);
  held[0].CompletePart(4096);
  EXPECT_TRUE(h->Wait().ok());
  EXPECT_EQ(h->bytes_completed(), 8192u);
}

// Counts its CheckOperation calls and refuses 13-byte operations there.
class CheckingEngine : public ScriptedEngine {
 public:
  explicit CheckingEngine(bool checks)
      : ScriptedEngine([](const Operation&, Submission& s) { s.CompleteHere(0); }) {
    set_checks_operations(checks);
  }
  mutable std::atomic<int> checks{0};

 protected:
  Status CheckOperation(const Operation& op) const override {
    ++checks;
    return op.size == 13 ? Status::InvalidArgument("13 bytes refused by the engine") : Status::Ok();
  }
};

TEST(EngineChecks, CheckOperationRunsOnlyWhileTheEngineAsksForIt) {
  std::vector<unsigned char> src(64, 5), dst(64);
  CheckingEngine checking(true);
  Result<Handle> refused = checking.Submit(Operation::Copy(dst.data(), src.data(), 13));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("13 bytes refused"), std::string::npos);
  EXPECT_TRUE(checking.Submit(Operation::Copy(dst.data(), src.data(), 12)).ok());
  EXPECT_FALSE(checking.Validate(Operation::Copy(dst.data(), src.data(), 13)).ok());
  EXPECT_EQ(checking.checks.load(), 3);

  CheckingEngine quiet(false);
  EXPECT_TRUE(quiet.Submit(Operation::Copy(dst.data(), src.data(), 13)).ok());
  EXPECT_TRUE(quiet.Validate(Operation::Copy(dst.data(), src.data(), 13)).ok());
  EXPECT_EQ(quiet.checks.load(), 0);
  // The common checks still apply.
  Result<Handle> empty = quiet.Submit(Operation::Copy(dst.data(), src.data(), 0));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("size 0"), std::string::npos);
  Result<Handle> overlapping = quiet.Submit(Operation::Copy(src.data() + 1, src.data(), 8));
  ASSERT_FALSE(overlapping.ok());
  EXPECT_NE(overlapping.status().message().find("overlap"), std::string::npos);
  EXPECT_EQ(quiet.checks.load(), 0);
}

}  // namespace
}  // namespace tierflow
