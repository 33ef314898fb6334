// SPDX-License-Identifier: Apache-2.0
// tierflow.Handle: a submitted operation as Python sees it. Submit (engines.cc) makes one with
// MakeHandle; the completion reaches Python three ways, none with a thread per handle: wait()
// (the GIL released), a callback (called with the GIL, on the thread that completed the
// operation), and `await` (the completion queued to the event loop's notifier, an eventfd the
// loop watches).
#pragma once

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

// The callback given to Submit: marks the state done, calls `callback` (a Python callable or
// None) with the completion, and tells an awaiting event loop.
CompletionCallback CallbackFor(const std::shared_ptr<HandleState>& state);
std::shared_ptr<HandleState> NewHandleState(nb::object callback);
// For an operation the engine refused: its callback will never be called; released here (the
// GIL held).
void DropCallback(HandleState& state);

}  // namespace tierflow::python
