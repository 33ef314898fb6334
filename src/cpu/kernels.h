// Copy and fill kernels, one set per instruction set, chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/pattern.h"
#include "tierflow/cpu_engine.h"

namespace tierflow::cpu {

struct Kernels {
  // Non-overlapping copy. `nt`: streaming stores, fenced before return.
  void (*copy)(void* dst, const void* src, std::size_t n, bool nt);
  // dst[i] = byte ((phase + i) % 8) of pattern.
  void (*fill)(void* dst, std::uint64_t pattern, std::size_t phase, std::size_t n, bool nt);
};

bool IsaSupported(CpuIsa isa);
const Kernels& KernelsFor(CpuIsa isa);  // isa must be supported and not kAuto

// Offset of the first differing byte, or n when equal.
std::size_t FirstDifference(const void* a, const void* b, std::size_t n);

// One piece of an operation, run on this thread: the CPU engine's workers and the DSA
// engine's CPU fallback share it. `phase`: offset of the piece within its operation (fill
// pattern). `overlapping`: a move whose ranges may overlap (memmove). Returns the offset of
// the first difference for a compare, n otherwise.
std::size_t RunPiece(const Kernels& k, OpKind kind, char* dst, const char* src, const char* src2,
                     std::size_t n, std::uint64_t pattern, std::size_t phase, bool nt,
                     bool overlapping);

namespace internal {
extern const Kernels kBaselineKernels;
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512Kernels;
}  // namespace internal

}  // namespace tierflow::cpu
