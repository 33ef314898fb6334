// SPDX-License-Identifier: Apache-2.0
#include "kernels/kernels.h"

#include "coherence/lines.h"
#include "common/crc32c.h"
#include "common/fault_guard.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace tierflow::kernels {

bool IsaSupported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kBaseline:
      return true;
#if defined(__x86_64__)
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
#else
    default:
      return false;
#endif
  }
  return false;
}

const Kernels& KernelsFor(CpuIsa isa, StreamPrefetch prefetch) {
  const bool sw = prefetch == StreamPrefetch::kSoftware;
  switch (isa) {
    case CpuIsa::kAvx512:
      return sw ? internal::kAvx512Kernels : internal::kAvx512KernelsHw;
    case CpuIsa::kAvx2:
      return sw ? internal::kAvx2Kernels : internal::kAvx2KernelsHw;
    default:
      return sw ? internal::kBaselineKernels : internal::kBaselineKernelsHw;
  }
}

namespace {

void Maintain(coherence::Maintenance m, const PieceWork& w, PieceResult* r) {
  if (coherence::MaintainAndComplete(m, w.dst, w.n) == 0) return;
  r->faulted = true;
  r->fault = t_fixup_fault;
  r->fault.range = 0;  // the destination: the only range a maintenance piece has
  // The instructions name whole lines: the first may start before the piece.
  r->fault.address = std::max(r->fault.address, reinterpret_cast<std::uintptr_t>(w.dst));
}

}  // namespace

PieceResult RunPiece(const Kernels& k, const PieceWork& w) {
  PieceResult r;
  r.difference = w.n;
  switch (w.kind) {
    case OpKind::kCopy:
      k.copy(w.dst, w.src, w.n, w.nt);
      break;
    case OpKind::kMove:
      if (w.overlapping) {
        std::memmove(w.dst, w.src, w.n);
      } else {
        k.copy(w.dst, w.src, w.n, w.nt);
      }
      break;
    case OpKind::kFill:
      k.fill(w.dst, w.pattern, w.phase, w.n, w.nt);
      break;
    case OpKind::kCompare:
      r.difference = FirstDifference(w.src, w.src2, w.n);
      break;
    case OpKind::kComparePattern:
      r.difference = FirstPatternDifference(w.src, w.pattern, w.phase, w.n);
      break;
    case OpKind::kDualcast:
      k.copy(w.dst, w.src, w.n, w.nt);
      k.copy(w.dst2, w.src, w.n, w.nt);
      break;
    case OpKind::kCrc32c:
      r.crc = Crc32c(w.crc_seed, w.src, w.n);
      break;
    case OpKind::kWriteBack:
      Maintain(coherence::Maintenance::kWriteBack, w, &r);
      break;
    case OpKind::kInvalidate:
      Maintain(coherence::Maintenance::kInvalidate, w, &r);
      break;
    case OpKind::kWriteBackInvalidate:
      Maintain(coherence::Maintenance::kWriteBackInvalidate, w, &r);
      break;
    case OpKind::kDrain:
      break;  // no data: engines complete drains themselves
  }
  return r;
}

namespace {

// The piece's ranges, in the order PieceRanges lists them (called by the fault handler).
int LocatePieceFault(const void* context, std::uintptr_t a) {
  const auto& w = *static_cast<const PieceWork*>(context);
  const void* ranges[] = {w.dst, w.dst2, w.src, w.src2};
  for (int i = 0; i < 4; ++i) {
    const auto b = reinterpret_cast<std::uintptr_t>(ranges[i]);
    if (b != 0 && a >= b && a - b < w.n) return i;
  }
  return -1;
}

}  // namespace

bool RunPieceGuarded(const Kernels& k, const PieceWork& w, PieceResult* result, Status* error) {
  MemoryFault fault;
  bool ran;
  if (w.kind == OpKind::kCopy) {  // the common case, without RunPiece's dispatch and copies
    result->difference = w.n;
    if (!w.nt && k.copy_recoverable != nullptr) [[likely]] {
      if (k.copy_recoverable(w.dst, w.src, w.n) == 0) [[likely]]
        return true;
      result->faulted = true;
      result->fault = t_fixup_fault;
      result->fault.range = LocatePieceFault(&w, result->fault.address);
    }
    ran = result->faulted ||
          RunGuarded(&w, &LocatePieceFault, &fault, [&] { k.copy(w.dst, w.src, w.n, w.nt); });
  } else {
    ran = RunGuarded(&w, &LocatePieceFault, &fault, [&] { *result = RunPiece(k, w); });
  }
  if (ran) [[likely]] {
    if (!result->faulted) [[likely]]
      return true;
    fault = result->fault;
  }
  const bool writes = WritesData(w.kind);
  const GuardedRange ranges[] = {{w.dst, w.n, "destination", writes, w.phase},
                                 {w.dst2, w.n, "second destination", writes, w.phase},
                                 {w.src, w.n, "source", false, w.phase},
                                 {w.src2, w.n, "second source", false, w.phase}};
  *error = FaultError(std::string("CPU ") + std::string(OpKindName(w.kind)), fault, ranges);
  return false;
}

std::size_t FirstPatternDifference(const void* p, std::uint64_t pattern, std::size_t phase,
                                   std::size_t n) {
  const auto* x = static_cast<const unsigned char*>(p);
  const std::uint64_t rotated = RotatePattern(pattern, phase);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, x + i, 8);
    if (w != rotated) break;
  }
  for (; i < n; ++i) {
    if (x[i] != static_cast<unsigned char>(rotated >> (8 * (i % 8)))) return i;
  }
  return n;
}

std::size_t FirstDifference(const void* a, const void* b, std::size_t n) {
  auto* x = static_cast<const unsigned char*>(a);
  auto* y = static_cast<const unsigned char*>(b);
  std::size_t i = 0;
  constexpr std::size_t kBlock = 4096;
  while (i < n) {
    std::size_t len = std::min(kBlock, n - i);
    if (std::memcmp(x + i, y + i, len) != 0) {
      while (x[i] == y[i]) ++i;
      return i;
    }
    i += len;
  }
  return n;
}

}  // namespace tierflow::kernels
