// SPDX-License-Identifier: Apache-2.0
// Memory faults as errors: runs a piece of work so that a SIGSEGV or SIGBUS raised by an
// access to the ranges it was given (a read-only destination, a PROT_NONE source, a file
// mapping past the end of its file) ends the work and is reported, as a DSA completion record
// reports a page fault, instead of killing the process.
//
// How: a process-wide handler for SIGSEGV and SIGBUS, installed once (InstallFaultHandler);
// the guarded thread points a thread-local scope at a sigsetjmp buffer, and the handler
// siglongjmps there when the faulting address lies in one of the scope's ranges. Every other
// fault goes to the handler that was installed before (or to the default action, which ends
// the process as it would have without tierflow). The work between must hold no lock and
// allocate nothing: it is abandoned where it faulted. Costs a sigsetjmp without saving the
// signal mask (no system call) per guarded run; the handler unblocks the signal itself before
// it jumps, on the faulting path only.
//
// A program that installs its own SIGSEGV/SIGBUS handler after tierflow's replaces it: faults
// in tierflow's copies then reach that handler (chain to the previous one to keep both).
#pragma once

#include <setjmp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tierflow/status.h"

namespace tierflow {

struct GuardedRange {
  const void* begin = nullptr;
  std::size_t size = 0;
  const char* name = "";   // "dst", "src": how the error names the range
  bool write = false;      // the work writes it (else only reads)
  std::size_t offset = 0;  // where `begin` lies in the operation's buffer (a piece's offset)
};

struct MemoryFault {
  int signal = 0;              // SIGSEGV or SIGBUS
  std::uintptr_t address = 0;  // the faulting address (si_addr)
  int range = -1;              // index of the range it lies in
};

// Installs the handler (once per process; later calls return the first result).
Status InstallFaultHandler();

// What a fault means for the user: which range, read or write, why (from the mapping's
// protection), and the fix. `what` names the operation ("CPU copy").
Status FaultError(std::string_view what, const MemoryFault& fault,
                  std::span<const GuardedRange> ranges);

// Which of the guarded work's ranges holds a faulting address: its index, or -1. Called in
// the signal handler: it must only read memory and compare.
using LocateFault = int (*)(const void* context, std::uintptr_t address);

namespace detail {

struct FaultScope {
  sigjmp_buf env;
  const void* context;
  LocateFault locate;
  MemoryFault fault;
  FaultScope* outer;
};

// The innermost guarded run of this thread. Initial-exec TLS: the handler reads it, and such
// a read is async-signal-safe (no lazy allocation).
inline constinit thread_local FaultScope* t_fault_scope __attribute__((tls_model("initial-exec"))) =
    nullptr;

}  // namespace detail

// Code that recovers from its own faults without a sigsetjmp, as the kernel's exception
// tables do: a fault whose instruction lies in [begin, end) of a registered range resumes at
// `resume` with the fault recorded in t_fixup_fault. For leaf loops written in assembly that
// keep their progress in registers (coherence maintenance: one instruction per cache line,
// where a sigsetjmp per call would cost more than a short range's work). Up to 8 ranges;
// registering the same range again does nothing. The handler must be installed.
struct FaultFixup {
  std::uintptr_t begin = 0, end = 0, resume = 0;
};
void RegisterFaultFixup(const FaultFixup& fixup);
// The last fault a fixup range took on this thread (signal 0: none since the last Clear).
inline constinit thread_local MemoryFault t_fixup_fault
    __attribute__((tls_model("initial-exec"))) = {};

// Runs work(); true when it completed, false with *fault set when an access to a range that
// locate(context, address) recognises faulted (the work stopped there; what it wrote before
// stays written). InstallFaultHandler must have succeeded, or faults end the process as usual.
// The fast path stores two pointers and calls sigsetjmp; nothing else.
template <typename Work>
bool RunGuarded(const void* context, LocateFault locate, MemoryFault* fault, Work&& work) {
  detail::FaultScope scope;
  scope.context = context;
  scope.locate = locate;
  detail::FaultScope*& current = detail::t_fault_scope;
  scope.outer = current;
  if (sigsetjmp(scope.env, 0) != 0) {  // the handler jumped here and restored `current`
    *fault = scope.fault;
    return false;
  }
  current = &scope;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the work stays inside the scope
  work();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  current = scope.outer;
  return true;
}

}  // namespace tierflow
