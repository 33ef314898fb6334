#include "cpu/kernels.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace tierflow::cpu {

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

const Kernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return internal::kAvx512Kernels;
    case CpuIsa::kAvx2: return internal::kAvx2Kernels;
    default: return internal::kBaselineKernels;
  }
}

std::size_t RunPiece(const Kernels& k, OpKind kind, char* dst, const char* src, const char* src2,
                     std::size_t n, std::uint64_t pattern, std::size_t phase, bool nt,
                     bool overlapping) {
  switch (kind) {
    case OpKind::kCopy:
      k.copy(dst, src, n, nt);
      return n;
    case OpKind::kMove:
      if (overlapping) {
        std::memmove(dst, src, n);
      } else {
        k.copy(dst, src, n, nt);
      }
      return n;
    case OpKind::kFill:
      k.fill(dst, pattern, phase, n, nt);
      return n;
    case OpKind::kCompare:
      return FirstDifference(src, src2, n);
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

}  // namespace tierflow::cpu

namespace tierflow {

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto: return "auto";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kBaseline: return "baseline";
  }
  return "?";
}

Result<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kAuto, CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kBaseline}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return Status::Invalid("unknown ISA '" + std::string(name) +
                         "': use auto, avx512, avx2 or baseline");
}

CpuIsa DetectCpuIsa() {
  if (const char* env = std::getenv("TIERFLOW_ISA"); env != nullptr && *env != '\0') {
    Result<CpuIsa> isa = ParseCpuIsa(env);
    if (isa.ok() && *isa != CpuIsa::kAuto) return *isa;
  }
  if (cpu::IsaSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (cpu::IsaSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}

}  // namespace tierflow
