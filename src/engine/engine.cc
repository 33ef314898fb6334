// SPDX-License-Identifier: Apache-2.0
#include "tierflow/engine.h"

#include <vector>

#include <fmt/format.h>

#include "common/crc32c.h"
#include "common/hot_path.h"
#include "common/pattern.h"
#include "engine/op_state.h"
#include "engine/overlap.h"
#include "tierflow/engine_module.h"

namespace tierflow {
namespace {

// x86-64 and arm64 user space with 4-level page tables ends below 2^47; with 5-level paging it
// reaches 2^56. Addresses at or above that, or in the first page, can never be valid buffers.
constexpr std::uintptr_t kUserSpaceEnd = std::uintptr_t{1} << 56;
constexpr std::uintptr_t kFirstValid = 4096;

Status CheckRange(const char* what, const void* p, std::size_t size) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  if (p == nullptr) return Status::InvalidArgument(fmt::format("{} is null", what));
  if (a < kFirstValid) {
    return Status::InvalidArgument(
        fmt::format("{} = {} lies in the first page: not a valid buffer", what, p));
  }
  if (a >= kUserSpaceEnd || size > kUserSpaceEnd - a) {
    return Status::InvalidArgument(
        fmt::format("{} range [{}, +{}) leaves user space (or wraps around)", what, p, size));
  }
  return Status::Ok();
}

bool Overlap(const void* a, const void* b, std::size_t n) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + n && y < x + n;
}

bool InRange(const void* p, std::size_t size) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  return a >= kFirstValid && a < kUserSpaceEnd && size <= kUserSpaceEnd - a;
}

// The checks of Validate as one predicate, without building a Status: the common case of a
// well-formed operation should cost a few compares (batches validate every member).
bool PlainlyValid(const Operation& op, const EngineCapabilities& caps) {
  if (static_cast<unsigned>(op.kind) > static_cast<unsigned>(kLastOpKind) ||
      (caps.ops & OpBit(op.kind)) == 0 || op.size == 0 || op.size > caps.max_op_bytes) {
    return false;
  }
  switch (op.kind) {
    case OpKind::kCopy:
      return InRange(op.dst, op.size) && InRange(op.src, op.size) && !detail::DstSrcOverlap(op);
    case OpKind::kMove:
      return InRange(op.dst, op.size) && InRange(op.src, op.size);
    case OpKind::kFill:
    case OpKind::kWriteBack:
    case OpKind::kInvalidate:
    case OpKind::kWriteBackInvalidate:
      return InRange(op.dst, op.size);
    case OpKind::kCompare:
      return InRange(op.src, op.size) && InRange(op.src2, op.size);
    case OpKind::kComparePattern:
    case OpKind::kCrc32c:
      return InRange(op.src, op.size);
    case OpKind::kDualcast:
      return InRange(op.dst, op.size) && InRange(op.dst2, op.size) && InRange(op.src, op.size) &&
             !Overlap(op.dst, op.src, op.size) && !Overlap(op.dst2, op.src, op.size) &&
             !Overlap(op.dst, op.dst2, op.size);
    case OpKind::kDrain:
      return false;  // size 0: checked on the slow path
  }
  return false;
}

}  // namespace

Engine::Engine() : counters_(std::make_unique<EngineCounters>()) {}
Engine::~Engine() = default;

EngineQueue Engine::queue() const { return {}; }

EngineStats Engine::stats() const {
  const EngineCounters& c = *counters_;
  const EngineQueue q = queue();
  EngineStats s;
  s.queue_capacity = q.capacity;
  s.queued = q.queued;
  s.in_flight = c.Total(EngineCounters::kInFlight);
  s.ops_submitted = c.Total(EngineCounters::kOpsSubmitted);
  s.pieces_completed = c.Total(EngineCounters::kPiecesCompleted);
  s.bytes_completed = c.Total(EngineCounters::kBytesCompleted);
  s.ops_inline = c.Total(EngineCounters::kOpsInline);
  s.pieces_by_waiters = c.Total(EngineCounters::kPiecesByWaiters);
  s.pieces_failed = c.Total(EngineCounters::kPiecesFailed);
  s.pieces_cancelled = c.Total(EngineCounters::kPiecesCancelled);
  s.callback_errors = c.callback_errors.load(std::memory_order_relaxed);
  return s;
}

