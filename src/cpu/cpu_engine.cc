// SPDX-License-Identifier: Apache-2.0
#include "tierflow/cpu_engine.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/cpu_relax.h"
#include "common/crc32c.h"
#include "common/fault_guard.h"
#include "common/fork_guard.h"
#include "common/futex.h"
#include "common/hot_path.h"
#include "common/mapping.h"
#include "common/prefetch.h"
#include "cpu/cpu_engine_internal.h"
#include "cpu/split_shape.h"
#include "cpu/task_queue.h"
#include "kernels/kernels.h"
#include "tierflow/engine_module.h"

namespace tierflow {

namespace {

// The held piece's bias that this thread learnt waiting on the engine numbered `engine`
// (numbers, unlike addresses, are not reused by a later engine).
struct HeldBias {
  std::uint64_t engine = 0;
  cpu::HeldPieceBias bias;
};
thread_local HeldBias t_held_bias;
std::atomic<std::uint64_t> g_engines_created{0};

constexpr std::uint64_t kMaxOpBytes = std::uint64_t{1} << 40;  // 1 TiB
constexpr std::size_t kMaxBatch = 65536;
constexpr std::size_t kPieceAlign = 4096;

}  // namespace

// A single operation cut into equal pieces that workers and the waiting thread take by index.
// The description lives in the operation's scratch area (OpRef::scratch) and the pieces are
// handed out through its claims word (OpRef::claims), so taking one needs no queue; the queue only
// carries tickets that send workers to the operation. The first pieces go instead, one each, to
// workers found polling their mailboxes (Impl::Mailbox): they run it without the claims word.
//
// piece_claims = [generation:24 | back:20 | front:20]: pieces [front, back) are still untaken.
// Workers take from the front, the waiting thread from the back, so in a loop of same-sized
// operations each participant tends to copy the bytes it copied last time (still in its
// core's cache). The generation changes with every split operation on the state, so a ticket
// left in the queue after its operation finished (the waiter took the last piece) takes
// nothing from a later operation on the same state. The next generation comes from the copy
// kept in the description, not from the claims word, which a worker reading a ticket may have
// pulled to its core (a load from there stalls the submitter for a transfer of the line). Even
// if a generation repeated while a ticket sat in the queue (wrapped at 24 bits, or the scratch
// area last used by another engine), whoever takes a piece runs it with that operation's own
// description and engine, so the piece is still done correctly and exactly once.
//
// When there are two pieces or more and waiting threads run pieces, the last is held for the
// waiter: it takes it first, through a word of its own (HeldWord), without contending with
// the workers for the claims word that the first of them has usually pulled to its core by
// then; workers take it only once the claims word has no piece left (the waiter may never
// come, or wait without helping). The description fills the scratch area's first line, the
// held piece is in its second, which workers do not touch until then.

struct [[gnu::visibility("hidden")]] CpuEngine::SplitWork {
  cpu::SplitShape shape;
  Impl* engine = nullptr;
  // Cut into no more pieces than there are workers, so that the waiter and the workers have
  // one piece each and which of them finishes last says who is slower (CutHeldPiece).
  bool one_each = false;

  static constexpr int kIndexBits = 20;
  static constexpr std::uint64_t kMaxPieces = (std::uint64_t{1} << kIndexBits) - 1;
  static constexpr std::uint64_t kIndexMask = kMaxPieces;
  static constexpr std::uint32_t kGenerationMask = (1u << 24) - 1;

  static std::uint64_t Pack(std::uint32_t generation, std::uint64_t front, std::uint64_t back) {
    return std::uint64_t{generation} << (2 * kIndexBits) | back << kIndexBits | front;
  }
  static std::uint32_t GenerationOf(std::uint64_t claims) {
    return static_cast<std::uint32_t>(claims >> (2 * kIndexBits));
  }

  static SplitWork& Of(OpRef s) { return *std::launder(reinterpret_cast<SplitWork*>(s.scratch())); }

  // Claims one piece of the operation of `generation`; false when none is left (or the state
  // has moved on to another operation).
  static bool Take(OpRef s, std::uint32_t generation, bool from_back, std::uint64_t& index) {
    std::atomic<std::uint64_t>& claims = s.claims();
    // Usually last written by another participant's core: ask for it owned, so the
    // compare-and-swap does not wait for a second transfer after the load's shared copy.
    PrefetchForWrite(&claims);
    std::uint64_t cur = claims.load(std::memory_order_acquire);
    for (;;) {
      std::uint64_t front = cur & kIndexMask;
      std::uint64_t back = (cur >> kIndexBits) & kIndexMask;
      if (GenerationOf(cur) != generation || front >= back) return false;
      std::uint64_t want =
          from_back ? Pack(generation, front, back - 1) : Pack(generation, front + 1, back);
      if (claims.compare_exchange_weak(cur, want, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        index = from_back ? back - 1 : front;
        return true;
      }
    }
  }

  // The held piece: HeldWord = generation << 1 | 1 while piece HeldIndex of that operation is
  // untaken. Raw words in the scratch area's second line (never re-created with the
  // description, so a stale ticket may read them at any time).
  static std::atomic_ref<std::uint32_t> HeldWord(OpRef s) {
    return std::atomic_ref<std::uint32_t>(
        *std::launder(reinterpret_cast<std::uint32_t*>(static_cast<char*>(s.scratch()) + 64)));
  }
  static void Hold(OpRef s, std::uint32_t generation, std::uint64_t index) {
    std::memcpy(static_cast<char*>(s.scratch()) + 72, &index, sizeof index);
    HeldWord(s).store(generation << 1 | 1, std::memory_order_release);
  }
  static bool TakeHeld(OpRef s, std::uint32_t generation, std::uint64_t & index) {
    std::atomic_ref<std::uint32_t> word = HeldWord(s);
    std::uint32_t held = generation << 1 | 1;
    if (word.load(std::memory_order_acquire) != held ||
        !word.compare_exchange_strong(held, generation << 1, std::memory_order_acq_rel)) {
      return false;
    }
    std::memcpy(&index, static_cast<const char*>(s.scratch()) + 72, sizeof index);
    return true;
  }
  // A piece of the operation of `generation` for a worker: from the claims word, else the held
  // piece.
  static bool TakeForWorker(OpRef s, std::uint32_t generation, std::uint64_t & index) {
    return Take(s, generation, /*from_back=*/false, index) || TakeHeld(s, generation, index);
  }
};

struct [[gnu::visibility("hidden")]] CpuEngine::Impl final : ForkAware {
  static_assert(sizeof(SplitWork) <= 64, "the description is the scratch area's first line");
  static_assert(alignof(SplitWork) <= 64, "OpRef::scratch is 64-byte aligned");
  static_assert(std::is_trivially_destructible_v<SplitWork>);

