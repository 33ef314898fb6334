// SPDX-License-Identifier: Apache-2.0
// The C API's error model, the runtime and locators (tierflow/tierflow_c.h).
#include <cstring>
#include <string>

#include "capi/capi_internal.h"
#include "tierflow/version.h"

static_assert(static_cast<int>(tierflow::StatusCode::kInternal) == TF_INTERNAL &&
                  static_cast<int>(tierflow::StatusCode::kPending) == TF_PENDING &&
                  static_cast<int>(tierflow::StatusCode::kIoError) == TF_IO_ERROR,
              "tf_status mirrors StatusCode value for value");

namespace tierflow::capi {

namespace {
thread_local std::string t_last_error;
thread_local const char* t_last_static = nullptr;
}  // namespace

tf_status Fail(const Status& s) noexcept {
  if (s.ok()) return TF_OK;
  try {
    t_last_error = s.message();
    t_last_static = nullptr;
  } catch (...) {
    t_last_static = "tierflow: out of memory while recording an error";
  }
  return Code(s.code());
}

tf_status FailStatic(tf_status code, const char* message) noexcept {
  t_last_static = message;
  return code;
}

Status CheckStructSize(std::size_t given, std::size_t expected, const char* type) {
  if (given == expected) return Status::Ok();
  return Status::InvalidArgument(std::string(type) + ".struct_size is " + std::to_string(given) +
                                 ", not " + std::to_string(expected) + ": fill the struct with " +
                                 type + "_init before setting fields");
}

std::size_t CopyOut(const std::string& text, char* buffer, std::size_t capacity) {
  if (buffer != nullptr && capacity > 0) {
    const std::size_t n = std::min(text.size(), capacity - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}

namespace {

Result<FileMode> ModeOf(const tf_file_mode& mode) {
  const int raw = RawEnum(mode);
  switch (raw) {
    case TF_FILE_READ:
      return FileMode::kRead;
    case TF_FILE_CREATE:
      return FileMode::kCreate;
    case TF_FILE_REPLACE:
      return FileMode::kReplace;
    case TF_FILE_MODIFY:
      return FileMode::kModify;
  }
  return Status::InvalidArgument("file mode " + std::to_string(raw) +
                                 ": use TF_FILE_READ, TF_FILE_CREATE, TF_FILE_REPLACE or "
                                 "TF_FILE_MODIFY");
}

tf_status GiveLocator(Result<Locator> r, tf_locator** out) {
  if (!r.ok()) return Fail(r.status());
  return Give(new tf_locator{std::move(*r)}, out);
}

Result<PipeRuntimeOptions> RuntimeOptions(const tf_runtime_options* in) {
  PipeRuntimeOptions o;
  if (in == nullptr) return o;
  if (Status s = CheckStructSize(in->struct_size, sizeof *in, "tf_runtime_options"); !s.ok()) {
    return s;
  }
  o.cpu_workers = in->cpu_workers;
  o.use_dsa = in->use_dsa != 0;
  o.dsa_model = in->dsa_model != 0;
  o.model_placement = in->model_placement != 0;
  if (in->calibration_path != nullptr) o.calibration_path = in->calibration_path;
  if (in->topology_xml != nullptr) o.topology_xml = in->topology_xml;
  return o;
}

}  // namespace
}  // namespace tierflow::capi

using namespace tierflow;
using namespace tierflow::capi;

extern "C" {

const char* tf_last_error(void) {
  return t_last_static != nullptr ? t_last_static : t_last_error.c_str();
}

const char* tf_status_name(int status) {
  if (status == TF_AGAIN) return "again";
  if (status < TF_OK || status > TF_INTERNAL) return "unknown";
  // Names of a fixed table, NUL-terminated: string_views of string literals.
  return StatusCodeName(static_cast<StatusCode>(status)).data();
}

const char* tf_version(void) { return Version(); }
int tf_c_api_version(void) { return 1; }

void tf_runtime_options_init(tf_runtime_options* options) {
  if (options == nullptr) return;
  const PipeRuntimeOptions d;
  *options = tf_runtime_options{};
  options->struct_size = sizeof(tf_runtime_options);
  options->cpu_workers = d.cpu_workers;
  options->use_dsa = d.use_dsa ? 1 : 0;
  options->dsa_model = d.dsa_model ? 1 : 0;
  options->model_placement = d.model_placement ? 1 : 0;
}

tf_status tf_runtime_create(const tf_runtime_options* options, tf_runtime** out) {
  return Guarded("tf_runtime_create", [&] {
    tf_status st;
    if (MissingOut(out, "tf_runtime_create", &st)) return st;
    Result<PipeRuntimeOptions> o = RuntimeOptions(options);
    if (!o.ok()) return Fail(o.status());
    Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(*o);
    if (!rt.ok()) return Fail(rt.status());
    return Give(new tf_runtime{std::move(*rt)}, out);
  });
}

void tf_runtime_free(tf_runtime* runtime) { delete runtime; }

tf_status tf_locator_parse(tf_runtime* runtime, const char* spec, tf_file_mode mode,
                           uint64_t default_size, tf_locator** out) {
  return Guarded("tf_locator_parse", [&] {
    tf_status st;
    if (Missing(runtime, "tf_locator_parse: runtime", &st) ||
        Missing(spec, "tf_locator_parse: spec", &st) || MissingOut(out, "tf_locator_parse", &st)) {
      return st;
    }
    Result<FileMode> m = ModeOf(mode);
    if (!m.ok()) return Fail(m.status());
    return GiveLocator(runtime->runtime->Parse(spec, *m, default_size), out);
  });
}

tf_status tf_locator_file(tf_runtime* runtime, const char* path, uint64_t offset, uint64_t length,
                          tf_file_mode mode, tf_locator** out) {
  return Guarded("tf_locator_file", [&] {
    tf_status st;
    if (Missing(runtime, "tf_locator_file: runtime", &st) ||
        Missing(path, "tf_locator_file: path", &st) || MissingOut(out, "tf_locator_file", &st)) {
      return st;
    }
    Result<FileMode> m = ModeOf(mode);
    if (!m.ok()) return Fail(m.status());
    return GiveLocator(runtime->runtime->File(path, offset, length, *m), out);
  });
}

tf_status tf_locator_borrow(tf_runtime* runtime, void* data, uint64_t size, int node,
                            tf_locator** out) {
  return Guarded("tf_locator_borrow", [&] {
    tf_status st;
    if (Missing(runtime, "tf_locator_borrow: runtime", &st) ||
        Missing(data, "tf_locator_borrow: data", &st) ||
        MissingOut(out, "tf_locator_borrow", &st)) {
      return st;
    }
    return GiveLocator(runtime->runtime->Borrow(data, size, node), out);
  });
}

void tf_locator_free(tf_locator* locator) { delete locator; }

uint64_t tf_locator_capacity(const tf_locator* locator) {
  return locator != nullptr ? locator->locator.capacity() : 0;
}

void* tf_locator_data(const tf_locator* locator) {
  return locator != nullptr ? static_cast<void*>(locator->locator.data()) : nullptr;
}

const char* tf_locator_name(const tf_locator* locator) {
  return locator != nullptr ? locator->locator.name().c_str() : "";
}

}  // extern "C"
