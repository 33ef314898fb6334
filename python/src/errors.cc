// SPDX-License-Identifier: Apache-2.0
// tierflow's Status as Python exceptions: every one a tierflow.Error, and also the built-in
// class Python code catches for that kind of failure (ValueError, LookupError, MemoryError,
// OSError, ...). The message is the library's, which names the fix.
#include <cerrno>
#include <cstring>
#include <string>

#include "common.h"

namespace tierflow::python {

namespace {

struct Classes {
  PyObject* base = nullptr;
  PyObject* file_not_found = nullptr;  // a NotFound that names a path
  PyObject* by_code[static_cast<int>(StatusCode::kInternal) + 1] = {};
};
Classes g_classes;

PyObject* NewClass(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string full = std::string("tierflow.") + name;
  PyObject* c = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases, nullptr);
  if (c == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(c);
  return c;
}

// The errno whose text the message carries ("...: No such file or directory"), or 0.
int ErrnoIn(const std::string& message) {
  for (int e = 1; e < 134; ++e) {
    const char* text = std::strerror(e);
    if (text != nullptr && message.find(text) != std::string::npos) return e;
  }
  return 0;
}

// The first absolute path the message names ("cannot open /x/y: ..."), or "".
std::string PathIn(const std::string& message) {
  for (size_t at = message.find('/'); at != std::string::npos; at = message.find('/', at + 1)) {
    if (at > 0 && message[at - 1] != ' ' && message[at - 1] != '\'' && message[at - 1] != '(') {
      continue;
    }
    size_t end = message.find_first_of(" ':,)", at);
    if (end == std::string::npos) end = message.size();
    return message.substr(at, end - at);
  }
  return "";
}

// OSError(errno, message[, filename]): errno where the message carries its text.
void RaiseIoError(PyObject* cls, const std::string& message) {
  const int e = ErrnoIn(message);
  const std::string path = PathIn(message);
  PyObject* args = e == 0         ? Py_BuildValue("(s)", message.c_str())
                   : path.empty() ? Py_BuildValue("(is)", e, message.c_str())
                                  : Py_BuildValue("(iss)", e, message.c_str(), path.c_str());
  if (args == nullptr) throw nb::python_error();
  PyErr_SetObject(cls, args);
  Py_DECREF(args);
}

}  // namespace

namespace {

// The library's messages name its C++ API where they give the fix ("declare it with
// FileMode::kReplace"); from Python the fix is spelled as the binding's arguments.
std::string ForPython(std::string message) {
  static const std::pair<const char*, const char*> kSpellings[] = {
      {"FileMode::kReplace", "mode='replace'"},
      {"FileMode::kModify", "mode='modify'"},
      {"FileMode::kRead", "mode='read'"},
      {"set extsort::Config::overwrite", "give overwrite=True"},
      {"PipeRuntimeOptions::model_placement", "model_placement=True"},
      {"FileOpenOptions::length", "length="},
      {"OpenFile with FileAccess::kReadWrite", "open_file(writable=True)"},
      {"open it with FileAccess::kReadWrite", "open it with open_file(writable=True)"},
      {"RegisterFile/OpenFile the file first", "open the file first (engine.open_file)"},
      {"(Topology::Discover)", "(Topology.discover() without xml_path)"}};
  for (auto [api, spelling] : kSpellings) {
    for (size_t at = message.find(api); at != std::string::npos;
         at = message.find(api, at + std::strlen(spelling))) {
      message.replace(at, std::strlen(api), spelling);
    }
  }
  return message;
}

}  // namespace

void Check(const Status& status) {
  if (status.ok()) return;
  const Status s(status.code(), ForPython(status.message()));
  PyObject* cls = g_classes.by_code[static_cast<int>(s.code())];
  if (cls == nullptr) cls = g_classes.base;
  if (s.code() == StatusCode::kIoError) {
    RaiseIoError(cls, s.message());
  } else if (s.code() == StatusCode::kNotFound && !PathIn(s.message()).empty()) {
    PyObject* args =
        Py_BuildValue("(iss)", ENOENT, s.message().c_str(), PathIn(s.message()).c_str());
    if (args == nullptr) throw nb::python_error();
    PyErr_SetObject(g_classes.file_not_found, args);
    Py_DECREF(args);
  } else {
    PyErr_SetString(cls, s.message().c_str());
  }
  throw nb::python_error();
}

void BindErrors(nb::module_& m) {
  Classes& c = g_classes;
  c.base = NewClass(m, "Error", PyExc_Exception, "Every error tierflow raises.");
  auto with = [&](PyObject* builtin) {
    PyObject* bases = PyTuple_Pack(2, c.base, builtin);
    if (bases == nullptr) throw nb::python_error();
    return bases;
  };
  struct Kind {
    StatusCode code;
    const char* name;
    PyObject* builtin;
    const char* doc;
  };
  const Kind kinds[] = {
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "An argument the contract forbids (the message names it and what to give)."},
      {StatusCode::kNotFound, "NotFoundError", PyExc_LookupError,
       "A node, tier, engine or file that does not exist."},
      {StatusCode::kOutOfMemory, "OutOfMemoryError", PyExc_MemoryError,
       "An allocation the system could not satisfy."},
      {StatusCode::kUnsupported, "UnsupportedError", PyExc_NotImplementedError,
       "What the hardware or engine cannot do."},
      {StatusCode::kCancelled, "CancelledError", PyExc_RuntimeError,
       "An operation dropped before it ran (its engine shut down)."},
      {StatusCode::kFailed, "FailedError", PyExc_RuntimeError, "An operation that ran and failed."},
      {StatusCode::kIoError, "IoError", PyExc_OSError,
       "An OS call that failed (errno set where the message names one)."},
      {StatusCode::kInternal, "InternalError", PyExc_RuntimeError,
       "A broken invariant inside tierflow: please report it."},
  };
  for (const Kind& k : kinds) {
    PyObject* bases = with(k.builtin);
    c.by_code[static_cast<int>(k.code)] = NewClass(m, k.name, bases, k.doc);
    Py_DECREF(bases);
  }
  c.by_code[static_cast<int>(StatusCode::kPending)] = c.base;
  PyObject* bases =
      PyTuple_Pack(2, c.by_code[static_cast<int>(StatusCode::kIoError)], PyExc_FileNotFoundError);
  if (bases == nullptr) throw nb::python_error();
  c.file_not_found = NewClass(m, "MissingFileError", bases,
                              "A file or directory that does not exist (errno ENOENT, filename).");
  Py_DECREF(bases);
}