  CpuEngineOptions opts;
  CpuIsa isa = CpuIsa::kBaseline;
  CpuIsa streaming_isa = CpuIsa::kBaseline;
  const kernels::Kernels* kernels = nullptr;     // copies that stay in the cache
  const kernels::Kernels* nt_kernels = nullptr;  // streaming copies (non-temporal stores)
  std::size_t nt_threshold = 0;
  EngineCapabilities caps;
  std::vector<int> cpus;
  int worker_count = 0;
  std::vector<std::thread> threads;
  EngineCounters* counters = nullptr;  // the engine's (Engine::counters)
  const std::uint64_t number = g_engines_created.fetch_add(1, std::memory_order_relaxed) + 1;
  // Read on every submission and by polling workers, written only at shutdown and fork: on a
  // line that no hand-off writes, so polling it costs no transfer of a line.
  std::atomic<bool> stopping{false};
  std::atomic<bool> restart_after_fork{false};

  cpu::TaskQueue queue;               // its own line
  alignas(64) WakeWord idle;          // written by submitters, read by workers going to sleep
  alignas(64) std::mutex restart_mu;  // rare
  // Waiting threads inside RunSplit (see HelpSplit): the destructor waits for them.
  alignas(64) std::atomic<std::uint32_t> helpers{0};

  // A worker's mailbox: while the worker polls, a submitter may hand it a piece of a split
  // operation directly (ClaimMailboxes, FillPosts) instead of a ticket through the queue. The
  // worker then starts as after a bare hand-off between two threads, on its mailbox's one
  // line, rather than after the queue's cell, the claims word and the description one after
  // the other. A submitter also leaves the ticket for the held piece in the mailbox of a
  // worker pinned to its own CPU if that worker polls (PostLocalTicket): a line this core has,
  // where the queue's are with the worker that popped last and its publication waits for
  // every earlier store. Such a worker runs only when the waiter sleeps or yields (or the
  // scheduler gives it a turn), so the ticket may sit there until a later submission replaces
  // it (only where the operation posted pieces: their workers look for what is left when
  // done). A worker that finds nothing left for its ticket (the waiter ran the held piece)
  // sleeps, resting: submitters on its CPU do not wake it for held pieces (EnqueueSplit), as
  // polling there only takes turns with them for the CPU. Written by the worker (kAway or
  // kResting <-> kPolling, kPosted -> kAway, kTicket -> kTaking -> kAway -> kResting) and by a
  // submitter (kPolling or kTicket -> kPosting -> kPosted or kTicket).
  struct alignas(64) Mailbox {
    static constexpr std::uint32_t kAway = 0;     // not polling: nothing may be posted
    static constexpr std::uint32_t kPolling = 1;  // a submitter may claim it
    static constexpr std::uint32_t kPosting = 2;  // claimed: the submitter is writing it
    static constexpr std::uint32_t kPosted = 3;   // piece `index` of `op` is the worker's
    static constexpr std::uint32_t kTicket = 4;   // a ticket for `op`: may still be replaced
    static constexpr std::uint32_t kTaking = 5;   // the worker is reading the ticket
    // Not polling since a ticket of its own CPU found nothing left: the waiter there runs held
    // pieces itself, so its submitter leaves this worker out of tickets and wake-ups.
    static constexpr std::uint32_t kResting = 6;
    std::atomic<std::uint32_t> state{kAway};
    std::uint32_t index = 0;  // of the posted piece
    OpRef op;
    cpu::SplitShape shape;  // of the operation (a ticket: only its generation)

    cpu::Piece Posted() const { return SplitPiece(shape, index, op); }
    cpu::Piece Ticket() const { return TicketFor(op, shape.generation); }
  };
  static_assert(sizeof(Mailbox) == 64, "a mailbox is one line: the worker reads no other");
  // Pieces one submission posts at most; the rest go through the claims word and tickets.
  static constexpr std::size_t kMaxPosts = 8;
  // Mailboxes a submission looks at at most (from worker 0: a loop of operations keeps
  // finding the workers that hold its bytes in their caches).
  static constexpr int kMaxMailboxesScanned = 16;
  std::unique_ptr<Mailbox[]> mailboxes;  // one per worker

  explicit Impl(std::size_t queue_capacity) : queue(queue_capacity) {}

  void PrepareFork() override { queue.LockForFork(); }
  void AfterForkParent() override { queue.UnlockAfterFork(); }
  // The workers stayed in the parent. Every piece still queued is cancelled (its operation
  // is the parent's); workers start again on the next submission. A piece that a worker was
  // running at the fork is not in this process any more: its operation never completes here,
  // so wait for operations before forking (a thread's state at fork() is gone in the child).
  void AfterForkChild() override {
    new (&restart_mu) std::mutex();
    for (std::thread& t : threads) new (&t) std::thread();  // abandon, never join
    threads.clear();
    constexpr const char* kForked =
        "the process forked before the CPU engine ran this part; it runs in the parent only";
    cpu::Piece piece;
    while (queue.TryPop(piece)) CancelInChild(piece, piece.ticket, kForked);
    // What was posted to a worker and not yet taken; a post still being written belonged to
    // a thread that is not in the child (its operation cannot complete here, as above).
    for (int i = 0; i < worker_count; ++i) {
      Mailbox& box = mailboxes[static_cast<std::size_t>(i)];
      const std::uint32_t st = box.state.load(std::memory_order_relaxed);
      if (st == Mailbox::kPosted) CancelInChild(box.Posted(), /*split=*/true, kForked);
      if (st == Mailbox::kTicket) CancelInChild(box.Ticket(), /*split=*/true, kForked);
      box.state.store(Mailbox::kAway, std::memory_order_relaxed);
    }
    queue.ResetInChild();
    // Pieces that threads now gone were running (workers, helping waiters) never report.
    counters->Clear(EngineCounters::kInFlight);
    helpers.store(0, std::memory_order_relaxed);
    restart_after_fork.store(true, std::memory_order_release);
  }
  // A queued or posted piece or ticket in a fork() child: its parts complete as cancelled,
  // with the rest of its operation when it belongs to a split one.
  static void CancelInChild(const cpu::Piece& piece, bool split, const char* why) {
    if (!piece.ticket) piece.state.CompletePart(0, StatusCode::kCancelled, why);
    if (!split) return;
    std::uint64_t index;
    while (SplitWork::TakeForWorker(piece.state, piece.generation, index)) {
      piece.state.CompletePart(0, StatusCode::kCancelled, why);
    }
  }

