// SPDX-License-Identifier: Apache-2.0
#include "pipes/pipe_core.h"

#include "pipes/tiered.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace tierflow {

using detail::Chunk;
using detail::Route;
using Clock = std::chrono::steady_clock;

namespace {

// Set by Core::Submit for the Enqueue it calls on the same thread: whether the transfer is
// posted (Post/Reap) and its tag.
thread_local bool t_posted = false;
thread_local std::uint64_t t_tag = 0;

// Pump re-entered on the same thread (an engine completed a chunk inline): the outer call loops.
thread_local Pipe::Core* t_pumping = nullptr;
thread_local bool t_pump_again = false;

// Where byte `offset` of a locator is: the leaf holding it (a spill member, a tiered area's
// stage, or the locator), its address, and the bytes from there on in that leaf (at most
// `len`). A tiered area places the extent first when it is written.
struct Spot {
  std::size_t leaf = 0;
  std::byte* address = nullptr;
  std::uint64_t len = 0;
};

Result<Spot> SpotOf(const Locator& l, const std::vector<const detail::LocatorImpl*>& leaves,
                    std::uint64_t offset, std::uint64_t len, bool write) {
  if (detail::TieredArea* area = detail::LocatorAccess::Get(l)->tiered.get()) {
    Result<detail::TieredArea::Spot> s =
        write ? area->ForWrite(offset, len) : area->ForRead(offset, len);
    if (!s.ok()) return s.status();
    return Spot{s->stage, s->address, s->len};
  }
  std::size_t i = 0;
  while (i + 1 < leaves.size() && offset >= leaves[i]->capacity) offset -= leaves[i++]->capacity;
  return Spot{i, leaves[i]->At(offset), std::min(len, leaves[i]->capacity - offset)};
}

}  // namespace

void t_posted_set(bool posted, std::uint64_t tag) {
  t_posted = posted;
  t_tag = tag;
}

PipeEngine::PipeEngine(Pipe::Core* core) : core_(core) {
  caps_.name = "pipe";
  caps_.kind = EngineKind::kStorage;  // moves between its locators, never planned for memory
  caps_.ops = OpBit(OpKind::kCopy);
  caps_.max_op_bytes = kSrcBase;
  caps_.max_batch = 1;
  caps_.copies_memory = false;
}

Status PipeEngine::Enqueue(std::span<const Operation> ops, Submission& submission) {
  const Operation& op = ops.front();
  auto* t = new detail::Transfer;
  t->op = submission.op();
  t->posted = t_posted;
  t->tag = t_tag;
  std::vector<Chunk*> chunks;
  const std::uint64_t so = reinterpret_cast<std::uintptr_t>(op.src) - kSrcBase;
  const std::uint64_t d = reinterpret_cast<std::uintptr_t>(op.dst) - kDstBase;
  if (Status s = core_->Split(t, so, d, op.size, chunks); !s.ok()) {
    delete t;
    return s;
  }
  t->parts = static_cast<std::uint32_t>(chunks.size());
  t->chunks_left.store(t->parts);
  submission.AddParts(t->parts);
  {
    std::lock_guard lock(core_->mu);
    ++core_->transfers;
    if (core_->active_transfers++ == 0) core_->busy_since = Clock::now();
    if (t->posted) {
      t->seq = core_->next_post_seq++;
      ++core_->posted_open;
    }
  }
  core_->Enqueue(chunks);
  return Status::Ok();
}

Status Pipe::Core::Split(detail::Transfer* t, std::uint64_t so, std::uint64_t d, std::uint64_t len,
                         std::vector<Chunk*>& out) const {
  const auto srcs = detail::Leaves(from);
  const auto dsts = detail::Leaves(to);
  const std::size_t chunk = bp.plan.chunk_bytes;
  for (std::uint64_t pos = 0; pos < len;) {
    const std::uint64_t want = std::min<std::uint64_t>(len - pos, chunk);
    Result<Spot> s = SpotOf(from, srcs, so + pos, want, false);
    Result<Spot> dd = s.ok() ? SpotOf(to, dsts, d + pos, s->len, true) : s;
    if (!dd.ok()) {
      for (Chunk* c : out) delete c;
      out.clear();
      return dd.status();
    }
    auto* c = new Chunk;
    c->core = const_cast<Pipe::Core*>(this);
    c->transfer = t;
    c->route = &bp.routes[s->leaf * dsts.size() + dd->leaf];
    c->src = s->address;
    c->dst = dd->address;
    c->len = std::min(s->len, dd->len);
    out.push_back(c);
    pos += c->len;
  }
  return Status::Ok();
}

void Pipe::Core::Enqueue(std::vector<Chunk*>& chunks) {
  {
    std::lock_guard lock(mu);
    for (Chunk* c : chunks) queue.push_back(c);
  }
  Pump();
  // Full only if chunks still wait once those that fit have started: a transfer that fits the
  // free slots never makes the descriptor flicker unwritable.
  std::lock_guard lock(mu);
  SignalRoom();
}