View& View::operator=(View&& o) noexcept {
  if (this != &o) {
    Release();
    view_ = o.view_;
    held_ = std::exchange(o.held_, false);
  }
  return *this;
}

View View::Of(nb::handle obj, bool writable, const char* what) {
  View v;
  const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &v.view_, flags) != 0) {
    PyErr_Clear();
    const bool has_buffer = PyObject_CheckBuffer(obj.ptr()) != 0;
    const std::string why =
        !has_buffer ? "it has no buffer (a " + std::string(Py_TYPE(obj.ptr())->tp_name) + ")"
        : writable  ? "it is read-only or not C-contiguous"
                    : "it is not C-contiguous";
    Check(Status::InvalidArgument(
        std::string(what) + ": " + why + "; give a C-contiguous" + (writable ? ", writable" : "") +
        " object with the buffer protocol (a numpy array, bytearray, memoryview, mmap or "
        "tierflow.Buffer)"));
  }
  v.held_ = true;
  return v;
}

View View::Holding(nb::handle owner, void* data, std::size_t size, bool readonly) {
  View v;
  // PyBuffer_Release of this view only drops the reference: the owner has no buffer procs.
  v.view_.obj = nb::handle(owner).inc_ref().ptr();
  v.view_.buf = data;
  v.view_.len = static_cast<Py_ssize_t>(size);
  v.view_.readonly = readonly ? 1 : 0;
  v.held_ = true;
  return v;
}

void View::Release() {
  if (held_) PyBuffer_Release(&view_);
  held_ = false;
}

}  // namespace tierflow::python
