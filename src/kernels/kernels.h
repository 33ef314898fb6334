// SPDX-License-Identifier: Apache-2.0
// Copy and fill kernels, one set per instruction set, chosen at run time.
#pragma once

#include "common/fault_guard.h"

#include <cstddef>
#include <cstdint>

#include "common/pattern.h"
#include "tierflow/cpu_isa.h"
#include "tierflow/operation.h"
#include "tierflow/status.h"

// Whether the x86-64 copies that recover from their own faults (copy_recoverable.cc) are
// built: not under sanitizers, which do not see the accesses of assembly (the C++ kernels,
// which they do see, copy there instead).
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if !__has_feature(address_sanitizer) && !__has_feature(thread_sanitizer) && \
    !__has_feature(memory_sanitizer)
#define TIERFLOW_RECOVERABLE_COPY 1
#endif
#else
#define TIERFLOW_RECOVERABLE_COPY 1
#endif
#endif
#ifndef TIERFLOW_RECOVERABLE_COPY
#define TIERFLOW_RECOVERABLE_COPY 0
#endif

#if TIERFLOW_RECOVERABLE_COPY
extern "C" {
std::size_t tierflow_copy_recoverable_avx2(void* dst, const void* src, std::size_t n);
std::size_t tierflow_copy_recoverable_sse2(void* dst, const void* src, std::size_t n);
}
#endif

namespace tierflow::kernels {

struct Kernels {
  // Non-overlapping copy. `nt`: streaming stores, fenced before return.
  void (*copy)(void* dst, const void* src, std::size_t n, bool nt);
  // dst[i] = byte ((phase + i) % 8) of pattern.
  void (*fill)(void* dst, std::uint64_t pattern, std::size_t phase, std::size_t n, bool nt);
  // The same copy with temporal stores, recovering from a memory fault by itself (a fault
  // fixup: no sigsetjmp per call): 0, or non-zero when an access faulted, with the fault in
  // t_fixup_fault (what was copied before it stays). The fault handler must be installed.
  // nullptr where this ISA has none (AVX-512, arm64, sanitizer builds): use RunPieceGuarded.
  std::size_t (*copy_recoverable)(void* dst, const void* src, std::size_t n) = nullptr;
};

bool IsaSupported(CpuIsa isa);
// How a streaming copy (nt) gets its source ahead of the loads: software prefetches a fixed
// distance ahead, or the hardware prefetchers alone. Which is faster depends on the core.
enum class StreamPrefetch : std::uint8_t { kSoftware, kHardware };
// isa must be supported and not kAuto; `prefetch` changes streaming copies only.
const Kernels& KernelsFor(CpuIsa isa, StreamPrefetch prefetch = StreamPrefetch::kSoftware);

// The supported ISA whose copy kernel is fastest on this CPU for copies that stay in the
// cache (temporal stores, timed on a block that fits in L1 and one that fits in L2) and for
// streaming ones (non-temporal stores, a block past L2), measured the first time it is asked
// for in a process (a few milliseconds; later calls return the same). A narrower ISA is chosen
// only when it is at least 5% faster at every size timed; so is leaving the streaming copy's
// source to the hardware prefetchers (streaming_prefetch) over software prefetches.
// Thread-safe.
struct MeasuredKernelChoice {
  CpuIsa cached;
  CpuIsa streaming;
  StreamPrefetch streaming_prefetch = StreamPrefetch::kSoftware;
};
MeasuredKernelChoice MeasuredKernels();
// What TIERFLOW_ISA names: kAuto when it is unset, empty or "auto" (then the kernels are
// measured); an error naming the value when it is not an ISA. The one reader of the variable.
Result<CpuIsa> IsaInEnvironment();

// Offset of the first differing byte, or n when equal.
std::size_t FirstDifference(const void* a, const void* b, std::size_t n);

// Offset of the first byte of [p, p+n) that differs from the pattern (byte i compared with
// byte (phase + i) % 8 of pattern), or n when all match.
std::size_t FirstPatternDifference(const void* p, std::uint64_t pattern, std::size_t phase,
                                   std::size_t n);

// One piece of an operation, run on this thread: the CPU engine's workers and the DSA
// engine's CPU fallback share it.
struct PieceWork {
  OpKind kind = OpKind::kCopy;
  char* dst = nullptr;
  char* dst2 = nullptr;
  const char* src = nullptr;
  const char* src2 = nullptr;
  std::size_t n = 0;
  std::uint64_t pattern = 0;
  std::size_t phase = 0;       // offset of the piece within its operation (pattern phase)
  std::uint32_t crc_seed = 0;  // kCrc32c: the CRC of the piece's bytes before src
  bool nt = false;             // streaming stores (copies and fills)
  bool overlapping = false;    // a move whose ranges may overlap (memmove)
};
struct PieceResult {
  std::size_t difference = 0;  // compares: offset of the first difference, n when equal
  std::uint32_t crc = 0;       // kCrc32c: Crc32c(crc_seed, the piece)
  bool faulted = false;        // maintenance: a line faulted (its loop recovers by itself)
  MemoryFault fault;           // ... where (range 0: dst)
};
PieceResult RunPiece(const Kernels& k, const PieceWork& w);
// RunPiece with a memory fault on one of the piece's ranges (a read-only destination, a
// PROT_NONE source, a truncated file mapping) returned as false with *error naming the range,
// the reason and the fix, instead of ending the process (common/fault_guard.h; the handler
// must be installed). What the piece wrote before the fault stays written.
bool RunPieceGuarded(const Kernels& k, const PieceWork& w, PieceResult* result, Status* error);

// The fields an engine's piece description shares with PieceWork (members of the same names:
// kind, dst, dst2, src, src2, size, pattern, offset).
template <typename EnginePiece>
PieceWork WorkOf(const EnginePiece& p) {
  PieceWork w;
  w.kind = p.kind;
  w.dst = p.dst;
  w.dst2 = p.dst2;
  w.src = p.src;
  w.src2 = p.src2;
  w.n = p.size;
  w.pattern = p.pattern;
  w.phase = p.offset;
  return w;
}

// Kinds whose destination is written with data (streaming stores apply).
constexpr bool WritesData(OpKind kind) {
  return kind == OpKind::kCopy || kind == OpKind::kMove || kind == OpKind::kFill ||
         kind == OpKind::kDualcast;
}

namespace internal {
extern const Kernels kBaselineKernels;
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512Kernels;
// The same with streaming copies left to the hardware prefetchers (StreamPrefetch::kHardware).
extern const Kernels kBaselineKernelsHw;
extern const Kernels kAvx2KernelsHw;
extern const Kernels kAvx512KernelsHw;
}  // namespace internal

}  // namespace tierflow::kernels
