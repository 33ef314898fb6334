// SPDX-License-Identifier: Apache-2.0
// Counts heap allocations made through operator new in this program (the CLI replaces the
// global operator new to do so), so benchmarks can check that steady-state paths allocate nothing.
#pragma once

#include <cstdint>

namespace tierflow::tools {
std::uint64_t AllocationCount();
}
