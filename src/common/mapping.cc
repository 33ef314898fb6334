#include "common/mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>

#include <fmt/format.h>

namespace tierflow {

Status CheckMapped(const char* what, const void* p, std::size_t size) {
  if (p == nullptr) return Status::Ok();
  auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  std::uintptr_t start = a & ~(page - 1);
  if (msync(reinterpret_cast<void*>(start), a + size - start, MS_ASYNC) != 0 && errno == ENOMEM) {
    return Status::Invalid(
        fmt::format("{} range [{}, +{}) is not (entirely) mapped in this process", what, p, size));
  }
  return Status::Ok();
}

PageAccess QueryPageAccess(const void* addr) {
  PageAccess out;
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, perms) != 3) continue;
    if (a >= lo && a < hi) {
      out.mapped = true;
      out.readable = perms[0] == 'r';
      out.writable = perms[1] == 'w';
      break;
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace tierflow
