// SPDX-License-Identifier: Apache-2.0
// The C API's engines, operations and handles (tierflow/tierflow_c.h over engine.h).
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "capi/capi_internal.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_inventory.h"
#include "tierflow/dsa_model.h"
#include "tierflow/topology.h"

namespace tierflow::capi {

CompletionCallback ToCallback(tf_callback callback, void* user);  // capi_pipes.cc

namespace {

// This system's topology, discovered by the first engine made and kept for the process (the
// engines plan on it; the machine does not change under them).
Result<const Topology*> ThisSystem() {
  static const Result<Topology> system = Topology::Discover();
  if (!system.ok()) return system.status();
  return &*system;
}

Result<Operation> OperationOf(const tf_operation& o) {
  const int kind = RawEnum(o.kind);
  switch (kind) {
    case TF_OP_COPY:
      return Operation::Copy(o.dst, o.src, o.size);
    case TF_OP_MOVE:
      return Operation::Move(o.dst, o.src, o.size);
    case TF_OP_FILL:
      return Operation::Fill(o.dst, o.pattern, o.size);
    case TF_OP_COMPARE:
      return Operation::Compare(o.src, o.src2, o.size);
    case TF_OP_COMPARE_PATTERN:
      return Operation::ComparePattern(o.src, o.pattern, o.size);
    case TF_OP_DUALCAST:
      return Operation::Dualcast(o.dst, o.dst2, o.src, o.size);
    case TF_OP_CRC32C:
      return Operation::Crc32c(o.src, o.size, o.crc_seed);
    case TF_OP_WRITE_BACK:
      return Operation::WriteBack(o.dst, o.size);
    case TF_OP_INVALIDATE:
      return Operation::Invalidate(o.dst, o.size);
    case TF_OP_WRITE_BACK_INVALIDATE:
      return Operation::WriteBackInvalidate(o.dst, o.size);
    case TF_OP_DRAIN:
      return Operation::Drain();
  }
  return Status::InvalidArgument("tf_operation.kind " + std::to_string(kind) +
                                 ": use one of the TF_OP_* kinds");
}

std::string CapabilitiesJson(const Engine& e) {
  const EngineCapabilities& c = e.capabilities();
  nlohmann::json ops = nlohmann::json::array();
  for (unsigned k = 0; k <= static_cast<unsigned>(kLastOpKind); ++k) {
    if ((c.ops & (1u << k)) != 0) ops.push_back(OpKindName(static_cast<OpKind>(k)));
  }
  nlohmann::json j = {{"name", c.name},
                      {"kind", EngineKindName(c.kind)},
                      {"ops", ops},
                      {"max_op_bytes", c.max_op_bytes},
                      {"max_batch", c.max_batch},
                      {"node", c.node},
                      {"is_model", c.is_model}};
  return j.dump();
}

tf_status GiveEngine(Result<std::unique_ptr<Engine>> e, tf_engine** out) {
  if (!e.ok()) return Fail(e.status());
  return Give(new tf_engine{std::move(*e)}, out);
}

template <typename T>
Result<std::unique_ptr<Engine>> AsEngine(Result<std::unique_ptr<T>> r) {
  if (!r.ok()) return r.status();
  return std::unique_ptr<Engine>(std::move(*r));
}

}  // namespace
}  // namespace tierflow::capi

using namespace tierflow;
using namespace tierflow::capi;

extern "C" {

tf_status tf_cpu_engine_create(int node, int workers, tf_engine** out) {
  return Guarded("tf_cpu_engine_create", [&] {
    tf_status st;
    if (MissingOut(out, "tf_cpu_engine_create", &st)) return st;
    Result<const Topology*> t = ThisSystem();
    if (!t.ok()) return Fail(t.status());
    CpuEngineOptions o;
    o.node = node;
    o.workers = workers;
    return GiveEngine(AsEngine(CpuEngine::Create(**t, o)), out);
  });
}

tf_status tf_dsa_engine_create(int model, int node, tf_engine** out) {
  return Guarded("tf_dsa_engine_create", [&] {
    tf_status st;
    if (MissingOut(out, "tf_dsa_engine_create", &st)) return st;
    if (model == 0) {
      Result<DsaInventory> inv = DsaInventory::Discover();
      if (!inv.ok()) return Fail(inv.status());
      return GiveEngine(AsEngine(DsaEngine::Create(std::move(*inv))), out);
    }
    DsaModelConfig c;
    c.numa_node = node;
    auto device = DsaDeviceModel::Create(c);
    if (!device.ok()) return Fail(device.status());
    return GiveEngine(AsEngine(DsaEngine::CreateOnModel(std::move(*device))), out);
  });
}

void tf_engine_free(tf_engine* engine) { delete engine; }

size_t tf_engine_capabilities(const tf_engine* engine, char* buffer, size_t capacity) {
  if (engine == nullptr) return CopyOut("", buffer, capacity);
  return TextOut(
      "tf_engine_capabilities: out of memory", [&] { return CapabilitiesJson(*engine->engine); },
      buffer, capacity);
}

tf_status tf_engine_submit(tf_engine* engine, const tf_operation* ops, size_t count,
                           tf_callback callback, void* user, tf_handle** out) {
  return Guarded("tf_engine_submit", [&] {
    tf_status st;
    if (Missing(engine, "tf_engine_submit: engine", &st) ||
        Missing(ops, "tf_engine_submit: ops", &st) || MissingOut(out, "tf_engine_submit", &st)) {
      return st;
    }
    if (count == 0) return Fail(Status::InvalidArgument("tf_engine_submit: count is 0"));
    std::vector<Operation> plain;
    plain.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      Result<Operation> op = OperationOf(ops[i]);
      if (!op.ok()) return Fail(op.status());
      plain.push_back(*op);
    }
    // Made first: once the operations are submitted nothing may fail and lose their handle.
    auto made = std::make_unique<tf_handle>();
    SubmitOptions o;
    o.callback = ToCallback(callback, user);
    Result<Handle> h = count == 1 ? engine->engine->Submit(plain[0], std::move(o))
                                  : engine->engine->SubmitBatch(plain, std::move(o));
    if (!h.ok()) return Fail(h.status());
    made->handle = std::move(*h);
    return Give(made.release(), out);
  });
}

tf_status tf_handle_wait(tf_handle* handle) {
  return Guarded("tf_handle_wait", [&] {
    tf_status st;
    if (Missing(handle, "tf_handle_wait: handle", &st)) return st;
    return Fail(handle->handle.Wait());
  });
}

tf_status tf_handle_test(tf_handle* handle) {
  return Guarded("tf_handle_test", [&] {
    tf_status st;
    if (Missing(handle, "tf_handle_test: handle", &st)) return st;
    if (!handle->handle.done()) return TF_PENDING;
    return Fail(handle->handle.status());
  });
}

tf_status tf_handle_result(const tf_handle* handle, tf_result* out) {
  return Guarded("tf_handle_result", [&] {
    tf_status st;
    if (Missing(handle, "tf_handle_result: handle", &st) ||
        MissingOut(out, "tf_handle_result", &st)) {
      return st;
    }
    const Completion c = handle->handle.result();
    *out = tf_result{Code(c.status.code()), c.bytes_completed, c.equal ? 1 : 0, c.first_difference,
                     c.crc};
    return TF_OK;
  });
}

void tf_handle_free(tf_handle* handle) {
  if (handle == nullptr) return;
  (void)handle->handle.Wait();  // the memory the operation uses stays the caller's until now
  delete handle;
}

}  // extern "C"
