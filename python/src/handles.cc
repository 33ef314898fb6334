// SPDX-License-Identifier: Apache-2.0
// tierflow.Handle and the event-loop notifier behind `await handle` (handles.h).
#include "handles.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <utility>

#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

namespace tierflow::python {

namespace {

// One per event loop: completed states queued by any thread, an eventfd the loop watches
// (loop.add_reader), and Dispatch on the loop's thread resolving their futures.
class Notifier {
 public:
  Notifier() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) Check(Status::IoError(std::string("eventfd: ") + std::strerror(errno)));
  }
  ~Notifier() { close(fd_); }
  int fd() const { return fd_; }
  void Push(std::shared_ptr<HandleState> s) {
    {
      std::lock_guard lock(mu_);
      ready_.push_back(std::move(s));
    }
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
  }
  void Dispatch();

 private:
  int fd_;
  std::mutex mu_;
  std::vector<std::shared_ptr<HandleState>> ready_;
};

}  // namespace

struct HandleState {
  std::mutex mu;
  bool done = false;
  std::shared_ptr<Notifier> notifier;  // set by an awaiting coroutine
  // Owned references, released only with the GIL held: the awaiting coroutine's future, the
  // user's callback.
  PyObject* future = nullptr;
  PyObject* callback = nullptr;

  PyObject* TakeFuture() {
    std::lock_guard lock(mu);
    return std::exchange(future, nullptr);
  }
};

namespace {

void Notifier::Dispatch() {
  uint64_t n = 0;
  (void)!read(fd_, &n, sizeof n);
  std::vector<std::shared_ptr<HandleState>> ready;
  {
    std::lock_guard lock(mu_);
    ready.swap(ready_);
  }
  for (const auto& s : ready) {
    nb::object future = nb::steal(s->TakeFuture());
    if (future.is_valid() && !nb::cast<bool>(future.attr("done")())) {
      future.attr("set_result")(nb::none());
    }
  }
}

struct PyCompletion {
  Completion c;
};

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void CallPython(PyObject* callback, const Completion& c) {
  if (Finalizing()) return;  // the interpreter is going: nothing to call, nothing to free
  nb::gil_scoped_acquire gil;
  PyObject* arg = nb::cast(PyCompletion{c}).release().ptr();
  PyObject* r = PyObject_CallOneArg(callback, arg);
  if (r == nullptr) PyErr_WriteUnraisable(callback);  // nowhere to raise it: say it
  Py_XDECREF(r);
  Py_DECREF(arg);
  Py_DECREF(callback);
}

}  // namespace

namespace {

std::shared_ptr<HandleState> NewHandleState(nb::object callback) {
  auto s = std::make_shared<HandleState>();
  if (!callback.is_none()) s->callback = callback.release().ptr();
  return s;
}

void DropCallback(HandleState& state) { Py_XDECREF(std::exchange(state.callback, nullptr)); }

CompletionCallback CallbackFor(const std::shared_ptr<HandleState>& state) {
  return [state](const Completion& c) {
    std::shared_ptr<Notifier> notifier;
    PyObject* callback = nullptr;
    {
      std::lock_guard lock(state->mu);
      state->done = true;
      notifier = state->notifier;
      callback = std::exchange(state->callback, nullptr);
    }
    if (callback != nullptr) CallPython(callback, c);
    if (notifier) notifier->Push(state);
  };
}

}  // namespace

PyHandle StartHandle(nb::object owner, std::vector<std::shared_ptr<std::vector<View>>> views,
                     nb::object callback,
                     const std::function<Result<Handle>(CompletionCallback)>& submit) {
  PyHandle h;
  h.state = NewHandleState(std::move(callback));
  h.views = std::move(views);
  h.engine = std::move(owner);
  Result<Handle> r = submit(CallbackFor(h.state));
  if (!r.ok()) {
    DropCallback(*h.state);
    Check(r.status());
  }
  h.handle = std::move(*r);
  return h;
}

nb::handle AioFunction(Aio which) {
  static PyObject* functions[2] = {nullptr, nullptr};
  PyObject*& f = functions[static_cast<int>(which)];
  if (f == nullptr) {
    nb::object aio = nb::module_::import_("tierflow._aio");
    f = nb::getattr(aio, which == Aio::kReap ? "reap" : "await_handle").release().ptr();
  }
  return f;
}

