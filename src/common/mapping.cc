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

std::FILE* OpenMaps() { return std::fopen("/proc/self/maps", "r"); }

bool NextMapping(std::FILE* maps, MapsLine& line) {
  char text[512];
  while (std::fgets(text, sizeof text, maps) != nullptr) {
    line = MapsLine{};
    if (std::sscanf(text, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %lu %255s", &line.lo, &line.hi,
                    line.perms, &line.inode, line.path) >= 4) {
      return true;
    }
  }
  return false;
}

PageAccess QueryPageAccess(const void* addr) {
  PageAccess out;
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  ForEachMapping(a, a + 1, [&](const MapsLine& m) {
    out.mapped = true;
    out.readable = m.perms[0] == 'r';
    out.writable = m.perms[1] == 'w';
    return false;
  });
  return out;
}

}  // namespace tierflow
