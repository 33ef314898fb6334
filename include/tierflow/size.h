// SPDX-License-Identifier: Apache-2.0
// Sizes written as text, as the command line and locators spell them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

// "4096", "4096B", "64K", "64KiB", "64KB", "1GiB", "2TiB": a whole number and an optional unit;
// every unit is binary (K, KB and KiB all mean 1024). Errors: no number, an unknown unit, a
// value that does not fit in 64 bits. 0 is a valid size here; callers that need more say so.
TIERFLOW_EXPORT Result<std::uint64_t> ParseSize(std::string_view text);
// The shortest exact spelling: "1GiB", "64KiB", "1536B".
TIERFLOW_EXPORT std::string FormatSize(std::uint64_t bytes);

}  // namespace tierflow
