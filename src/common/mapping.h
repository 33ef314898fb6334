// Whether address ranges are mapped in this process, checked without touching them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "tierflow/status.h"

namespace tierflow {

// msync(MS_ASYNC) only validates the range on Linux: ENOMEM means part of it is not mapped.
// `what` names the range in the error ("dst", "src"). A null pointer is not checked here.
Status CheckMapped(const char* what, const void* p, std::size_t size);

// The protection of the mapping holding `addr`, from /proc/self/maps (slow: error paths only).
struct PageAccess {
  bool mapped = false;
  bool readable = false;
  bool writable = false;
};
PageAccess QueryPageAccess(const void* addr);

// One line of /proc/self/maps.
struct MapsLine {
  std::uintptr_t lo = 0, hi = 0;
  char perms[5] = {};  // "rw-p": read, write, execute, private (p) or shared (s)
  unsigned long inode = 0;
  char path[256] = {};  // empty for anonymous memory; "[heap]", "[stack]" or a file
};

// /proc/self/maps, opened for NextMapping (nullptr when it cannot be read), and its next line.
std::FILE* OpenMaps();
bool NextMapping(std::FILE* maps, MapsLine& line);

// Calls visit(line) for each mapping that overlaps [begin, end), in address order, until
// visit returns false. False when /proc/self/maps cannot be read. Allocates nothing.
template <typename Visit>
bool ForEachMapping(std::uintptr_t begin, std::uintptr_t end, Visit visit) {
  std::FILE* maps = OpenMaps();
  if (maps == nullptr) return false;
  MapsLine line;
  while (NextMapping(maps, line) && line.lo < end) {
    if (line.hi > begin && !visit(static_cast<const MapsLine&>(line))) break;
  }
  std::fclose(maps);
  return true;
}

}  // namespace tierflow
