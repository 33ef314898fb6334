// For engine authors: what an engine keeps up to date besides doing its work. (Programs that
// only use engines need engine.h, not this header.)
//
// Engine::Submit/SubmitBatch/SubmitParts count the operations they accept (ops_submitted) and
// the callbacks that throw (callback_errors); an engine counts its pieces — the units it
// completes (a piece of a split operation, a descriptor, a read) — in the fields below, so that
// Engine::state() means the same on every engine.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tierflow/engine.h"

namespace tierflow {

class EngineCounters {
 public:
  // Raised when a piece is started (queued, submitted to a device or run inline), lowered when
  // it completes, fails or is cancelled.
  std::atomic<std::size_t> in_flight{0};
  std::atomic<std::uint64_t> ops_submitted{0};      // by Engine
  std::atomic<std::uint64_t> pieces_completed{0};   // every finished piece, failed ones included
  std::atomic<std::uint64_t> bytes_completed{0};    // bytes of the pieces that succeeded
  std::atomic<std::uint64_t> ops_inline{0};         // operations run on the submitting thread
  std::atomic<std::uint64_t> pieces_by_waiters{0};  // pieces run by a thread waiting on them
  std::atomic<std::uint64_t> pieces_failed{0};      // finished with an error
  std::atomic<std::uint64_t> pieces_cancelled{0};   // dropped because the engine shut down
  std::atomic<std::uint64_t> callback_errors{0};    // by the handle machinery
};

}  // namespace tierflow
