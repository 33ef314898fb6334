// SPDX-License-Identifier: Apache-2.0
// The referee of the pipes benchmarks: a file read or written with liburing directly, O_DIRECT,
// `chunk` bytes per request and at most `depth` in flight — what the disk does without a pipe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tierflow/status.h"

namespace tierflow::bench {

// Seconds to read `size` bytes of the file at `path` into `buf` (page-aligned), or to write
// them to a new file there (created O_EXCL, then fdatasync'd: the time includes the sync).
Result<double> DirectIo(const std::string& path, std::byte* buf, std::uint64_t size, unsigned depth,
                        std::uint64_t chunk, bool write);

}  // namespace tierflow::bench
