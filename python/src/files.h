// SPDX-License-Identifier: Apache-2.0
// Files as operands (tierflow/uring_engine.h): a FileWindow stands for a file by an address
// range of its io_uring engine; copies to and from it are that engine's reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common.h"
#include "operations.h"
#include "tierflow/uring_engine.h"

namespace tierflow::python {

struct PyFileWindow {
  // The IoUringEngine it belongs to: declared first, so that it outlives the window even when
  // this holds its last reference.
  nb::object engine;
  FileWindow window;
  bool open() const { return window.base() != nullptr; }
};

// Bytes [offset, offset + size) of a window (FileWindow.at).
struct PyFileRange {
  nb::object window;
  std::uint64_t offset = 0;
  std::size_t size = 0;
};

// `obj` as an operand: a FileWindow or FileRange (recorded in `op`, which only that window's
// engine may then run), else a Python buffer as View::Of takes it.
View Operand(nb::handle obj, bool writable, const char* what, PyOperation& op);

// Raises unless `engine` may run `op`: every window it names is open and belongs to `engine`.
// `engine` None: a copy policy, which never reaches files.
void CheckFiles(nb::handle engine, const PyOperation& op);

}  // namespace tierflow::python
