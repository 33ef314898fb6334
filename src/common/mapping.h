// SPDX-License-Identifier: Apache-2.0
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

// The protection of the mapping holding `addr`, from /proc/self/maps (error paths only: slow
// where the kernel has no PROCMAP_QUERY).
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

// The mapping holding `addr` or, when none does, the first one above it, asked of the kernel
// with the PROCMAP_QUERY ioctl on `maps` (Linux 6.11): one lookup instead of formatting and
// parsing every line before it (a process with an MPI's transports maps thousands of regions:
// reading them all took 240-320 µs). kUnsupported: an older kernel, read the text instead.
enum class MapQuery { kFound, kNone, kUnsupported };
MapQuery QueryMapping(std::FILE* maps, std::uintptr_t addr, MapsLine& line);

// Where ForEachMapping reads: the kernel's query where it has one, else the text (kAny), or
// always the text (kText: tests compare the two).
enum class MapsSource { kAny, kText };

// Calls visit(line) for each mapping that overlaps [begin, end), in address order, until
// visit returns false. False when /proc/self/maps cannot be read. Allocates nothing but the
// stream.
template <typename Visit>
bool ForEachMapping(std::uintptr_t begin, std::uintptr_t end, Visit visit,
                    MapsSource source = MapsSource::kAny) {
  std::FILE* maps = OpenMaps();
  if (maps == nullptr) return false;
  MapsLine line;
  MapQuery q =
      source == MapsSource::kAny ? QueryMapping(maps, begin, line) : MapQuery::kUnsupported;
  if (q == MapQuery::kUnsupported) {
    while (NextMapping(maps, line) && line.lo < end) {
      if (line.hi > begin && !visit(static_cast<const MapsLine&>(line))) break;
    }
  } else {
    while (q == MapQuery::kFound && line.lo < end && visit(static_cast<const MapsLine&>(line)) &&
           line.hi < end) {
      q = QueryMapping(maps, line.hi, line);
    }
  }
  std::fclose(maps);
  return true;
}

}  // namespace tierflow
