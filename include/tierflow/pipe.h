// SPDX-License-Identifier: Apache-2.0
// A pipe: one direction of data movement between two locators, planned when it is declared
// (PipeRuntime::Connect) and used in any of three flavours that share one core:
//   (a) blocking          Transfer(src_offset, dst_offset, length) returns when done;
//   (b) inversion of      Submit(...) returns a Handle (a future; a callback may be given);
//       control           transfers stream through the pipe, at most queue_depth chunks in
//                         flight, started in the order submitted;
//   (c) OS style          fd() is a descriptor to poll as a socket's: readable while
//                         completions wait, writable while the pipe has room; Post(...) starts
//                         a transfer with a user tag (like pwrite/pread), TryPost(...) only
//                         when there is room (EAGAIN's contract), Reap(...) collects
//                         completions; fd() works with epoll/poll in your own loop.
// Offsets are relative to each locator's first byte. A transfer beyond either locator's
// capacity is refused at once with both ranges named.
//
// A plan is a sequence of hops (one mechanism each). A file and memory whose alignment O_DIRECT
// cannot meet for a transfer go through an aligned bounce buffer (a fallback, counted);
// staged plans (file -> DRAM -> HBM) move each chunk through a staging buffer, the hops
// overlapping. Explain() says what the plan is, what each hop should achieve (calibrated), and
// why the alternatives were rejected; stats() says what the pipe has done.
//
// Thread-safety: all members may be called from any thread, concurrently. A Pipe is a shared
// handle: copies refer to the same pipe; the last one to go waits for transfers in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/handle.h"
#include "tierflow/locator.h"
#include "tierflow/status.h"

namespace tierflow {

// The knobs, each with its default and what it trades.
struct PipeOptions {
  // Chunks in flight at once. More: higher throughput from devices that need parallelism
  // (SSDs), more memory held in staging. 0: the planner's choice (8 for files, 4 for memory).
  unsigned queue_depth = 0;
  // Transfers are cut into chunks of this many bytes. Larger: fewer submissions; smaller:
  // earlier overlap of staged hops and less staging memory. 0: planner's (1 MiB files, 4 MiB
  // memory).
  std::size_t chunk_bytes = 0;
  // Use this mechanism for the hop it can serve; Connect fails with the reason if it cannot
  // serve any hop of the path. Unset: the planner chooses by calibration.
  std::optional<Mechanism> mechanism;
  // Bytes per second the pipe may move (0: unlimited). Leaves bandwidth to other work at the
  // price of this pipe's latency.
  std::uint64_t bandwidth_cap = 0;
  // Stage through this locator (a staging locator) instead of memory the pipe allocates itself.
  Locator staging;
  // Force an intermediate hop through DRAM near the destination even where a direct path
  // exists (e.g. file -> DRAM -> HBM). Off: staged only where calibration says it is faster.
  bool force_staging = false;
  // Post/Reap: deliver completions in the order transfers were posted (a later one waits for
  // earlier ones). Off: as they complete.
  bool in_order_completions = false;
  // Files: fdatasync the destination at the end of every transfer (durable on completion).
  bool sync_writes = false;
};

// One hop of a plan.
struct PipeHop {
  Mechanism mechanism = Mechanism::kCpu;
  std::string from, to;      // endpoint names ("file:/x", "dram:0", "staging dram:0")
  double expected_gbps = 0;  // calibrated bandwidth; 0 when uncalibrated
  bool calibrated = false;   // false: no figure for this mechanism and pair
  bool model = false;        // the mechanism is a software model of hardware
};

// An alternative the planner did not take, and why.
struct PipeRejection {
  std::string mechanism;  // a mechanism, or a plan ("io_uring-read>cpu via dram:0")
  std::string reason;
};

struct TIERFLOW_EXPORT PipePlan {
  std::string from, to;       // the locators' names
  std::vector<PipeHop> hops;  // in order; one hop for a direct path
  std::vector<PipeRejection> rejected;
  double expected_gbps = 0;  // of the whole plan (the slowest hop's; 0: uncalibrated)
  unsigned queue_depth = 0;  // chosen knobs
  std::size_t chunk_bytes = 0;
  std::uint64_t bandwidth_cap = 0;
  std::size_t staging_bytes = 0;   // staging memory the pipe holds
  std::vector<std::string> notes;  // calibration source, modelled placement, spill members
  // Spill chains: one plan per member, in order (hops above are empty then).
  std::vector<PipePlan> segments;

