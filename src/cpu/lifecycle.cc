// SPDX-License-Identifier: Apache-2.0
// The CPU engine's lifecycle: starting its workers, indexing them by CPU, and what a fork()
// child does with the parent's work.
#include <system_error>

#include <fmt/format.h>

#include "cpu/cpu_engine_impl.h"

namespace tierflow {

// The workers stayed in the parent. Every piece still queued is cancelled (its operation
// is the parent's); workers start again on the next submission. A piece that a worker was
// running at the fork is not in this process any more: its operation never completes here,
// so wait for operations before forking (a thread's state at fork() is gone in the child).
void CpuEngine::Impl::AfterForkChild() {
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
void CpuEngine::Impl::CancelInChild(const cpu::Piece& piece, bool split, const char* why) {
  if (!piece.ticket) piece.state.CompletePart(0, StatusCode::kCancelled, why);
  if (!split) return;
  std::uint64_t index;
  while (SplitWork::TakeForWorker(piece.state, piece.generation, index)) {
    piece.state.CompletePart(0, StatusCode::kCancelled, why);
  }
}

Status CpuEngine::Impl::StartWorkers() {
  try {
    for (int i = 0; i < worker_count; ++i) threads.emplace_back([this, i] { WorkerLoop(i); });
  } catch (const std::system_error& e) {
    return Status(StatusCode::kFailed,
                  fmt::format("could not start CPU engine worker threads: {}", e.what()));
  }
  return Status::Ok();
}

// The fork() child's first submission starts the workers again.
Status CpuEngine::Impl::RestartAfterFork() {
  std::lock_guard lock(restart_mu);  // another thread of the child may have started them
  if (restart_after_fork.load(std::memory_order_relaxed)) {
    if (Status s = StartWorkers(); !s.ok()) return s;
    restart_after_fork.store(false, std::memory_order_release);
  }
  return Status::Ok();
}

// Fills beside_cpu, once the workers and their CPUs are known. Workers are pinned to the
// node's CPUs only: every other CPU has all of them beside it.
void CpuEngine::Impl::IndexWorkersByCpu() {
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

}  // namespace tierflow
