// SPDX-License-Identifier: Apache-2.0
// The CPU copy engine: worker threads pinned to the cores of one NUMA node.
//
// Large operations are cut into pieces spread over the workers; pieces at or above the
// non-temporal threshold use streaming stores so a copy larger than the cache does not evict
// everyone else's data. Operations (or batches) up to inline_max_bytes run on the submitting
// thread instead of being handed to a worker.
//
// Thread-safety: as every engine (engine.h): any number of threads may submit at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "tierflow/cpu_isa.h"
#include "tierflow/engine.h"
#include "tierflow/export.h"
#include "tierflow/topology.h"

namespace tierflow {

class OpRef;  // engine_module.h

// Whether Submit asks the kernel that an operation's ranges are mapped. Either way a copy
// that touches unmapped or protected memory fails with an error naming the range instead of
// crashing; the check only moves that error from the handle to Submit, at the price of a
// system call per range, so it is off by default.
enum class MappingCheck : std::uint8_t {
  kOff,        // the handle reports faults (the default)
  kHandedOff,  // Submit checks operations above inline_max_bytes
  kAll,        // Submit checks every operation (costs more than a small copy)
};

// Each field: its default, and what moving it trades.
struct CpuEngineOptions {
  // Default 0. The workers run on this node's CPUs: put the engine near the memory it copies.
  int node = 0;
  // Default 0: one per CPU of the node. Fewer leave cores to the application; more than the
  // node has CPUs share them.
  int workers = 0;
  // Default true: worker i is pinned to the node's CPU i (mod count). Off: the scheduler may
  // move workers, even to another node.
  bool pin = true;
  // Default 32 KiB. Operations and batches up to this size run on the submitting thread: no
  // hand-off to a worker, but the caller's core does the copy.
  std::size_t inline_max_bytes = 32 * 1024;
  // Default 0: 3/4 of the last-level cache. Pieces at or above it use non-temporal stores: they
  // do not evict the cache, but a copy the caller reads next comes from memory.
  std::size_t nt_threshold_bytes = 0;
  // Defaults 64 KiB and 64 MiB: the smallest and largest piece a split operation is cut into.
  // Smaller pieces spread over more workers and cost more hand-offs.
  std::size_t min_piece_bytes = 64 * 1024;
  std::size_t max_piece_bytes = 64 * 1024 * 1024;
  // Default 4096: pieces waiting for a worker (1 .. 2^24, rounded up to a power of two);
  // submit waits while the queue is full. Larger: more memory, longer bursts absorbed.
  std::size_t queue_capacity = 4096;
  // Default kOff: see MappingCheck.
  MappingCheck check_mappings = MappingCheck::kOff;
  // Default kAuto: TIERFLOW_ISA if set, else the fastest kernel measured on this CPU when the
  // process creates its first engine (see isa()). An ISA the CPU lacks is refused.
  CpuIsa isa = CpuIsa::kAuto;
  // Default 50: an idle worker polls this many microseconds before it sleeps. Longer: quicker
  // pick-up of the next piece, more CPU burnt while idle.
  std::uint32_t worker_spin_us = 50;
  // Default true: a thread waiting on a handle (other than WaitMode::kBlock) runs pieces of
  // that operation that no worker has started yet (single operations only; batches are left
  // to the workers). The last piece of a split operation is kept for the waiter and cut larger
  // or smaller as the waiter keeps finishing before or after the workers. Off: the waiter only
  // waits, and its core stays free.
  bool waiter_runs_pieces = true;
};

class TIERFLOW_EXPORT CpuEngine final : public Engine {
 public:
  // Errors: the topology is not this system's (cannot pin), the node does not exist or has no
  // CPUs (the message names its nearest CPU node), an ISA the CPU lacks, nonsensical sizes.
  static Result<std::unique_ptr<CpuEngine>> Create(const Topology& topology,
                                                   const CpuEngineOptions& options = {});
  // Pieces still queued are cancelled (their handles report cancelled); pieces running finish.
  ~CpuEngine() override;

  const EngineCapabilities& capabilities() const override;

  // The ISA of the kernel that copies operations below nt_threshold_bytes (and every other
  // kind of operation), and of the one that streams copies at or above it. With CpuIsa::kAuto
  // and no TIERFLOW_ISA, each is the fastest of its kind measured on this CPU when the first
  // engine of the process is created; otherwise both are the one asked for.
  CpuIsa isa() const;
  CpuIsa streaming_isa() const;
  // Whether streaming copies ask for their source ahead in software (true), or leave it to the
  // hardware prefetchers; measured with the streaming ISA (true when an ISA is named).
  bool streaming_software_prefetch() const;
  std::size_t nt_threshold_bytes() const;
  int workers() const;
  const CpuEngineOptions& options() const;

 protected:
  Status CheckOperation(const Operation& op) const override;
  Status Enqueue(std::span<const Operation> ops, Submission& submission) override;
  EngineQueue queue() const override;

 private:
  friend class CpuEngineInternal;  // src/cpu/cpu_engine_internal.h
  struct Impl;
  struct SplitWork;
  explicit CpuEngine(std::unique_ptr<Impl> impl);
  Status EnqueueOthers(std::span<const Operation> ops, Submission& submission);
  Status EnqueueSplit(const Operation& op, Submission& submission);
  static bool HelpSplit(OpRef state);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
