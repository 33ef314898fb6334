#include "coherence/lines.h"

#include <string>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tierflow::coherence {
namespace {

#if defined(__x86_64__)
CoherenceSupport Detect() {
  CoherenceSupport s;
  s.architecture = "x86-64";
  unsigned a = 0, b = 0, c = 0, d = 0;
  __get_cpuid(1, &a, &b, &c, &d);
  s.line_size = ((b >> 8) & 0xff) * 8;
  s.line_size_source = "CPUID.01H:EBX[15:8]";
  if (s.line_size == 0) {  // a hypervisor that hides it; every x86-64 CPU so far uses 64
    s.line_size = 64;
    s.line_size_source = "64 (CPUID.01H:EBX[15:8] reads 0 here)";
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    s.clflushopt = (b >> 23) & 1;
    s.clwb = (b >> 24) & 1;
  }
  s.invalidate = s.clflushopt ? LineInstruction::kClflushopt : LineInstruction::kClflush;
  s.write_back = s.clwb ? LineInstruction::kClwb : s.invalidate;
  return s;
}
#elif defined(__aarch64__)
CoherenceSupport Detect() {
  CoherenceSupport s;
  s.architecture = "arm64";
  std::uint64_t ctr = 0;
  __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr));
  s.line_size = std::size_t{4} << ((ctr >> 16) & 0xf);
  s.line_size_source = "CTR_EL0.DminLine";
  s.write_back = LineInstruction::kDcCvac;
  s.invalidate = LineInstruction::kDcCivac;
  return s;
}
#else
#error "coherence: add this architecture's cache-line detection"
#endif

bool IsX86(LineInstruction i) {
  return i == LineInstruction::kClwb || i == LineInstruction::kClflushopt ||
         i == LineInstruction::kClflush;
}
bool IsArm(LineInstruction i) {
  return i == LineInstruction::kDcCvac || i == LineInstruction::kDcCivac;
}
bool KeepsLine(LineInstruction i) {
  return i == LineInstruction::kClwb || i == LineInstruction::kDcCvac;
}

// Why this CPU cannot run `i` ("" when it can).
std::string Missing(LineInstruction i, const CoherenceSupport& s) {
  if (s.architecture == "x86-64" && IsArm(i))
    return "it is an arm64 instruction and this is x86-64";
  if (s.architecture == "arm64" && IsX86(i)) return "it is an x86 instruction and this is arm64";
  if (i == LineInstruction::kClwb && !s.clwb)
    return "this CPU lacks CLWB (CPUID.(EAX=7,ECX=0):EBX[24] is 0)";
  if (i == LineInstruction::kClflushopt && !s.clflushopt) {
    return "this CPU lacks CLFLUSHOPT (CPUID.(EAX=7,ECX=0):EBX[23] is 0)";
  }
  return "";
}

#if defined(__x86_64__)
__attribute__((target("clwb"))) void Clwb(std::uintptr_t a, std::size_t n, std::size_t line) {
  for (; n > 0; --n, a += line) __builtin_ia32_clwb(reinterpret_cast<void*>(a));
}
__attribute__((target("clflushopt"))) void Clflushopt(std::uintptr_t a, std::size_t n,
                                                      std::size_t line) {
  for (; n > 0; --n, a += line) __builtin_ia32_clflushopt(reinterpret_cast<void*>(a));
}
void Clflush(std::uintptr_t a, std::size_t n, std::size_t line) {
  for (; n > 0; --n, a += line) __builtin_ia32_clflush(reinterpret_cast<void*>(a));
}
#elif defined(__aarch64__)
void DcCvac(std::uintptr_t a, std::size_t n, std::size_t line) {
  for (; n > 0; --n, a += line) __asm__ volatile("dc cvac, %0" ::"r"(a) : "memory");
}
void DcCivac(std::uintptr_t a, std::size_t n, std::size_t line) {
  for (; n > 0; --n, a += line) __asm__ volatile("dc civac, %0" ::"r"(a) : "memory");
}
#endif

}  // namespace

const char* MaintenanceName(Maintenance m) {
  switch (m) {
    case Maintenance::kWriteBack:
      return "WriteBack";
    case Maintenance::kInvalidate:
      return "Invalidate";
    case Maintenance::kWriteBackInvalidate:
      return "WriteBackInvalidate";
  }
  return "?";
}

Status Resolve(Maintenance m, LineInstruction requested, LineInstruction* resolved) {
  const CoherenceSupport& s = GetCoherenceSupport();
  if (requested == LineInstruction::kAuto) {
    *resolved = m == Maintenance::kWriteBack ? s.write_back : s.invalidate;
    return Status::Ok();
  }
  if (std::string why = Missing(requested, s); !why.empty()) {
    return Status::Unsupported(fmt::format(
        "{}: cannot use {}: {}; use auto (this CPU: {})", MaintenanceName(m),
        LineInstructionName(requested), why,
        LineInstructionName(m == Maintenance::kWriteBack ? s.write_back : s.invalidate)));
  }
  if (m != Maintenance::kWriteBack && KeepsLine(requested)) {
    return Status::Invalid(fmt::format(
        "{}: {} writes lines back but keeps them cached, so it does not invalidate; use {} or "
        "auto",
        MaintenanceName(m), LineInstructionName(requested), LineInstructionName(s.invalidate)));
  }
  *resolved = requested;
  return Status::Ok();
}

void ApplyLines(LineInstruction instruction, const void* data, std::size_t size) {
  const std::size_t line = GetCoherenceSupport().line_size;
  const LineRange r = LinesCovering(reinterpret_cast<std::uintptr_t>(data), size, line);
  switch (instruction) {
#if defined(__x86_64__)
    case LineInstruction::kClwb:
      return Clwb(r.first, r.count, line);
    case LineInstruction::kClflushopt:
      return Clflushopt(r.first, r.count, line);
    case LineInstruction::kClflush:
      return Clflush(r.first, r.count, line);
#elif defined(__aarch64__)
    case LineInstruction::kDcCvac:
      return DcCvac(r.first, r.count, line);
    case LineInstruction::kDcCivac:
      return DcCivac(r.first, r.count, line);
#endif
    default:
      return;  // Resolve never yields another
  }
}

void MaintainAndComplete(Maintenance m, const void* data, std::size_t size) {
  const CoherenceSupport& s = GetCoherenceSupport();
  ApplyLines(m == Maintenance::kWriteBack ? s.write_back : s.invalidate, data, size);
  CompleteNow();
}

}  // namespace tierflow::coherence

namespace tierflow {

const CoherenceSupport& GetCoherenceSupport() {
  static const CoherenceSupport support = coherence::Detect();
  return support;
}

}  // namespace tierflow
