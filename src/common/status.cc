// SPDX-License-Identifier: Apache-2.0
#include "tierflow/status.h"

#include <cstdio>
#include <cstdlib>

namespace tierflow {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kOutOfMemory:
      return "out_of_memory";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kPending:
      return "pending";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kFailed:
      return "failed";
    case StatusCode::kIoError:
      return "io_error";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(StatusCodeName(code_));
  if (!message_.empty()) s += ": " + message_;
  return s;
}

void AbortOnResultError(const Status& error) {
  std::fprintf(stderr, "tierflow: Result::value() called on an error (check ok() first): %s\n",
               error.ToString().c_str());
  std::abort();
}

}  // namespace tierflow