namespace {

// The ranges of an operation whose kind and size are valid: null, wrap, overlap.
Status CheckRanges(const Operation& op) {
  Status s;
  auto overlap = [&op](const char* a, const void* pa, const char* b, const void* pb) {
    if (!Overlap(pa, pb, op.size)) return Status::Ok();
    auto x = reinterpret_cast<std::uintptr_t>(pa);
    auto y = reinterpret_cast<std::uintptr_t>(pb);
    std::uintptr_t bytes = std::min(x, y) + op.size - std::max(x, y);
    return Status::InvalidArgument(
        fmt::format("{} {} and {} overlap by {} bytes; {}", OpKindName(op.kind), a, b, bytes,
                    op.kind == OpKind::kCopy ? "use a move (OpKind::kMove) for overlapping ranges"
                                             : "give it ranges that do not overlap"));
  };
  switch (op.kind) {
    case OpKind::kCopy:
    case OpKind::kMove:
      if (!(s = CheckRange("dst", op.dst, op.size)).ok()) return s;
      if (!(s = CheckRange("src", op.src, op.size)).ok()) return s;
      if (op.kind == OpKind::kCopy &&
          !(s = overlap("source", op.src, "destination", op.dst)).ok()) {
        return s;
      }
      break;
    case OpKind::kFill:
    case OpKind::kWriteBack:
    case OpKind::kInvalidate:
    case OpKind::kWriteBackInvalidate:
      if (!(s = CheckRange("dst", op.dst, op.size)).ok()) return s;
      break;
    case OpKind::kCompare:
      if (!(s = CheckRange("src", op.src, op.size)).ok()) return s;
      if (!(s = CheckRange("src2", op.src2, op.size)).ok()) return s;
      break;
    case OpKind::kComparePattern:
    case OpKind::kCrc32c:
      if (!(s = CheckRange("src", op.src, op.size)).ok()) return s;
      break;
    case OpKind::kDualcast:
      if (!(s = CheckRange("dst", op.dst, op.size)).ok()) return s;
      if (!(s = CheckRange("dst2", op.dst2, op.size)).ok()) return s;
      if (!(s = CheckRange("src", op.src, op.size)).ok()) return s;
      if (!(s = overlap("dst", op.dst, "src", op.src)).ok()) return s;
      if (!(s = overlap("dst2", op.dst2, "src", op.src)).ok()) return s;
      if (!(s = overlap("dst", op.dst, "dst2", op.dst2)).ok()) return s;
      break;
    case OpKind::kDrain:
      break;
  }
  return Status::Ok();
}

// The checks every engine applies, with the error that names the problem: the fast predicate
// first, then, only when it fails, the search for what is wrong.
Status CommonChecks(const Operation& op, const EngineCapabilities& caps) {
  if (PlainlyValid(op, caps)) return Status::Ok();
  if (static_cast<unsigned>(op.kind) > static_cast<unsigned>(kLastOpKind)) {
    return Status::InvalidArgument(
        fmt::format("unknown operation kind {}", static_cast<int>(op.kind)));
  }
  if ((caps.ops & OpBit(op.kind)) == 0) {
    if (op.kind == OpKind::kDrain) {
      return Status::Unsupported(fmt::format(
          "engine '{}' keeps no queue of its own to drain: wait on the handles of the earlier "
          "operations instead",
          caps.name));
    }
    return Status::Unsupported(
        fmt::format("engine '{}' does not support {}", caps.name, OpKindName(op.kind)));
  }
  if (op.kind == OpKind::kDrain) {
    if (op.size != 0 || op.dst != nullptr || op.src != nullptr || op.src2 != nullptr ||
        op.dst2 != nullptr) {
      return Status::InvalidArgument("drain takes no buffers: use Operation::Drain()");
    }
    return Status::Ok();
  }
  if (op.size == 0) {
    return Status::InvalidArgument(fmt::format(
        "{} of size 0: nothing to do; skip the call for empty ranges", OpKindName(op.kind)));
  }
  if (op.size > caps.max_op_bytes) {
    return Status::InvalidArgument(
        fmt::format("{} of {} bytes exceeds engine '{}' limit of {} bytes; split it",
                    OpKindName(op.kind), op.size, caps.name, caps.max_op_bytes));
  }
  return CheckRanges(op);
}

}  // namespace

Status Engine::CheckOperation(const Operation&) const { return Status::Ok(); }

Status Engine::Validate(const Operation& op) const {
  if (Status s = CommonChecks(op, capabilities()); !s.ok()) return s;
  return checks_operations_ ? CheckOperation(op) : Status::Ok();
}

TIERFLOW_HOT_PATH Result<Handle> Engine::Start(std::span<const Operation> ops,
                                               SubmitOptions& options) {
  detail::OpState* state = detail::AcquireOpState();
  if (options.callback) state->callback = std::move(options.callback);  // a state's is empty
  state->callback_errors = &counters_->callback_errors;
  for (const Operation& op : ops) {
    // The seed's share of the CRC; the engine XORs in the data's (see Crc32cShift).
    if (op.kind == OpKind::kCrc32c) state->crc.store(Crc32cShift(op.crc_seed, op.size));
  }
  Submission submission(OpRef(state), &state->parts, 0, /*shared=*/false);
  if (Status s = Enqueue(ops, submission); !s.ok()) {
    state->callback.Reset();
    detail::ReleaseOpState(state);  // the in-flight reference
    detail::ReleaseOpState(state);  // the handle's
    return s;
  }
  counters_->Add(EngineCounters::kOpsSubmitted, ops.size());
  // Drop the submission guard, unless the engine handed it to its parts (AddFinalParts):
  // then they may all have completed already.
  if (!submission.guard_given_) detail::FinishSubmission(state);
  return Handle(state);
}

