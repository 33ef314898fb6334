// SPDX-License-Identifier: Apache-2.0
// What the library and its tests may ask a CpuEngine beyond its public contract (LevelDB's
// *_internal.h pattern: CpuEngine names this class its friend and nothing else).
#pragma once

#include "tierflow/cpu_engine.h"

namespace tierflow {

class CpuEngineInternal {
 public:
  // How large `engine` cuts the piece of a split operation that it keeps for the calling
  // thread's waits (the last piece; CpuEngineOptions::waiter_runs_pieces), relative to an even
  // cut: 1.0 until the thread has run such pieces, then moving by 1/64 between 0.75 and 1.25
  // each time four more of its waits finished before the workers than after them (larger) or
  // the other way (smaller), towards where the thread and the workers finish together. Only
  // operations cut into no more pieces than there are workers are cut so and teach it. Learnt
  // per thread and engine; the value is the calling thread's. Thread-safe.
  static double HeldPieceScale(const CpuEngine& engine);
};

}  // namespace tierflow
