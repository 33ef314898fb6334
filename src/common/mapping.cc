// SPDX-License-Identifier: Apache-2.0
#include "common/mapping.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#ifndef PROCMAP_QUERY
// Linux 6.11's uapi (include/uapi/linux/fs.h), for older headers; the ABI is fixed, and an
// older kernel answers ENOTTY.
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
enum procmap_query_flags {
  PROCMAP_QUERY_VMA_READABLE = 0x01,
  PROCMAP_QUERY_VMA_WRITABLE = 0x02,
  PROCMAP_QUERY_VMA_EXECUTABLE = 0x04,
  PROCMAP_QUERY_VMA_SHARED = 0x08,
  PROCMAP_QUERY_COVERING_OR_NEXT_VMA = 0x10,
};
struct procmap_query {
  __u64 size;
  __u64 query_flags;
  __u64 query_addr;
  __u64 vma_start;
  __u64 vma_end;
  __u64 vma_flags;
  __u64 vma_page_size;
  __u64 vma_offset;
  __u64 inode;
  __u32 dev_major;
  __u32 dev_minor;
  __u32 vma_name_size;
  __u32 build_id_size;
  __u64 vma_name_addr;
  __u64 build_id_addr;
};
#endif

namespace tierflow {

namespace {

int AskKernel(std::FILE* maps, std::uintptr_t addr, char* name, std::size_t name_size,
              procmap_query& q) {
  q = procmap_query{};
  q.size = sizeof q;
  q.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA;
  q.query_addr = addr;
  q.vma_name_addr = reinterpret_cast<std::uintptr_t>(name);
  q.vma_name_size = static_cast<__u32>(name_size);
  return ioctl(fileno(maps), PROCMAP_QUERY, &q) == 0 ? 0 : errno;
}

}  // namespace

MapQuery QueryMapping(std::FILE* maps, std::uintptr_t addr, MapsLine& line) {
  line = MapsLine{};
  procmap_query q;
  int e = AskKernel(maps, addr, line.path, sizeof line.path, q);
  if (e == ENAMETOOLONG || e == E2BIG) {  // a file's path longer than MapsLine keeps
    e = AskKernel(maps, addr, nullptr, 0, q);
    std::snprintf(line.path, sizeof line.path, "%s", "[name too long]");
  }  // else an anonymous mapping has no name: the kernel wrote none, line.path stays empty
  if (e == ENOENT) return MapQuery::kNone;
  if (e != 0) return MapQuery::kUnsupported;
  line.lo = q.vma_start;
  line.hi = q.vma_end;
  line.perms[0] = (q.vma_flags & PROCMAP_QUERY_VMA_READABLE) != 0 ? 'r' : '-';
  line.perms[1] = (q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE) != 0 ? 'w' : '-';
  line.perms[2] = (q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE) != 0 ? 'x' : '-';
  line.perms[3] = (q.vma_flags & PROCMAP_QUERY_VMA_SHARED) != 0 ? 's' : 'p';
  line.inode = static_cast<unsigned long>(q.inode);
  return MapQuery::kFound;
}

Status CheckMapped(const char* what, const void* p, std::size_t size) {
  if (p == nullptr) return Status::Ok();
  auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  std::uintptr_t start = a & ~(page - 1);
  if (msync(reinterpret_cast<void*>(start), a + size - start, MS_ASYNC) != 0 && errno == ENOMEM) {
    return Status::InvalidArgument(
        fmt::format("{} range [{}, +{}) is not (entirely) mapped in this process", what, p, size));
  }
  return Status::Ok();
}

std::FILE* OpenMaps() { return std::fopen("/proc/self/maps", "r"); }

bool NextMapping(std::FILE* maps, MapsLine& line) {
  char text[512];
  while (std::fgets(text, sizeof text, maps) != nullptr) {
    line = MapsLine{};
    int path_at = -1;  // the path runs to the end of the line and may hold spaces
    if (std::sscanf(text, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %lu %n", &line.lo, &line.hi,
                    line.perms, &line.inode, &path_at) >= 4) {
      if (path_at > 0) {
        std::snprintf(line.path, sizeof line.path, "%s", text + path_at);
        line.path[std::strcspn(line.path, "\n")] = '\0';
      }
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
