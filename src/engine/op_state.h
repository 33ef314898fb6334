// SPDX-License-Identifier: Apache-2.0
// The shared state behind a Handle. Internal: engines see it only through Submission.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tierflow/engine_module.h"
#include "tierflow/handle.h"
#include "tierflow/status.h"

namespace tierflow::detail {

// States are never freed: they return to a pool (see AcquireOpState), so the atomics of a state
// stay readable through stale references.
struct OpState {
  static constexpr std::uint32_t kDone = 1;
  static constexpr std::uint32_t kWaiter = 2;
  static constexpr std::uint64_t kNoDifference = ~std::uint64_t{0};

  // Futex word: kDone once complete, kWaiter while a thread sleeps on it.
  std::atomic<std::uint32_t> word{0};
  // One reference for the Handle, one for the operation while parts are outstanding.
  std::atomic<std::uint32_t> refs{0};
  // Outstanding parts, plus one guard held by the submitter until every part is enqueued.
  std::atomic<std::uint32_t> parts{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> first_difference{kNoDifference};
  std::atomic<bool> error_claimed{false};
  // kCrc32c: pieces XOR their contributions in (see Crc32cShift), in any order.
  std::atomic<std::uint32_t> crc{0};

  // Written by the first part that fails (the one that claimed error_claimed), read after done.
  StatusCode error_code = StatusCode::kOk;
  std::string error_text;
  // Final status, written before kDone is published.
  Status final_status;
  CompletionCallback callback;
  std::atomic<std::uint64_t>* callback_errors = nullptr;  // engine counter for throwing callbacks
  OpState* next_free = nullptr;                           // the link of common/free_list.h

  // Set by an engine that lets a waiting thread run not-yet-started parts of this operation
  // itself (the waiter has nothing better to do, and on a small machine it would otherwise
  // compete with the engine's workers for a core). Returns false when no part is left to
  // take. Only an engine that owns the whole operation may set it; it may keep what `help`
  // needs in `engine_area`, which lives as long as the state.
  bool (*help)(OpRef op) = nullptr;
  alignas(64) unsigned char engine_area[128] = {};  // zeroed once: engines may read what they left
  // For an engine that cuts an operation into numbered pieces and hands them out to whoever
  // asks (the CPU engine: its workers and the waiting thread). The engine defines the layout;
  // it must include a generation, because queued references to an operation may outlive it:
  // states are pooled and never freed, so such a reference reads this word of a later
  // operation (or of none) and must recognise that it is not its own.
  std::atomic<std::uint64_t> piece_claims{0};
};

// A fresh state: refs = 2 (handle + in flight), parts = 1 (the submission guard).
// Allocation-free in steady state (per-thread free lists).
OpState* AcquireOpState();
void ReleaseOpState(OpState* state);

// Records the completion of one part. The last part finalises the operation: computes the
// final status, runs the callback, publishes kDone, wakes waiters, drops the in-flight ref;
// true for that last part.
bool CompletePart(OpState* state, std::uint64_t bytes, StatusCode code = StatusCode::kOk,
                  const char* message = nullptr,
                  std::uint64_t first_difference = OpState::kNoDifference);
// Same, with a message that must be built at run time (error paths only).
void FailPart(OpState* state, std::uint64_t bytes, StatusCode code, std::string message);

// Whether only the submitting thread can touch the state's results: every part registered so
// far has completed (parts holds just the submission guard). Parts are registered only by the
// submitting thread, so this stays true until it registers another.
inline bool IsPrivate(const OpState* state) {
  return state->parts.load(std::memory_order_acquire) == 1;
}
// Records work that ran on the submitting thread, with plain stores when the state is
// private (no read-modify-write: on x86 each locked instruction drains the store buffer the
// copy just filled), else as a registered part.
void CompleteHere(OpState* state, std::uint64_t bytes, std::uint64_t first_difference);
void FailHere(OpState* state, std::uint64_t bytes, StatusCode code, std::string message);
// Drops the submission guard: completes the operation when no part is outstanding.
void FinishSubmission(OpState* state);

}  // namespace tierflow::detail
