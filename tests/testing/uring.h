// SPDX-License-Identifier: Apache-2.0
// Helpers of the io_uring engine's tests: an engine made or the test failed, and page-aligned
// memory (O_DIRECT needs it).
#pragma once

#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "tierflow/uring_engine.h"

namespace tierflow::testkit {

inline std::unique_ptr<IoUringEngine> MakeUringEngine(IoUringEngineOptions o = {}) {
  Result<std::unique_ptr<IoUringEngine>> e = IoUringEngine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

struct FreeDeleter {
  void operator()(unsigned char* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<unsigned char, FreeDeleter>;

// n bytes (rounded up to whole pages) at a page boundary.
inline AlignedBytes PageAligned(std::size_t n) {
  return AlignedBytes(
      static_cast<unsigned char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096)));
}

}  // namespace tierflow::testkit
