// SPDX-License-Identifier: Apache-2.0
#include "testing/fault_injection.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tierflow/engine_module.h"

namespace tierflow::testkit {
namespace {

// A fill pattern as it continues `phase` bytes further on (the pattern repeats every 8 bytes).
std::uint64_t RotatePattern(std::uint64_t pattern, std::size_t phase) {
  const unsigned r = static_cast<unsigned>(phase % 8) * 8;
  return r == 0 ? pattern : (pattern >> r) | (pattern << (64 - r));
}

}  // namespace

struct [[gnu::visibility("hidden")]] FaultInjectingEngine::Impl {
  Engine* inner = nullptr;
  FaultPlan plan;
  EngineCapabilities caps;
  EngineCounters* counters = nullptr;
  std::mutex mu;  // the draws, so that a seed gives one sequence
  std::mt19937_64 rng;
  std::uint64_t faults = 0;  // under mu
  std::atomic<std::uint64_t> refused{0}, failed{0}, split{0}, delayed{0};

  struct Choice {
    bool refuse = false, fail = false, split = false, delay = false;
  };

  static bool Overlapping(const Operation& op) {
    const auto d = reinterpret_cast<std::uintptr_t>(op.dst),
               s = reinterpret_cast<std::uintptr_t>(op.src);
    return d < s + op.size && s < d + op.size;
  }
  bool Draw(double p) {
    if (p <= 0 || faults >= plan.max_faults) return false;
    if (std::uniform_real_distribution<double>(0, 1)(rng) >= p) return false;
    ++faults;
    return true;
  }
  // One submission to the inner engine on behalf of a part of an outer operation.
  struct Pending;
  // Submits to the inner engine; its completion (or refusal) reaches Finished.
  void Send(Pending * p);
  static void Finished(Pending * p, const Completion& c);

