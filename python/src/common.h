// SPDX-License-Identifier: Apache-2.0
// Shared by the binding's files: errors as Python exceptions, and views of Python buffers.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <string>
#include <utility>

#include "tierflow/status.h"

namespace tierflow {
class Topology;
}

namespace tierflow::python {

namespace nb = nanobind;

// This system's topology (TIERFLOW_TIERS applied), discovered by the first call that needs it
// and kept: engines, caches and copy policies are made and planned on it without discovering
// the machine again each time. A failed discovery is raised and tried again next time.
const Topology& ThisSystem();

// Raises InvalidArgumentError unless `t` describes the running system: `what` (an engine, a
// buffer, a cache) uses this machine's memory or cores, which a topology read from a file does
// not describe.
void RequireThisSystem(const Topology& t, const char* what);

// Raises the Python exception for `s` (errors.cc) unless it is ok.
void Check(const Status& s);

template <typename T>
T Take(Result<T>&& r) {
  Check(r.status());
  return std::move(*r);
}

// A view of a Python object's memory through the buffer protocol, held (and so the object kept
// alive and its memory in place) until the view is released, which needs the GIL.
class View {
 public:
  View() = default;
  ~View() { Release(); }
  View(View&& o) noexcept : view_(o.view_), held_(std::exchange(o.held_, false)) {}
  View& operator=(View&& o) noexcept;
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  // A C-contiguous view of `obj` (writable when `writable`); `what` names the argument in the
  // ValueError raised for anything else.
  static View Of(nb::handle obj, bool writable, const char* what);
  // A range that is not Python memory (a file window's addresses), holding `owner` alive.
  static View Holding(nb::handle owner, void* data, std::size_t size, bool readonly);
  void* data() const { return view_.buf; }
  std::size_t size() const { return static_cast<std::size_t>(view_.len); }
  bool readonly() const { return view_.readonly != 0; }
  void Release();

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// `obj` as an argument of a bound class T (an engine, an operation); anything else, None
// included, raises InvalidArgumentError naming `what` and the type it got.
template <typename T>
T& Arg(nb::handle obj, const char* what, const char* expected) {
  if (obj.is_none() || !nb::isinstance<T>(obj)) {
    Check(Status::InvalidArgument(
        std::string(what) + ": give " + expected + ", not " +
        (obj.is_none() ? std::string("None") : std::string("a ") + Py_TYPE(obj.ptr())->tp_name)));
  }
  return nb::cast<T&>(obj);
}

// tierflow._aio's functions, looked up once (the GIL held) and kept for the life of the
// process: never released, since the interpreter may be gone when statics are destroyed.
enum class Aio { kAwaitHandle, kReap };
nb::handle AioFunction(Aio which);

void BindErrors(nb::module_& m);
void BindTopology(nb::module_& m);
void BindBuffers(nb::module_& m);
void BindOperations(nb::module_& m);
void BindHandles(nb::module_& m);
void BindEngines(nb::module_& m);
void BindFiles(nb::module_& m);
void BindCache(nb::module_& m);
void BindPipes(nb::module_& m);
void BindSort(nb::module_& m);
void BindCoherence(nb::module_& m);

}  // namespace tierflow::python
