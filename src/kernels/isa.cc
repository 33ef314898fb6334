// SPDX-License-Identifier: Apache-2.0
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
  return Status::InvalidArgument("unknown ISA '" + std::string(name) +
                                 "': use auto, avx512, avx2 or baseline");
}

namespace kernels {
Result<CpuIsa> IsaInEnvironment() {
  const char* env = std::getenv("TIERFLOW_ISA");
  if (env == nullptr || *env == '\0') return CpuIsa::kAuto;
  Result<CpuIsa> isa = ParseCpuIsa(env);
  if (!isa.ok()) {
    return Status::InvalidArgument(
        fmt::format("TIERFLOW_ISA={}: {}, or unset it", env, isa.status().message()));
  }
  return isa;
}
}  // namespace kernels

namespace {
// The widest ISA this CPU runs.
CpuIsa WidestSupported() {
  if (kernels::IsaSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (kernels::IsaSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}
}  // namespace

Result<CpuIsa> ChooseCpuIsa() {
  Result<CpuIsa> named = kernels::IsaInEnvironment();
  if (!named.ok()) return named.status();
  if (*named == CpuIsa::kAuto) return WidestSupported();
  if (!kernels::IsaSupported(*named)) {
    return Status::Unsupported(fmt::format(
        "TIERFLOW_ISA={}: this CPU lacks it (its widest is {}): name that, a narrower one, or "
        "unset TIERFLOW_ISA",
        CpuIsaName(*named), CpuIsaName(WidestSupported())));
  }
  return *named;
}

CpuIsa DetectCpuIsa() {
  Result<CpuIsa> chosen = ChooseCpuIsa();
  return chosen.ok() ? *chosen : WidestSupported();
}

}  // namespace tierflow
