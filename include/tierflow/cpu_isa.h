// SPDX-License-Identifier: Apache-2.0
// The instruction sets of the CPU kernels (the CPU engine's copies, and the DSA engine's pieces
// that run on the CPU), chosen at run time: AVX-512, AVX2, or baseline (SSE2 on x86-64, plain
// C++ elsewhere). Thread-safety: the functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

enum class CpuIsa : std::uint8_t { kAuto, kAvx512, kAvx2, kBaseline };
// "auto", "avx512", "avx2", "baseline"; ParseCpuIsa takes those (lower case).
TIERFLOW_EXPORT std::string_view CpuIsaName(CpuIsa isa);
TIERFLOW_EXPORT Result<CpuIsa> ParseCpuIsa(std::string_view name);
// ChooseCpuIsa's answer, or the best ISA this CPU supports where it has an error: never an
// ISA this CPU lacks. Engines refuse such a TIERFLOW_ISA when created (ChooseCpuIsa).
TIERFLOW_EXPORT CpuIsa DetectCpuIsa();
// The ISA CpuEngine::Create uses for CpuIsa::kAuto: TIERFLOW_ISA when set (empty or "auto":
// unset), else the best this CPU supports. Errors: TIERFLOW_ISA names no ISA (the message lists
// the names, which are lower case) or one this CPU lacks (kUnsupported).
TIERFLOW_EXPORT Result<CpuIsa> ChooseCpuIsa();

}  // namespace tierflow
