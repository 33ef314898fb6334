// SPDX-License-Identifier: Apache-2.0
// Temporal copies that recover from their own memory faults (kernels.h: copy_recoverable).
//
// Why assembly: the fault guard of a C++ kernel is a sigsetjmp per call plus the scope around
// it, about 12 ns of a 4 KiB copy that takes 41 ns here (issue 17: a single inline 4 KiB copy
// must cost at most 70 ns from submit to wait). A loop whose every memory access lies between
// two labels can instead be resumed by the signal handler at a fixup label, as the kernel's
// exception tables do for copies from user space: nothing is saved per call.
//
// Between tierflow_copy_recoverable_begin and _end only the loads from the source and the
// stores to the destination touch memory; a fault there resumes at the variant's fixup, which
// returns 1 (the bytes copied before it stay copied). Same shape as the C++ kernels
// (kernels_impl.h): an unaligned first and last vector cover the ragged edges, the loop stores
// aligned vectors, four per round; below four vectors, whole vectors and an overlapping last
// one; below one vector, rep movsb.
#include "kernels/kernels.h"

#include "common/hot_path.h"

#if TIERFLOW_RECOVERABLE_COPY

// Each variant starts on a cache line, in the section of the inline path's C++ functions
// (common/hot_path.h).
// clang-format off
#define TIERFLOW_COPY_HEAD(name) \
  ".globl " #name "\n.hidden " #name "\n.type " #name ", @function\n.p2align 6\n" #name ":\n"

// rdi = dst, rsi = src, rdx = n. LOAD/STORE_A/STORE_U: the ISA's moves, R: its register prefix
// (xmm, ymm), W: its width in bytes; EXIT: what leaves the wide registers clean.
#define TIERFLOW_COPY_BODY(LOAD, STORE_A, STORE_U, R, W, EXIT)                                    \
  " cmp $" #W "*4, %rdx\n jb 5f\n"                                                                 \
  " " LOAD " (%rsi), %" R "4\n " LOAD " -" #W "(%rsi,%rdx), %" R "5\n lea (%rdi,%rdx), %r8\n"      \
  " mov %rdi, %rcx\n neg %rcx\n and $" #W "-1, %rcx\n " STORE_U " %" R "4, (%rdi)\n"                \
  " add %rcx, %rdi\n add %rcx, %rsi\n sub %rcx, %rdx\n cmp $" #W "*4, %rdx\n jb 2f\n"              \
  "1: " LOAD " (%rsi), %" R "0\n " LOAD " " #W "(%rsi), %" R "1\n"                                 \
  " " LOAD " " #W "*2(%rsi), %" R "2\n " LOAD " " #W "*3(%rsi), %" R "3\n"                         \
  " " STORE_A " %" R "0, (%rdi)\n " STORE_A " %" R "1, " #W "(%rdi)\n"                              \
  " " STORE_A " %" R "2, " #W "*2(%rdi)\n " STORE_A " %" R "3, " #W "*3(%rdi)\n"                    \
  " add $" #W "*4, %rsi\n add $" #W "*4, %rdi\n sub $" #W "*4, %rdx\n cmp $" #W "*4, %rdx\n jae 1b\n" \
  "2: cmp $" #W ", %rdx\n jb 3f\n " LOAD " (%rsi), %" R "0\n " STORE_A " %" R "0, (%rdi)\n"        \
  " add $" #W ", %rsi\n add $" #W ", %rdi\n sub $" #W ", %rdx\n jmp 2b\n"                           \
  "3: " STORE_U " %" R "5, -" #W "(%r8)\n" EXIT " xor %eax, %eax\n ret\n"                           \
  "5: cmp $" #W ", %rdx\n jb 6f\n " LOAD " -" #W "(%rsi,%rdx), %" R "5\n lea (%rdi,%rdx), %r8\n"   \
  "7: " LOAD " (%rsi), %" R "0\n " STORE_U " %" R "0, (%rdi)\n add $" #W ", %rsi\n"                 \
  " add $" #W ", %rdi\n sub $" #W ", %rdx\n cmp $" #W ", %rdx\n jae 7b\n"                           \
  " " STORE_U " %" R "5, -" #W "(%r8)\n" EXIT " xor %eax, %eax\n ret\n"                             \
  "6: mov %rdx, %rcx\n rep movsb\n xor %eax, %eax\n ret\n"

asm(".pushsection " TIERFLOW_HOT_SECTION ",\"ax\",@progbits\n"
    ".globl tierflow_copy_recoverable_begin\n.hidden tierflow_copy_recoverable_begin\n"
    "tierflow_copy_recoverable_begin:\n"
    TIERFLOW_COPY_HEAD(tierflow_copy_recoverable_avx2)
    TIERFLOW_COPY_BODY("vmovdqu", "vmovdqa", "vmovdqu", "ymm", 32, " vzeroupper\n")
    TIERFLOW_COPY_HEAD(tierflow_copy_recoverable_sse2)
    TIERFLOW_COPY_BODY("movdqu", "movdqa", "movdqu", "xmm", 16, "")
    ".globl tierflow_copy_recoverable_end\n.hidden tierflow_copy_recoverable_end\n"
    "tierflow_copy_recoverable_end:\n"
    // Outside the range: the fixups themselves never fault.
    ".globl tierflow_copy_recoverable_fixup_avx2\n.hidden tierflow_copy_recoverable_fixup_avx2\n"
    "tierflow_copy_recoverable_fixup_avx2:\n vzeroupper\n mov $1, %eax\n ret\n"
    ".globl tierflow_copy_recoverable_fixup_sse2\n.hidden tierflow_copy_recoverable_fixup_sse2\n"
    "tierflow_copy_recoverable_fixup_sse2:\n mov $1, %eax\n ret\n"
    ".popsection\n");
// clang-format on

extern "C" {
extern const char tierflow_copy_recoverable_begin[], tierflow_copy_recoverable_end[];
extern const char tierflow_copy_recoverable_fixup_avx2[], tierflow_copy_recoverable_fixup_sse2[];
}

namespace tierflow::kernels {
namespace {

// Registered when the library loads, as the coherence loops are (coherence/lines.cc): the two
// variants share one range each, split where the SSE2 one starts.
[[maybe_unused]] const bool kCopyFixupsRegistered = [] {
  const auto addr = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  RegisterFaultFixup({addr(tierflow_copy_recoverable_begin),
                      addr(reinterpret_cast<const void*>(&tierflow_copy_recoverable_sse2)),
                      addr(tierflow_copy_recoverable_fixup_avx2)});
  RegisterFaultFixup({addr(reinterpret_cast<const void*>(&tierflow_copy_recoverable_sse2)),
                      addr(tierflow_copy_recoverable_end),
                      addr(tierflow_copy_recoverable_fixup_sse2)});
  return true;
}();

}  // namespace
}  // namespace tierflow::kernels

#endif  // TIERFLOW_RECOVERABLE_COPY
