// SPDX-License-Identifier: Apache-2.0
// For engine authors: how an engine does its work and reports it. (Programs that only use
// engines need engine.h, not this header.) The CPU, DSA and io_uring engines are written
// against this header alone; tests/consumer builds one outside the library.
//
// An engine derives from Engine and implements capabilities() and Enqueue(ops, submission).
// Engine::Submit and SubmitBatch validate the operations (Engine::Validate, then the engine's
// CheckOperation, unless it turned that off: set_checks_operations) and call Enqueue once;
// Engine::SubmitParts calls it once per part of an operation split over engines. Enqueue starts the
// work and reports it in parts:
//  - submission.AddParts(n) registers n parts before any of them can complete (or
//    AddFinalParts(n), when no part will be registered or reported inside Enqueue after them);
//  - each part is reported exactly once, from any thread, through the operation's OpRef
//    (submission.op()): CompletePart on success, FailPart (or CompletePart with a code) on
//    error or cancellation. The last report finalises the operation: the user's callback runs
//    on that thread, then its waiters wake. Nothing may be reported for an operation after its
//    last part, and an engine must not touch the operation's buffers after reporting.
//  - An error returned by Enqueue means nothing was started: no part may have been registered.
//
// Engines also keep their EngineCounters (below) and may publish their queue (Engine::queue).
// The destructor of an engine must not return while it still holds parts that it will report.
//
// Engine::set_checks_operations(false) tells Validate not to call CheckOperation: for an
// engine whose CheckOperation has nothing to check in its configuration (a submission then
// makes no virtual call for it). Set it in the constructor, before the engine is shared.
// Enqueue is called from any number of submitting threads at once; CheckOperation and queue()
// too.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tierflow/engine.h"
#include "tierflow/export.h"

namespace tierflow {

namespace detail {
struct OpState;
}

// How an engine's own queue stands (Engine::queue, reported in EngineStats): pieces of work
// that can wait, and that wait now. An engine without a queue of its own reports zeros.
struct EngineQueue {
  std::size_t capacity = 0;
  std::size_t queued = 0;
};

// An operation an engine is running, as the engine refers to it until it has reported every
// part it registered. Trivially copyable (engines keep it in their queues and descriptors).
class TIERFLOW_EXPORT OpRef {
 public:
  static constexpr std::uint64_t kNoDifference = ~std::uint64_t{0};

  OpRef() = default;  // refers to nothing
  explicit operator bool() const { return state_ != nullptr; }
  friend bool operator==(OpRef a, OpRef b) { return a.state_ == b.state_; }

  // Reports one part: `bytes` of it done, and for a compare the first byte that differs
  // (counted from the start of the caller's operation: add Submission::offset_base()). A code
  // other than kOk fails the operation; `message` must then be static text (FailPart builds
  // one). The first error reported wins. Returns true when this was the operation's last
  // outstanding part: it is complete, and its handle may be gone already, so do not use
  // this OpRef again (an engine may learn from it which of its threads finished last).
  bool CompletePart(std::uint64_t bytes, StatusCode code = StatusCode::kOk,
                    const char* message = nullptr,
                    std::uint64_t first_difference = kNoDifference) const;
  void FailPart(std::uint64_t bytes, StatusCode code, std::string message) const;
  // kCrc32c: XORs one part's contribution into the result. The result starts as the seed's
  // share; a part of the data contributes Crc32cShift(Crc32c(0, part), bytes after the part).
  void AddCrc(std::uint32_t contribution) const;

  // For an engine that owns the whole operation (Submission::exclusive()):
  // 128 bytes, 64-byte aligned, that live as long as the operation's state (states are
  // reused, so a reference kept in a queue after the operation ended sees a later one's);
  void* scratch() const;
  // a word for handing out numbered pieces; its layout is the engine's and must carry a
  // generation, for the same reason;
  std::atomic<std::uint64_t>& claims() const;
  // lets a thread that waits on the handle (any WaitMode but kBlock) run parts itself: `help`
  // runs one part and returns false when none is left to take.
  void SetHelper(bool (*help)(OpRef op)) const;

