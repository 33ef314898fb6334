// SPDX-License-Identifier: Apache-2.0
// A software Intel DSA: it consumes the same 64-byte descriptors as the hardware and writes the
// same 32-byte completion records, with the queue semantics of shared and dedicated work
// queues, several engines, batches with fence, drain, block-on-fault, and injectable page
// faults, descriptor errors and slow engines.
//
// DsaEngine drives it through the one step that differs from hardware: the hand-over of a
// descriptor (ENQCMD / MOVDIR64B / write() there, Enqueue here). Everything before and after —
// descriptor building, retries, credits, completion processing, fault resume — is the code that
// runs on a real DSA. Results produced on the model are labelled as such by every tool.
//
// Thread-safety: every member may be called from any thread at once (the model keeps one lock).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

struct DsaModelWqConfig {
  bool shared = true;           // SWQ (ENQCMD: refused when full) or DWQ (MOVDIR64B: posted)
  std::uint32_t size = 128;     // entries
  bool block_on_fault = false;  // whether descriptors may ask the device to wait out faults
};

struct DsaModelConfig {
  std::vector<DsaModelWqConfig> wqs = {DsaModelWqConfig{}};
  int engines = 1;  // processing engines of the group (threads)
  // Execute each descriptor inside Enqueue, before it returns: no threads, no queueing. For
  // measuring the library's own per-descriptor cost.
  bool instant = false;
  std::uint64_t max_transfer_size = 2u << 20;  // the WQ default of the idxd driver
  std::uint32_t max_batch_size = 32;
  std::uint32_t engine_delay_ns = 0;  // extra time per descriptor: a slow engine
  int numa_node = 0;
  // Check every address against this process' mappings before touching it, as the IOMMU
  // does (an unmapped page faults instead of crashing the model). Off: addresses are trusted,
  // like a device whose IOTLB already holds them; injected faults still happen. The
  // library-cost benchmark turns it off so that two msync calls per range do not drown the
  // cost it measures.
  bool translate_addresses = true;
  std::uint64_t op_cap = 0x1003f03ffull;  // opcodes 0..0x3f supported (DSA 1.0's set)
};

enum class DsaEnqueueResult : std::uint8_t {
  kAccepted,
  kRetry,  // shared WQ full (ENQCMD's "retry" answer)
};

class TIERFLOW_EXPORT DsaDeviceModel {
 public:
  struct Stats {
    std::uint64_t descriptors = 0;  // accepted at a portal (a batch counts 1)
    std::uint64_t executed = 0;     // descriptors executed, batch members included
    std::uint64_t batches = 0;
    std::uint64_t page_faults = 0;     // reported in completion records
    std::uint64_t faults_blocked = 0;  // waited out because of block-on-fault
    std::uint64_t injected_errors = 0;
    std::uint64_t swq_retries = 0;    // ENQCMD answered "retry"
    std::uint64_t dwq_overflows = 0;  // MOVDIR64B beyond the WQ size: a caller bug
  };

  static Result<std::shared_ptr<DsaDeviceModel>> Create(const DsaModelConfig& config = {});
  ~DsaDeviceModel();
  DsaDeviceModel(const DsaDeviceModel&) = delete;
  DsaDeviceModel& operator=(const DsaDeviceModel&) = delete;

  // Hands one descriptor (64 bytes, copied before return as ENQCMD/MOVDIR64B do) to WQ `wq`.
  // Shared WQ: kRetry when full. Dedicated WQ: always kAccepted; a descriptor beyond the WQ's
  // size is dropped (it never completes) and recorded in counters and caller_errors().
  DsaEnqueueResult Enqueue(int wq, const void* descriptor);

  // The page holding `addr` faults on the next device access to it (once: afterwards it
  // behaves as touched by the CPU, which is how fault resume makes progress).
  void InjectPageFault(const void* addr);
  // The next `count` descriptors (batch members included) complete with `status`.
  void InjectError(std::uint8_t status, int count = 1);
  void SetEngineDelay(std::uint32_t ns);
  // Paused engines take no descriptor from the WQs (which fill up); Resume lets them go on.
  // For deterministic tests of full queues. No effect in instant mode.
  void Pause();
  void Resume();

  Stats stats() const;
  // Misuse detected at the portal (DWQ overflow, malformed submission), one line each.
  std::vector<std::string> caller_errors() const;
  const DsaModelConfig& config() const;
  // Descriptors accepted but not finished, per WQ (occupancy).
  std::uint32_t occupancy(int wq) const;

 private:
  struct Impl;
  explicit DsaDeviceModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
