// SPDX-License-Identifier: Apache-2.0
// An engine that wraps another engine and makes things go wrong on purpose, for testing what
// uses engines (the cache, copy policies, applications) without hooks in the engines
// themselves. It can fail operations, refuse submissions, delay completions and run an operation
// as two submissions to the inner engine (a short read continued). The choices are seeded, so
// the same seed, plan and submissions give the same faults.
//
// Written against the engine author's header (engine_module.h) alone, as an outside engine is;
// built into the tierflow_testing library (tests/CMakeLists.txt), which is not installed.
//
// Thread safety: like any engine. The inner engine must outlive the wrapper; operations in
// flight through the wrapper complete through the inner engine.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "tierflow/engine.h"

namespace tierflow::testkit {

struct FaultPlan {
  // Probabilities per operation (0..1), drawn in this order: refuse, fail, split; delay is
  // drawn for every operation that is not refused or failed.
  double refuse = 0;  // Submit/SubmitBatch returns kUnsupported "injected refusal"
  double fail = 0;    // the operation completes with kIoError "injected failure", untouched
  double split = 0;   // two submissions to the inner engine: the first half, then the rest
  double delay = 0;   // completion is reported delay_us later (holding the completing thread)
  std::uint32_t delay_us = 200;
  std::uint64_t seed = 1;
  // Injects at most this many faults (refusals + failures + splits + delays), then passes
  // everything through.
  std::uint64_t max_faults = std::numeric_limits<std::uint64_t>::max();
};

struct FaultStats {
  std::uint64_t refused = 0, failed = 0, split = 0, delayed = 0;
};

class FaultInjectingEngine final : public Engine {
 public:
  // Errors: a probability outside 0..1 or not a number.
  static Result<std::unique_ptr<FaultInjectingEngine>> Create(Engine& inner, FaultPlan plan);
  ~FaultInjectingEngine() override;

  // The inner engine's, named "faulty <name>" (drains and CRCs split over two submissions are
  // not offered: a drain is never split and a CRC is computed by one submission).
  const EngineCapabilities& capabilities() const override;
  bool ReadsSourceDirectly(const void* p, std::size_t n) const override;
  FaultStats fault_stats() const;

 protected:
  Status CheckOperation(const Operation& op) const override;
  Status Enqueue(std::span<const Operation> ops, Submission& submission) override;

 private:
  struct Impl;
  explicit FaultInjectingEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow::testkit