 private:
  friend class Submission;
  friend class Engine;  // makes them, for the operations it accepts
  friend class Handle;  // a waiter that runs parts itself (SetHelper)
  explicit OpRef(detail::OpState* state) : state_(state) {}
  detail::OpState* state_ = nullptr;
};

// What Enqueue is given: the operation and how its parts are reported. Only Engine makes
// them, on the submitting thread's stack: a Submission is valid only during the Enqueue call
// it is given to. Register parts there (AddParts), and keep op(), not the Submission.
class TIERFLOW_EXPORT Submission {
 public:
  // Registers n more parts. Must happen before any of them can complete.
  void AddParts(std::uint32_t n) {
    // With no registered part outstanding nothing but this thread touches the count, so a
    // plain store does (a read-modify-write on x86 also waits for every earlier store).
    if (parts_->load(std::memory_order_relaxed) == 1) {
      parts_->store(1 + n, std::memory_order_relaxed);
    } else {
      parts_->fetch_add(n, std::memory_order_relaxed);
    }
  }
  // Registers the last n parts (n >= 1) of an exclusive submission and hands them the guard
  // that keeps the operation open while Enqueue runs: the operation completes as soon as
  // they have, and Engine does not release the guard after Enqueue (one read-modify-write
  // less on the line that waiters poll). Afterwards nothing more may be registered or
  // reported on this Submission (AddParts, CompleteHere, FailHere), and Enqueue must return
  // success. On a shared submission it is AddParts(n).
  void AddFinalParts(std::uint32_t n) {
    if (shared_ || n == 0) {
      AddParts(n);
      return;
    }
    AddParts(n - 1);  // the guard counts as the n-th
    guard_given_ = true;
  }
  // Reports work that this thread ran to completion inside Enqueue, without registering it as
  // a part first: `bytes` done, and for a compare the first differing byte (as CompletePart).
  // Cheaper than AddParts(1) + CompletePart: while no registered part is outstanding nothing
  // else can touch the operation, so its results are written without atomic read-modify-write
  // instructions. FailHere reports such work that failed. Submitting thread, during Enqueue.
  void CompleteHere(std::uint64_t bytes,
                    std::uint64_t first_difference = OpRef::kNoDifference) const;
  void FailHere(std::uint64_t bytes, StatusCode code, std::string message) const;
  OpRef op() const { return op_; }
  // Where the operations given to this engine start within the caller's operation (non-zero
  // when a copy is split over engines): add it to reported compare differences.
  std::uint64_t offset_base() const { return offset_base_; }
  // Whether this engine owns the whole operation, and so may use OpRef::scratch/claims/
  // SetHelper.
  bool exclusive() const { return !shared_; }

 private:
  friend class Engine;  // makes them, for its operations
  Submission(OpRef op, std::atomic<std::uint32_t>* parts, std::uint64_t offset_base, bool shared)
      : op_(op), parts_(parts), offset_base_(offset_base), shared_(shared) {}
  OpRef op_;
  std::atomic<std::uint32_t>* parts_;  // the operation's count of parts not yet complete
  std::uint64_t offset_base_;
  bool shared_;
  bool guard_given_ = false;  // AddFinalParts handed the submission guard to the parts
};

// The counters every engine keeps (Engine::counters(); Engine::stats() reads them). Engine
// counts the operations it accepts and the callbacks that throw; the engine counts its pieces
// — the units it completes (a piece of a split operation, a descriptor, a read).
//
// Each thread adds to a share of its own (one cache line holds all of a share's counters), so
// the workers and the submitting threads of an engine do not pull one line to and fro on every
// piece (with one line for all, the thread that finishes an operation waited for it). A total
// is the sum of the shares. Up to 16 threads at a time own a share each; more share the
// remaining ones (still exact, only slower). Thread-safe throughout.
class TIERFLOW_EXPORT EngineCounters {
  struct Share;  // the counters of one thread (below)