  std::string ToText() const;  // the explanation, for people
  std::string ToJson() const;  // {"from","to","hops":[{"mechanism","from","to","expected_gbps",
                               //  ...}],"rejected":[{"mechanism","reason"}],...}
};

// Where a tiered area's extents are now: one entry per stage, in the order stages are tried.
struct TieredStage {
  std::string stage;        // "hbm:8", "file in /var/tmp"
  std::uint64_t bytes = 0;  // of the area placed there now
  std::uint64_t limit = 0;  // TieredOptions::tier_limits for its tier (0: none)
  double occupancy = 0;     // the stage's occupancy when last placed on or asked
  bool modelled = false;    // memory standing in for a node this machine lacks
  std::string state;  // "taking extents", "not needed yet", or why it took no more ("holds ...")
};

// What a pipe has done (visible state).
struct TIERFLOW_EXPORT PipeStats {
  std::uint64_t transfers = 0;       // submitted
  std::uint64_t transfers_done = 0;  // completed (failed ones included)
  std::uint64_t bytes = 0;           // moved by completed transfers
  std::uint64_t chunks = 0;          // chunks started
  std::size_t in_flight = 0;         // chunks in flight now
  std::size_t queued = 0;            // chunks waiting for a slot
  unsigned queue_depth = 0;
  double achieved_gbps = 0;     // bytes over the time transfers were in flight
  double expected_gbps = 0;     // the plan's calibrated figure (0: none)
  std::uint64_t fallbacks = 0;  // chunks bounced through aligned memory
  std::uint64_t syncs = 0;      // fdatasyncs (PipeOptions::sync_writes)
  std::uint64_t errors = 0;     // failed transfers
  std::string last_error;       // the latest failure's message
  // A tiered end (PipeRuntime::Tiered): its stages now, and the placement's switches so far.
  std::vector<TieredStage> stages;
  std::vector<std::string> switches;
  std::string ToJson() const;
};

// A completed transfer, as Reap returns it.
struct PipeCompletion {
  std::uint64_t tag = 0;  // as given to Post
  Status status;
  std::uint64_t bytes = 0;
};

class TIERFLOW_EXPORT Pipe {
 public:
  Pipe() = default;  // refers to no pipe: every call fails with invalid_argument

  // (a) Moves [src_offset, +length) of the source to [dst_offset, +length) of the destination
  // and returns when done. Errors: ranges beyond a locator, length 0, the transfer's failure
  // (naming the file and offset for file I/O).
  Status Transfer(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length);
  // (b) The same, asynchronously: the handle completes when the whole transfer has (its
  // callback, if given, runs on the thread that completes it and must not block).
  Result<Handle> Submit(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length,
                        CompletionCallback callback = {});
  // (c) Starts a transfer whose completion Reap reports with `tag`; fd() becomes readable. Never
  // blocks: what does not fit the queue depth waits in the pipe (and fd() is not writable).
  Status Post(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length,
              std::uint64_t tag);
  // As Post, but only when the pipe has room (no chunk waits for a slot): true when started,
  // false when full (nothing started: wait for fd() to be writable), as a non-blocking write
  // answers EAGAIN. Errors: as Post's.
  Result<bool> TryPost(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t length,
                       std::uint64_t tag);
  // Moves up to out.size() completions into `out` and returns how many (0 when none is ready;
  // a readable fd() may still yield 0 once). Never blocks.
  std::size_t Reap(std::span<PipeCompletion> out);
  // The readiness descriptor, owned by the pipe: readable (POLLIN) while completions wait to
  // be reaped, writable (POLLOUT) while the pipe has room, i.e. no chunk waits for a slot of
  // the queue depth (TryPost would start at once). Poll it; never read, write or close it. A
  // thread that posted file transfers may see epoll_wait/poll return EINTR (io_uring runs
  // completion work on the submitting thread): retry, as for any signal.
  int fd() const;
  // Posted transfers not reaped yet (in flight or waiting in the completion queue).
  std::size_t posted() const;

  // Waits for every transfer submitted so far (any flavour), their completion callbacks
  // included. Returns the first error among them since the last Drain, or ok. Not from a
  // completion callback of this pipe (it would wait for itself).
  Status Drain();

  const PipePlan& plan() const;
  PipePlan Explain() const { return plan(); }
  PipeStats stats() const;
  const Locator& from() const;
  const Locator& to() const;
  bool valid() const { return core_ != nullptr; }

  struct Core;

 private:
  friend class PipeRuntime;  // makes pipes (Connect)
  explicit Pipe(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  std::shared_ptr<Core> core_;
};

}  // namespace tierflow
