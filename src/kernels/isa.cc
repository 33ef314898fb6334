#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "kernels/kernels.h"
#include "tierflow/cpu_isa.h"

namespace tierflow {

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto:
      return "auto";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kBaseline:
      return "baseline";
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

Result<CpuIsa> ChooseCpuIsa() {
  if (const char* env = std::getenv("TIERFLOW_ISA"); env != nullptr && *env != '\0') {
    Result<CpuIsa> isa = ParseCpuIsa(env);
    if (!isa.ok()) {
      return Status::Invalid(
          fmt::format("TIERFLOW_ISA={}: {}, or unset it", env, isa.status().message()));
    }
  }
  return DetectCpuIsa();
}

namespace kernels {
bool IsaFromEnvironment() {
  const char* env = std::getenv("TIERFLOW_ISA");
  if (env == nullptr || *env == '\0') return false;
  Result<CpuIsa> isa = ParseCpuIsa(env);
  return isa.ok() && *isa != CpuIsa::kAuto;
}
}  // namespace kernels

CpuIsa DetectCpuIsa() {
  if (const char* env = std::getenv("TIERFLOW_ISA"); env != nullptr && *env != '\0') {
    Result<CpuIsa> isa = ParseCpuIsa(env);
    if (isa.ok() && *isa != CpuIsa::kAuto) return *isa;
  }
  if (kernels::IsaSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (kernels::IsaSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}

}  // namespace tierflow
