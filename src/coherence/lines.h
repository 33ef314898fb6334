// SPDX-License-Identifier: Apache-2.0
// The maintenance instructions themselves, for the public functions (coherence.cc), the CPU
// kernels and the DSA device model. No validation and no fault guard: callers check the range
// and guard the call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tierflow/coherence.h"

namespace tierflow::coherence {

enum class Maintenance : std::uint8_t { kWriteBack, kInvalidate, kWriteBackInvalidate };
const char* MaintenanceName(Maintenance m);  // "WriteBack", "Invalidate", ...

// The first line's address and the number of lines that cover [address, address+size) with
// lines of `line` bytes (a power of two). Pure, so that 32-, 64- and 256-byte lines can be
// tested on any machine.
struct LineRange {
  std::uintptr_t first = 0;
  std::size_t count = 0;
};
constexpr LineRange LinesCovering(std::uintptr_t address, std::size_t size, std::size_t line) {
  if (size == 0) return {};
  const std::uintptr_t first = address & ~(std::uintptr_t{line} - 1);
  const std::uintptr_t last = (address + size - 1) & ~(std::uintptr_t{line} - 1);
  return {first, static_cast<std::size_t>((last - first) / line + 1)};
}

// The instruction kAuto means for `m` on this CPU, or `requested` itself. Status::Ok() when
// this CPU has it and it does what `m` needs; otherwise the error names why and the fix.
Status Resolve(Maintenance m, LineInstruction requested, LineInstruction* resolved);

// A loop over lines (assembly, lines.cc): first line, count > 0, line size; returns 0 or, after
// a fault, the lines not done.
using LineLoop = std::size_t (*)(std::uintptr_t first, std::size_t count, std::size_t line);

namespace detail {
// Filled when the library loads: the loop for each (maintenance, requested instruction), null
// where the instruction cannot do it here; and the line size. Zero before (a static
// constructor elsewhere that calls in first takes the slow path).
extern const std::array<std::array<LineLoop, 6>, 3> g_loops;
extern const std::size_t g_line_size;
}  // namespace detail

// The per-call fast path of Resolve without the message: the loop, or null when `requested`
// cannot do `m` here (then Resolve says why) or the tables are not filled yet.
inline LineLoop ResolveQuickly(Maintenance m, LineInstruction requested) {
  const auto i = static_cast<std::size_t>(requested);
  return i < 6 ? detail::g_loops[static_cast<std::size_t>(m)][i] : nullptr;
}
// The loop that runs a resolved instruction (Resolve's result).
LineLoop LoopFor(LineInstruction resolved);

// Runs `loop` on every line covering [data, data+size); as ApplyLines.
inline std::size_t RunLoop(LineLoop loop, const void* data, std::size_t size) {
  const std::size_t line =
      detail::g_line_size != 0 ? detail::g_line_size : GetCoherenceSupport().line_size;
  const LineRange r = LinesCovering(reinterpret_cast<std::uintptr_t>(data), size, line);
  return r.count == 0 ? 0 : loop(r.first, r.count, line);
}

// Runs `instruction` (resolved: supported and not kAuto) on every line covering
// [data, data+size). No fence. Returns 0, or when a line faulted (not mapped, PROT_NONE) the
// number of lines not done, the faulting one included, with the fault in t_fixup_fault
// (common/fault_guard.h): the loops recover through a fault fixup, at no cost per call, once
// InstallFaultHandler has run (the fixup registers itself when the library loads).
std::size_t ApplyLines(LineInstruction instruction, const void* data, std::size_t size);

// Fence()/Complete(), inline for the kernels' loops.
inline void FenceNow() {
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#elif defined(__aarch64__)
  __asm__ volatile("dmb sy" ::: "memory");
#else
#error "coherence: add this architecture's fence"
#endif
}
inline void CompleteNow() {
#if defined(__x86_64__)
  __builtin_ia32_mfence();
#elif defined(__aarch64__)
  __asm__ volatile("dsb sy" ::: "memory");
#else
#error "coherence: add this architecture's completion barrier"
#endif
}

// What the engines run for a maintenance operation's piece: kAuto's instruction for `m`,
// then Complete, so that the piece has taken effect when it is reported done.
// Returns ApplyLines' count (0: done).
std::size_t MaintainAndComplete(Maintenance m, const void* data, std::size_t size);

}  // namespace tierflow::coherence
