// SPDX-License-Identifier: Apache-2.0
// The asynchronous handle model shared by every engine (CPU, DSA, io_uring, ...).
//
// Submitting an operation returns a Handle. The handle can be checked once (done(), status()),
// waited on in one of four ways, or given a callback at submission. Engine-specific detail
// never appears here: an engine reports progress of the parts it was given, and the handle
// completes when every part has completed (a copy split over several engines is one handle).
//
// Handles are move-only. Destroying a handle does not cancel the operation: it still runs, and
// its buffers must stay valid until it completes (wait, or use a callback).
//
// Thread-safety: the const members of one Handle (done, status, bytes_completed, result, Wait)
// may be called from any number of threads at once: several threads may Wait on one handle,
// in any WaitModes, and all return when the operation completes. Moving or destroying a handle
// while another thread uses it is a race.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

namespace detail {
struct OpState;
}

enum class WaitMode : std::uint8_t {
  kSpin,      // spin with PAUSE: lowest latency, burns the core
  kYield,     // spin, yielding the core to other threads between checks
  kBlock,     // sleep in the kernel (futex) until completion: no busy waiting
  kAdaptive,  // spin ~2 us, poll while yielding up to ~250 us, then block (the default)
};

// The outcome of an operation, as given to callbacks and returned by Handle::result().
struct Completion {
  Status status;                      // ok, failed, cancelled (never pending)
  std::uint64_t bytes_completed = 0;  // summed over all parts and batch members
  // kCompare, kComparePattern: true when every compared range was equal; otherwise true.
  bool equal = true;
  // kCompare/kComparePattern of a single operation: offset of the first differing byte, when
  // !equal.
  std::uint64_t first_difference = 0;
  // kCrc32c: the CRC-32C of the range, continuing from the operation's crc_seed.
  std::uint32_t crc = 0;
};

// A move-only callable invoked once with the Completion, on the thread that completes the
// operation (a worker, or the submitting thread for inline operations). Its captures live in
// place (up to kCapacity bytes), so setting one allocates nothing. It must not block for long;
// an exception it throws is caught, counted in the engine state and does not affect the
// operation's status.
class TIERFLOW_EXPORT CompletionCallback {
 public:
  static constexpr std::size_t kCapacity = 48;

  // User-provided, so that value-initialising one (SubmitOptions{}, the default argument of
  // every Submit) leaves the capture storage alone instead of zeroing all of it.
  CompletionCallback() noexcept {}
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, CompletionCallback>>>
  CompletionCallback(F&& f) {  // NOLINT(implicit)
    using Fn = std::decay_t<F>;
    static_assert(sizeof(Fn) <= kCapacity, "callback captures too much: capture a pointer instead");
    static_assert(alignof(Fn) <= alignof(std::max_align_t), "callback over-aligned");
    new (storage_) Fn(std::forward<F>(f));
    invoke_ = [](void* p, const Completion& c) { (*static_cast<Fn*>(p))(c); };
    manage_ = [](void* dst, void* src) {
      if (dst != nullptr) new (dst) Fn(std::move(*static_cast<Fn*>(src)));
      static_cast<Fn*>(src)->~Fn();
    };
  }
  CompletionCallback(CompletionCallback&& o) noexcept { MoveFrom(o); }
  CompletionCallback& operator=(CompletionCallback&& o) noexcept {
    if (this != &o) {
      Reset();
      MoveFrom(o);
    }
    return *this;
  }
  ~CompletionCallback() { Reset(); }

  explicit operator bool() const { return invoke_ != nullptr; }
  void operator()(const Completion& c) { invoke_(storage_, c); }
  void Reset() {
    if (manage_ != nullptr) manage_(nullptr, storage_);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

 private:
  void MoveFrom(CompletionCallback& o) {
    if (o.manage_ != nullptr) o.manage_(storage_, o.storage_);
    invoke_ = o.invoke_;
    manage_ = o.manage_;
    o.invoke_ = nullptr;
    o.manage_ = nullptr;
  }
  alignas(std::max_align_t) unsigned char storage_[kCapacity];
  void (*invoke_)(void*, const Completion&) = nullptr;
  void (*manage_)(void*, void*) = nullptr;
};

class TIERFLOW_EXPORT Handle {
 public:
  Handle() = default;  // empty: every query reports "empty handle"
  ~Handle();
  Handle(Handle&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  bool valid() const { return state_ != nullptr; }
  // Check once, never blocks.
  bool done() const;
  // kPending while in flight, then the final status. Empty handle: invalid_argument.
  Status status() const;
  // Bytes completed so far (progress while in flight, total once done).
  std::uint64_t bytes_completed() const;

  // Waits for completion and returns the final status. Waiting again returns the same status at
  // once. Waiting on an empty handle, or from the operation's own callback (which would never
  // return), gives invalid_argument instead of hanging.
  Status Wait(WaitMode mode = WaitMode::kAdaptive) const;
  // The full outcome once done; status kPending while in flight.
  Completion result() const;

  // A handle of an operation that needed no work: done at once, ok.
  static Handle Completed();

 private:
  friend class Engine;                                        // makes the handles of its work
  explicit Handle(detail::OpState* state) : state_(state) {}  // takes one reference
  detail::OpState* state_ = nullptr;
};

}  // namespace tierflow
