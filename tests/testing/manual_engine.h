// SPDX-License-Identifier: Apache-2.0
// A test engine that holds every part until the test completes it: lets tests control when
// and how operations finish (and shows the handle model needs nothing CPU-specific).
#pragma once

#include <cstring>
#include <mutex>
#include <vector>

#include "tierflow/engine.h"
#include "tierflow/engine_module.h"

namespace tierflow::testkit {

class ManualEngine : public Engine {
 public:
  explicit ManualEngine(int node = 0, const char* name = "manual") {
    caps_.name = name;
    caps_.ops = kAllOps;
    caps_.max_op_bytes = 1 << 30;
    caps_.max_batch = 8;
    caps_.node = node;
  }
  const EngineCapabilities& capabilities() const override { return caps_; }
  void set_kind(EngineKind kind) { caps_.kind = kind; }

  struct Part {
    OpRef state;
    Operation op;
  };
  std::size_t pending() const {
    std::lock_guard lock(mu_);
    return pending_.size();
  }
  // Performs (copy/fill) and completes the oldest pending part with `code`.
  void CompleteNext(StatusCode code = StatusCode::kOk, const char* msg = nullptr) {
    Part p;
    {
      std::lock_guard lock(mu_);
      p = pending_.front();
      pending_.erase(pending_.begin());
    }
    if (code == StatusCode::kOk && p.op.kind == OpKind::kCopy)
      std::memcpy(p.op.dst, p.op.src, p.op.size);
    if (code == StatusCode::kOk && p.op.kind == OpKind::kFill) {
      for (std::size_t i = 0; i < p.op.size; ++i) {
        static_cast<unsigned char*>(p.op.dst)[i] =
            static_cast<unsigned char>(p.op.pattern >> (8 * (i % 8)));
      }
    }
    // As an engine author does (tierflow/engine_module.h): count the piece, then complete it.
    counters().Add(EngineCounters::kPiecesCompleted);
    if (code == StatusCode::kOk) {
      counters().Add(EngineCounters::kBytesCompleted, p.op.size);
    } else {
      counters().Add(EngineCounters::kPiecesFailed);
    }
    counters().Sub(EngineCounters::kInFlight);
    p.state.CompletePart(code == StatusCode::kOk ? p.op.size : 0, code, msg);
  }

 protected:
  Status Enqueue(std::span<const Operation> ops, Submission& s) override {
    if (refuse_) return Status::Unsupported("manual engine refuses");
    std::lock_guard lock(mu_);
    s.AddParts(static_cast<std::uint32_t>(ops.size()));
    counters().Add(EngineCounters::kInFlight, ops.size());
    for (const Operation& op : ops) pending_.push_back({s.op(), op});
    return Status::Ok();
  }
  EngineQueue queue() const override {
    std::lock_guard lock(mu_);
    return {0, pending_.size()};
  }

 public:
  bool refuse_ = false;

 private:
  EngineCapabilities caps_;
  mutable std::mutex mu_;
  std::vector<Part> pending_;
};

}  // namespace tierflow::testkit
