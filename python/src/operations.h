// SPDX-License-Identifier: Apache-2.0
// An operation as Python builds it: the library's Operation and the views of the Python objects
// it reads and writes, which go with the handle once submitted (they keep the objects alive and
// their memory in place until the operation is over).
#pragma once

#include <memory>
#include <vector>

#include "common.h"
#include "tierflow/operation.h"

namespace tierflow::python {

// Copies share the views: an operation may be submitted more than once, and dropped while its
// handles still run. The views are released where the last owner goes, which is always a
// Python object's destruction (the GIL held).
struct PyFileWindow;
struct PyOperation {
  Operation op;
  std::shared_ptr<std::vector<View>> views = std::make_shared<std::vector<View>>();
  // File windows among the operands (files.h); the views keep them alive.
  std::vector<const PyFileWindow*> files;
};

}  // namespace tierflow::python
