// SPDX-License-Identifier: Apache-2.0
#include "tierflow/handle.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <mutex>
#include <vector>

#include "common/cpu_relax.h"
#include "common/fork_guard.h"
#include "common/free_list.h"
#include "common/futex.h"
#include "common/hot_path.h"
#include "engine/op_state.h"

namespace tierflow {
namespace detail {
namespace {

// --- OpState pool -------------------------------------------------------------------------
// States come from per-thread free lists (common/free_list.h): a state is usually released by
// the thread that submitted it (the handle owner), so steady-state submit/wait never reaches the
// allocator. A state whose last reference a worker drops goes to the shared list, which
// submitting threads refill from.
using StatePool = FreeList<OpState, /*kLocalMax=*/256, /*kRefill=*/32, /*kGrow=*/16>;

// The operation whose callback this thread is running (to refuse waiting on it).
thread_local const OpState* t_completing = nullptr;

void Recycle(OpState* s, bool shared);

// Runs the user's callback (if any) with the operation's outcome, which is final.
void RunCallback(OpState* s) {
  if (s->callback) {
    Completion c;
    c.status = s->final_status;
    c.bytes_completed = s->bytes.load(std::memory_order_relaxed);
    std::uint64_t diff = s->first_difference.load(std::memory_order_relaxed);
    c.equal = diff == OpState::kNoDifference;
    c.first_difference = c.equal ? 0 : diff;
    c.crc = s->crc.load(std::memory_order_relaxed);
    const OpState* outer = t_completing;
    t_completing = s;
    try {
      s->callback(c);
    } catch (...) {
      if (s->callback_errors != nullptr)
        s->callback_errors->fetch_add(1, std::memory_order_relaxed);
    }
    t_completing = outer;
    s->callback.Reset();
  }
}

// The final status from the first error a part reported, if any.
void SettleStatus(OpState* s) {
  if (s->error_claimed.load(std::memory_order_acquire)) {
    s->final_status = Status(s->error_code, std::move(s->error_text));
  }
}

void Finalize(OpState* s) {
  SettleStatus(s);
  RunCallback(s);
  std::uint32_t old = s->word.fetch_or(OpState::kDone, std::memory_order_acq_rel);
  if (old & OpState::kWaiter) FutexWake(&s->word, INT_MAX);
  // The in-flight reference. If it is the last one (the handle went away first), this thread is
  // usually a worker: return the state to the shared list, where submitting threads refill
  // from, instead of this thread's own list which no submission would draw from.
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) Recycle(s, /*shared=*/true);
}

}  // namespace

TIERFLOW_HOT_PATH OpState* AcquireOpState() {
  OpState* s = StatePool::Get();
  s->word.store(0, std::memory_order_relaxed);
  s->refs.store(2, std::memory_order_relaxed);
  s->parts.store(1, std::memory_order_relaxed);
  s->bytes.store(0, std::memory_order_relaxed);
  s->first_difference.store(OpState::kNoDifference, std::memory_order_relaxed);
  s->crc.store(0, std::memory_order_relaxed);
  s->error_claimed.store(false, std::memory_order_relaxed);
  s->error_code = StatusCode::kOk;
  s->callback_errors = nullptr;
  s->help = nullptr;
  return s;
}

TIERFLOW_HOT_PATH void ReleaseOpState(OpState* s) {
  // refs == 1: this is the last reference and nobody else can take one, so no atomic
  // decrement is needed (the common case of an operation that completed before its handle).
  if (s->refs.load(std::memory_order_acquire) == 1 ||
      s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Recycle(s, /*shared=*/false);
  }
}

namespace {
void Recycle(OpState* s, bool shared) {
  if (!s->final_status.ok()) s->final_status = Status();
  if (s->error_text.capacity() > std::string().capacity()) std::string().swap(s->error_text);
  if (shared) {
    StatePool::PutShared(s);
  } else {
    StatePool::Put(s);
  }
}
}  // namespace

bool CompletePart(OpState* s, std::uint64_t bytes, StatusCode code, const char* message,
                  std::uint64_t first_difference) {
  if (bytes != 0) s->bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (first_difference != OpState::kNoDifference) {
    std::uint64_t cur = s->first_difference.load(std::memory_order_relaxed);
    while (first_difference < cur && !s->first_difference.compare_exchange_weak(
                                         cur, first_difference, std::memory_order_relaxed)) {
    }
  }
  if (code != StatusCode::kOk && !s->error_claimed.exchange(true, std::memory_order_acq_rel)) {
    s->error_code = code;
    s->error_text = message != nullptr ? message : "";
  }
  if (s->parts.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
  Finalize(s);
  return true;
}

TIERFLOW_HOT_PATH void CompleteHere(OpState* s, std::uint64_t bytes,
                                    std::uint64_t first_difference) {
  if (!IsPrivate(s)) {
    s->parts.fetch_add(1, std::memory_order_relaxed);
    CompletePart(s, bytes, StatusCode::kOk, nullptr, first_difference);
    return;
  }
  s->bytes.store(s->bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  if (first_difference < s->first_difference.load(std::memory_order_relaxed)) {
    s->first_difference.store(first_difference, std::memory_order_relaxed);
  }
}

void FailHere(OpState* s, std::uint64_t bytes, StatusCode code, std::string message) {
  s->parts.fetch_add(1, std::memory_order_relaxed);  // error paths: the general route
  FailPart(s, bytes, code, std::move(message));
}

void FinishSubmission(OpState* s) {
  if (!IsPrivate(s)) {
    CompletePart(s, 0);
    return;
  }
  // Nothing else refers to the operation yet (its handle is not returned): no waiter to
  // wake, and the in-flight reference can be dropped with a store.
  SettleStatus(s);
  s->parts.store(0, std::memory_order_relaxed);
  RunCallback(s);
  s->word.store(OpState::kDone, std::memory_order_release);
  s->refs.store(1, std::memory_order_relaxed);
}

void FailPart(OpState* s, std::uint64_t bytes, StatusCode code, std::string message) {
  if (!s->error_claimed.exchange(true, std::memory_order_acq_rel)) {
    s->error_code = code;
    s->error_text = std::move(message);
  }
  CompletePart(s, bytes);
}

}  // namespace detail

using detail::OpState;

namespace {
Status EmptyHandle() {
  return Status::InvalidArgument(
      "empty handle: it was moved from or default-constructed; use the handle "
      "returned by Submit");
}
}  // namespace

Handle::~Handle() {
  if (state_ != nullptr) detail::ReleaseOpState(state_);
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) detail::ReleaseOpState(state_);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

namespace {
// The operation's outcome for the caller: a fresh Status when it succeeded, which spares the
// copy of the (empty) message string on every successful wait.
Status FinalStatus(const detail::OpState* s) {
  return s->final_status.ok() ? Status() : s->final_status;
}
}  // namespace

bool Handle::done() const {
  return state_ != nullptr && (state_->word.load(std::memory_order_acquire) & OpState::kDone);
}

Status Handle::status() const {
  if (state_ == nullptr) return EmptyHandle();
  if (!done()) return Status(StatusCode::kPending, "operation in flight");
  return FinalStatus(state_);
}

std::uint64_t Handle::bytes_completed() const {
  return state_ == nullptr ? 0 : state_->bytes.load(std::memory_order_relaxed);
}

TIERFLOW_HOT_PATH Status Handle::Wait(WaitMode mode) const {
  if (state_ == nullptr) return EmptyHandle();
  std::atomic<std::uint32_t>& word = state_->word;
  if (word.load(std::memory_order_acquire) & OpState::kDone) return FinalStatus(state_);
  if (detail::t_completing == state_) {
    return Status::InvalidArgument(
        "Wait called from the operation's own completion callback: it would "
        "never return; the callback already has the Completion");
  }
  if (mode != WaitMode::kBlock && state_->help != nullptr) {
    while (!(word.load(std::memory_order_acquire) & OpState::kDone) &&
           state_->help(OpRef(state_))) {
    }
  }
  switch (mode) {
    case WaitMode::kSpin:
      while (!(word.load(std::memory_order_acquire) & OpState::kDone)) CpuRelax();
      return FinalStatus(state_);
    case WaitMode::kYield:
      while (!(word.load(std::memory_order_acquire) & OpState::kDone)) sched_yield();
      return FinalStatus(state_);
    case WaitMode::kAdaptive: {
      // Spin a little, then poll while yielding the core (the engine's workers may need it:
      // on a small machine they share cores with the caller), and only then sleep. A futex
      // wake-up costs tens of microseconds when the sleeper's core has gone idle (a halted
      // vCPU in a VM), which would dominate megabyte-sized copies.
      using Clock = std::chrono::steady_clock;
      const auto start = Clock::now();
      for (unsigned i = 1;; ++i) {
        if (word.load(std::memory_order_acquire) & OpState::kDone) return FinalStatus(state_);
        if (i % 16 == 0) {
          auto waited = Clock::now() - start;
          if (waited >= std::chrono::microseconds(250)) break;
          if (waited >= std::chrono::microseconds(2)) {
            sched_yield();
            continue;
          }
        }
        CpuRelax();
      }
      [[fallthrough]];
    }
    case WaitMode::kBlock:
      break;
  }
  for (;;) {
    std::uint32_t w = word.load(std::memory_order_acquire);
    if (w & OpState::kDone) return FinalStatus(state_);
    if (!(w & OpState::kWaiter)) {
      if (!word.compare_exchange_weak(w, w | OpState::kWaiter, std::memory_order_acq_rel)) continue;
      w |= OpState::kWaiter;
    }
    FutexWait(&word, w);  // returns at once if the word changed meanwhile
  }
}

Completion Handle::result() const {
  Completion c;
  c.status = status();
  if (state_ == nullptr || !done()) return c;
  c.bytes_completed = state_->bytes.load(std::memory_order_relaxed);
  std::uint64_t diff = state_->first_difference.load(std::memory_order_relaxed);
  c.equal = diff == OpState::kNoDifference;
  c.first_difference = c.equal ? 0 : diff;
  c.crc = state_->crc.load(std::memory_order_relaxed);
  return c;
}

Handle Handle::Completed() {
  OpState* state = detail::AcquireOpState();
  detail::FinishSubmission(state);  // the submission guard: the operation is complete
  return Handle(state);
}

}  // namespace tierflow
