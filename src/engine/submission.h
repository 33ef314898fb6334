// What an engine's Enqueue gets: the operation's shared state and how to report on its parts.
#pragma once

#include <cstdint>

#include "engine/op_state.h"

namespace tierflow::detail {

class Submission {
 public:
  // `shared`: other engines take part in the same operation (a copy policy split it).
  explicit Submission(OpState* state, std::uint64_t offset_base = 0, bool shared = false)
      : state_(state), offset_base_(offset_base), shared_(shared) {}
  // Registers n more parts. Must happen before any of them can complete.
  void AddParts(std::uint32_t n) { state_->parts.fetch_add(n, std::memory_order_relaxed); }
  OpState* state() const { return state_; }
  // Where the operations given to this engine start within the caller's operation (non-zero
  // when a copy is split over engines): add it to reported compare differences.
  std::uint64_t offset_base() const { return offset_base_; }
  // Whether this engine owns the whole operation, and so may use OpState::help/engine_area.
  bool exclusive() const { return !shared_; }

 private:
  OpState* state_;
  std::uint64_t offset_base_;
  bool shared_;
};

}  // namespace tierflow::detail