  Status StartWorkers() {
    try {
      for (int i = 0; i < worker_count; ++i) threads.emplace_back([this, i] { WorkerLoop(i); });
    } catch (const std::system_error& e) {
      return Status(StatusCode::kFailed,
                    fmt::format("could not start CPU engine worker threads: {}", e.what()));
    }
    return Status::Ok();
  }

  std::size_t PieceSize(std::size_t size) const {
    std::size_t per_worker = (size + worker_count - 1) / worker_count;
    per_worker = (per_worker + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    return std::clamp(per_worker, opts.min_piece_bytes, opts.max_piece_bytes);
  }

  bool UseNt(const Operation& op) const {
    return kernels::WritesData(op.kind) && !op.keep_in_cache && op.size >= nt_threshold;
  }

  // Bytes [offset, offset + size) of each of op's buffers, as a piece of the submission's
  // operation.
  cpu::Piece MakePiece(const Operation& op, const Submission& submission, std::size_t offset,
                       std::size_t size, bool overlap) const {
    cpu::Piece p;
    p.state = submission.op();
    p.kind = op.kind;
    p.nt = UseNt(op);
    p.keep_in_cache = op.keep_in_cache;
    p.overlapping = overlap;
    p.dst = static_cast<char*>(op.dst) + (op.dst != nullptr ? offset : 0);
    p.src = static_cast<const char*>(op.src) + (op.src != nullptr ? offset : 0);
    p.src2 = static_cast<const char*>(op.src2) + (op.src2 != nullptr ? offset : 0);
    p.dst2 = static_cast<char*>(op.dst2) + (op.dst2 != nullptr ? offset : 0);
    p.size = size;
    p.offset = offset;
    p.tail = op.size - offset - size;
    p.report_base = submission.offset_base();
    p.pattern = op.pattern;
    return p;
  }

  // The fork() child's first submission starts the workers again.
  Status RestartAfterFork() {
    std::lock_guard lock(restart_mu);  // another thread of the child may have started them
    if (restart_after_fork.load(std::memory_order_relaxed)) {
      if (Status s = StartWorkers(); !s.ok()) return s;
      restart_after_fork.store(false, std::memory_order_release);
    }
    return Status::Ok();
  }

  // The common small submission, one temporal copy, run here without building a piece.
  void CopyInline(const Operation& op, Submission& submission) {
    if (kernels->copy_recoverable != nullptr &&
        kernels->copy_recoverable(op.dst, op.src, op.size) == 0) [[likely]] {
      submission.CompleteHere(op.size, OpRef::kNoDifference);
      const EngineCounters::Local mine = counters->ForThisThread();
      mine.Add(EngineCounters::kBytesCompleted, op.size);
      mine.Add(EngineCounters::kOpsInline);
      mine.Add(EngineCounters::kPiecesCompleted);
      return;
    }
    // No such kernel, or it faulted: the general route, whose guard names the range that
    // faulted (a copy run again writes the same bytes).
    RunInline({&op, 1}, submission);
  }

  // Small work, or a worker submitting: run every operation whole on this thread, reported
  // without registering parts (Submission::CompleteHere: no locked instruction per piece).
  // Out of line: its pieces and statuses would otherwise widen CopyInline's frame.
  [[gnu::noinline]] void RunInline(std::span<const Operation> ops, Submission & submission) {
    std::uint64_t bytes = 0, failed = 0;
    for (const Operation& op : ops) {
      const cpu::Piece p = MakePiece(op, submission, 0, op.size, IsOverlappingMove(op));
      std::uint64_t diff;
      Status fault;
      if (Execute(p, &diff, &fault)) [[likely]] {
        bytes += p.size;
        submission.CompleteHere(p.size, diff);
      } else {
        ++failed;
        submission.FailHere(0, fault.code(), fault.message());
      }
    }
    const EngineCounters::Local mine = counters->ForThisThread();
    mine.Add(EngineCounters::kOpsInline, ops.size());
    mine.Add(EngineCounters::kPiecesCompleted, ops.size());
    if (bytes != 0) mine.Add(EngineCounters::kBytesCompleted, bytes);
    if (failed != 0) mine.Add(EngineCounters::kPiecesFailed, failed);
  }

  // Pushes a piece, waking every worker and yielding while the queue is full; cancels it when
  // the engine stops meanwhile.
  void Push(const cpu::Piece& p, std::size_t& pushed) {
    while (!queue.TryPush(p)) {
      if (stopping.load(std::memory_order_acquire)) {
        Cancel(p);
        return;
      }
      Wake(INT_MAX);  // full: make sure every worker is draining, then give them the core
      sched_yield();
    }
    if (++pushed % 64 == 0) Wake(worker_count);
  }

  // Every operation cut into pieces for the workers (an overlapping move stays one piece: its
  // direction matters).
  void EnqueuePieces(std::span<const Operation> ops, Submission & submission) {
    std::size_t pieces = 0;
    for (const Operation& op : ops) {
      if (IsOverlappingMove(op)) {
        ++pieces;
      } else {
        std::size_t piece = PieceSize(op.size);
        pieces += (op.size + piece - 1) / piece;
      }
    }
    submission.AddFinalParts(static_cast<std::uint32_t>(pieces));
    counters->Add(EngineCounters::kInFlight, pieces);
    std::size_t pushed = 0;
    for (const Operation& op : ops) {
      if (IsOverlappingMove(op)) {
        Push(MakePiece(op, submission, 0, op.size, true), pushed);
        continue;
      }
      std::size_t piece = PieceSize(op.size);
      for (std::size_t off = 0; off < op.size; off += piece) {
        Push(MakePiece(op, submission, off, std::min(piece, op.size - off), false), pushed);
      }
    }
    Wake(static_cast<int>(std::min<std::size_t>(pieces, INT_MAX)));
  }

  // Runs the piece's work; false with *fault set when a memory fault stopped it. *diff: for
  // a compare, the first differing byte in the caller's operation.
  bool Execute(const cpu::Piece& p, std::uint64_t* diff, Status* fault) const {
    kernels::PieceWork w = kernels::WorkOf(p);
    w.nt = p.nt;
    w.overlapping = p.overlapping;
    kernels::PieceResult r;
    if (!kernels::RunPieceGuarded(p.nt ? *nt_kernels : *kernels, w, &r, fault)) [[unlikely]]
      return false;
    *diff = r.difference < p.size ? p.report_base + p.offset + r.difference : OpRef::kNoDifference;
    if (p.kind == OpKind::kCrc32c) p.state.AddCrc(Crc32cShift(r.crc, p.tail));
    return true;
  }

  // Runs a registered piece and reports it; true when it was its operation's last part.
  bool Run(const cpu::Piece& p) {
    std::uint64_t diff;
    Status fault;
    const bool ok = Execute(p, &diff, &fault);
    const EngineCounters::Local mine = counters->ForThisThread();
    mine.Add(EngineCounters::kPiecesCompleted);
    mine.Sub(EngineCounters::kInFlight);
    if (!ok) [[unlikely]] {
      mine.Add(EngineCounters::kPiecesFailed);
      p.state.FailPart(0, fault.code(), fault.message());
      return false;
    }
    mine.Add(EngineCounters::kBytesCompleted, p.size);
    return p.state.CompletePart(p.size, StatusCode::kOk, nullptr, diff);
  }

  bool RunSplit(const SplitWork& w, std::uint64_t index, OpRef state) {
    return Run(SplitPiece(w.shape, index, state));
  }

  // Piece `index` of the split operation that w describes.
  static cpu::Piece SplitPiece(const cpu::SplitShape& w, std::uint64_t index, OpRef state) {
    cpu::Piece p;
    p.state = state;
    p.kind = w.kind;
    p.nt = w.nt;
    const cpu::PieceBounds b = cpu::BoundsOf(w, index);
    p.offset = b.offset;
    p.size = b.size;
    p.dst = w.dst != nullptr ? w.dst + p.offset : nullptr;
    p.src = w.src != nullptr ? w.src + p.offset : nullptr;
    if (w.kind == OpKind::kCompare) p.src2 = reinterpret_cast<const char*>(w.extra) + p.offset;
    if (w.kind == OpKind::kDualcast) p.dst2 = reinterpret_cast<char*>(w.extra) + p.offset;
    if (w.kind == OpKind::kFill || w.kind == OpKind::kComparePattern) p.pattern = w.extra;
    p.tail = w.size - p.offset - p.size;
    p.keep_in_cache = w.keep_in_cache;
    p.generation = w.generation;
    return p;
  }

  // A worker popped a ticket: run pieces of its operation while any is left; false when none
  // was. The piece runs with the engine recorded in the description (see SplitWork on
  // generations).
  static bool RunTicket(const cpu::Piece& ticket) {
    // The description was last written by the submitter's core: ask for its line while Take
    // asks for the claims word's, instead of one after the other.
    PrefetchForRead(ticket.state.scratch());
    std::uint64_t index;
    bool took = false;
    for (; SplitWork::TakeForWorker(ticket.state, ticket.generation, index); took = true) {
      SplitWork& w = SplitWork::Of(ticket.state);
      if (w.engine->stopping.load(std::memory_order_relaxed)) {
        // Shutting down: the rest of this operation is cancelled, piece by piece, as the
        // destructor does for tickets still queued.
        cpu::Piece p;
        p.state = ticket.state;
        w.engine->Cancel(p);
        continue;
      }
      w.engine->RunSplit(w, index, ticket.state);
    }
    return took;
  }

  // Engine shutdown: every piece of the ticket's operation not taken yet is cancelled.
  void CancelTicket(const cpu::Piece& ticket) {
    std::uint64_t index;
    while (SplitWork::TakeForWorker(ticket.state, ticket.generation, index)) {
      SplitWork& w = SplitWork::Of(ticket.state);
      if (w.engine != this) {  // a wrapped generation: another engine's live operation
        w.engine->RunSplit(w, index, ticket.state);
        continue;
      }
      cpu::Piece p;
      p.state = ticket.state;
      Cancel(p);
    }
  }

  void Cancel(const cpu::Piece& p) {
    const EngineCounters::Local mine = counters->ForThisThread();
    mine.Add(EngineCounters::kPiecesCancelled);
    mine.Sub(EngineCounters::kInFlight);
    p.state.CompletePart(0, StatusCode::kCancelled,
                         "the CPU engine was destroyed before this part of the operation ran");
  }

  // The held piece, cut as this thread has learnt (cpu::HeldPieceBias): its CPU keeps its own
  // pace against the workers'. Only where each of them has one piece (SplitWork::one_each):
  // with more pieces than workers, those who finish first take more through the claims
  // word, and a waiter done with its held piece before the others says nothing of its pace.
  void CutHeldPiece(SplitWork & d) const {
    // Cut evenly so far: no more pieces than workers is no more bytes than a piece each (a
    // piece below the operation's size keeps the product far from overflowing).
    const cpu::SplitShape& w = d.shape;
    d.one_each = w.piece >= w.size || w.size <= static_cast<std::size_t>(worker_count) * w.piece;
    if (d.one_each && t_held_bias.engine == number) t_held_bias.bias.Cut(d.shape);
  }
  // This thread ran a held piece of this engine's; `last`: the operation then had no other
  // part outstanding.
  void VoteOnHeldPiece(bool last) const {
    if (t_held_bias.engine != number) t_held_bias = HeldBias{number, {}};
    t_held_bias.bias.Vote(last);
  }

  // Writes the description of a split operation into its state's engine area.
  const SplitWork& DescribeSplit(const Operation& op, const Submission& submission) {
    OpRef state = submission.op();
    std::uint32_t last_generation;  // of the last split operation on this state, if any
    std::memcpy(&last_generation,
                static_cast<const char*>(state.scratch()) + offsetof(SplitWork, shape) +
                    offsetof(cpu::SplitShape, generation),
                sizeof last_generation);
    SplitWork* d = new (state.scratch()) SplitWork;
    d->engine = this;
    cpu::SplitShape* w = &d->shape;
    w->kind = op.kind;
    w->nt = UseNt(op);
    w->keep_in_cache = op.keep_in_cache;
    w->dst = static_cast<char*>(op.dst);
    w->src = static_cast<const char*>(op.src);
    if (op.kind == OpKind::kCompare) w->extra = reinterpret_cast<std::uintptr_t>(op.src2);
    if (op.kind == OpKind::kDualcast) w->extra = reinterpret_cast<std::uintptr_t>(op.dst2);
    if (op.kind == OpKind::kFill || op.kind == OpKind::kComparePattern) w->extra = op.pattern;
    w->size = op.size;
    w->piece = PieceSize(op.size);
    if (op.size / w->piece >= SplitWork::kMaxPieces) {  // tiny max_piece_bytes, huge operation
      w->piece = (op.size / SplitWork::kMaxPieces + kPieceAlign) / kPieceAlign * kPieceAlign;
    }
    w->generation = (last_generation + 1) & SplitWork::kGenerationMask;
    if (opts.waiter_runs_pieces) CutHeldPiece(*d);
    return *d;
  }

  // Queues n copies of a ticket, waking every worker and yielding while the queue is full,
  // then up to n of the sleeping workers that `bits` names (WakeBitOf); cancels what is left
  // of the operation when the engine stops meanwhile.
  void PushTickets(const cpu::Piece& ticket, std::size_t n, std::uint32_t bits) {
    for (std::size_t left = n; left != 0;) {
      left -= queue.TryPushCopies(ticket, left);
      if (left == 0) break;
      if (stopping.load(std::memory_order_acquire)) {
        CancelTicket(ticket);
        break;
      }
      Wake(INT_MAX);
      sched_yield();
    }
    Wake(static_cast<int>(n), bits);
  }

  // --- Mailboxes (see Mailbox) ---

  static cpu::Piece TicketFor(OpRef state, std::uint32_t generation) {
    cpu::Piece ticket;
    ticket.state = state;
    ticket.ticket = true;
    ticket.generation = generation;
    return ticket;
  }

  // Runs what was posted to this worker (waiting out a submitter still writing it). A piece:
  // then whatever else of its operation is left, as for a ticket: the claims word's pieces,
  // then the held piece if no waiter has taken it; cancelled instead while the engine stops.
  // True for a ticket that found nothing left (as a rule because its submitter, on this
  // worker's CPU, ran the held piece itself; else a posted worker took it first).
  bool RunPosted(Mailbox & box) {
    // The submitter writes the mailbox right after claiming it; should it lose its CPU
    // meanwhile, let it have this one if they share it (workers need not be pinned).
    for (unsigned i = 1;; ++i) {
      std::uint32_t st = box.state.load(std::memory_order_acquire);
      if (st == Mailbox::kPosted) break;
      // A ticket is taken with a compare-and-swap: a submitter may be replacing it.
      if (st == Mailbox::kTicket &&
          box.state.compare_exchange_strong(st, Mailbox::kTaking, std::memory_order_acquire)) {
        const cpu::Piece ticket = box.Ticket();
        box.state.store(Mailbox::kAway, std::memory_order_relaxed);
        return !RunTicket(ticket);  // cancels the operation's pieces while the engine stops
      }
      if (i % 64 == 0) {
        sched_yield();
      } else {
        CpuRelax();
      }
    }
    const cpu::Piece p = box.Posted();
    box.state.store(Mailbox::kAway, std::memory_order_relaxed);
    if (stopping.load(std::memory_order_relaxed)) {
      Cancel(p);
    } else {
      Run(p);
    }
    RunTicket(TicketFor(p.state, p.generation));
    return false;
  }

  // Closes the mailbox; false when something had been posted first (it has run).
  bool StopPolling(Mailbox & box) {
    std::uint32_t polling = Mailbox::kPolling;
    if (box.state.compare_exchange_strong(polling, Mailbox::kAway, std::memory_order_acquire) ||
        polling == Mailbox::kAway) {
      return true;
    }
    RunPosted(box);
    return false;
  }

  // The CPU this thread runs on when workers are pinned (-1: not pinned, or unknown).
  int PinnedCpuHere() const { return opts.pin && !cpus.empty() ? sched_getcpu() : -1; }
  bool PinnedTo(int worker, int cpu) const {
    return cpu >= 0 && cpus[static_cast<std::size_t>(worker) % cpus.size()] == cpu;
  }

  // Claims the mailbox of a polling worker (one that holds a ticket not taken yet is still
  // polling: the ticket is replaced); then it is kPosting.
  static bool ClaimMailbox(Mailbox & box) {
    std::uint32_t st = box.state.load(std::memory_order_relaxed);
    return (st == Mailbox::kPolling || st == Mailbox::kTicket) &&
           box.state.compare_exchange_strong(st, Mailbox::kPosting, std::memory_order_acquire);
  }

  // Claims up to `want` mailboxes of polling workers pinned (`local`) or not pinned to CPU
  // `here`, this thread's, into claimed[]. Returns how many; each is kPosting until written.
  // Pieces go to the others: a worker on this CPU could run only once this thread stops, and
  // this thread is about to run the held piece.
  std::size_t ClaimMailboxes(int here, bool local, std::size_t want, Mailbox** claimed) {
    const int scan = std::min(worker_count, kMaxMailboxesScanned);
    std::size_t got = 0;
    for (int i = 0; i < scan && got < want; ++i) {
      Mailbox& box = mailboxes[static_cast<std::size_t>(i)];
      if (PinnedTo(i, here) == local && ClaimMailbox(box)) claimed[got++] = &box;
    }
    return got;
  }

  // Hands piece i of the split operation to claimed[i], for i < count.
  static void FillPosts(Mailbox * *claimed, std::size_t count, const cpu::SplitShape& w,
                        OpRef state) {
    for (std::size_t i = 0; i < count; ++i) {
      claimed[i]->shape = w;
      claimed[i]->op = state;
      claimed[i]->index = static_cast<std::uint32_t>(i);
      claimed[i]->state.store(Mailbox::kPosted, std::memory_order_release);
    }
  }

  // Whether the workers pinned to CPU `here` (one at least) all rest (Mailbox::kResting).
  bool LocalWorkersRest(int here) const {
    const int scan = std::min(worker_count, kMaxMailboxesScanned);
    bool any = false;
    for (int i = 0; here >= 0 && i < scan; ++i) {
      if (!PinnedTo(i, here)) continue;
      const Mailbox& box = mailboxes[static_cast<std::size_t>(i)];
      if (box.state.load(std::memory_order_relaxed) != Mailbox::kResting) return false;
      any = true;
    }
    return any;
  }

  // Leaves the ticket in the mailbox of a polling worker pinned to CPU `here`; false when
  // there is none.
  bool PostLocalTicket(int here, const cpu::Piece& ticket) {
    Mailbox* box;
    if (here < 0 || ClaimMailboxes(here, /*local=*/true, 1, &box) == 0) return false;
    box->op = ticket.state;
    box->shape.generation = ticket.generation;
    box->state.store(Mailbox::kTicket, std::memory_order_release);
    return true;
  }

  // Every piece and ticket is published by the queue's sequentially consistent store. `bits`:
  // the workers that may be woken (WakeBitOf).
  void Wake(int n, std::uint32_t bits = WakeWord::kAnyBits) {
    idle.WakeAfterSeqCstPublish(n, bits);
  }

  // A worker's bit in `idle`, so that a submitter can leave the workers on its CPU asleep
  // (workers 32 apart share a bit: one may then be woken for the other).
  static std::uint32_t WakeBitOf(int worker) { return 1u << (static_cast<unsigned>(worker) % 32); }

  // Workers that may run beside a thread: their wake-up bits and how many they are.
  struct Workers {
    std::uint32_t bits = WakeWord::kAnyBits;
    int count = 0;
  };
  // Per CPU id up to the highest of `cpus`: the workers not pinned there (empty when workers
  // are not pinned).
  std::vector<Workers> beside_cpu;

  Workers AllWorkers() const { return {WakeWord::kAnyBits, worker_count}; }
  // Those not pinned to CPU `here` (all of them when `here` is unknown or every one is there).
  Workers WorkersBeside(int here) const {
    if (here < 0 || static_cast<std::size_t>(here) >= beside_cpu.size()) return AllWorkers();
    return beside_cpu[static_cast<std::size_t>(here)];
  }
  // Fills beside_cpu, once the workers and their CPUs are known. Workers are pinned to the
  // node's CPUs only: every other CPU has all of them beside it.
  void IndexWorkersByCpu() {
    if (!opts.pin || cpus.empty()) return;
    const int top = *std::max_element(cpus.begin(), cpus.end());
    beside_cpu.assign(static_cast<std::size_t>(top) + 1, AllWorkers());
    for (int cpu : cpus) {
      Workers& w = beside_cpu[static_cast<std::size_t>(cpu)];
      w = Workers{0, 0};
      for (int i = 0; i < worker_count; ++i) {
        if (!PinnedTo(i, cpu)) {
          w.bits |= WakeBitOf(i);
          ++w.count;
        }
      }
      if (w.count == 0) w = AllWorkers();
    }
  }

  void WorkerLoop(int index);
  bool PollForWork(Mailbox & box);
};

namespace {
// The engine whose worker this thread is (work submitted from a callback runs inline there).
thread_local const void* t_worker_of = nullptr;
}  // namespace

// The waiter's helper (OpRef::SetHelper) for split operations. A claimed piece is still counted in
// the engine's in_flight, so the engine cannot finish its destructor before the piece is done;
// `helpers` covers the completion that follows (callbacks may count errors in the engine).
bool CpuEngine::HelpSplit(OpRef state) {
  // The caller holds the handle, so the state still describes its operation (read from the
  // description's line, which workers only read, rather than the claims word's).
  SplitWork& w = SplitWork::Of(state);
  const std::uint32_t generation = w.shape.generation;
  std::uint64_t index;
  const bool held = SplitWork::TakeHeld(state, generation, index);
  if (!held && !SplitWork::Take(state, generation, /*from_back=*/true, index)) return false;
  const bool vote = held && w.one_each;
  Impl* m = w.engine;
  m->helpers.fetch_add(1, std::memory_order_seq_cst);
  m->counters->Add(EngineCounters::kPiecesByWaiters);
  const bool last = m->RunSplit(w, index, state);  // then the state may be another's
  if (vote) m->VoteOnHeldPiece(last);
  m->helpers.fetch_sub(1, std::memory_order_seq_cst);
  return true;
}

void CpuEngine::Impl::WorkerLoop(int index) {
  t_worker_of = this;
  if (opts.pin && !cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[index % cpus.size()], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: cgroups may deny
  }
  Mailbox& box = mailboxes[static_cast<std::size_t>(index)];
  cpu::Piece piece;
  while (!stopping.load(std::memory_order_acquire)) {
    if (queue.TryPop(piece)) {
      if (piece.ticket) {
        RunTicket(piece);
      } else {
        Run(piece);
      }
      continue;
    }
    if (PollForWork(box)) continue;
    idle.SleepUnless([&] { return !queue.empty() || stopping.load(std::memory_order_seq_cst); },
                     WakeBitOf(index));
  }
}

// Polls the queue and this worker's mailbox a while (yielding now and then, so a submitter
// sharing this core can run); true when there is work or the engine stops (what was posted
// has run), false when it is time to sleep. The mailbox is closed again on return.
bool CpuEngine::Impl::PollForWork(Mailbox& box) {
  using Clock = std::chrono::steady_clock;
  // Release: the submitter that claims the mailbox writes its fields after this thread's last
  // read of them.
  box.state.store(Mailbox::kPolling, std::memory_order_release);
  const auto deadline = Clock::now() + std::chrono::microseconds(opts.worker_spin_us);
  for (unsigned i = 1;; ++i) {
    if (box.state.load(std::memory_order_relaxed) != Mailbox::kPolling) {
      // A ticket with nothing left: the waiter on this CPU runs its held pieces itself, and
      // polling on would only take turns with it for the CPU (the scheduler gives a runnable
      // poller its share, sched_yield or not). Sleep, resting: see EnqueueSplit.
      if (!RunPosted(box)) return true;
      box.state.store(Mailbox::kResting, std::memory_order_relaxed);
      return false;
    }
    if (!queue.empty() || stopping.load(std::memory_order_relaxed)) {
      StopPolling(box);
      return true;
    }
    if (i % 64 == 0) {
      if (Clock::now() >= deadline) return !StopPolling(box);
      sched_yield();
    } else {
      CpuRelax();
    }
  }
}

namespace {

// The ISAs of the kernels for cached and for streaming copies: the one asked for (options or
// TIERFLOW_ISA) for both, else the fastest of each kind as measured on this CPU.
Result<std::pair<CpuIsa, CpuIsa>> ChooseKernels(CpuIsa asked) {
  if (asked == CpuIsa::kAuto) {
    Result<CpuIsa> named = kernels::IsaInEnvironment();
    if (!named.ok()) return named.status();
    if (*named == CpuIsa::kAuto) {
      const kernels::MeasuredKernelChoice m = kernels::MeasuredKernels();
      return std::pair{m.cached, m.streaming};
    }
    asked = *named;
  }
  if (!kernels::IsaSupported(asked)) {
    return Status::Unsupported(fmt::format(
        "this CPU lacks {} (asked for by options or TIERFLOW_ISA); best available here is {}",
        CpuIsaName(asked),
        CpuIsaName(kernels::IsaSupported(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kBaseline)));
  }
  return std::pair{asked, asked};
}

}  // namespace

Result<std::unique_ptr<CpuEngine>> CpuEngine::Create(const Topology& topology,
                                                     const CpuEngineOptions& options) {
  Result<const NumaNode*> node = topology.FindNode(options.node);
  if (!node.ok()) return node.status();
  if (!(*node)->has_cpus()) {
    return Status::InvalidArgument(fmt::format(
        "NUMA node {} ({}) has no CPUs, so no CPU engine can run on it; create the engine on its "
        "nearest CPU node {} instead",
        options.node, TierKindName((*node)->kind), (*node)->near_cpu_node));
  }
  if (!topology.is_this_system()) {
    return Status::InvalidArgument(
        fmt::format("the CPU engine needs the running system's topology, not one loaded from '{}'",
                    topology.source()));
  }
  if (options.workers < 0 || options.workers > 4096) {
    return Status::InvalidArgument(
        fmt::format("workers = {}: use 0 (one per CPU of the node) or 1..4096", options.workers));
  }
  if (options.min_piece_bytes < kPieceAlign || options.min_piece_bytes % kPieceAlign != 0 ||
      options.max_piece_bytes < options.min_piece_bytes ||
      options.max_piece_bytes % kPieceAlign != 0) {
    return Status::InvalidArgument(
        fmt::format("piece sizes min {} / max {}: both must be multiples of {} with min <= max",
                    options.min_piece_bytes, options.max_piece_bytes, kPieceAlign));
  }
  if (options.queue_capacity == 0 || options.queue_capacity > cpu::TaskQueue::kMaxCapacity) {
    return Status::InvalidArgument(fmt::format(
        "queue_capacity is {}: use 1..{}", options.queue_capacity, cpu::TaskQueue::kMaxCapacity));
  }
  Result<std::pair<CpuIsa, CpuIsa>> isas = ChooseKernels(options.isa);
  if (!isas.ok()) return isas.status();

  if (Status s = InstallFaultHandler(); !s.ok()) return s;
  auto impl = std::make_unique<Impl>(options.queue_capacity);
  impl->opts = options;
  impl->isa = isas->first;
  impl->streaming_isa = isas->second;
  impl->kernels = &kernels::KernelsFor(isas->first);
  impl->nt_kernels = &kernels::KernelsFor(isas->second);
  impl->cpus = (*node)->cpus;
  impl->worker_count = options.workers == 0 ? static_cast<int>(impl->cpus.size()) : options.workers;
  impl->mailboxes.reset(new Impl::Mailbox[static_cast<std::size_t>(impl->worker_count)]);
  impl->IndexWorkersByCpu();
  std::uint64_t llc =
      topology.caches().l3_bytes != 0 ? topology.caches().l3_bytes : topology.caches().l2_bytes;
  impl->nt_threshold = options.nt_threshold_bytes != 0
                           ? options.nt_threshold_bytes
                           : static_cast<std::size_t>(llc != 0 ? llc * 3 / 4 : 8u << 20);
  EngineCapabilities& caps = impl->caps;
  caps.name = "cpu";
  caps.kind = EngineKind::kCpu;
  caps.ops = kDataOps;  // no queue of its own to drain
  caps.max_op_bytes = kMaxOpBytes;
  caps.max_batch = kMaxBatch;
  caps.preferred_min_bytes = 0;
  caps.preferred_chunk_bytes = options.min_piece_bytes;
  caps.node = options.node;
  caps.is_model = false;

  std::unique_ptr<CpuEngine> engine(new CpuEngine(std::move(impl)));
  Impl* raw = engine->impl_.get();
  if (Status s = raw->StartWorkers(); !s.ok()) return s;
  RegisterForkAware(raw);
  return engine;
}

CpuEngine::CpuEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->counters = &counters();
  set_checks_operations(impl_->opts.check_mappings != MappingCheck::kOff);
}

CpuEngine::~CpuEngine() {
  UnregisterForkAware(impl_.get());
  impl_->stopping.store(true, std::memory_order_seq_cst);
  impl_->idle.Wake();
  for (std::thread& t : impl_->threads) t.join();
  cpu::Piece piece;
  while (impl_->queue.TryPop(piece)) {
    if (piece.ticket) {
      impl_->CancelTicket(piece);
    } else {
      impl_->Cancel(piece);
    }
  }
  // Pieces that waiting threads took before the queue was drained are still running.
  while (impl_->counters->Total(EngineCounters::kInFlight) != 0 ||
         impl_->helpers.load(std::memory_order_seq_cst) != 0) {
    sched_yield();
  }
}

const EngineCapabilities& CpuEngine::capabilities() const { return impl_->caps; }

EngineQueue CpuEngine::queue() const { return {impl_->queue.capacity(), impl_->queue.size()}; }

CpuIsa CpuEngine::isa() const { return impl_->isa; }
CpuIsa CpuEngine::streaming_isa() const { return impl_->streaming_isa; }
std::size_t CpuEngine::nt_threshold_bytes() const { return impl_->nt_threshold; }
double CpuEngineInternal::HeldPieceScale(const CpuEngine& engine) {
  return t_held_bias.engine == engine.impl_->number ? t_held_bias.bias.scale() : 1.0;
}
int CpuEngine::workers() const { return impl_->worker_count; }
const CpuEngineOptions& CpuEngine::options() const { return impl_->opts; }

Status CpuEngine::CheckOperation(const Operation& op) const {
  const MappingCheck mode = impl_->opts.check_mappings;
  if (mode == MappingCheck::kOff ||
      (mode == MappingCheck::kHandedOff && op.size <= impl_->opts.inline_max_bytes)) {
    return Status::Ok();
  }
  return CheckMapped(op);
}

TIERFLOW_HOT_PATH Status CpuEngine::Enqueue(std::span<const Operation> ops,
                                            Submission& submission) {
  Impl& m = *impl_;
  // The common small submission, one temporal copy, first and on its own: the rest of the
  // cases make a stack frame that costs this one a few nanoseconds (issue 17).
  if (ops.size() == 1 && ops[0].kind == OpKind::kCopy && ops[0].size <= m.opts.inline_max_bytes &&
      !m.UseNt(ops[0])) [[likely]] {
    m.CopyInline(ops[0], submission);
    return Status::Ok();
  }
  return EnqueueOthers(ops, submission);
}

Status CpuEngine::EnqueueOthers(std::span<const Operation> ops, Submission& submission) {
  Impl& m = *impl_;
  if (m.restart_after_fork.load(std::memory_order_acquire)) [[unlikely]] {
    if (Status s = m.RestartAfterFork(); !s.ok()) return s;
  }
  std::size_t total = 0;
  for (const Operation& op : ops) total += op.size;
  if (total <= m.opts.inline_max_bytes || t_worker_of == &m) {
    m.RunInline(ops, submission);
    return Status::Ok();
  }
  if (ops.size() == 1 && submission.exclusive() && !IsOverlappingMove(ops[0])) {
    return EnqueueSplit(ops[0], submission);
  }
  m.EnqueuePieces(ops, submission);
  return Status::Ok();
}

Status CpuEngine::EnqueueSplit(const Operation& op, Submission& submission) {
  Impl& m = *impl_;
  OpRef state = submission.op();
  // The state is usually back from the core of the worker that finished its last operation:
  // ask for the description's and the claims word's lines at once, owned, before the stores
  // below wait for them one after the other.
  PrefetchForWrite(state.scratch());
  PrefetchForWrite(&state.claims());
  const cpu::SplitShape& w = m.DescribeSplit(op, submission).shape;
  const std::uint64_t pieces = cpu::PieceCount(w);
  submission.AddFinalParts(static_cast<std::uint32_t>(pieces));
  m.counters->Add(EngineCounters::kInFlight, pieces);
  const bool hold = m.opts.waiter_runs_pieces && pieces >= 2;
  if (hold) SplitWork::Hold(state, w.generation, pieces - 1);
  const std::uint64_t shared = hold ? pieces - 1 : pieces;  // not kept for the waiter
  // Pieces [0, posted) go straight to polling workers' mailboxes, the rest of the shared ones
  // to whoever claims them. Not when the waiter may take the one piece there is: a posted
  // piece is the worker's, and a waiter that gets there first runs it without a hand-off.
  const bool post = hold || !m.opts.waiter_runs_pieces;
  const int here = post ? m.PinnedCpuHere() : -1;
  Impl::Mailbox* claimed[Impl::kMaxPosts];
  const std::size_t posted =
      post ? m.ClaimMailboxes(here, /*local=*/false,
                              std::min<std::uint64_t>(shared, Impl::kMaxPosts), claimed)
           : 0;
  // Publishes the description: whoever claims a piece, or is posted one, reads it after this.
  state.claims().store(SplitWork::Pack(w.generation, posted, shared), std::memory_order_release);
  if (m.opts.waiter_runs_pieces) state.SetHelper(&CpuEngine::HelpSplit);
  Impl::FillPosts(claimed, posted, w, state);

  // One ticket per further worker that can usefully take part: one per piece left in the
  // claims word, and one for the held piece (the waiter may never come, or wait without
  // helping: then another worker runs it beside the posted ones).
  const std::uint64_t wanted = shared - posted + (hold ? 1 : 0);
  if (wanted == 0) return Status::Ok();
  const cpu::Piece ticket = Impl::TicketFor(state, w.generation);
  // Every other worker has a piece: the one left may share this CPU and would pop a queued
  // ticket only when this thread stops too (a waiter that blocks), so leave the ticket with
  // it if it polls, without the queue's cost or a wake-up. The ticket may be replaced before
  // it is taken: the posted workers still look for what is left when their pieces are done,
  // so nothing is stranded (with none posted, queue it).
  if (posted != 0 && posted + 1 == static_cast<std::size_t>(m.worker_count) &&
      m.PostLocalTicket(here, ticket)) {
    return Status::Ok();
  }
  // Workers on this CPU that rest found the held pieces of its waiters run by those waiters:
  // woken, they would only take turns with this thread for the CPU. Leave them out.
  const Impl::Workers to =
      hold && m.LocalWorkersRest(here) ? m.WorkersBeside(here) : m.AllWorkers();
  const std::uint64_t tickets =
      std::min<std::uint64_t>(wanted, static_cast<std::uint64_t>(to.count) - posted);
  if (tickets != 0) m.PushTickets(ticket, tickets, to.bits);
  return Status::Ok();
}

}  // namespace tierflow
