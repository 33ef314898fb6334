// SPDX-License-Identifier: Apache-2.0
// Errors as values. Every failure the library can foresee (bad input, missing hardware, memory
// exhaustion) is reported as a Status that names the problem and, where there is one, the fix.
// Exceptions are never thrown across the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "tierflow/export.h"

namespace tierflow {

enum class StatusCode : std::uint8_t {
  kOk = 0,
  kInvalidArgument,  // the caller passed something the contract forbids
  kNotFound,         // a node, tier, engine or file that does not exist
  kOutOfMemory,      // an allocation the system could not satisfy
  kUnsupported,      // the hardware or engine cannot do this
  kPending,          // the operation has not completed yet (check-once results)
  kCancelled,        // the operation was dropped before it ran (engine shut down)
  kFailed,           // the operation ran and failed
  kIoError,          // an OS call failed
  kInternal,         // a broken invariant inside tierflow: please report it
};

// Stable, lower-case name of a code ("invalid_argument", ...), used in JSON and messages.
TIERFLOW_EXPORT std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] TIERFLOW_EXPORT Status {
 public:
  Status() = default;  // ok
  // Thread-safety: a Status is a value; distinct objects may be used from any threads.
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  // One factory per code, named as the code.
  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status OutOfMemory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status Pending(std::string m) { return {StatusCode::kPending, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Failed(std::string m) { return {StatusCode::kFailed, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: <message>", or "ok".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// What Result::value() does on an error: prints the error and aborts (see there).
[[noreturn]] TIERFLOW_EXPORT void AbortOnResultError(const Status& error);

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status status)                      // NOLINT(implicit)
      : v_(status.ok()
               ? Status(StatusCode::kInternal, "Result built from an ok Status without a value")
               : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  // The error; Status::Ok() when a value is held.
  Status status() const { return ok() ? Status::Ok() : *std::get_if<Status>(&v_); }

  // The value. Requires ok(): asking an error for its value is a bug in the caller, and the
  // process ends (abort) with the error's message on stderr; nothing is thrown. The same
  // holds for operator* and operator->.
  T& value() & { return *Checked(); }
  const T& value() const& { return *const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(*Checked()); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  T* Checked() {
    if (T* v = std::get_if<T>(&v_)) return v;
    AbortOnResultError(*std::get_if<Status>(&v_));
  }
  std::variant<T, Status> v_;
};

}  // namespace tierflow