 public:
  enum Counter : unsigned {
    // Raised when a piece is started (queued, submitted to a device or run inline), lowered
    // when it completes, fails or is cancelled.
    kInFlight,
    kOpsSubmitted,     // by Engine
    kPiecesCompleted,  // every finished piece, failed ones included
    kBytesCompleted,   // bytes of the pieces that succeeded
    kOpsInline,        // operations run on the submitting thread
    kPiecesByWaiters,  // pieces run by a thread waiting on them
    kPiecesFailed,     // finished with an error
    kPiecesCancelled,  // dropped because the engine shut down
  };
  static constexpr unsigned kCounters = 8;
  static constexpr unsigned kShares = 20;  // 16 owned by one thread each, 4 shared
  static constexpr unsigned kSharedShares = 4;

  // Adds (subtracts) n to the calling thread's share. Any thread; relaxed; wait-free.
  void Add(Counter c, std::uint64_t n = 1) { ForThisThread().Add(c, n); }
  void Sub(Counter c, std::uint64_t n = 1) { ForThisThread().Add(c, 0 - n); }
  // The sum of the shares, each read with acquire; never below 0. Not a snapshot: changes made
  // while it reads may be missed. In particular kInFlight, read once every raise of it has
  // happened (the submissions returned), is never below the number of pieces still unfinished,
  // so 0 means none is left; read while pieces are submitted and finish, it may be off by them.
  std::uint64_t Total(Counter c) const;
  // Sets a counter to 0 in every share. Only while no thread updates it (a fork() child).
  void Clear(Counter c);

  // The calling thread's share, for several updates in a row (one lookup). Use it on the
  // thread that made it only.
  class Local {
   public:
    void Add(Counter c, std::uint64_t n = 1) const {
      std::atomic<std::uint64_t>& v = share_->v[c];
      if (owned_) {  // no other thread writes it: no locked instruction needed
        v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
      } else {
        v.fetch_add(n, std::memory_order_relaxed);
      }
    }
    void Sub(Counter c, std::uint64_t n = 1) const { Add(c, 0 - n); }

   private:
    friend class EngineCounters;
    Share* share_;
    bool owned_;
  };
  Local ForThisThread() {
    const unsigned s = ShareOfThisThread();
    Local l;
    l.share_ = &shares_[s & kShareIndexMask];
    l.owned_ = (s & kShareOwned) != 0;
    return l;
  }

  std::atomic<std::uint64_t> callback_errors{0};  // by Engine (rare: one word, not shared)

 private:
  // The share of the calling thread (its index, and kShareOwned while it is the thread's
  // alone): given at its first use, given back when the thread ends.
  static unsigned ShareOfThisThread() {
    const unsigned s = t_share_;
    return s != kNoShare ? s : TakeShare();
  }
  static unsigned TakeShare();
  struct Owner;  // gives the thread's share back when the thread ends (counters.cc)
  static thread_local Owner t_owner_;
  static constexpr unsigned kNoShare = ~0u;
  static inline thread_local unsigned t_share_ = kNoShare;
  static constexpr unsigned kShareIndexMask = 0xffff;
  static constexpr unsigned kShareOwned = 0x10000;
  struct alignas(64) Share {
    std::atomic<std::uint64_t> v[kCounters] = {};
  };
  Share shares_[kShares];
};

// The CRC-32C `crc` as it stands after `bytes` more zero bytes: what an engine that computes a
// part of a kCrc32c operation (OpRef::AddCrc) applies to its part's CRC, with `bytes` the
// length of the operation after that part.
TIERFLOW_EXPORT std::uint32_t Crc32cShift(std::uint32_t crc, std::uint64_t bytes);

// A move whose ranges overlap needs memmove semantics: the direction of the copy matters, so
// an engine must not cut it into pieces that run in any order.
inline bool IsOverlappingMove(const Operation& op) {
  const auto d = reinterpret_cast<std::uintptr_t>(op.dst);
  const auto s = reinterpret_cast<std::uintptr_t>(op.src);
  return op.kind == OpKind::kMove && d < s + op.size && s < d + op.size;
}

// Whether every range of the operation is mapped in this process, checked without touching it
// (a system call per range; unmapped memory is refused at submission instead of faulting in a
// worker). Errors name the range.
TIERFLOW_EXPORT Status CheckMapped(const Operation& op);

}  // namespace tierflow
