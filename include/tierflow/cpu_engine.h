// SPDX-License-Identifier: Apache-2.0
// The CPU copy engine: worker threads pinned to the cores of one NUMA node.
//
// Large operations are cut into pieces spread over the workers; pieces at or above the
// non-temporal threshold use streaming stores so a copy larger than the cache does not evict
// everyone else's data. Operations (or batches) up to inline_max_bytes run on the submitting
// thread, where a copy is cheaper than the hand-off to a worker (about a microsecond).
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
// crashing (the fault guard: common/fault_guard.h); the check only moves that error from the
// handle to Submit, for a system call per range (0.3-0.6 us each on a VM), so it is off by
// default.
enum class MappingCheck : std::uint8_t {
  kOff,        // the handle reports faults (the default)
  kHandedOff,  // Submit checks operations above inline_max_bytes
  kAll,        // Submit checks every operation (costs more than a small copy)
};

struct CpuEngineOptions {
  int node = 0;     // workers run on this node's CPUs
  int workers = 0;  // 0: one per CPU of the node
  bool pin = true;  // pin worker i to the node's CPU i (mod count)
  std::size_t inline_max_bytes = 32 * 1024;
  std::size_t nt_threshold_bytes = 0;  // 0: 3/4 of the last-level cache
  std::size_t min_piece_bytes = 64 * 1024;
  std::size_t max_piece_bytes = 64 * 1024 * 1024;
  // Pieces waiting for a worker (1 .. 2^24, rounded up to a power of two); submit waits while
  // the queue is full.
  std::size_t queue_capacity = 4096;
  MappingCheck check_mappings = MappingCheck::kOff;
  CpuIsa isa = CpuIsa::kAuto;         // kAuto: TIERFLOW_ISA, else measured (see isa())
  std::uint32_t worker_spin_us = 50;  // an idle worker polls this long before sleeping
  // A thread waiting on a handle (other than WaitMode::kBlock) runs pieces of that operation
  // that no worker has started yet. Single operations only; batches are left to the workers.
  // The last piece of a split operation is kept for the waiter, and cut larger or smaller as
  // the waiter keeps finishing before or after the workers.
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
  // engine of the process is created (a few milliseconds); otherwise both are the one asked for.
  CpuIsa isa() const;
  CpuIsa streaming_isa() const;
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
