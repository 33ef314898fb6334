// SPDX-License-Identifier: Apache-2.0
// The CPU engine's state and its submission and piece-running paths, private to the cpu
// component. cpu_engine.cc holds creation, submission and the worker threads, in one unit so
// that the compiler sees the hot paths together (the workers in a unit of their own ran
// batches 6% slower); lifecycle.cc starting, fork and shutdown; split_work.h what a split
// operation's pieces look like and how they are claimed.
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/cpu_relax.h"
#include "common/crc32c.h"
#include "common/fork_guard.h"
#include "common/futex.h"
#include "common/prefetch.h"
#include "cpu/split_shape.h"
#include "cpu/split_work.h"
#include "cpu/task_queue.h"
#include "kernels/kernels.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/engine_module.h"

namespace tierflow {
namespace cpu {

inline constexpr std::uint64_t kMaxOpBytes = std::uint64_t{1} << 40;  // 1 TiB
inline constexpr std::size_t kMaxBatch = 65536;

// The held piece's bias that this thread learnt waiting on the engine numbered `engine`
// (numbers, unlike addresses, are not reused by a later engine).
struct HeldBias {
  std::uint64_t engine = 0;
  HeldPieceBias bias;
};
inline thread_local HeldBias t_held_bias;
inline std::atomic<std::uint64_t> g_engines_created{0};
// The engine whose worker this thread is (work submitted from a callback runs inline there).
inline thread_local const void* t_worker_of = nullptr;

}  // namespace cpu

struct [[gnu::visibility("hidden")]] CpuEngine::Impl final : ForkAware {
  static_assert(sizeof(SplitWork) <= 64, "the description is the scratch area's first line");
  static_assert(alignof(SplitWork) <= 64, "OpRef::scratch is 64-byte aligned");
  static_assert(std::is_trivially_destructible_v<SplitWork>);

  CpuEngineOptions opts;
  CpuIsa isa = CpuIsa::kBaseline;
  CpuIsa streaming_isa = CpuIsa::kBaseline;
  const kernels::Kernels* kernels = nullptr;     // copies that stay in the cache
  const kernels::Kernels* nt_kernels = nullptr;  // streaming copies (non-temporal stores)
  kernels::StreamPrefetch streaming_prefetch = kernels::StreamPrefetch::kSoftware;
  std::size_t nt_threshold = 0;
  EngineCapabilities caps;
  std::vector<int> cpus;
  int worker_count = 0;
  std::vector<std::thread> threads;
  EngineCounters* counters = nullptr;  // the engine's (Engine::counters)
  const std::uint64_t number = cpu::g_engines_created.fetch_add(1, std::memory_order_relaxed) + 1;
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
  void AfterForkChild() override;
  static void CancelInChild(const cpu::Piece& piece, bool split, const char* why);

  Status StartWorkers();

  std::size_t PieceSize(std::size_t size) const {
    std::size_t per_worker = (size + worker_count - 1) / worker_count;
    per_worker = (per_worker + cpu::kPieceAlign - 1) / cpu::kPieceAlign * cpu::kPieceAlign;
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

  Status RestartAfterFork();

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
    if (d.one_each && cpu::t_held_bias.engine == number) cpu::t_held_bias.bias.Cut(d.shape);
  }
  // This thread ran a held piece of this engine's; `last`: the operation then had no other
  // part outstanding.
  void VoteOnHeldPiece(bool last) const {
    if (cpu::t_held_bias.engine != number) cpu::t_held_bias = cpu::HeldBias{number, {}};
    cpu::t_held_bias.bias.Vote(last);
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
      w->piece = (op.size / SplitWork::kMaxPieces + cpu::kPieceAlign) / cpu::kPieceAlign *
                 cpu::kPieceAlign;
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

  bool RunPosted(Mailbox & box);

  bool StopPolling(Mailbox & box);

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
  void IndexWorkersByCpu();

  // The worker side.
  void WorkerLoop(int index);
  bool PollForWork(Mailbox & box);
};

}  // namespace tierflow
