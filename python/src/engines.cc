// SPDX-License-Identifier: Apache-2.0
// tierflow.Engine and the engines Python creates (tierflow/engine.h, cpu_engine.h): submit of
// one operation or a batch, capabilities and counters.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <vector>

#include "files.h"
#include "handles.h"
#include "operations.h"
#include "tierflow/copy_policy.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_inventory.h"
#include "tierflow/dsa_model.h"

namespace tierflow::python {

namespace {

PyHandle Start(nb::handle self, std::span<const Operation> ops,
               std::vector<std::shared_ptr<std::vector<View>>> views, nb::object callback) {
  Engine& e = nb::cast<Engine&>(self);
  return StartHandle(
      nb::borrow(self), std::move(views), std::move(callback), [&](CompletionCallback done) {
        SubmitOptions o;
        o.callback = std::move(done);
        return ops.size() == 1 ? e.Submit(ops[0], std::move(o)) : e.SubmitBatch(ops, std::move(o));
      });
}

PyHandle Submit(nb::handle self, const PyOperation& op, nb::object callback) {
  CheckFiles(self, op);
  return Start(self, {&op.op, 1}, {op.views}, std::move(callback));
}

PyHandle SubmitBatch(nb::handle self, const std::vector<nb::handle>& ops, nb::object callback) {
  if (ops.empty()) Check(Status::InvalidArgument("submit_batch: give at least one operation"));
  std::vector<Operation> plain;
  std::vector<std::shared_ptr<std::vector<View>>> views;
  for (nb::handle o : ops) {
    const PyOperation& op = Arg<PyOperation>(o, "submit_batch", "tierflow.Operation objects");
    CheckFiles(self, op);
    plain.push_back(op.op);
    views.push_back(op.views);
  }
  return Start(self, plain, std::move(views), std::move(callback));
}

nb::dict Capabilities(const Engine& e) {
  const EngineCapabilities& c = e.capabilities();
  nb::list ops;
  for (unsigned k = 0; k <= static_cast<unsigned>(kLastOpKind); ++k) {
    if ((c.ops & (1u << k)) != 0) ops.append(std::string(OpKindName(static_cast<OpKind>(k))));
  }
  nb::dict d;
  d["name"] = c.name;
  d["kind"] = std::string(EngineKindName(c.kind));
  d["ops"] = ops;
  d["max_op_bytes"] = c.max_op_bytes;
  d["max_batch"] = c.max_batch;
  d["preferred_min_bytes"] = c.preferred_min_bytes;
  d["preferred_chunk_bytes"] = c.preferred_chunk_bytes;
  d["node"] = c.node;
  d["is_model"] = c.is_model;
  return d;
}

nb::dict Stats(const Engine& e) {
  const EngineStats s = e.stats();
  nb::dict d;
  d["queue_capacity"] = s.queue_capacity;
  d["queued"] = s.queued;
  d["in_flight"] = s.in_flight;
  d["ops_submitted"] = s.ops_submitted;
  d["pieces_completed"] = s.pieces_completed;
  d["bytes_completed"] = s.bytes_completed;
  d["ops_inline"] = s.ops_inline;
  d["pieces_failed"] = s.pieces_failed;
  d["pieces_cancelled"] = s.pieces_cancelled;
  d["callback_errors"] = s.callback_errors;
  return d;
}

std::unique_ptr<CpuEngine> CreateCpuOn(const Topology& t, int node, int workers, bool pin,
                                       size_t inline_max_bytes) {
  CpuEngineOptions o;
  o.node = node;
  o.workers = workers;
  o.pin = pin;
  o.inline_max_bytes = inline_max_bytes;
  return Take(CpuEngine::Create(t, o));
}

std::unique_ptr<CpuEngine> CreateCpu(int node, int workers, bool pin, size_t inline_max_bytes) {
  return CreateCpuOn(ThisSystem(), node, workers, pin, inline_max_bytes);
}

// On this machine's DSA work queues (an error naming every WQ's reason when none is usable), or
// on the software device model of one DSA on `node` (its capabilities say is_model).
std::unique_ptr<DsaEngine> CreateDsa(bool model, int node) {
  if (model) {
    DsaModelConfig c;
    c.numa_node = node;
    return Take(DsaEngine::CreateOnModel(Take(DsaDeviceModel::Create(c))));
  }
  return Take(DsaEngine::Create(Take(DsaInventory::Discover())));
}

// The model's node must be one of `t`'s; the hardware's queues are the kernel's, whatever
// topology is given (it must still be this system's).
std::unique_ptr<DsaEngine> CreateDsaOn(const Topology& t, bool model, int node) {
  RequireThisSystem(t, "DsaEngine.create");
  if (model) Take(t.FindNode(node));
  return CreateDsa(model, node);
}

// Every work queue the kernel shows, with whether it is usable and why not.
nb::list DsaQueues(const std::string& sysfs_root, const std::string& dev_root) {
  DsaDiscoveryOptions o;
  o.sysfs_root = sysfs_root;
  o.dev_root = dev_root;
  const DsaInventory inv = Take(DsaInventory::Discover(o));
  nb::list out;
  for (const DsaDevice& d : inv.devices()) {
    for (const DsaWq& w : d.wqs) {
      nb::dict q;
      q["device"] = d.name;
      q["wq"] = w.name;
      q["node"] = d.numa_node;
      q["shared"] = w.shared;
      q["usable"] = w.usable();
      q["reason"] = w.reason;
      out.append(q);
    }
  }
  return out;
}

// One copy (or fill) divided over several engines by a copy policy (tierflow/copy_policy.h):
// the parts run at once, one Handle for all; the engines stay alive with it.
PyHandle SubmitWithPolicy(const PyOperation& op, std::vector<nb::object> engines,
                          const std::string& policy, int engine_node, int socket,
                          nb::object callback) {
  if (op.op.kind != OpKind::kCopy && op.op.kind != OpKind::kFill) {
    Check(Status::InvalidArgument("a copy policy divides copies and fills; submit '" +
                                  std::string(OpKindName(op.op.kind)) + "' to one engine"));
  }
  CheckFiles(nb::none(), op);
  CopyPolicy p;
  p.kind = Take(ParsePolicyKind(policy));
  p.engine_node = engine_node;
  p.socket = socket;
  std::vector<Engine*> plain;
  for (const nb::object& e : engines) {
    plain.push_back(&Arg<Engine>(e, "engines", "tierflow engines (CpuEngine, DsaEngine)"));
  }
  const Topology& t = ThisSystem();
  const int dst = Take(NodeOfAddress(op.op.dst));
  const int src = op.op.kind == OpKind::kCopy ? Take(NodeOfAddress(op.op.src)) : dst;
  const std::vector<CopyPart> parts =
      Take(op.op.kind == OpKind::kCopy ? PlanCopy(p, t, plain, src, dst, op.op.size)
                                       : PlanFill(p, t, plain, nullptr, src, dst, op.op.size));
  return StartHandle(nb::cast(engines), {op.views}, std::move(callback),
                     [&](CompletionCallback done) {
                       SubmitOptions o;
                       o.callback = std::move(done);
                       return SubmitParts(op.op, parts, std::move(o));
                     });
}

}  // namespace

void BindEngines(nb::module_& m) {
  m.def("submit_with_policy", &SubmitWithPolicy, nb::arg("op"), nb::arg("engines"),
        nb::arg("policy") = "auto", nb::arg("engine_node") = -1, nb::arg("socket") = -1,
        nb::arg("callback") = nb::none(),
        "Divides a copy or fill over `engines` as the copy policy says ('single', 'push-pull', "
        "'socket', 'brute-force', 'auto') from where its memory lives, and starts every part: "
        "one Handle for all.");
  nb::class_<Engine>(m, "Engine", "Runs operations asynchronously; known by its capabilities.")
      .def("submit", &Submit, nb::arg("op"), nb::arg("callback") = nb::none(),
           "Starts `op` and returns its Handle. callback(completion), when given, is called "
           "once on the thread that completes the operation, holding the GIL only while it "
           "runs. Raises InvalidArgumentError for what the engine refuses (overlap, size).")
      .def("submit_batch", &SubmitBatch, nb::arg("ops"), nb::arg("callback") = nb::none(),
           "Starts the operations as one batch: one Handle for all of them.")
      .def_prop_ro("capabilities", &Capabilities, "What the engine does: name, kind, ops, ...")
      .def_prop_ro("stats", &Stats, "Its counters.");
  nb::class_<CpuEngine, Engine>(m, "CpuEngine", "The tuned CPU engine on one node's cores.")
      .def_static("create", &CreateCpu, nb::arg("node") = 0, nb::arg("workers") = 0,
                  nb::arg("pin") = true, nb::arg("inline_max_bytes") = 32 * 1024,
                  "An engine whose workers (0: one per core of the node, less one) run on "
                  "`node`'s cores; copies up to inline_max_bytes run on the submitting thread.")
      .def_static("create", &CreateCpuOn, nb::arg("topology"), nb::arg("node") = 0,
                  nb::arg("workers") = 0, nb::arg("pin") = true,
                  nb::arg("inline_max_bytes") = 32 * 1024,
                  "The same, on node `node` of `topology`, which must describe this system.")
      .def_prop_ro("workers", &CpuEngine::workers, "Worker threads.");
  nb::class_<DsaEngine, Engine>(m, "DsaEngine",
                                "Intel DSA: the kernel's work queues, or the device model.")
      .def_static("create", &CreateDsa, nb::arg("model") = false, nb::arg("node") = 0,
                  "model=False: this machine's usable work queues (an error names why each "
                  "is unusable when none is); model=True: the software model of one DSA on "
                  "`node`, which executes the same descriptors (capabilities['is_model']).")
      .def_static("create", &CreateDsaOn, nb::arg("topology"), nb::arg("model") = false,
                  nb::arg("node") = 0,
                  "The same, `node` checked against `topology` (which must describe this "
                  "system).")
      .def_static("queues", &DsaQueues, nb::arg("sysfs_root") = "/sys",
                  nb::arg("dev_root") = "/dev",
                  "Every DSA work queue the kernel shows: device, wq, node, shared, usable and "
                  "the reason it is not.")
      .def_prop_ro("description", &DsaEngine::description, "What it submits to, and how.");
}

}  // namespace tierflow::python
