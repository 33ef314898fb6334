// SPDX-License-Identifier: Apache-2.0
// tierflow.Handle: a submitted operation as Python sees it. Submit (engines.cc) makes one with
// MakeHandle; the completion reaches Python three ways, none with a thread per handle: wait()
// (the GIL released), a callback (called with the GIL, on the thread that completed the
// operation), and `await` (the completion queued to the event loop's notifier, an eventfd the
// loop watches).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common.h"
#include "tierflow/engine.h"

namespace tierflow::python {

struct HandleState;

struct PyHandle {
  PyHandle() = default;
  PyHandle(PyHandle&&) = default;
  ~PyHandle();
  Handle handle;
  std::shared_ptr<HandleState> state;
  std::vector<std::shared_ptr<std::vector<View>>> views;  // released when the handle goes
  nb::object engine;                                      // outlives the operation
};

// Starts an operation through `submit`, which is given the completion callback to pass on, and
// returns its handle, holding `views` and `owner` (what must outlive the operation: the
// engines, the pipe). `callback`, a Python callable or None, is called with the completion; an
// error of `submit` is raised, and the callback released then, never called.
PyHandle StartHandle(nb::object owner, std::vector<std::shared_ptr<std::vector<View>>> views,
                     nb::object callback,
                     const std::function<Result<Handle>(CompletionCallback)>& submit);

}  // namespace tierflow::python
