// SPDX-License-Identifier: Apache-2.0
#include "coherence/lines.h"

#include "common/fault_guard.h"

#include <array>
#include <string>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

// The loops, one instruction per line, in assembly so that a fault (a line that is not
// mapped) resumes at a fixup that returns the count of lines not done: the progress is in a
// register at every instruction. Arguments: first line, count (> 0), line size. Between
// tierflow_lines_begin and tierflow_lines_end only the maintenance instructions can fault.
extern "C" {
std::size_t tierflow_lines_clwb(std::uintptr_t, std::size_t, std::size_t);
std::size_t tierflow_lines_clflushopt(std::uintptr_t, std::size_t, std::size_t);
std::size_t tierflow_lines_clflush(std::uintptr_t, std::size_t, std::size_t);
std::size_t tierflow_lines_dc_cvac(std::uintptr_t, std::size_t, std::size_t);
std::size_t tierflow_lines_dc_civac(std::uintptr_t, std::size_t, std::size_t);
extern const char tierflow_lines_begin[], tierflow_lines_end[], tierflow_lines_fixup[];
}

#define TIERFLOW_LOOP_HEAD(name) \
  ".globl " #name "\n.hidden " #name "\n.type " #name ", @function\n" #name ":\n"

#if defined(__x86_64__)
// rdi = address, rsi = count, rdx = line size; the fixup returns rsi.
#define TIERFLOW_X86_LOOP(name, insn) \
  TIERFLOW_LOOP_HEAD(name)            \
  "1: " insn " (%rdi)\n add %rdx, %rdi\n dec %rsi\n jnz 1b\n xor %eax, %eax\n ret\n"
asm(".pushsection .text\n.p2align 4\n.globl tierflow_lines_begin\n.hidden tierflow_lines_begin\ntierflow_lines_begin:\n"
    TIERFLOW_X86_LOOP(tierflow_lines_clwb, "clwb")
    TIERFLOW_X86_LOOP(tierflow_lines_clflushopt, "clflushopt")
    TIERFLOW_X86_LOOP(tierflow_lines_clflush, "clflush")
    ".globl tierflow_lines_end\n.hidden tierflow_lines_end\ntierflow_lines_end:\n"
    ".globl tierflow_lines_fixup\n.hidden tierflow_lines_fixup\ntierflow_lines_fixup:\n"
    " mov %rsi, %rax\n ret\n"
    // The arm64 names exist everywhere so that the dispatch below compiles; never called.
    TIERFLOW_LOOP_HEAD(tierflow_lines_dc_cvac) TIERFLOW_LOOP_HEAD(tierflow_lines_dc_civac)
    " ud2\n.popsection\n");
#elif defined(__aarch64__)
// x0 = address, x1 = count, x2 = line size; the fixup returns x1.
#define TIERFLOW_ARM_LOOP(name, op) \
  TIERFLOW_LOOP_HEAD(name)          \
  "1: dc " op ", x0\n add x0, x0, x2\n subs x1, x1, #1\n b.ne 1b\n mov x0, #0\n ret\n"
asm(".pushsection .text\n.p2align 4\n.globl tierflow_lines_begin\n.hidden tierflow_lines_begin\ntierflow_lines_begin:\n"
    TIERFLOW_ARM_LOOP(tierflow_lines_dc_cvac, "cvac")
    TIERFLOW_ARM_LOOP(tierflow_lines_dc_civac, "civac")
    ".globl tierflow_lines_end\n.hidden tierflow_lines_end\ntierflow_lines_end:\n"
    ".globl tierflow_lines_fixup\n.hidden tierflow_lines_fixup\ntierflow_lines_fixup:\n"
    " mov x0, x1\n ret\n"
    TIERFLOW_LOOP_HEAD(tierflow_lines_clwb) TIERFLOW_LOOP_HEAD(tierflow_lines_clflushopt)
    TIERFLOW_LOOP_HEAD(tierflow_lines_clflush) " brk #0\n.popsection\n");
#else
#error "coherence: add this architecture's maintenance loops"
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
  if (static_cast<unsigned>(requested) > static_cast<unsigned>(LineInstruction::kDcCivac)) {
    return Status::InvalidArgument(
        fmt::format("{}: unknown LineInstruction value {}; use kAuto or one of "
                    "the named instructions",
                    MaintenanceName(m), static_cast<unsigned>(requested)));
  }
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
    return Status::InvalidArgument(fmt::format(
        "{}: {} writes lines back but keeps them cached, so it does not invalidate; use {} or "
        "auto",
        MaintenanceName(m), LineInstructionName(requested), LineInstructionName(s.invalidate)));
  }
  *resolved = requested;
  return Status::Ok();
}

LineLoop LoopFor(LineInstruction resolved) {
  switch (resolved) {
    case LineInstruction::kClwb:
      return &tierflow_lines_clwb;
    case LineInstruction::kClflushopt:
      return &tierflow_lines_clflushopt;
    case LineInstruction::kClflush:
      return &tierflow_lines_clflush;
    case LineInstruction::kDcCvac:
      return &tierflow_lines_dc_cvac;
    case LineInstruction::kDcCivac:
      return &tierflow_lines_dc_civac;
    case LineInstruction::kAuto:
      break;
  }
  return nullptr;  // Resolve never yields kAuto
}

std::size_t ApplyLines(LineInstruction instruction, const void* data, std::size_t size) {
  const LineLoop loop = LoopFor(instruction);
  return loop == nullptr ? 0 : RunLoop(loop, data, size);
}

namespace {

std::array<std::array<LineLoop, 6>, 3> MakeLoopTable() {
  std::array<std::array<LineLoop, 6>, 3> t{};
  for (std::size_t m = 0; m < 3; ++m) {
    for (std::size_t i = 0; i < 6; ++i) {
      LineInstruction r = LineInstruction::kAuto;
      const bool ok =
          Resolve(static_cast<Maintenance>(m), static_cast<LineInstruction>(i), &r).ok();
      t[m][i] = ok ? LoopFor(r) : nullptr;
    }
  }
  return t;
}

}  // namespace

// Filled when the library loads, so that a call reads them without the guard of a
// function-local static: a call on a short range costs about as much as its instructions.
const std::array<std::array<LineLoop, 6>, 3> detail::g_loops = MakeLoopTable();
const std::size_t detail::g_line_size = GetCoherenceSupport().line_size;

namespace {

// Registered when the library loads, so that every caller of ApplyLines (the public functions,
// the CPU engine, the DSA model) recovers from faults once the handler is installed.
[[maybe_unused]] const bool kLineFixupRegistered = [] {
  RegisterFaultFixup({reinterpret_cast<std::uintptr_t>(tierflow_lines_begin),
                      reinterpret_cast<std::uintptr_t>(tierflow_lines_end),
                      reinterpret_cast<std::uintptr_t>(tierflow_lines_fixup)});
  return true;
}();

}  // namespace

std::size_t MaintainAndComplete(Maintenance m, const void* data, std::size_t size) {
  const CoherenceSupport& s = GetCoherenceSupport();
  const std::size_t left =
      ApplyLines(m == Maintenance::kWriteBack ? s.write_back : s.invalidate, data, size);
  CompleteNow();
  return left;
}

}  // namespace tierflow::coherence

namespace tierflow {

const CoherenceSupport& GetCoherenceSupport() {
  static const CoherenceSupport support = coherence::Detect();
  return support;
}

}  // namespace tierflow
