// SPDX-License-Identifier: Apache-2.0
// Sizes written as text, as the command line and locators spell them. Thread-safety: pure
// functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

// "4096", "4096B", "64KiB", "1GiB", "2TiB", "500MB": a whole number and an optional unit, in
// any case. Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (kB, MB, GB, TB)
// powers of 1000. Errors: no number, an unknown unit, a bare K, M, G or T (ambiguous: the
// message gives both spellings), a value that does not fit in 64 bits. 0 is a valid size here;
// callers that need more say so.
TIERFLOW_EXPORT Result<std::uint64_t> ParseSize(std::string_view text);
// The shortest exact spelling: "1GiB", "64KiB", "1536B".
TIERFLOW_EXPORT std::string FormatSize(std::uint64_t bytes);

}  // namespace tierflow