PyHandle::~PyHandle() {
  if (handle.valid() && !handle.done()) {
    // The operation still reads or writes the buffers this handle holds: wait for it.
    nb::gil_scoped_release release;
    (void)handle.Wait(WaitMode::kBlock);
  }
  if (state) Py_XDECREF(state->TakeFuture());
}

namespace {

// The future an awaiting coroutine waits on: `future`, registered now, or the one an earlier
// awaiter of the same handle registered (every awaiter is woken); None when already done.
nb::object Notify(PyHandle& h, std::shared_ptr<Notifier> n, nb::object future) {
  std::lock_guard lock(h.state->mu);
  if (h.state->done) return nb::none();
  if (h.state->future != nullptr) return nb::borrow(h.state->future);
  h.state->notifier = std::move(n);
  h.state->future = future.inc_ref().ptr();
  return future;
}

PyCompletion Result(PyHandle& h, WaitMode mode) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = h.handle.Wait(mode);
  }
  Check(s);
  return PyCompletion{h.handle.result()};
}

WaitMode ParseMode(const std::string& m) {
  if (m == "adaptive") return WaitMode::kAdaptive;
  if (m == "block") return WaitMode::kBlock;
  if (m == "spin") return WaitMode::kSpin;
  if (m == "yield") return WaitMode::kYield;
  Check(Status::InvalidArgument("mode='" + m + "': give 'adaptive', 'block', 'spin' or 'yield'"));
  return WaitMode::kAdaptive;
}

void BindCompletion(nb::module_& m) {
  nb::class_<PyCompletion>(m, "Completion", "The outcome of a completed operation.")
      .def_prop_ro(
          "bytes_completed", [](const PyCompletion& c) { return c.c.bytes_completed; },
          "Bytes completed, over all parts and batch members.")
      .def_prop_ro(
          "equal", [](const PyCompletion& c) { return c.c.equal; },
          "compare, compare_pattern: whether every byte was equal (otherwise True).")
      .def_prop_ro(
          "first_difference", [](const PyCompletion& c) { return c.c.first_difference; },
          "compare of one operation: the offset of the first differing byte when not equal.")
      .def_prop_ro(
          "crc", [](const PyCompletion& c) { return c.c.crc; }, "crc32c: the CRC-32C.")
      .def_prop_ro(
          "ok", [](const PyCompletion& c) { return c.c.status.ok(); }, "Whether it succeeded.")
      .def_prop_ro(
          "error", [](const PyCompletion& c) { return c.c.status.message(); },
          "The error's message ('' when it succeeded).");
}

}  // namespace

void BindHandles(nb::module_& m) {
  BindCompletion(m);
  nb::class_<Notifier>(m, "_Notifier")
      .def(nb::new_([] { return std::make_shared<Notifier>(); }))
      .def_prop_ro("fd", &Notifier::fd)
      .def("dispatch", &Notifier::Dispatch);
  nb::class_<PyHandle>(m, "Handle",
                       "A submitted operation. It holds the buffers the operation uses until "
                       "it is over; dropped while in flight, it waits for the operation.")
      .def(
          "done", [](const PyHandle& h) { return h.handle.done(); },
          "Whether the operation is over (checks once, never blocks).")
      .def_prop_ro(
          "bytes_completed", [](const PyHandle& h) { return h.handle.bytes_completed(); },
          "Bytes completed so far.")
      .def(
          "wait", [](PyHandle& h, const std::string& mode) { return Result(h, ParseMode(mode)); },
          nb::arg("mode") = "adaptive",
          "Waits with the GIL released and returns the Completion; raises the operation's "
          "error. mode: 'adaptive' (spin briefly, then sleep), 'block', 'spin', 'yield'.")
      .def("_notify", &Notify)
      .def(
          "__await__", [](nb::handle self) { return AioFunction(Aio::kAwaitHandle)(self); },
          nb::sig("def __await__(self) -> collections.abc.Generator[typing.Any, None, "
                  "Completion]"));
}

}  // namespace tierflow::python