  Choice Choose(const Operation& op) {
    std::lock_guard lock(mu);
    Choice c;
    c.refuse = Draw(plan.refuse);
    if (c.refuse) return c;
    c.fail = Draw(plan.fail);
    if (c.fail) return c;
    // Not a CRC (one submission computes it) nor an overlapping move (its halves must run in
    // the order the overlap needs, which only the inner engine knows).
    c.split = op.size >= 2 && op.kind != OpKind::kCrc32c && op.kind != OpKind::kDrain &&
              !(op.kind == OpKind::kMove && Overlapping(op)) && Draw(plan.split);
    c.delay = Draw(plan.delay);
    return c;
  }
};

struct FaultInjectingEngine::Impl::Pending {
  Impl* m = nullptr;
  OpRef state;
  Operation op;    // what the inner engine runs
  Operation rest;  // a split's second half, submitted when the first completes
  bool has_rest = false;
  bool delay = false;
  std::uint64_t report_base = 0;  // where `op` starts in the caller's operation
};

void FaultInjectingEngine::Impl::Finished(Pending* p, const Completion& c) {
  Impl& m = *p->m;
  if (p->delay) std::this_thread::sleep_for(std::chrono::microseconds(m.plan.delay_us));
  std::uint64_t diff = OpRef::kNoDifference;
  if (!c.equal) diff = p->report_base + c.first_difference;
  if (p->op.kind == OpKind::kCrc32c && c.status.ok()) {
    // Engine::Start put the seed's share in; the inner engine's CRC holds it too.
    p->state.AddCrc(c.crc ^ Crc32cShift(p->op.crc_seed, p->op.size));
  }
  m.counters->Add(EngineCounters::kPiecesCompleted);
  if (c.status.ok()) {
    m.counters->Add(EngineCounters::kBytesCompleted, c.bytes_completed);
  } else {
    m.counters->Add(EngineCounters::kPiecesFailed);
  }
  if (p->has_rest && c.status.ok()) {
    auto* next =
        new Pending{p->m, p->state, p->rest, {}, false, false, p->report_base + p->op.size};
    m.Send(next);
  } else if (p->has_rest) {  // the first half failed: the second never runs
    m.counters->Add(EngineCounters::kPiecesCancelled);
    m.counters->Sub(EngineCounters::kInFlight);
    p->state.CompletePart(0, StatusCode::kCancelled,
                          "not run: the first half of this split operation failed");
  }
  OpRef state = p->state;
  const Status status = c.status;
  const std::uint64_t bytes = c.status.ok() ? c.bytes_completed : 0;
  delete p;
  m.counters->Sub(EngineCounters::kInFlight);
  if (status.ok()) {
    state.CompletePart(bytes, StatusCode::kOk, nullptr, diff);
  } else {
    state.FailPart(0, status.code(), status.message());
  }
}

void FaultInjectingEngine::Impl::Send(Pending* p) {
  SubmitOptions so;
  so.callback = [p](const Completion& c) { Finished(p, c); };
  Result<Handle> h = inner->Submit(p->op, std::move(so));
  if (h.ok()) return;
  Completion refused;  // the inner engine refused: this part fails with its reason
  refused.status = h.status();
  Finished(p, refused);
}

Result<std::unique_ptr<FaultInjectingEngine>> FaultInjectingEngine::Create(Engine& inner,
                                                                           FaultPlan plan) {
  for (double p : {plan.refuse, plan.fail, plan.split, plan.delay}) {
    if (!(p >= 0 && p <= 1)) {
      return Status::InvalidArgument(fmt::format("fault probability {}: use 0..1", p));
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->inner = &inner;
  impl->plan = plan;
  impl->rng.seed(plan.seed);
  impl->caps = inner.capabilities();
  impl->caps.name = "faulty " + impl->caps.name;
  impl->caps.ops &= ~OpBit(OpKind::kDrain);
  return std::unique_ptr<FaultInjectingEngine>(new FaultInjectingEngine(std::move(impl)));
}

FaultInjectingEngine::FaultInjectingEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->counters = &counters();
}

FaultInjectingEngine::~FaultInjectingEngine() {
  // Completions in flight still reach this engine's state.
  while (counters().Total(EngineCounters::kInFlight) != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

const EngineCapabilities& FaultInjectingEngine::capabilities() const { return impl_->caps; }

bool FaultInjectingEngine::ReadsSourceDirectly(const void* p, std::size_t n) const {
  return impl_->inner->ReadsSourceDirectly(p, n);
}

FaultStats FaultInjectingEngine::fault_stats() const {
  return {impl_->refused.load(), impl_->failed.load(), impl_->split.load(), impl_->delayed.load()};
}

Status FaultInjectingEngine::CheckOperation(const Operation& op) const {
  return impl_->inner->Validate(op);
}

Status FaultInjectingEngine::Enqueue(std::span<const Operation> ops, Submission& submission) {
  Impl& m = *impl_;
  std::vector<Impl::Choice> choices;
  for (const Operation& op : ops) {
    choices.push_back(m.Choose(op));
    if (choices.back().refuse) {
      m.refused.fetch_add(1, std::memory_order_relaxed);
      return Status::Unsupported("injected refusal (FaultInjectingEngine)");
    }
  }
  std::uint64_t offset = submission.offset_base();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Operation& op = ops[i];
    const Impl::Choice& c = choices[i];
    submission.AddParts(1);
    m.counters->Add(EngineCounters::kInFlight);
    auto* p = new Impl::Pending{&m, submission.op(), op, {}, false, c.delay, offset};
    offset += op.size;
    if (c.delay) m.delayed.fetch_add(1, std::memory_order_relaxed);
    if (c.fail) {
      m.failed.fetch_add(1, std::memory_order_relaxed);
      Completion failure;
      failure.status =
          Status::IoError(fmt::format("injected failure (FaultInjectingEngine) of a {} of {} bytes",
                                      OpKindName(op.kind), op.size));
      Impl::Finished(p, failure);
      continue;
    }
    if (c.split) {  // the second half becomes a part of its own once the first completes
      m.split.fetch_add(1, std::memory_order_relaxed);
      const std::size_t half = op.size / 2;
      p->rest = op;
      p->op.size = half;
      p->rest.size = op.size - half;
      for (auto [field, base] :
           {std::pair{&p->rest.dst, op.dst}, std::pair{&p->rest.dst2, op.dst2}}) {
        if (base != nullptr) *field = static_cast<char*>(base) + half;
      }
      if (op.src != nullptr) p->rest.src = static_cast<const char*>(op.src) + half;
      if (op.src2 != nullptr) p->rest.src2 = static_cast<const char*>(op.src2) + half;
      p->rest.pattern = RotatePattern(op.pattern, half);  // fills and pattern compares
      p->has_rest = true;
      submission.AddParts(1);
      m.counters->Add(EngineCounters::kInFlight);
    }
    m.Send(p);
  }
  return Status::Ok();
}

}  // namespace tierflow::testkit
