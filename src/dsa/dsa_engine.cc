// SPDX-License-Identifier: Apache-2.0
#include "tierflow/dsa_engine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/cpu_relax.h"
#include "common/crc32c.h"
#include "common/fault_guard.h"
#include "common/fork_guard.h"
#include "common/free_list.h"
#include "common/futex.h"
#include "common/mapping.h"
#include "common/pattern.h"
#include "common/touch.h"
#include "dsa/descriptor.h"
#include "dsa/dsa_engine_impl.h"
#include "dsa/monitor_wait.h"
#include "dsa/portal.h"
#include "kernels/kernels.h"
#include "tierflow/engine_module.h"

namespace tierflow {

using dsa::GetJob;
using dsa::kMaxOpBytes;
using dsa::kMaxOpsPerSubmit;
using dsa::PutJob;
using Job = dsa::Job;
using dsa::kMaxFaultsWithoutProgress;
using dsa::kMonitorWaitCycles;
using dsa::Log2;

// The submission and completion paths stay in this unit with Enqueue, defined `inline` as they
// were inside the class: in units of their own, or out of line without it (the compiler then
// inlines less), one descriptor and a batch of 32 took 5-7% longer on the model.

// --- submission: operations cut into pieces, grouped into batches, encoded as descriptors and
// offered to the work queue (retries, credits, the CPU fallback policy) ---

inline void DsaEngine::Impl::Encode(Job& j, std::uint32_t i) {
  Piece& p = j.pieces[i];
  dsa::Record* rec = &j.recs[i];
  dsa::ClearRecord(*rec);
  // Cache control: copies leave the destination cached; a cache flush keeps the lines
  // (write back only) instead of evicting them.
  const bool cc = IsMaintenance(p.kind) ? p.kind == OpKind::kWriteBack : p.keep_in_cache;
  std::uint32_t flags =
      (cc ? IDXD_OP_FLAG_CC : 0) | (opts.block_on_fault && bof_allowed ? IDXD_OP_FLAG_BOF : 0);
  dsa_hw_desc& d = j.descs[i].d;
  const auto size = static_cast<std::uint32_t>(p.size);
  switch (p.kind) {
    case OpKind::kCopy:
    case OpKind::kMove:
      dsa::EncodeMemmove(d, p.dst, p.src, size, flags, rec);
      break;
    case OpKind::kFill:
      dsa::EncodeFill(d, p.dst, RotatePattern(p.pattern, p.offset), size, flags, rec);
      break;
    case OpKind::kCompare:
      dsa::EncodeCompare(d, p.src, p.src2, size, flags, rec);
      break;
    case OpKind::kComparePattern:
      dsa::EncodeComparePattern(d, p.src, RotatePattern(p.pattern, p.offset), size, flags, rec);
      break;
    case OpKind::kDualcast:
      dsa::EncodeDualcast(d, p.dst, p.dst2, p.src, size, flags, rec);
      break;
    case OpKind::kCrc32c:
      dsa::EncodeCrc(d, p.src, p.crc_seed, size, flags, rec);
      break;
    case OpKind::kWriteBack:
    case OpKind::kInvalidate:
    case OpKind::kWriteBackInvalidate:
      dsa::EncodeCacheFlush(d, p.dst, size, flags, rec);
      break;
    case OpKind::kDrain:
      dsa::EncodeNoop(d, rec);  // never built: drains have no pieces
      break;
  }
}

// Offers a top-level descriptor, retrying a shared WQ up to opts.enqcmd_retries times with
// doubling PAUSE backoff. On a dedicated WQ a credit must be held (taken here).
inline dsa::Offer DsaEngine::Impl::Offer(const dsa_hw_desc& d, int retries) {
  for (int attempt = 0;; ++attempt) {
    dsa::Offer o = portal->Submit(d);
    if (o != dsa::Offer::kRetry) return o;
    submit_retries.fetch_add(1, std::memory_order_relaxed);
    if (attempt >= retries) return o;
    for (int k = 0; k < (1 << std::min(attempt, 10)); ++k) CpuRelax();
  }
}

// A dedicated WQ is full: the credits come back as records complete, including those of
// the job being submitted (which only this thread may advance now).
inline void DsaEngine::Impl::WaitForCredit(Job& j) {
  while (!TryCredit()) {
    credit_waits.fetch_add(1, std::memory_order_relaxed);
    Reap(j);
    PollAll();
    if (!TryCredit())
      sched_yield();
    else
      return;
  }
}

// Submits piece i on its own. `blocking`: the submitting thread may wait for a DWQ credit
// and applies the SWQ-full policy; otherwise (completion thread) one try, else later.
inline void DsaEngine::Impl::SubmitPiece(Job& j, std::uint32_t i, bool blocking) {
  Piece& p = j.pieces[i];
  if (!TryCredit()) {
    if (!blocking) return;  // stays unsubmitted; a later round retries
    WaitForCredit(j);
  }
  dsa::Offer o = Offer(j.descs[i].d, blocking ? opts.enqcmd_retries : 0);
  if (o == dsa::Offer::kAccepted) {
    p.state = Piece::kSubmitted;
    p.holds_credit = !shared;
    return;
  }
  ReleaseCredit();
  if (o == dsa::Offer::kFailed) {
    return Fail(j, i, StatusCode::kIoError, portal->last_error());
  }
  if (opts.on_swq_full == DsaSwqFullPolicy::kCpu) {
    cpu_fallbacks.fetch_add(1, std::memory_order_relaxed);
    return RunOnCpu(j, i);
  }
  if (blocking) retried_later.fetch_add(1, std::memory_order_relaxed);
  p.state = Piece::kUnsubmitted;
}

inline void DsaEngine::Impl::SubmitGroup(Job& j, Group& g) {
  dsa::ClearRecord(g.rec);
  dsa::EncodeBatch(g.desc.d, &j.descs[g.first], g.count, 0, &g.rec);
  if (!TryCredit()) WaitForCredit(j);
  dsa::Offer o = Offer(g.desc.d, opts.enqcmd_retries);
  if (o == dsa::Offer::kAccepted) {
    g.in_flight = true;
    ++j.groups_in_flight;
    batches.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ReleaseCredit();
  // Not accepted: the members go on their own (later, or on the CPU by policy).
  for (std::uint32_t i = g.first; i < g.first + g.count; ++i) {
    j.pieces[i].state = Piece::kUnsubmitted;
    if (o == dsa::Offer::kFailed) {
      Fail(j, i, StatusCode::kIoError, portal->last_error());
    } else if (opts.on_swq_full == DsaSwqFullPolicy::kCpu) {
      cpu_fallbacks.fetch_add(1, std::memory_order_relaxed);
      RunOnCpu(j, i);
    } else {
      retried_later.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

inline bool DsaEngine::Impl::OverlappingBigMove(const Operation& op) const {
  return op.size > max_xfer && IsOverlappingMove(op);
}

// An overlapping move cut into pieces must run alone: its pieces run in order.
inline Status DsaEngine::Impl::CheckBatch(std::span<const Operation> ops) const {
  if (ops.size() < 2) return Status::Ok();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (OverlappingBigMove(ops[i])) {
      return Status::InvalidArgument(fmt::format(
          "batch member {}: an overlapping move larger than the WQ's max_transfer_size ({} "
          "bytes) must be cut into pieces that run in order; submit it on its own",
          i, max_xfer));
    }
  }
  return Status::Ok();
}

// Cuts `op` into pieces of at most max_xfer bytes, appended to the job. DSA's dualcast needs
// destinations that agree in address bits 11:0; others become two copies (the source is
// read twice).
inline void DsaEngine::Impl::AddPieces(Job& j, const Operation& op, const Submission& submission,
                                       SizeRun& sizes) {
  const bool split_dualcast =
      op.kind == OpKind::kDualcast &&
      ((reinterpret_cast<std::uintptr_t>(op.dst) ^ reinterpret_cast<std::uintptr_t>(op.dst2)) &
       0xfff) != 0;
  if (split_dualcast) dualcast_splits.fetch_add(1, std::memory_order_relaxed);
  for (int copy = 0; copy < (split_dualcast ? 2 : 1); ++copy) {
    for (std::uint64_t off = 0; off < op.size; off += max_xfer) {
      // Filled in place: a Piece built on the stack and copied in costs a store-forwarding
      // stall per piece, which is most of a batch's build time.
      Piece& p = j.pieces.emplace_back();
      p.kind = split_dualcast ? OpKind::kCopy : op.kind;
      p.state = Piece::kUnsubmitted;
      p.holds_credit = false;
      p.faults_here = 0;
      p.echo = copy == 1;
      p.keep_in_cache = op.keep_in_cache;
      p.size = std::min<std::uint64_t>(max_xfer, op.size - off);
      p.offset = off;
      p.tail = op.size - off - p.size;
      void* dst = split_dualcast && copy == 1 ? op.dst2 : op.dst;
      p.dst = dst != nullptr ? static_cast<char*>(dst) + off : nullptr;
      p.src = op.src != nullptr ? static_cast<const char*>(op.src) + off : nullptr;
      p.src2 = op.src2 != nullptr ? static_cast<const char*>(op.src2) + off : nullptr;
      p.dst2 = op.dst2 != nullptr && !split_dualcast ? static_cast<char*>(op.dst2) + off : nullptr;
      p.pattern = op.pattern;
      p.crc_seed = 0;  // pieces are checksummed apart and combined (Crc32cShift)
      p.report_base = submission.offset_base();
      sizes.Add(histogram, std::min<unsigned>(Log2(p.size), 31));
    }
  }
  if (OverlappingBigMove(op)) {
    // Pieces of an overlapping move would overwrite source bytes other pieces still need:
    // run them in order, from the end when moving up. (The only operation of this job.)
    j.ordered = true;
    if (op.dst > op.src) std::reverse(j.pieces.begin(), j.pieces.end());
  }
}

// Batches for the job's pieces: an ordered job is one fenced batch when it fits (the device
// keeps the order; otherwise its pieces go one at a time); others are cut into batches of
// up to max_batch, a lone last piece going on its own.
inline void DsaEngine::Impl::GroupPieces(Job& j) {
  const auto n = static_cast<std::uint32_t>(j.pieces.size());
  if (!opts.use_batches || !portal->accepts_batches()) return;
  if (j.ordered) {
    if (n > max_batch) return;
    Group& g = j.groups.emplace_back();
    g.first = 0;
    g.count = n;
    for (std::uint32_t i = 0; i < n; ++i) {
      j.pieces[i].state = Piece::kInBatch;
      if (i > 0) j.descs[i].d.flags |= IDXD_OP_FLAG_FENCE;
    }
    return;
  }
  for (std::uint32_t first = 0; n >= 2 && first < n; first += max_batch) {
    std::uint32_t count = std::min(max_batch, n - first);
    if (count < 2) break;
    Group& g = j.groups.emplace_back();
    g.first = first;
    g.count = count;
    for (std::uint32_t i = first; i < first + count; ++i) j.pieces[i].state = Piece::kInBatch;
  }
}

// Encodes and submits the job's descriptors. The job becomes visible to the completion
// thread only if it is still running after one check; until then this thread alone
// advances it (WaitForCredit reaps it too). Small operations on an idle device (or the
// instant model) are done by then.
inline void DsaEngine::Impl::Launch(Job* j, Submission& submission) {
  const auto n = static_cast<std::uint32_t>(j->pieces.size());
  j->descs.resize(n);
  j->recs.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) Encode(*j, i);
  GroupPieces(*j);
  j->open = n;
  descriptors.fetch_add(n, std::memory_order_relaxed);
  counters->Add(EngineCounters::kInFlight, n);
  submission.AddParts(1);
  for (Group& g : j->groups) SubmitGroup(*j, g);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (j->pieces[i].state == Piece::kUnsubmitted) {
      SubmitPiece(*j, i, /*blocking=*/true);
      if (j->ordered && j->pieces[i].state != Piece::kDone) break;  // the rest follow in order
    }
  }
  if (Advance(*j)) {
    Complete(j);
    PutJob(j);
    return;
  }
  Link(j);
  j->busy.store(false, std::memory_order_release);
  idle.Wake(1);
}

// A drain is a job without pieces that completes once every job linked before it has left
// the list (completed and reported). Jobs finished at submission were never linked. The
// device's own drain descriptor is not needed: parts waiting in this engine for a retry
// are not in the device yet, so only this engine's bookkeeping can tell.
inline Status DsaEngine::Impl::EnqueueDrain(Submission& submission) {
  Job* j = GetJob();
  j->Reset(submission.op(), /*is_drain=*/true);
  submission.AddParts(1);
  {
    std::lock_guard lock(list_mu);
    j->drain_after = link_seq;
    if (AnyLinkedUpTo(j->drain_after)) {
      j->busy.store(false, std::memory_order_relaxed);
      LinkLocked(j);
      j = nullptr;
    }
  }
  if (j == nullptr) {
    idle.Wake(1);
    return Status::Ok();
  }
  Complete(j);
  PutJob(j);
  return Status::Ok();
}

// --- completion: records read, page faults resumed or finished on the CPU, results and errors
// reported, and the completion thread that polls and sleeps ---

// Where a compare found its first difference, to the byte: the device reports the offset
// of the differing byte or (pattern compares) of its 8-byte word; the CPU finds the byte.
inline std::uint64_t DsaEngine::Impl::ExactDifference(const Piece& p, std::uint64_t at) const {
  at = std::min(at, p.size);
  std::size_t rest = p.size - at;
  if (p.kind == OpKind::kCompare) {
    return at + kernels::FirstDifference(p.src + at, p.src2 + at, rest);
  }
  return at + kernels::FirstPatternDifference(p.src + at, p.pattern, p.offset + at, rest);
}

inline void DsaEngine::Impl::NoteDifference(Job& j, const Piece& p, std::uint64_t at) {
  j.first_difference = std::min<std::uint64_t>(j.first_difference, p.report_base + p.offset + at);
}

inline void DsaEngine::Impl::AddCrc(Job& j, const Piece& p, std::uint32_t crc) {
  j.state.AddCrc(Crc32cShift(crc, p.tail));
}

// Runs piece i on the CPU (SWQ stayed full with the CPU policy, or a fault with kFinishOnCpu).
inline void DsaEngine::Impl::RunOnCpu(Job& j, std::uint32_t i) {
  Piece& p = j.pieces[i];
  kernels::PieceWork w = kernels::WorkOf(p);
  w.crc_seed = p.crc_seed;
  w.overlapping = p.kind == OpKind::kMove;  // a piece of an overlapping move overlaps itself
  kernels::PieceResult r;
  Status fault;
  if (!kernels::RunPieceGuarded(*kernels, w, &r, &fault)) {
    return Fail(j, i, fault.code(), fault.message());
  }
  if (r.difference < p.size) NoteDifference(j, p, r.difference);
  if (p.kind == OpKind::kCrc32c) AddCrc(j, p, r.crc);
  Done(j, i, p.size);
}

inline void DsaEngine::Impl::Done(Job& j, std::uint32_t i, std::uint64_t bytes) {
  j.pieces[i].state = Piece::kDone;
  if (!j.pieces[i].echo) j.bytes += bytes;
  --j.open;
  ++j.done_unreported;  // one atomic update per Advance, not per piece (batches)
}

inline void DsaEngine::Impl::ReportDone(Job& j) {
  if (j.done_unreported == 0) return;
  counters->Add(EngineCounters::kPiecesCompleted, j.done_unreported - j.cancelled_unreported);
  counters->Add(EngineCounters::kPiecesCancelled, j.cancelled_unreported);
  counters->Sub(EngineCounters::kInFlight, j.done_unreported);
  j.done_unreported = 0;
  j.cancelled_unreported = 0;
}

inline void DsaEngine::Impl::Fail(Job& j, std::uint32_t i, StatusCode code, std::string text) {
  counters->Add(EngineCounters::kPiecesFailed);
  if (j.error_code == StatusCode::kOk) {
    j.error_code = code;
    j.error_text = std::move(text);
  }
  Done(j, i, 0);
}

// Touches the page the device faulted on, so that the next attempt finds it mapped. The
// page's protection is checked first: touching an unmapped or read-only page would crash.
inline bool DsaEngine::Impl::TouchFaultPage(Job& j, std::uint32_t i, std::uint64_t addr,
                                            bool write) {
  PageAccess a = QueryPageAccess(dsa::Ptr(addr));
  if (!a.mapped || !a.readable || (write && !a.writable)) {
    Fail(j, i, StatusCode::kInvalidArgument,
         fmt::format("DSA {}: the device faulted on {} 0x{:x}, which is {} in this process: "
                     "pass buffers that are mapped {}",
                     OpKindName(j.pieces[i].kind), write ? "writing" : "reading", addr,
                     !a.mapped              ? "not mapped"
                     : write && !a.writable ? "read-only"
                                            : "not readable",
                     write ? "read-write" : "readable"));
    return false;
  }
  auto* byte = dsa::Ptr<unsigned char>(addr);
  if (write) {
    TouchForWrite(byte);  // a write that changes nothing
  } else {
    (void)*static_cast<volatile unsigned char*>(byte);
  }
  return true;
}

// A finished record of piece i.
inline void DsaEngine::Impl::Process(Job& j, std::uint32_t i, std::uint8_t raw) {
  Piece& p = j.pieces[i];
  const dsa_completion_record& r = j.recs[i].r;
  const unsigned status = raw & DSA_COMP_STATUS_MASK;
  if (p.holds_credit) {
    p.holds_credit = false;
    ReleaseCredit();
  }
  if (status == DSA_COMP_SUCCESS) {
    if ((p.kind == OpKind::kCompare || p.kind == OpKind::kComparePattern) && r.result != 0) {
      NoteDifference(j, p, ExactDifference(p, r.bytes_completed));
    }
    if (p.kind == OpKind::kCrc32c) AddCrc(j, p, static_cast<std::uint32_t>(r.crc_val));
    return Done(j, i, p.size);
  }
  if (status == DSA_COMP_PAGE_FAULT_NOBOF) {
    const std::uint64_t done = std::min<std::uint64_t>(r.bytes_completed, p.size);
    const bool descending = p.kind == OpKind::kMove && (r.result & 1) != 0;
    // Progress: ascending work advances the start; descending work shrinks from the end.
    if (!descending) {
      if (p.dst != nullptr) p.dst += done;
      if (p.dst2 != nullptr) p.dst2 += done;
      if (p.src != nullptr) p.src += done;
      if (p.src2 != nullptr) p.src2 += done;
      p.offset += done;
      // The CRC of the bytes done continues from here (the record holds it, seed applied).
      if (p.kind == OpKind::kCrc32c && done > 0) p.crc_seed = static_cast<std::uint32_t>(r.crc_val);
    }
    p.size -= done;
    if (!p.echo) j.bytes += done;
    p.faults_here = done == 0 ? p.faults_here + 1 : 0;
    if (p.size == 0) {
      if (p.kind == OpKind::kCrc32c) AddCrc(j, p, p.crc_seed);
      return Done(j, i, 0);
    }
    if (opts.on_fault == DsaFaultPolicy::kFinishOnCpu) {
      faults_on_cpu.fetch_add(1, std::memory_order_relaxed);
      return RunOnCpu(j, i);
    }
    if (p.faults_here > kMaxFaultsWithoutProgress) {
      return Fail(j, i, StatusCode::kFailed,
                  fmt::format("DSA {}: the page at 0x{:x} keeps faulting after being touched "
                              "{} times; prefault the buffer (DsaEngineOptions::prefault)",
                              OpKindName(p.kind), r.fault_addr, kMaxFaultsWithoutProgress));
    }
    if (!TouchFaultPage(j, i, r.fault_addr, (raw & DSA_COMP_STATUS_WRITE) != 0)) return;
    faults_resumed.fetch_add(1, std::memory_order_relaxed);
    Encode(j, i);
    p.state = Piece::kUnsubmitted;
    return;
  }
  Status s = dsa::RecordError(r, j.descs[i].d.opcode);
  Fail(j, i, s.code(), s.message());
}

// Processes the job's finished records (batches, then pieces); submits nothing.
inline void DsaEngine::Impl::Reap(Job& j) {
  for (Group& g : j.groups) {
    if (!g.in_flight) continue;
    std::uint8_t st = dsa::LoadStatus(g.rec.r);
    if (st == 0) continue;
    g.in_flight = false;
    --j.groups_in_flight;
    ReleaseCredit();
    for (std::uint32_t i = g.first; i < g.first + g.count; ++i) {
      if (j.pieces[i].state != Piece::kInBatch) continue;
      // Members the batch did not process (fence after a failure, batch refused) go alone.
      j.pieces[i].state =
          dsa::LoadStatus(j.recs[i].r) == 0 ? Piece::kUnsubmitted : Piece::kSubmitted;
    }
  }
  for (std::uint32_t i = 0; i < j.pieces.size(); ++i) {
    if (j.pieces[i].state == Piece::kSubmitted) {
      std::uint8_t st = dsa::LoadStatus(j.recs[i].r);
      if (st != 0) Process(j, i, st);
    }
  }
}

// Reaps, then resumes and resubmits; true when the job is complete.
inline bool DsaEngine::Impl::Advance(Job& j) {
  if (j.drain) return !AnyLinkedUpTo(j.drain_after);  // caller holds list_mu
  Reap(j);
  const bool drain = draining.load(std::memory_order_relaxed);
  bool ordered_busy =
      j.ordered && std::any_of(j.pieces.begin(), j.pieces.end(), [](const Piece& p) {
        return p.state == Piece::kSubmitted || p.state == Piece::kInBatch;
      });
  for (std::uint32_t i = 0; i < j.pieces.size(); ++i) {
    Piece& p = j.pieces[i];
    if (p.state == Piece::kUnsubmitted && (!ordered_busy || drain)) {
      if (drain) {
        ++j.cancelled_unreported;
        if (j.error_code == StatusCode::kOk) {
          j.error_code = StatusCode::kCancelled;
          j.error_text =
              "the DSA engine was destroyed before this part of the operation "
              "was submitted";
        }
        Done(j, i, 0);
      } else {
        SubmitPiece(j, i, /*blocking=*/false);
        if (j.ordered && p.state != Piece::kDone) ordered_busy = true;
      }
    }
  }
  ReportDone(j);
  return j.open == 0 && j.groups_in_flight == 0;
}

// Reports a complete job to its handle (callbacks run here: no lock may be held). The job
// itself is recycled by the caller, after unlinking it if it was linked: a job stays in the
// list until its handle has completed, so that a drain never overtakes it.
inline void DsaEngine::Impl::Complete(Job* j) {
  OpRef state = j->state;
  const std::uint64_t bytes = j->bytes;
  ops_done.fetch_add(1, std::memory_order_relaxed);
  counters->Add(EngineCounters::kBytesCompleted, bytes);
  StatusCode code = j->error_code;
  std::string text = std::move(j->error_text);
  std::uint64_t diff = j->first_difference;
  j->error_text.clear();
  j->state = OpRef();
  if (code != StatusCode::kOk) {
    state.FailPart(bytes, code, std::move(text));
  } else {
    state.CompletePart(bytes, StatusCode::kOk, nullptr, diff);
  }
}

// Advances every in-flight job nobody else is advancing; completes the finished ones
// (outside the list lock: callbacks may submit more). True when any job finished.
inline bool DsaEngine::Impl::PollAll() {
  Job* finished = nullptr;
  {
    std::lock_guard lock(list_mu);
    for (Job* j = head; j != nullptr; j = j->next) {
      if (!j->busy.exchange(true, std::memory_order_acquire)) {
        if (Advance(*j)) {
          j->finished_next = finished;  // stays busy: nobody else touches it
          finished = j;
        } else {
          j->busy.store(false, std::memory_order_release);
        }
      }
    }
  }
  if (finished == nullptr) return false;
  for (Job* j = finished; j != nullptr; j = j->finished_next) Complete(j);
  {
    std::lock_guard lock(list_mu);
    for (Job* j = finished; j != nullptr; j = j->finished_next) UnlinkLocked(j);
  }
  while (finished != nullptr) {
    Job* j = finished;
    finished = j->finished_next;
    PutJob(j);
  }
  return true;
}

// The completion thread: polls while work is in flight (spin, then yield, then short
// sleeps), sleeps on a futex when nothing is.
void DsaEngine::Impl::PollerLoop() {
  int fruitless = 0;  // polls in a row that finished nothing
  while (!stopping.load(std::memory_order_acquire)) {
    if (jobs_in_flight.load(std::memory_order_acquire) == 0) {
      idle.SleepUnless([&] {
        return jobs_in_flight.load(std::memory_order_seq_cst) != 0 ||
               stopping.load(std::memory_order_seq_cst);
      });
      fruitless = 0;
      continue;
    }
    if (PollAll()) {
      fruitless = 0;
      continue;
    }
    ++fruitless;
    if (fruitless < 256) {
      CpuRelax();
    } else if (use_umwait) {
      if (const volatile std::uint8_t* status = RecordToWatch()) {
        monitor_waits.fetch_add(1, std::memory_order_relaxed);
        dsa::internal::monitor_wait(status, kMonitorWaitCycles, umwait_max);
      } else if (fruitless < 4096) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    } else if (fruitless < 4096) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

// With exactly one job in flight, the status byte of a record the device has yet to write
// (its first batch, else its first descriptor in flight); null otherwise (UMONITOR watches
// one line, and waiting on one job would delay the others). The job may finish and be
// recycled right after: its memory stays allocated while the engine lives, so the wait
// then merely times out.
inline const volatile std::uint8_t* DsaEngine::Impl::RecordToWatch() {
  std::lock_guard lock(list_mu);
  if (head == nullptr || head->next != nullptr || head->drain) return nullptr;
  for (const Group& g : head->groups) {
    if (g.in_flight) return &g.rec.r.status;
  }
  for (std::uint32_t i = 0; i < head->pieces.size(); ++i) {
    if (head->pieces[i].state == Piece::kSubmitted) return &head->recs[i].r.status;
  }
  return nullptr;
}

// In the child: the device writes the records of jobs in flight in the parent's memory,
// never in the child's copy, so those jobs fail here (their callbacks are dropped: they
// belong to the parent's operation and run there). Threads and portal come back on the
// next submission (ReinitAfterFork).
void DsaEngine::Impl::AfterForkChild() {
  new (&list_mu) std::mutex();
  new (&reinit_mu) std::mutex();
  new (&poller) std::thread();  // abandon the parent's completion thread, never join it
  while (Job* j = head) {
    UnlinkLocked(j);
    if (j->state) {  // its callback runs here, with this error
      j->state.FailPart(j->bytes, StatusCode::kFailed,
                        fmt::format("this operation was in flight on the DSA ({}) when the "
                                    "process forked; it completes in the parent only",
                                    description));
      j->state = OpRef();
    }
    j->busy.store(false, std::memory_order_relaxed);
    PutJob(j);
  }
  credits_used.store(0, std::memory_order_relaxed);
  reinit_after_fork.store(true, std::memory_order_relaxed);
}

Status DsaEngine::Impl::ReinitAfterFork() {
  if (model == nullptr) {
    portal.reset();  // unmaps the parent's portal page and closes the inherited file
    Result<std::unique_ptr<dsa::Portal>> p = dsa::OpenHardwarePortal(hw_wq, hw_cpu);
    if (!p.ok()) {
      return Status(p.status().code(), fmt::format("re-opening {} in the fork() child: {}",
                                                   description, p.status().message()));
    }
    portal = std::move(*p);
  }
  poller = std::thread([this] { PollerLoop(); });
  reinit_after_fork.store(false, std::memory_order_release);
  return Status::Ok();
}

namespace {
Status CheckWaitOption(const DsaEngineOptions& options) {
  if (options.completion_wait == DsaCompletionWait::kUmwait && !dsa::internal::cpu_has_waitpkg()) {
    return Status::Unsupported(
        "completion_wait = kUmwait, but this CPU lacks WAITPKG (UMONITOR/UMWAIT): use kAuto "
        "(UMWAIT where available) or kPause");
  }
  return Status::Ok();
}
}  // namespace

Result<std::unique_ptr<DsaEngine>> DsaEngine::Create(const DsaInventory& inventory,
                                                     const DsaEngineOptions& options) {
  if (Status s = CheckWaitOption(options); !s.ok()) return s;
  // Pieces that fall back to the CPU run its kernels: refused here for an ISA this CPU lacks.
  if (Result<CpuIsa> isa = ChooseCpuIsa(); !isa.ok()) return isa.status();
  const DsaWq* chosen = nullptr;
  std::string tried;
  for (const DsaDevice& d : inventory.devices()) {
    for (const DsaWq& w : d.wqs) {
      std::string full = d.name + "/" + w.name;
      if (!options.wq.empty() && options.wq != full) continue;
      if (options.wq.empty() && options.node >= 0 && d.numa_node != options.node) continue;
      if (!w.usable()) {
        tried += fmt::format("\n  {}: {}", full, w.reason);
        continue;
      }
      if (chosen == nullptr ||
          (chosen->path == DsaSubmitPath::kWrite && w.path != DsaSubmitPath::kWrite)) {
        chosen = &w;
      }
    }
  }
  if (chosen == nullptr) {
    if (inventory.devices().empty()) {
      return Status::Unsupported(
          fmt::format("no DSA engine: {}; the device model "
                      "(DsaEngine::CreateOnModel) runs the same code "
                      "in software",
                      inventory.note()));
    }
    std::string which = !options.wq.empty() ? options.wq
                        : options.node >= 0 ? fmt::format("node {}", options.node)
                                            : std::string("any device");
    return Status::Unsupported(
        fmt::format("no usable DSA work queue for {}{}", which,
                    tried.empty() ? std::string(" (no WQ matches)") : tried));
  }
  Result<std::unique_ptr<dsa::Portal>> portal = dsa::OpenHardwarePortal(*chosen, inventory.cpu());
  if (!portal.ok()) return portal.status();
  const DsaDevice* dev = inventory.FindDevice(chosen->device);
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  impl->shared = chosen->shared;
  impl->wq_size = chosen->size;
  impl->max_xfer = chosen->max_transfer_size;
  impl->max_batch = chosen->max_batch_size;
  impl->bof_allowed = chosen->block_on_fault;
  impl->hw_wq = *chosen;
  impl->hw_cpu = inventory.cpu();
  impl->caps.name = "dsa";
  impl->caps.kind = EngineKind::kOffload;
  impl->caps.node = dev != nullptr ? dev->numa_node : -1;
  impl->caps.is_model = false;
  impl->description =
      fmt::format("{}/{} ({}, {})", chosen->device, chosen->name,
                  chosen->shared ? "shared" : "dedicated", DsaSubmitPathName((*portal)->path()));
  if (!(*portal)->note.empty()) impl->description += "; " + (*portal)->note;
  impl->portal = std::move(*portal);
  std::unique_ptr<DsaEngine> e(new DsaEngine(std::move(impl)));
  return e;
}

Result<std::unique_ptr<DsaEngine>> DsaEngine::CreateOnModel(std::shared_ptr<DsaDeviceModel> model,
                                                            int wq,
                                                            const DsaEngineOptions& options) {
  if (model == nullptr) return Status::InvalidArgument("CreateOnModel: the model is null");
  if (Status s = CheckWaitOption(options); !s.ok()) return s;
  // Pieces that fall back to the CPU run its kernels: refused here for an ISA this CPU lacks.
  if (Result<CpuIsa> isa = ChooseCpuIsa(); !isa.ok()) return isa.status();
  const DsaModelConfig& c = model->config();
  if (wq < 0 || static_cast<std::size_t>(wq) >= c.wqs.size()) {
    return Status::NotFound(
        fmt::format("the DSA model has {} WQ(s); WQ {} does not exist", c.wqs.size(), wq));
  }
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  impl->shared = c.wqs[wq].shared;
  impl->wq_size = c.wqs[wq].size;
  impl->max_xfer = c.max_transfer_size;
  impl->max_batch = c.max_batch_size;
  impl->bof_allowed = c.wqs[wq].block_on_fault;
  impl->caps.name = "dsa-model";
  impl->caps.kind = EngineKind::kOffload;
  impl->caps.node = c.numa_node;
  impl->caps.is_model = true;
  impl->description =
      fmt::format("device model, wq{} ({}, {}{})", wq, impl->shared ? "shared" : "dedicated",
                  impl->shared ? "ENQCMD semantics" : "MOVDIR64B semantics",
                  c.instant ? ", instant completion" : "");
  impl->portal = dsa::ModelPortal(model, wq);
  impl->model = std::move(model);
  std::unique_ptr<DsaEngine> e(new DsaEngine(std::move(impl)));
  return e;
}

DsaEngine::DsaEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  Impl& m = *impl_;
  m.counters = &counters();
  set_checks_operations(m.opts.check_mappings);
  m.use_umwait =
      m.opts.completion_wait == DsaCompletionWait::kUmwait ||
      (m.opts.completion_wait == DsaCompletionWait::kAuto && dsa::internal::cpu_has_waitpkg());
  m.umwait_max = dsa::UmwaitMaxCycles();
  m.description += m.use_umwait ? "; completion wait: umwait" : "; completion wait: pause";
  if (m.opts.max_batch != 0) m.max_batch = std::min(m.max_batch, m.opts.max_batch);
  m.kernels = &kernels::KernelsFor(DetectCpuIsa());  // never an ISA this CPU lacks
  // Pieces that run on the CPU report faults as the device would. sigaction() fails only for
  // invalid signals; if it ever did, a fault would end the process as it did before.
  (void)InstallFaultHandler();
  m.caps.ops = kAllOps;  // kDrain included: the engine keeps its own queue
  m.caps.max_op_bytes = kMaxOpBytes;
  m.caps.max_batch = kMaxOpsPerSubmit;
  m.caps.preferred_min_bytes = 16 * 1024;
  m.caps.preferred_chunk_bytes = m.max_xfer;
  Impl* raw = impl_.get();
  m.poller = std::thread([raw] { raw->PollerLoop(); });
  RegisterForkAware(raw);
}

DsaEngine::~DsaEngine() {
  Impl& m = *impl_;
  UnregisterForkAware(&m);
  m.stopping.store(true, std::memory_order_seq_cst);
  m.idle.Wake();
  if (m.poller.joinable()) m.poller.join();  // not in a fork() child that never submitted
  // The device may still write into our records: wait for what it holds, cancel the rest.
  m.draining.store(true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (m.jobs_in_flight.load() != 0 && std::chrono::steady_clock::now() < deadline) {
    if (!m.PollAll()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  std::lock_guard lock(m.list_mu);
  while (Job* j = m.head) {
    m.UnlinkLocked(j);
    // The job is not recycled: the device may still write into its records.
    j->state.FailPart(j->bytes, StatusCode::kFailed,
                      fmt::format("the DSA ({}) did not complete this operation within 5 s of "
                                  "the engine's destruction; its completion records were left "
                                  "allocated",
                                  m.description));
  }
}

const EngineCapabilities& DsaEngine::capabilities() const { return impl_->caps; }
const std::string& DsaEngine::description() const { return impl_->description; }
DsaSubmitPath DsaEngine::submit_path() const { return impl_->portal->path(); }

EngineQueue DsaEngine::queue() const { return {impl_->wq_size, 0}; }

DsaEngineStats DsaEngine::device_stats() const {
  const Impl& m = *impl_;
  DsaEngineStats s;
  s.ops = m.ops_done.load(std::memory_order_relaxed);
  s.bytes = counters().Total(EngineCounters::kBytesCompleted);
  s.descriptors = m.descriptors.load(std::memory_order_relaxed);
  s.batches = m.batches.load(std::memory_order_relaxed);
  s.submit_retries = m.submit_retries.load(std::memory_order_relaxed);
  s.retried_later = m.retried_later.load(std::memory_order_relaxed);
  s.cpu_fallbacks = m.cpu_fallbacks.load(std::memory_order_relaxed);
  s.faults_resumed = m.faults_resumed.load(std::memory_order_relaxed);
  s.faults_on_cpu = m.faults_on_cpu.load(std::memory_order_relaxed);
  s.credit_waits = m.credit_waits.load(std::memory_order_relaxed);
  s.errors = counters().Total(EngineCounters::kPiecesFailed);
  s.dualcast_splits = m.dualcast_splits.load(std::memory_order_relaxed);
  s.monitor_waits = m.monitor_waits.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < s.size_histogram.size(); ++i) {
    s.size_histogram[i] = m.histogram[i].load(std::memory_order_relaxed);
  }
  return s;
}

Status DsaEngine::CheckOperation(const Operation& op) const {
  // Without the check an unmapped range still ends in a clear error: the device reports a
  // page fault there, and the resume finds the page unmapped (TouchFaultPage).
  return impl_->opts.check_mappings ? CheckMapped(op) : Status::Ok();
}

namespace {

// An operation's ranges in the order the prefault reports them: dst, dst2, src, src2.
std::array<GuardedRange, 4> RangesOf(const Operation& op) {
  const bool writes = !IsMaintenance(op.kind);  // a cache flush needs no write permission
  return {{{op.dst, op.size, "destination", writes},
           {op.dst2, op.size, "second destination", writes},
           {op.src, op.size, "source", false},
           {op.src2, op.size, "second source", false}}};
}

// Which operation's range holds a faulting address: 4 * operation + range, or -1.
int LocateOpFault(const void* context, std::uintptr_t a) {
  const auto& ops = *static_cast<const std::span<const Operation>*>(context);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::array<GuardedRange, 4> r = RangesOf(ops[i]);
    for (int k = 0; k < 4; ++k) {
      const auto b = reinterpret_cast<std::uintptr_t>(r[k].begin);
      if (b != 0 && a >= b && a - b < r[k].size) return static_cast<int>(4 * i) + k;
    }
  }
  return -1;
}

// Touches every page the operations read or write, as the device's accesses would fault them
// in, so that the device meets no page fault. A page that cannot be touched (read-only where
// the operation writes, PROT_NONE, unmapped) makes the submission fail, naming it.
Status Prefault(std::span<const Operation> ops) {
  MemoryFault fault;
  const bool done = RunGuarded(&ops, &LocateOpFault, &fault, [&] {
    for (const Operation& op : ops) {
      for (const GuardedRange& r : RangesOf(op)) {
        const auto first = reinterpret_cast<std::uintptr_t>(r.begin);
        for (std::uintptr_t a = first; r.begin != nullptr && a < first + r.size;
             a = (a & ~std::uintptr_t{4095}) + 4096) {
          if (r.write) {
            TouchForWrite(reinterpret_cast<void*>(a));
          } else {
            TouchForRead(reinterpret_cast<const void*>(a));
          }
        }
      }
    }
  });
  if (done) return Status::Ok();
  const std::size_t i = static_cast<std::size_t>(fault.range) / 4;
  const std::array<GuardedRange, 4> ranges = RangesOf(ops[i]);
  fault.range %= 4;
  return FaultError(fmt::format("DSA {} (operation {} of the submission), prefaulting",
                                OpKindName(ops[i].kind), i),
                    fault, ranges);
}

}  // namespace

Status DsaEngine::Enqueue(std::span<const Operation> ops, Submission& submission) {
  Impl& m = *impl_;
  if (m.stopping.load(std::memory_order_relaxed)) {
    return Status(StatusCode::kCancelled, "the DSA engine is being destroyed");
  }
  if (m.reinit_after_fork.load(std::memory_order_acquire)) [[unlikely]] {
    std::lock_guard lock(m.reinit_mu);  // the child may have started threads by now
    if (m.reinit_after_fork.load(std::memory_order_relaxed)) {
      if (Status s = m.ReinitAfterFork(); !s.ok()) return s;
    }
  }
  if (Status s = m.CheckBatch(ops); !s.ok()) return s;
  if (m.opts.prefault) {
    if (Status s = Prefault(ops); !s.ok()) return s;
  }
  if (ops.size() == 1 && ops[0].kind == OpKind::kDrain) return m.EnqueueDrain(submission);
  Job* j = GetJob();
  j->Reset(submission.op(), /*is_drain=*/false);
  Impl::SizeRun sizes;
  for (const Operation& op : ops) m.AddPieces(*j, op, submission, sizes);
  sizes.Flush(m.histogram);
  m.Launch(j, submission);
  return Status::Ok();
}

}  // namespace tierflow
