// SPDX-License-Identifier: Apache-2.0
// tierflow.IoUringEngine and its FileWindow (tierflow/uring_engine.h): copies between Python
// buffers and files as io_uring reads and writes, waited on like any other operation.
#include "files.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <memory>
#include <optional>
#include <string>

#include "tierflow/topology.h"

namespace tierflow::python {

namespace {

std::string Describe(const PyFileWindow& w) { return "the file window of " + w.window.path(); }

void CheckOpen(const PyFileWindow& w, const char* what) {
  if (!w.open()) {
    Check(Status::InvalidArgument(std::string(what) + ": " + Describe(w) +
                                  " was closed: open the file again (engine.open_file)"));
  }
}

View WindowView(nb::handle owner, PyFileWindow& w, std::uint64_t offset, std::size_t size,
                bool writable, const char* what, PyOperation& op) {
  CheckOpen(w, what);
  if (writable && !w.window.writable()) {
    Check(Status::InvalidArgument(std::string(what) + ": " + Describe(w) +
                                  " is read-only: open it with writable=True to write it"));
  }
  op.files.push_back(&w);
  return View::Holding(owner, w.window.at(offset), size, !w.window.writable());
}

// Bytes [offset, offset + size) of the window; size None: to the window's end.
PyFileRange At(nb::handle self, std::uint64_t offset, std::optional<std::size_t> size) {
  PyFileWindow& w = nb::cast<PyFileWindow&>(self);
  CheckOpen(w, "at");
  const std::size_t length = w.window.length();
  const std::size_t n = size.value_or(offset <= length ? length - offset : 0);
  if (offset > length || n > length - offset || n == 0) {
    Check(Status::InvalidArgument("at(" + std::to_string(offset) + ", " + std::to_string(n) +
                                  "): " + Describe(w) + " is " + std::to_string(length) +
                                  " bytes long; give a non-empty range inside it"));
  }
  return PyFileRange{nb::borrow(self), offset, n};
}

std::unique_ptr<IoUringEngine> CreateUring(unsigned queue_depth, std::size_t max_read_bytes,
                                           bool direct) {
  IoUringEngineOptions o;
  o.queue_depth = queue_depth;
  o.max_read_bytes = max_read_bytes;
  o.direct = direct;
  return Take(IoUringEngine::Create(o));
}

// Files, not nodes, are what io_uring reaches: the topology is taken so that every engine is
// created alike, and checked to be this system's like theirs.
std::unique_ptr<IoUringEngine> CreateUringOn(const Topology& t, unsigned queue_depth,
                                             std::size_t max_read_bytes, bool direct) {
  RequireThisSystem(t, "IoUringEngine.create");
  return CreateUring(queue_depth, max_read_bytes, direct);
}

PyFileWindow OpenFile(nb::handle self, const std::string& path, bool writable,
                      std::uint64_t length) {
  IoUringEngine& e = nb::cast<IoUringEngine&>(self);
  if (writable && length == 0) {
    Check(Status::InvalidArgument("open_file(" + path +
                                  ", writable=True): give length=, how far writes may reach"));
  }
  FileOpenOptions o;
  o.access = writable ? FileAccess::kReadWrite : FileAccess::kRead;
  o.length = length;
  std::optional<Result<FileWindow>> r;
  {
    nb::gil_scoped_release unlocked;  // opening may wait on storage; raising needs the GIL
    r.emplace(e.OpenFile(path, o));
  }
  return PyFileWindow{nb::borrow(self), Take(std::move(*r))};
}

nb::dict RingStats(const IoUringEngine& e) {
  const IoUringEngineStats s = e.ring_stats();
  nb::dict d;
  d["ops"] = s.ops;
  d["bytes"] = s.bytes;
  d["reads"] = s.reads;
  d["direct_reads"] = s.direct_reads;
  d["short_reads"] = s.short_reads;
  d["writes"] = s.writes;
  d["direct_writes"] = s.direct_writes;
  d["short_writes"] = s.short_writes;
  d["syncs"] = s.syncs;
  d["file_copies"] = s.file_copies;
  d["errors"] = s.errors;
  return d;
}

void BindWindow(nb::module_& m) {
  nb::class_<PyFileRange>(m, "FileRange", "Bytes of a file window: an operand of copies.")
      .def_prop_ro(
          "offset", [](const PyFileRange& r) { return r.offset; }, "File offset.")
      .def_prop_ro(
          "size", [](const PyFileRange& r) { return r.size; }, "Bytes.");
  nb::class_<PyFileWindow>(m, "FileWindow",
                           "A file opened by an IoUringEngine: as an operand of Operation.copy "
                           "(whole, or a range from at()) it is the file, read or written by "
                           "that engine. Holds no memory. Closing it (or leaving its `with` "
                           "block) unregisters the file; copies in flight finish.")
      .def("at", &At, nb::arg("offset") = 0, nb::arg("size") = nb::none(),
           "Bytes [offset, offset + size) of the file (size None: to the window's end); "
           "InvalidArgumentError for a range outside the window or an empty one.")
      .def_prop_ro("path", [](const PyFileWindow& w) { return w.window.path(); })
      .def_prop_ro(
          "length", [](const PyFileWindow& w) { return w.window.length(); },
          "Bytes of the file the window reaches.")
      .def_prop_ro("writable", [](const PyFileWindow& w) { return w.window.writable(); })
      .def_prop_ro("closed", [](const PyFileWindow& w) { return !w.open(); })
      .def(
          "close", [](PyFileWindow& w) { w.window.Close(); }, "Unregisters the file.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__", [](PyFileWindow& w, nb::handle, nb::handle, nb::handle) { w.window.Close(); },
          nb::arg("type").none(), nb::arg("value").none(), nb::arg("traceback").none());
}

}  // namespace

View Operand(nb::handle obj, bool writable, const char* what, PyOperation& op) {
  if (nb::isinstance<PyFileWindow>(obj)) {
    PyFileWindow& w = nb::cast<PyFileWindow&>(obj);
    return WindowView(obj, w, 0, w.window.length(), writable, what, op);
  }
  if (nb::isinstance<PyFileRange>(obj)) {
    const PyFileRange& r = nb::cast<const PyFileRange&>(obj);
    return WindowView(obj, nb::cast<PyFileWindow&>(r.window), r.offset, r.size, writable, what, op);
  }
  return View::Of(obj, writable, what);
}

void CheckFiles(nb::handle engine, const PyOperation& op) {
  for (const PyFileWindow* w : op.files) {
    CheckOpen(*w, "submit");
    if (engine.is_none() || !engine.is(w->engine)) {
      Check(Status::InvalidArgument(
          "submit: the operation reads or writes " + Describe(*w) +
          "; submit it to the IoUringEngine that opened the file, which alone can reach it"));
    }
  }
}

void BindFiles(nb::module_& m) {
  BindWindow(m);
  nb::class_<IoUringEngine, Engine>(m, "IoUringEngine",
                                    "Copies into and out of files as io_uring reads and writes.")
      .def_static("create", &CreateUring, nb::arg("queue_depth") = 64,
                  nb::arg("max_read_bytes") = 1 << 20, nb::arg("direct") = true,
                  "At most queue_depth reads and writes in flight, copies split into pieces of "
                  "max_read_bytes (a multiple of 4 KiB), O_DIRECT where the file system and the "
                  "alignment allow unless direct=False. UnsupportedError where io_uring is not "
                  "available.")
      .def_static("create", &CreateUringOn, nb::arg("topology"), nb::arg("queue_depth") = 64,
                  nb::arg("max_read_bytes") = 1 << 20, nb::arg("direct") = true,
                  "The same, given the topology every engine is created on (this system's).")
      .def("open_file", &OpenFile, nb::arg("path"), nb::arg("writable") = false,
           nb::arg("length") = 0,
           "Opens an existing file (never creates one) as a FileWindow. writable=False: reads "
           "of its first `length` bytes (0: the whole file). writable=True: reads and writes "
           "(which extend the file) of `length` bytes, which must be given. FileNotFoundError, "
           "OSError, InvalidArgumentError name the file and the cause.")
      .def_prop_ro("ring_stats", &RingStats,
                   "Reads, writes (O_DIRECT or not, short ones continued), syncs, file copies.");
}

}  // namespace tierflow::python
