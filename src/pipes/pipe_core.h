// SPDX-License-Identifier: Apache-2.0
// The one core behind a pipe's three flavours: transfers cut into chunks, at most queue_depth
// in flight, each chunk moved hop by hop through the planned engines (staging slots between
// hops), the transfer's handle completed when its last chunk is. Private to the pipes component.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pipes/planner.h"
#include "tierflow/engine_module.h"
#include "tierflow/pipe.h"

namespace tierflow {

namespace detail {

struct Transfer;

struct Chunk {
  Pipe::Core* core = nullptr;
  Transfer* transfer = nullptr;
  const Route* route = nullptr;
  std::byte* src = nullptr;  // addresses: memory, or a file window
  std::byte* dst = nullptr;
  std::size_t len = 0;
  int slot = -1;  // staging slot held between hops
  std::byte* mid = nullptr;
  unsigned hop = 0;     // the hop running
  bool bounce = false;  // a direct hop bounced through a slot for O_DIRECT alignment
  std::vector<Mechanism> mechanisms;
  std::vector<Engine*> engines;
};

struct Transfer {
  OpRef op;
  std::atomic<std::uint32_t> chunks_left{0};
  std::atomic<std::uint64_t> bytes{0};
  std::mutex mu;
  Status status;  // the first failure
  bool posted = false;
  std::uint64_t tag = 0;
  std::uint64_t seq = 0;
  std::uint32_t parts = 0;  // chunks
};

}  // namespace detail

// Marks the transfer the calling thread submits next as posted (Post/Reap) with `tag`.
void t_posted_set(bool posted, std::uint64_t tag);

// The engine a pipe's transfers are submitted to, so that their handles are ordinary Handles.
// A transfer arrives as a kCopy whose addresses encode offsets: src = kSrcBase + source offset,
// dst = kDstBase + destination offset (disjoint, canonical, never dereferenced).
class PipeEngine final : public Engine {
 public:
  static constexpr std::uintptr_t kSrcBase = std::uintptr_t{1} << 44;
  static constexpr std::uintptr_t kDstBase = std::uintptr_t{1} << 45;
  explicit PipeEngine(Pipe::Core* core);
  const EngineCapabilities& capabilities() const override { return caps_; }
  EngineCounters& Counters() const { return counters(); }

 protected:
  Status Enqueue(std::span<const Operation> ops, Submission& submission) override;

 private:
  Pipe::Core* core_;
  EngineCapabilities caps_;
};

struct [[gnu::visibility("hidden")]] Pipe::Core {
  PipeRuntime::Impl* rt = nullptr;
  Locator from, to;
  detail::PipeRoutes bp;
  std::unique_ptr<PipeEngine> engine;

  // Staging slots (2-hop routes and bounces): slot_count of slot_bytes each.
  Locator staging;
  std::size_t slot_bytes = 0;
  std::vector<int> free_slots;

  std::mutex mu;  // the queue, slots, counters below, completions
  std::condition_variable idle_cv;
  std::deque<detail::Chunk*> queue;
  std::size_t in_flight = 0;
  std::uint64_t transfers = 0, transfers_done = 0, bytes = 0, chunks = 0, errors = 0;
  // Transfers whose operation has completed too (its callback returned, its handle is done):
  // what Drain waits for, since a callback may use what the caller of Drain frees next.
  std::uint64_t settled = 0;
  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> syncs{0};
  std::string last_error;
  Status drain_status;
  std::chrono::steady_clock::time_point busy_since;
  double busy_seconds = 0;
  std::size_t active_transfers = 0;
  // Completion paths running inside the core: the destructor waits for them too, since a
  // transfer counts as done (and its owner may destroy the pipe) before its path returns.
  std::size_t active_paths = 0;

  // Post/Reap, and readiness: ready_fd (the user's, Pipe::fd) and signal_fd are the ends of a
  // datagram socket pair. ready_fd is readable while a datagram sent from signal_fd waits
  // (completions wait) and writable while its own small send buffer has room, which the core
  // fills while a chunk waits for a slot (the pipe is full) and empties by reading signal_fd
  // when none does: one descriptor says both, as a socket's does (SignalRoom).
  int ready_fd = -1;
  int signal_fd = -1;
  bool full = false;  // ready_fd's send buffer is filled: a chunk waits for a slot
  std::deque<PipeCompletion> completions;
  std::map<std::uint64_t, PipeCompletion> out_of_order;  // in_order_completions only
  // Caller holds mu: makes ready_fd writable exactly while no chunk waits for a slot.
  void SignalRoom();
  std::uint64_t next_post_seq = 0, next_deliver_seq = 0;
  std::size_t posted_open = 0;

  // Bandwidth cap.
  std::chrono::steady_clock::time_point next_allowed{};
  std::thread pacer;
  std::condition_variable pacer_cv;
  bool stopping = false;
  std::chrono::steady_clock::time_point pacer_wake{};

  PipeOptions options;

  ~Core();
  Status Init();
  Status OpenReadiness();
  Status AllocateStaging();
  std::mutex staging_mu;  // the lazy allocation of bounce memory
  std::atomic<bool> staging_ready{false};
  Result<Handle> Submit(std::uint64_t so, std::uint64_t d, std::uint64_t len, CompletionCallback cb,
                        bool posted, std::uint64_t tag);
  // Cuts a transfer into chunks at spill-member and tiered-extent boundaries and chunk_bytes,
  // placing the tiered extents it writes. Errors: a tiered area that cannot place an extent, or
  // whose extent read was never written (nothing is started then).
  Status Split(detail::Transfer * t, std::uint64_t so, std::uint64_t d, std::uint64_t len,
               std::vector<detail::Chunk*> & out) const;
  void Enqueue(std::vector<detail::Chunk*> & chunks);
  void Pump();
  void StartChunk(detail::Chunk * c);
  void SubmitHop(detail::Chunk * c);
  void HopDone(detail::Chunk * c, const Completion& done);
  void ChunkDone(detail::Chunk * c, Status status);
  void TransferDone(detail::Transfer * t);
  void Settled();
  bool SyncDestination(detail::Transfer * t, std::uint64_t len);
  void Deliver(const PipeCompletion& pc, std::uint64_t seq);
  void PacerLoop();
};

}  // namespace tierflow
