// SPDX-License-Identifier: Apache-2.0
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipes/pipe_core.h"
#include "pipes/runtime_impl.h"
#include "pipes/tiered.h"
#include "tierflow/size.h"

namespace tierflow {

using Clock = std::chrono::steady_clock;

namespace {

bool NeedsSlots(const detail::PipeRoutes& bp, bool staged_only) {
  for (const detail::Route& r : bp.routes) {
    if (r.mechanisms.size() > 1 || (!staged_only && r.may_bounce)) return true;
  }
  return false;
}

int SlotNode(const detail::PipeRoutes& bp) {
  for (const detail::Route& r : bp.routes) {
    if (r.staging_node >= 0) return r.staging_node;
  }
  return bp.routes.front().bounce_node;
}

}  // namespace

// The staging memory: slot_bytes for each of the queue_depth slots.
Status Pipe::Core::AllocateStaging() {
  const std::size_t need = slot_bytes * bp.plan.queue_depth;
  if (options.staging.valid()) {
    if (options.staging.capacity() < need) {
      return Status::InvalidArgument(
          fmt::format("staging {} holds {} bytes; this pipe needs {} (queue depth {} x chunk {} + "
                      "alignment): declare more, or lower queue_depth or chunk_bytes",
                      options.staging.name(), options.staging.capacity(), need, bp.plan.queue_depth,
                      bp.plan.chunk_bytes));
    }
    staging = options.staging;
    return Status::Ok();
  }
  Result<const NumaNode*> node = rt->topology.FindNode(SlotNode(bp));
  if (!node.ok()) return node.status();
  Result<Locator> s = rt->MakeMemory(**node, need, LocatorKind::kStaging, "staging:");
  if (!s.ok()) return s.status();
  staging = *s;
  return Status::Ok();
}

// The pair of sockets behind fd(): ready_fd's send buffer as small as the kernel allows, so that
// a few datagrams fill it (the pipe is full) and reading them at signal_fd empties it.
Status Pipe::Core::OpenReadiness() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::IoError(std::string("cannot create the pipe's readiness descriptor: ") +
                           std::strerror(errno));
  }
  ready_fd = sv[0];
  signal_fd = sv[1];
  const int smallest = 1;  // the kernel raises it to its minimum
  if (setsockopt(ready_fd, SOL_SOCKET, SO_SNDBUF, &smallest, sizeof smallest) != 0) {
    return Status::IoError(std::string("cannot size the pipe's readiness descriptor: ") +
                           std::strerror(errno));
  }
  return Status::Ok();
}

// Staged plans get their staging memory now; pipes that may only bounce misaligned chunks get
// it when the first one does (most never do). Then the readiness descriptor and the pacer.
Status Pipe::Core::Init() {
  engine = std::make_unique<PipeEngine>(this);
  if (Status s = OpenReadiness(); !s.ok()) return s;
  const unsigned depth = bp.plan.queue_depth;
  if (NeedsSlots(bp, false)) {
    slot_bytes = (bp.plan.chunk_bytes + 2 * 4096 - 1) / 4096 * 4096;
    for (unsigned i = 0; i < depth; ++i) free_slots.push_back(static_cast<int>(depth - 1 - i));
  }
  if (NeedsSlots(bp, true)) {
    if (Status s = AllocateStaging(); !s.ok()) return s;
    staging_ready.store(true);
    bp.plan.staging_bytes = slot_bytes * depth;
  }
  if (options.bandwidth_cap != 0) pacer = std::thread([this] { PacerLoop(); });
  return Status::Ok();
}

Result<Pipe> PipeRuntime::Connect(const Locator& from, const Locator& to,
                                  const PipeOptions& options) {
  Result<detail::PipeRoutes> bp = detail::PlanPipe(*impl_, from, to, options);
  if (!bp.ok()) return bp.status();
  auto core = std::make_shared<Pipe::Core>();
  core->rt = impl_.get();
  core->from = from;
  core->to = to;
  core->options = options;
  core->bp = std::move(*bp);
  if (Status s = core->Init(); !s.ok()) return s;
  return Pipe(std::move(core));
}

Result<PipePlan> PipeRuntime::Plan(const Locator& from, const Locator& to,
                                   const PipeOptions& options) const {
  Result<detail::PipeRoutes> bp = detail::PlanPipe(*impl_, from, to, options);
  if (!bp.ok()) return bp.status();
  return bp->plan;
}

Result<Handle> Pipe::Core::Submit(std::uint64_t so, std::uint64_t d, std::uint64_t len,
                                  CompletionCallback cb, bool posted, std::uint64_t tag) {
  if (len == 0) return Status::InvalidArgument("a transfer of 0 bytes: give a length above 0");
  if (so > from.capacity() || len > from.capacity() - so) {
    return Status::InvalidArgument(
        fmt::format("transfer [{}, +{}) is beyond the source {} ({} bytes)", so, len, from.name(),
                    from.capacity()));
  }
  if (d > to.capacity() || len > to.capacity() - d) {
    return Status::InvalidArgument(
        fmt::format("transfer [{}, +{}) is beyond the destination {} ({} "
                    "bytes)",
                    d, len, to.name(), to.capacity()));
  }
  t_posted_set(posted, tag);
  SubmitOptions o;
  o.callback = std::move(cb);
  auto* dst = reinterpret_cast<void*>(PipeEngine::kDstBase + d);
  auto* src = reinterpret_cast<const void*>(PipeEngine::kSrcBase + so);
  Result<Handle> h = engine->Submit(Operation::Copy(dst, src, len), std::move(o));
  t_posted_set(false, 0);
  return h;
}

