// SPDX-License-Identifier: Apache-2.0
// The Intel DSA engine, on the Linux idxd user-space ABI (no Intel DML).
//
// One engine drives one work queue. Operations become 64-byte descriptors (split above the
// WQ's max_transfer_size, several operations or pieces travel in batch descriptors), each with
// its own 32-byte completion record. Shared WQs take ENQCMD with bounded, backed-off retries
// and then a policy (retry later from the completion thread, or run on the CPU); dedicated WQs
// take MOVDIR64B with credits, never more than the WQ's size in flight; without a mappable
// portal descriptors are written to the WQ's file. Page faults (no block-on-fault) are resumed
// from bytes_completed — touch the page and resubmit the rest — or finished on the CPU.
//
// Completion: the submitting thread checks the records once right after submission; a
// completion thread per engine polls the rest (spinning briefly, then yielding, then sleeping
// while nothing is in flight) and finishes handles, runs callbacks, and resubmits.
//
// Thread-safety: as every engine (engine.h): any number of threads may submit to one work
// queue's engine at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "tierflow/dsa_inventory.h"
#include "tierflow/dsa_model.h"
#include "tierflow/engine.h"
#include "tierflow/export.h"

namespace tierflow {

enum class DsaSwqFullPolicy : std::uint8_t {
  kRetryLater,  // leave the descriptor to the completion thread, which keeps offering it
  kCpu,         // run that part of the operation on the submitting thread
};

enum class DsaFaultPolicy : std::uint8_t {
  kTouchAndResume,  // touch the faulting page, resubmit the rest (DSA does the work)
  kFinishOnCpu,     // copy the rest on the CPU
};

// How the completion thread waits for the device once it has spun briefly.
enum class DsaCompletionWait : std::uint8_t {
  kAuto,    // UMWAIT where the CPU has WAITPKG, otherwise kPause
  kPause,   // keep polling with PAUSE, then yield, then short sleeps
  kUmwait,  // UMONITOR the record of the only operation in flight and UMWAIT (light sleep)
            // until the device writes it, within the kernel's umwait max_time per wait
};

// Each field: its default, and what moving it trades.
struct DsaEngineOptions {
  // Default empty: the first usable WQ of a device on `node` (default -1: any node); else the
  // WQ to use on hardware, "dsa0/wq0.0". Ignored by CreateOnModel.
  std::string wq;
  int node = -1;
  // Default 16: ENQCMD attempts on a full shared WQ before on_swq_full applies (the backoff
  // doubles each time). More: fewer hand-offs to the policy, a submitting thread held longer.
  int enqcmd_retries = 16;
  // Defaults kRetryLater and kTouchAndResume: see the enums.
  DsaSwqFullPolicy on_swq_full = DsaSwqFullPolicy::kRetryLater;
  DsaFaultPolicy on_fault = DsaFaultPolicy::kTouchAndResume;
  // Default false: set block-on-fault on descriptors (only where the WQ allows it): the device
  // waits for the kernel to resolve a fault instead of returning the descriptor partly done,
  // which holds the engine for every fault.
  bool block_on_fault = false;
  // Default false: touch source and destination pages before submitting. On: no device page
  // faults, at the price of a CPU pass over the pages.
  bool prefault = false;
  // Default true: several descriptors of one submission go as one batch descriptor (one
  // submission instead of many; a batch completes as a whole).
  bool use_batches = true;
  // Default false: check with msync that ranges are mapped before submitting (system calls
  // per operation). Off: an unmapped range is reported when the device faults on it.
  bool check_mappings = false;
  // Default 0: the WQ's max_batch_size. Smaller batches complete sooner.
  std::uint32_t max_batch = 0;
  // Default kAuto: see DsaCompletionWait.
  DsaCompletionWait completion_wait = DsaCompletionWait::kAuto;
};

struct DsaEngineStats {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t descriptors = 0;      // data descriptors built (batch members included)
  std::uint64_t batches = 0;          // batch descriptors submitted
  std::uint64_t submit_retries = 0;   // ENQCMD/write() answered "retry"
  std::uint64_t retried_later = 0;    // descriptors left to the completion thread
  std::uint64_t cpu_fallbacks = 0;    // descriptors run on the CPU because the SWQ stayed full
  std::uint64_t faults_resumed = 0;   // page faults resumed on the device
  std::uint64_t faults_on_cpu = 0;    // page faults finished on the CPU
  std::uint64_t credit_waits = 0;     // dedicated WQ full: submitter waited for a credit
  std::uint64_t errors = 0;           // descriptors that completed with an error
  std::uint64_t monitor_waits = 0;    // completion-thread waits with UMONITOR/UMWAIT
  std::uint64_t dualcast_splits = 0;  // dualcasts sent as two copies (destinations differ in
                                      // address bits 11:0, which DSA's dualcast requires equal)
  // Descriptors by transfer size: bucket i counts sizes in [2^i, 2^(i+1)).
  std::array<std::uint64_t, 32> size_histogram{};
};

class TIERFLOW_EXPORT DsaEngine final : public Engine {
 public:
  // On hardware. Errors name the cause and fix: no usable WQ (with each WQ's reason), the WQ
  // file cannot be opened (permissions), the CPU lacks the instruction the WQ needs, or
  // kUmwait was asked for on a CPU without WAITPKG.
  static Result<std::unique_ptr<DsaEngine>> Create(const DsaInventory& inventory,
                                                   const DsaEngineOptions& options = {});
  // On the software device model, WQ `wq` of it. capabilities().is_model is true.
  static Result<std::unique_ptr<DsaEngine>> CreateOnModel(std::shared_ptr<DsaDeviceModel> model,
                                                          int wq = 0,
                                                          const DsaEngineOptions& options = {});
  // Waits for descriptors in flight (the device writes into our records); parts never
  // submitted are cancelled. A device that does not answer within 5 s is reported and its
  // records are left allocated, so a late write cannot land in freed memory.
  ~DsaEngine() override;

  const EngineCapabilities& capabilities() const override;
  DsaEngineStats device_stats() const;
  // "dsa0/wq0.0 (shared, ENQCMD); completion wait: umwait" or the model's equivalent.
  const std::string& description() const;
  DsaSubmitPath submit_path() const;

 protected:
  Status CheckOperation(const Operation& op) const override;
  Status Enqueue(std::span<const Operation> ops, Submission& submission) override;
  EngineQueue queue() const override;

 private:
  struct Impl;
  explicit DsaEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