namespace {

// Whether a direct file hop must bounce: file offset and memory disagree on O_DIRECT alignment.
bool NeedsBounce(const Route& r, const Chunk& c) {
  if (!r.may_bounce) return false;
  const detail::LocatorImpl& file = r.src->is_file() ? *r.src : *r.dst;
  const std::size_t a = file.direct_alignment;
  const auto f = reinterpret_cast<std::uintptr_t>(r.src->is_file() ? c.src : c.dst);
  const auto m = reinterpret_cast<std::uintptr_t>(r.src->is_file() ? c.dst : c.src);
  return c.len >= a && f % a != m % a;
}

}  // namespace

// Takes the next chunk that may start now (queue depth, bandwidth cap), or nullptr.
static Chunk* TakeStartable(Pipe::Core& p) {
  std::lock_guard lock(p.mu);
  if (p.queue.empty() || p.in_flight >= p.bp.plan.queue_depth) return nullptr;
  Chunk* c = p.queue.front();
  if (p.options.bandwidth_cap != 0) {
    const auto now = Clock::now();
    if (now < p.next_allowed) {
      p.pacer_wake = p.next_allowed;
      p.pacer_cv.notify_one();
      return nullptr;
    }
    const double secs = static_cast<double>(c->len) / static_cast<double>(p.options.bandwidth_cap);
    p.next_allowed = std::max(p.next_allowed, now) + std::chrono::duration_cast<Clock::duration>(
                                                         std::chrono::duration<double>(secs));
  }
  p.queue.pop_front();
  if (p.queue.empty()) p.SignalRoom();
  c->bounce = NeedsBounce(*c->route, *c);
  if (c->bounce || c->route->mechanisms.size() > 1) {
    c->slot = p.free_slots.back();
    p.free_slots.pop_back();
  }
  ++p.in_flight;
  ++p.chunks;
  return c;
}

void Pipe::Core::Pump() {
  if (t_pumping == this) {
    t_pump_again = true;
    return;
  }
  Pipe::Core* saved = t_pumping;
  const bool saved_again = t_pump_again;
  t_pumping = this;
  do {
    t_pump_again = false;
    while (Chunk* c = TakeStartable(*this)) StartChunk(c);
  } while (t_pump_again);
  t_pumping = saved;
  t_pump_again = saved_again;
}

void Pipe::Core::StartChunk(Chunk* c) {
  const Route& r = *c->route;
  c->mechanisms = r.mechanisms;
  c->engines = r.engines;
  if (c->slot >= 0 && !staging_ready.load(std::memory_order_acquire)) {
    std::lock_guard lock(staging_mu);
    Status s = staging_ready.load() ? Status::Ok() : AllocateStaging();
    if (!s.ok()) return ChunkDone(c, s);
    staging_ready.store(true, std::memory_order_release);
  }
  if (c->slot >= 0) {
    std::byte* slot = staging.data() + static_cast<std::size_t>(c->slot) * slot_bytes;
    const std::byte* file_side = r.src->is_file() ? c->src : c->dst;
    c->mid = slot + reinterpret_cast<std::uintptr_t>(file_side) % 4096;
  }
  if (c->bounce) {
    fallbacks.fetch_add(1, std::memory_order_relaxed);
    Engine* cpu = rt->cpu;
    if (r.src->is_file()) {
      c->mechanisms = {Mechanism::kUringRead, Mechanism::kCpu};
      c->engines = {r.engines[0], cpu};
    } else {
      c->mechanisms = {Mechanism::kCpu, Mechanism::kUringWrite};
      c->engines = {cpu, r.engines[0]};
    }
  }
  SubmitHop(c);
}

void Pipe::Core::SubmitHop(Chunk* c) {
  const bool two = c->engines.size() > 1;
  Operation op = c->hop == 0 ? Operation::Copy(two ? c->mid : c->dst, c->src, c->len)
                             : Operation::Copy(c->dst, c->mid, c->len);
  SubmitOptions so;
  so.callback = [c](const Completion& done) { c->core->HopDone(c, done); };
  Result<Handle> h = c->engines[c->hop]->Submit(op, std::move(so));
  if (!h.ok()) ChunkDone(c, h.status());
}

void Pipe::Core::HopDone(Chunk* c, const Completion& done) {
  if (!done.status.ok()) return ChunkDone(c, done.status);
  if (++c->hop < c->engines.size()) return SubmitHop(c);
  ChunkDone(c, Status::Ok());
}

namespace {

// Marks a completion path as running in the core for its lifetime (see active_paths).
class PathGuard {
 public:
  explicit PathGuard(Pipe::Core& core) : core_(core) {
    std::lock_guard lock(core_.mu);
    ++core_.active_paths;
  }
  ~PathGuard() {
    std::lock_guard lock(core_.mu);
    if (--core_.active_paths == 0) core_.idle_cv.notify_all();
  }
  PathGuard(const PathGuard&) = delete;
  PathGuard& operator=(const PathGuard&) = delete;

 private:
  Pipe::Core& core_;
};

}  // namespace