TIERFLOW_HOT_PATH Result<Handle> Engine::Submit(const Operation& op, SubmitOptions options) {
  // The common case, a well-formed operation to an engine with nothing more to check, builds
  // no Status.
  if (checks_operations_ || !PlainlyValid(op, capabilities())) {
    if (Status s = Validate(op); !s.ok()) return s;
  }
  return Start({&op, 1}, options);
}

Result<Handle> Engine::SubmitBatch(std::span<const Operation> ops, SubmitOptions options) {
  const EngineCapabilities& caps = capabilities();
  if (ops.empty()) return Status::InvalidArgument("empty batch: submit at least one operation");
  if (ops.size() > caps.max_batch) {
    return Status::InvalidArgument(
        fmt::format("batch of {} operations exceeds engine '{}' limit of {}; "
                    "split it into several batches",
                    ops.size(), caps.name, caps.max_batch));
  }
  int crcs = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (checks_operations_ || !PlainlyValid(ops[i], caps)) {
      if (Status s = Validate(ops[i]); !s.ok()) {
        return Status(s.code(), fmt::format("batch member {}: {}", i, s.message()));
      }
    }
    if (ops[i].kind == OpKind::kDrain && ops.size() > 1) {
      return Status::InvalidArgument(fmt::format(
          "batch member {}: a drain waits for whole earlier submissions; submit it on its own", i));
    }
    if (ops[i].kind == OpKind::kCrc32c && ++crcs > 1) {
      return Status::InvalidArgument(fmt::format(
          "batch member {}: a batch's handle reports one CRC; submit each CRC-32C on its own or "
          "in its own batch",
          i));
    }
  }
  return Start(ops, options);
}

// --- one operation over several engines ---------------------------------------------------

namespace {

Status CheckSplittable(const Operation& op) {
  if (op.kind == OpKind::kCrc32c || op.kind == OpKind::kDrain) {
    return Status::InvalidArgument(fmt::format(
        "a {} cannot be split over engines; submit it to one engine", OpKindName(op.kind)));
  }
  if (op.kind == OpKind::kMove && Overlap(op.dst, op.src, op.size)) {
    return Status::InvalidArgument(
        "an overlapping move cannot be split over engines; submit it to one");
  }
  return Status::Ok();
}

Status CheckTiling(const Operation& op, std::span<const EnginePart> parts) {
  if (parts.empty()) return Status::InvalidArgument("no parts to submit: plan the copy first");
  std::size_t expect = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const EnginePart& p = parts[i];
    if (p.engine == nullptr || p.offset != expect || p.size == 0) {
      return Status::InvalidArgument(fmt::format(
          "part {} (offset {}, size {}) does not continue the previous parts at offset {}", i,
          p.offset, p.size, expect));
    }
    expect += p.size;
  }
  if (expect != op.size) {
    return Status::InvalidArgument(
        fmt::format("parts cover {} bytes, the operation has {}", expect, op.size));
  }
  return Status::Ok();
}

// Part `part` of `op`: its ranges moved by the part's offset, a pattern rotated to match.
Operation PartOf(const Operation& op, const EnginePart& part) {
  Operation o = op;
  o.size = part.size;
  if (o.dst != nullptr) o.dst = static_cast<char*>(o.dst) + part.offset;
  if (o.src != nullptr) o.src = static_cast<const char*>(o.src) + part.offset;
  if (o.src2 != nullptr) o.src2 = static_cast<const char*>(o.src2) + part.offset;
  if (o.dst2 != nullptr) o.dst2 = static_cast<char*>(o.dst2) + part.offset;
  if (o.kind == OpKind::kFill || o.kind == OpKind::kComparePattern) {
    o.pattern = RotatePattern(op.pattern, part.offset);
  }
  return o;
}

}  // namespace

Result<Handle> Engine::SubmitParts(const Operation& op, std::span<const EnginePart> parts,
                                   SubmitOptions options) {
  if (Status s = CheckSplittable(op); !s.ok()) return s;
  if (Status s = CheckTiling(op, parts); !s.ok()) return s;
  std::vector<Operation> sub;
  sub.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    sub.push_back(PartOf(op, parts[i]));
    if (Status s = parts[i].engine->Validate(sub.back()); !s.ok()) {
      return Status(s.code(), fmt::format("part {}: {}", i, s.message()));
    }
  }
  detail::OpState* state = detail::AcquireOpState();
  state->callback = std::move(options.callback);
  state->callback_errors = &parts.front().engine->counters_->callback_errors;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Engine& e = *parts[i].engine;
    Submission submission(OpRef(state), &state->parts, parts[i].offset, /*shared=*/true);
    if (Status s = e.Enqueue({&sub[i], 1}, submission); !s.ok()) {
      // Parts already started run to completion; the handle reports this failure.
      detail::FailPart(state, 0, s.code(), fmt::format("part {}: {}", i, s.message()));
      return Handle(state);
    }
    e.counters_->Add(EngineCounters::kOpsSubmitted);
  }
  detail::FinishSubmission(state);
  return Handle(state);
}

}  // namespace tierflow