// --- the public face -------------------------------------------------------------------------

namespace {
Status NoPipe() {
  return Status::InvalidArgument("this Pipe refers to no pipe: PipeRuntime::Connect");
}
const PipePlan kNoPlan;
const Locator kNoLocator;
}  // namespace

Status Pipe::Transfer(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length) {
  Result<Handle> h = Submit(src_offset, dst_offset, length);
  if (!h.ok()) return h.status();
  return h->Wait();
}

Result<Handle> Pipe::Submit(std::uint64_t src_offset, std::uint64_t dst_offset,
                            std::uint64_t length, CompletionCallback callback) {
  if (!core_) return NoPipe();
  return core_->Submit(src_offset, dst_offset, length, std::move(callback), false, 0);
}

Status Pipe::Post(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length,
                  std::uint64_t tag) {
  if (!core_) return NoPipe();
  return core_->Submit(src_offset, dst_offset, length, {}, true, tag).status();
}

std::size_t Pipe::Reap(std::span<PipeCompletion> out) {
  if (!core_) return 0;
  Core& c = *core_;
  std::lock_guard lock(c.mu);
  std::size_t n = 0;
  while (n < out.size() && !c.completions.empty()) {
    out[n++] = std::move(c.completions.front());
    c.completions.pop_front();
  }
  c.posted_open -= n;
  if (c.completions.empty()) {  // no longer readable: take the signal back
    char byte;
    while (recv(c.ready_fd, &byte, 1, 0) == 1) {
    }
  }
  return n;
}

Result<bool> Pipe::TryPost(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length,
                           std::uint64_t tag) {
  if (!core_) return NoPipe();
  {
    std::lock_guard lock(core_->mu);
    if (!core_->queue.empty()) return false;
  }
  if (Status s = Post(src_offset, dst_offset, length, tag); !s.ok()) return s;
  return true;
}

int Pipe::fd() const { return core_ ? core_->ready_fd : -1; }

std::size_t Pipe::posted() const {
  if (!core_) return 0;
  std::lock_guard lock(core_->mu);
  return core_->posted_open;
}

Status Pipe::Drain() {
  if (!core_) return NoPipe();
  std::unique_lock lock(core_->mu);
  core_->idle_cv.wait(lock, [this] { return core_->settled == core_->transfers; });
  return std::exchange(core_->drain_status, Status::Ok());
}

const PipePlan& Pipe::plan() const { return core_ ? core_->bp.plan : kNoPlan; }
const Locator& Pipe::from() const { return core_ ? core_->from : kNoLocator; }
const Locator& Pipe::to() const { return core_ ? core_->to : kNoLocator; }

PipeStats Pipe::stats() const {
  PipeStats s;
  if (!core_) return s;
  Core& c = *core_;
  std::lock_guard lock(c.mu);
  s.transfers = c.transfers;
  s.transfers_done = c.transfers_done;
  s.bytes = c.bytes;
  s.chunks = c.chunks;
  s.in_flight = c.in_flight;
  s.queued = c.queue.size();
  s.queue_depth = c.bp.plan.queue_depth;
  double busy = c.busy_seconds;
  if (c.active_transfers > 0)
    busy += std::chrono::duration<double>(Clock::now() - c.busy_since).count();
  s.achieved_gbps = busy > 0 ? static_cast<double>(c.bytes) / busy / 1e9 : 0;
  s.expected_gbps = c.bp.plan.expected_gbps;
  s.fallbacks = c.fallbacks.load(std::memory_order_relaxed);
  s.syncs = c.syncs.load(std::memory_order_relaxed);
  s.errors = c.errors;
  s.last_error = c.last_error;
  for (const Locator* l : {&c.from, &c.to}) {
    if (const detail::TieredArea* area = detail::LocatorAccess::Get(*l)->tiered.get()) {
      s.stages = area->State();
      s.switches = area->Switches();
    }
  }
  return s;
}

std::string PipeStats::ToJson() const {
  nlohmann::json j{{"transfers", transfers},
                   {"transfers_done", transfers_done},
                   {"bytes", bytes},
                   {"chunks", chunks},
                   {"in_flight", in_flight},
                   {"queued", queued},
                   {"queue_depth", queue_depth},
                   {"achieved_gbps", achieved_gbps},
                   {"expected_gbps", expected_gbps},
                   {"fallbacks", fallbacks},
                   {"syncs", syncs},
                   {"errors", errors},
                   {"last_error", last_error}};
  if (!stages.empty()) {
    nlohmann::json st = nlohmann::json::array();
    for (const TieredStage& t : stages) {
      st.push_back({{"stage", t.stage},
                    {"bytes", t.bytes},
                    {"limit", t.limit},
                    {"occupancy", t.occupancy},
                    {"modelled", t.modelled},
                    {"state", t.state}});
    }
    j["stages"] = st;
    j["switches"] = switches;
  }
  return j.dump();
}

}  // namespace tierflow
