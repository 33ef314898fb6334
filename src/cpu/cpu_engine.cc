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
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/fault_guard.h"
#include "common/hot_path.h"
#include "common/mapping.h"
#include "cpu/cpu_engine_impl.h"
#include "cpu/cpu_engine_internal.h"

namespace tierflow {

using cpu::kMaxBatch;
using cpu::kMaxOpBytes;
using cpu::kPieceAlign;

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
// --- the worker threads: taking pieces and tickets from the queue, polling their mailboxes,
// sleeping ---
// Runs what was posted to this worker (waiting out a submitter still writing it). A piece:
// then whatever else of its operation is left, as for a ticket: the claims word's pieces,
// then the held piece if no waiter has taken it; cancelled instead while the engine stops.
// True for a ticket that found nothing left (as a rule because its submitter, on this
// worker's CPU, ran the held piece itself; else a posted worker took it first).
bool CpuEngine::Impl::RunPosted(Mailbox& box) {
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
bool CpuEngine::Impl::StopPolling(Mailbox& box) {
  std::uint32_t polling = Mailbox::kPolling;
  if (box.state.compare_exchange_strong(polling, Mailbox::kAway, std::memory_order_acquire) ||
      polling == Mailbox::kAway) {
    return true;
  }
  RunPosted(box);
  return false;
}

void CpuEngine::Impl::WorkerLoop(int index) {
  cpu::t_worker_of = this;
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

// The kernels for cached and for streaming copies: the ISA asked for (options or
// TIERFLOW_ISA) for both, with software prefetch, else the fastest of each kind as measured on
// this CPU.
Result<kernels::MeasuredKernelChoice> ChooseKernels(CpuIsa asked) {
  if (asked == CpuIsa::kAuto) {
    Result<CpuIsa> named = kernels::IsaInEnvironment();
    if (!named.ok()) return named.status();
    if (*named == CpuIsa::kAuto) return kernels::MeasuredKernels();
    asked = *named;
  }
  if (!kernels::IsaSupported(asked)) {
    return Status::Unsupported(fmt::format(
        "this CPU lacks {} (asked for by options or TIERFLOW_ISA); best available here is {}",
        CpuIsaName(asked),
        CpuIsaName(kernels::IsaSupported(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kBaseline)));
  }
  return kernels::MeasuredKernelChoice{asked, asked};
}

}  // namespace

namespace {

// The one check of CpuEngineOptions against the topology: every refusal of Create, before
// anything is built. Returns the node the workers run on.
Result<const NumaNode*> SanitizeOptions(const Topology& topology, const CpuEngineOptions& options) {
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
  return node;
}

EngineCapabilities CpuCapabilities(const CpuEngineOptions& options) {
  EngineCapabilities caps;
  caps.name = "cpu";
  caps.kind = EngineKind::kCpu;
  caps.ops = kDataOps;  // no queue of its own to drain
  caps.max_op_bytes = kMaxOpBytes;
  caps.max_batch = kMaxBatch;
  caps.preferred_min_bytes = 0;
  caps.preferred_chunk_bytes = options.min_piece_bytes;
  caps.node = options.node;
  caps.is_model = false;
  return caps;
}

}  // namespace

Result<std::unique_ptr<CpuEngine>> CpuEngine::Create(const Topology& topology,
                                                     const CpuEngineOptions& options) {
  Result<const NumaNode*> node = SanitizeOptions(topology, options);
  if (!node.ok()) return node.status();
  Result<kernels::MeasuredKernelChoice> isas = ChooseKernels(options.isa);
  if (!isas.ok()) return isas.status();
  if (Status s = InstallFaultHandler(); !s.ok()) return s;

  auto impl = std::make_unique<Impl>(options.queue_capacity);
  impl->opts = options;
  impl->isa = isas->cached;
  impl->streaming_isa = isas->streaming;
  impl->streaming_prefetch = isas->streaming_prefetch;
  impl->kernels = &kernels::KernelsFor(isas->cached);
  impl->nt_kernels = &kernels::KernelsFor(isas->streaming, isas->streaming_prefetch);
  impl->cpus = (*node)->cpus;
  impl->worker_count = options.workers == 0 ? static_cast<int>(impl->cpus.size()) : options.workers;
  impl->mailboxes.reset(new Impl::Mailbox[static_cast<std::size_t>(impl->worker_count)]);
  impl->IndexWorkersByCpu();
  std::uint64_t llc =
      topology.caches().l3_bytes != 0 ? topology.caches().l3_bytes : topology.caches().l2_bytes;
  impl->nt_threshold = options.nt_threshold_bytes != 0
                           ? options.nt_threshold_bytes
                           : static_cast<std::size_t>(llc != 0 ? llc * 3 / 4 : 8u << 20);
  impl->caps = CpuCapabilities(options);

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
bool CpuEngine::streaming_software_prefetch() const {
  return impl_->streaming_prefetch == kernels::StreamPrefetch::kSoftware;
}
std::size_t CpuEngine::nt_threshold_bytes() const { return impl_->nt_threshold; }
double CpuEngineInternal::HeldPieceScale(const CpuEngine& engine) {
  return cpu::t_held_bias.engine == engine.impl_->number ? cpu::t_held_bias.bias.scale() : 1.0;
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
  if (total <= m.opts.inline_max_bytes || cpu::t_worker_of == &m) {
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
