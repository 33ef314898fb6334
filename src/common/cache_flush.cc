#include "common/cache_flush.h"

#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tierflow {
namespace {

constexpr std::uintptr_t kLine = 64;

#if defined(__x86_64__)
struct FlushSupport {
  bool clflushopt = false;
  bool clwb = false;
};
FlushSupport Detect() {
  FlushSupport s;
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    s.clflushopt = (b >> 23) & 1;
    s.clwb = (b >> 24) & 1;
  }
  return s;
}
const FlushSupport kSupport = Detect();

__attribute__((target("clwb"))) void Clwb(std::uintptr_t a, std::uintptr_t end) {
  for (; a < end; a += kLine) __builtin_ia32_clwb(reinterpret_cast<void*>(a));
}
__attribute__((target("clflushopt"))) void Clflushopt(std::uintptr_t a, std::uintptr_t end) {
  for (; a < end; a += kLine) __builtin_ia32_clflushopt(reinterpret_cast<void*>(a));
}
void Clflush(std::uintptr_t a, std::uintptr_t end) {
  for (; a < end; a += kLine) __builtin_ia32_clflush(reinterpret_cast<void*>(a));
}
#endif

}  // namespace

void FlushCacheLines(const void* p, std::size_t n, bool keep) {
  if (n == 0) return;
  auto a = reinterpret_cast<std::uintptr_t>(p) & ~(kLine - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(p) + n;
#if defined(__x86_64__)
  if (keep && kSupport.clwb) {
    Clwb(a, end);
  } else if (kSupport.clflushopt) {
    Clflushopt(a, end);
  } else {
    Clflush(a, end);  // ordered by itself; the fence below covers the others
  }
  __builtin_ia32_sfence();
#else
#error "FlushCacheLines: add this architecture's cache write-back instructions"
#endif
}

const char* CacheFlushInstruction(bool keep) {
#if defined(__x86_64__)
  if (keep && kSupport.clwb) return "clwb";
  if (kSupport.clflushopt) return "clflushopt";
  return "clflush";
#else
#error "CacheFlushInstruction: add this architecture"
#endif
}

}  // namespace tierflow
