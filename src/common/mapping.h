// Whether address ranges are mapped in this process, checked without touching them.
#pragma once

#include <cstddef>

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

}  // namespace tierflow
