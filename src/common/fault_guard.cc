// SPDX-License-Identifier: Apache-2.0
#include "common/fault_guard.h"

#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "common/mapping.h"

namespace tierflow {

namespace {

struct sigaction g_previous_segv;
struct sigaction g_previous_bus;

// Hands a fault that is not ours to whoever had the signal before. With the default action
// (or none), the default is restored and the faulting instruction runs again: the process
// ends with that signal, as it would have without tierflow.
void Chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& previous = sig == SIGSEGV ? g_previous_segv : g_previous_bus;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
      previous.sa_handler != nullptr) {
    previous.sa_handler(sig);
    return;
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

constexpr int kMaxFixups = 8;
std::atomic<int> g_fixup_count{0};
FaultFixup g_fixups[kMaxFixups];

std::uintptr_t ProgramCounter(const ucontext_t& uc) {
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc.uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc.uc_mcontext.pc);
#else
#error "fault_guard: add this architecture's program counter"
#endif
}

void SetProgramCounter(ucontext_t& uc, std::uintptr_t pc) {
#if defined(__x86_64__)
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(pc);
#elif defined(__aarch64__)
  uc.uc_mcontext.pc = pc;
#endif
}

// A fault inside a registered fixup range: resume at its fixup (true), with the fault noted.
bool TakeFixup(int sig, std::uintptr_t address, void* context) {
  auto& uc = *static_cast<ucontext_t*>(context);
  const std::uintptr_t pc = ProgramCounter(uc);
  const int n = g_fixup_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (pc >= g_fixups[i].begin && pc < g_fixups[i].end) {
      t_fixup_fault = MemoryFault{sig, address, 0};
      SetProgramCounter(uc, g_fixups[i].resume);
      return true;
    }
  }
  return false;
}

void OnFault(int sig, siginfo_t* info, void* context) {
  detail::FaultScope* scope = detail::t_fault_scope;
  const auto a = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (TakeFixup(sig, a, context)) return;  // the signal mask is restored on return
  if (scope != nullptr) {
    if (const int range = scope->locate(scope->context, a); range >= 0) {
      scope->fault = MemoryFault{sig, a, range};
      detail::t_fault_scope = scope->outer;
      // The kernel blocked the signal for the handler's run; leaving by siglongjmp skips the
      // restore, so unblock here (the guarded run's sigsetjmp saved no mask: no system call
      // on the path without a fault).
      sigset_t faults;
      sigemptyset(&faults);
      sigaddset(&faults, SIGSEGV);
      sigaddset(&faults, SIGBUS);
      pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
      siglongjmp(scope->env, 1);
    }
  }
  Chain(sig, info, context);
}

Status Install() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = &OnFault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_previous_segv) != 0 ||
      sigaction(SIGBUS, &sa, &g_previous_bus) != 0) {
    return Status::IoError(
        fmt::format("cannot install tierflow's SIGSEGV/SIGBUS handler "
                    "(which turns faults in copies into errors): {}",
                    std::strerror(errno)));
  }
  return Status::Ok();
}

std::string_view Why(const MemoryFault& fault, const GuardedRange& r) {
  if (fault.signal == SIGBUS) {
    return "the page lies beyond the end of the file it maps (was the file truncated?) or the "
           "memory behind it failed";
  }
  const PageAccess access = QueryPageAccess(reinterpret_cast<const void*>(fault.address));
  if (!access.mapped) return "it is not mapped in this process";
  if (!access.readable) return "its pages are not readable (PROT_NONE)";
  if (r.write && !access.writable) return "its pages are read-only";
  return "the access was refused";
}

}  // namespace

void RegisterFaultFixup(const FaultFixup& fixup) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  const int n = g_fixup_count.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    if (g_fixups[i].begin == fixup.begin) return;
  }
  if (n == kMaxFixups) std::abort();  // a fixed table: tierflow registers two at most
  g_fixups[n] = fixup;
  g_fixup_count.store(n + 1, std::memory_order_release);
}

Status InstallFaultHandler() {
  static const Status installed = Install();
  return installed;
}

Status FaultError(std::string_view what, const MemoryFault& fault,
                  std::span<const GuardedRange> ranges) {
  if (fault.range < 0 || static_cast<std::size_t>(fault.range) >= ranges.size()) {
    return Status(StatusCode::kFailed,
                  fmt::format("{}: memory fault at 0x{:x}", what, fault.address));
  }
  const GuardedRange& r = ranges[static_cast<std::size_t>(fault.range)];
  const std::uintptr_t offset =
      fault.address - reinterpret_cast<std::uintptr_t>(r.begin) + r.offset;
  return Status::InvalidArgument(fmt::format(
      "{}: {} the {} faulted at 0x{:x} (byte {} of the operation's {}): {}; pass {} memory "
      "(the operation stopped there; bytes before it may have been {})",
      what, r.write ? "writing" : "reading", r.name, fault.address, offset, r.name, Why(fault, r),
      r.write ? "writable" : "readable", r.write ? "written" : "read"));
}

}  // namespace tierflow
