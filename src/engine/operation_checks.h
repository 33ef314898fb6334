// Checks of an operation's buffers that engines apply before they accept it.
#pragma once

#include "tierflow/operation.h"
#include "tierflow/status.h"

namespace tierflow {

// Every range of an operation (dst, dst2, src, src2) is mapped in this process (one system
// call per range: see common/mapping.h). A fault on a mapped range is the fault guard's.
Status CheckMapped(const Operation& op);

}  // namespace tierflow
