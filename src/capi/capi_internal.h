// SPDX-License-Identifier: Apache-2.0
// What the C API's files share (tierflow/tierflow_c.h): the objects behind its opaque types,
// the thread's last error, and the guard that keeps C++ exceptions from crossing into C.
#pragma once

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "tierflow/engine.h"
#include "tierflow/locator.h"
#include "tierflow/pipe.h"
#include "tierflow/pipe_runtime.h"
#include "tierflow/status.h"
#include "tierflow/tierflow_c.h"

struct tf_runtime {
  std::unique_ptr<tierflow::PipeRuntime> runtime;
};
struct tf_locator {
  tierflow::Locator locator;
};
struct tf_pipe {
  tierflow::Pipe pipe;
  std::mutex reap_mu;
  // The completions the last tf_pipe_reap returned: their messages are handed out.
  std::vector<tierflow::Status> reaped;
};
struct tf_engine {
  std::unique_ptr<tierflow::Engine> engine;
};
struct tf_handle {
  tierflow::Handle handle;
};

namespace tierflow::capi {

// Records `s` as the calling thread's last error and returns its code (TF_OK for ok).
tf_status Fail(const Status& s) noexcept;
// The same with a message that needs no allocation (for running out of memory).
tf_status FailStatic(tf_status code, const char* message) noexcept;
inline tf_status Code(StatusCode code) { return static_cast<tf_status>(code); }

// `p` is not NULL, or the call fails naming the argument ("tf_pipe_transfer: pipe is NULL").
inline bool Missing(const void* p, const char* what, tf_status* out) {
  if (p != nullptr) return false;
  *out = Fail(Status::InvalidArgument(std::string(what) + " is NULL: pass the object that " +
                                      "its *_create, *_parse or *_connect call returned"));
  return true;
}
// The same for the address where a call returns what it makes.
inline bool MissingOut(const void* p, const char* function, tf_status* out) {
  if (p != nullptr) return false;
  *out = Fail(Status::InvalidArgument(std::string(function) + ": out is NULL: pass the " +
                                      "address of a pointer variable to receive the result"));
  return true;
}

// Runs `body` (returning tf_status) with every exception turned into a failure: C callers
// never see one. Running out of memory is TF_OUT_OF_MEMORY; anything else is a bug.
template <typename F>
tf_status Guarded(const char* function, F&& body) noexcept {
  try {
    try {
      return body();
    } catch (const std::bad_alloc&) {
      return FailStatic(TF_OUT_OF_MEMORY, "tierflow: out of memory; the call did nothing more");
    } catch (const std::exception& e) {
      return Fail(Status::Internal(std::string(function) + ": " + e.what()));
    }
  } catch (...) {  // an unknown exception, or no memory left to describe one
    return FailStatic(TF_INTERNAL, "tierflow: an unexpected exception; please report it");
  }
}

// Hands the object to the caller through `out`, as every *_create does.
template <typename T>
tf_status Give(T* object, T** out) {
  *out = object;
  return TF_OK;
}

// The bits of a C enum a caller passed, as an int. A C caller may pass any int where the header
// says tf_file_mode or tf_op_kind; reading such a value as the C++ enum type would be undefined
// behaviour for values beyond its range, so it is copied out as bytes and checked as an int.
template <typename E>
int RawEnum(const E& value) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// `text` written into buffer as snprintf does; returns its full length.
std::size_t CopyOut(const std::string& text, char* buffer, std::size_t capacity);

// CopyOut of what `make` returns; running out of memory making it leaves "" and records
// `out_of_memory` (a literal) as the thread's last error.
template <typename F>
std::size_t TextOut(const char* out_of_memory, F&& make, char* buffer,
                    std::size_t capacity) noexcept {
  try {
    return CopyOut(make(), buffer, capacity);
  } catch (...) {
    FailStatic(TF_OUT_OF_MEMORY, out_of_memory);
    return CopyOut("", buffer, capacity);
  }
}

// An options struct's size as the caller's *_init set it: another size is a struct from a
// version of the header this library does not know, or one never initialised.
Status CheckStructSize(std::size_t given, std::size_t expected, const char* type);

}  // namespace tierflow::capi