void Pipe::Core::ChunkDone(Chunk* c, Status status) {
  PathGuard guard(*this);
  detail::Transfer* t = c->transfer;
  const std::uint64_t len = c->len;
  {
    std::lock_guard lock(mu);
    if (c->slot >= 0) free_slots.push_back(c->slot);
    --in_flight;
  }
  delete c;
  if (!status.ok()) {
    std::lock_guard lock(t->mu);
    if (t->status.ok()) t->status = status;
  } else {
    t->bytes.fetch_add(len, std::memory_order_relaxed);
  }
  OpRef op = t->op;
  const bool last = t->chunks_left.fetch_sub(1) == 1;
  if (last && options.sync_writes && status.ok() && SyncDestination(t, len)) return Pump();
  if (last) TransferDone(t);
  if (status.ok()) {
    op.CompletePart(len);
  } else {
    op.FailPart(0, status.code(), status.message());
  }
  if (last) Settled();
  Pump();
}

// fdatasync of the destination's files before the transfer completes (PipeOptions::sync_writes).
// False when there is nothing to sync or the sync could not be submitted (then recorded).
bool Pipe::Core::SyncDestination(detail::Transfer* t, std::uint64_t len) {
  std::vector<Operation> ops;
  for (const detail::LocatorImpl* l : detail::Leaves(to)) {
    if (l->is_file()) ops.push_back(Operation::WriteBack(l->window.base(), 1));
  }
  if (ops.empty()) return false;
  syncs.fetch_add(ops.size(), std::memory_order_relaxed);
  SubmitOptions so;
  so.callback = [this, t, len](const Completion& done) {
    PathGuard guard(*this);
    if (!done.status.ok()) {
      std::lock_guard lock(t->mu);
      t->status = done.status;
    }
    OpRef op = t->op;
    TransferDone(t);
    if (done.status.ok()) {
      op.CompletePart(len);
    } else {
      op.FailPart(0, done.status.code(), done.status.message());
    }
    Settled();
  };
  Result<Handle> h = rt->uring->SubmitBatch(ops, std::move(so));
  if (h.ok()) return true;
  std::lock_guard lock(t->mu);
  t->status = h.status();
  return false;
}

void Pipe::Core::Settled() {
  {
    std::lock_guard lock(mu);
    ++settled;
  }
  idle_cv.notify_all();
}

void Pipe::Core::TransferDone(detail::Transfer* t) {
  PipeCompletion pc{t->tag, t->status, t->bytes.load()};
  {
    std::lock_guard lock(mu);
    ++transfers_done;
    bytes += pc.bytes;
    if (!pc.status.ok()) {
      ++errors;
      last_error = pc.status.message();
      if (drain_status.ok()) drain_status = pc.status;
    }
    if (--active_transfers == 0) {
      busy_seconds += std::chrono::duration<double>(Clock::now() - busy_since).count();
    }
    if (t->posted) Deliver(pc, t->seq);
  }
  idle_cv.notify_all();
  delete t;
}

// Caller holds mu. A byte is sent to ready_fd when the queue of completions becomes non-empty, so
// it is readable exactly while completions wait (Reap clears it when it empties the queue).
void Pipe::Core::Deliver(const PipeCompletion& pc, std::uint64_t seq) {
  const bool was_empty = completions.empty();
  if (!options.in_order_completions) {
    completions.push_back(pc);
  } else {
    out_of_order.emplace(seq, pc);
    for (auto it = out_of_order.begin(); it != out_of_order.end() && it->first == next_deliver_seq;
         it = out_of_order.erase(it)) {
      completions.push_back(it->second);
      ++next_deliver_seq;
    }
  }
  if (was_empty && !completions.empty()) {
    const char one = 1;
    [[maybe_unused]] ssize_t n = send(signal_fd, &one, 1, MSG_DONTWAIT);
  }
}

// Caller holds mu. Full: fill ready_fd's send buffer (a handful of one-byte datagrams, until
// the kernel says it would block), so that it polls unwritable; room again: read them all at
// signal_fd, which frees the buffer and wakes pollers waiting for writability.
void Pipe::Core::SignalRoom() {
  const bool now_full = !queue.empty();
  if (now_full == full) return;
  full = now_full;
  char byte = 0;
  if (full) {
    while (send(ready_fd, &byte, 1, MSG_DONTWAIT) == 1) {
    }
  } else {
    while (recv(signal_fd, &byte, 1, MSG_DONTWAIT) == 1) {
    }
  }
}

void Pipe::Core::PacerLoop() {
  std::unique_lock lock(mu);
  while (!stopping) {
    if (pacer_wake == Clock::time_point{}) {
      pacer_cv.wait(lock);
      continue;
    }
    const auto wake = pacer_wake;
    pacer_cv.wait_until(lock, wake);
    if (Clock::now() < wake) continue;
    pacer_wake = {};
    lock.unlock();
    Pump();
    lock.lock();
  }
}

Pipe::Core::~Core() {
  {
    std::unique_lock lock(mu);
    idle_cv.wait(lock, [this] { return transfers_done == transfers && active_paths == 0; });
    stopping = true;
  }
  pacer_cv.notify_all();
  if (pacer.joinable()) pacer.join();
  if (ready_fd >= 0) close(ready_fd);
  if (signal_fd >= 0) close(signal_fd);
}

}  // namespace tierflow
