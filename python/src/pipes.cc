// SPDX-License-Identifier: Apache-2.0
// tierflow.PipeRuntime and tierflow.Pipe (tierflow/pipe_runtime.h, pipe.h): locators from the
// CLI's strings or from Python buffers, and pipes in the three flavours — transfer (blocking,
// the GIL released), submit (a Handle, awaitable), post/try_post/reap with the readiness
// descriptor that asyncio watches (tierflow._aio.reap). A locator over a Python buffer holds its
// view; a pipe holds its locators and its runtime.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "handles.h"
#include "tierflow/pipe_runtime.h"

namespace tierflow::python {

namespace {

// Members in the order they must outlive each other (destroyed last first): the runtime's
// engines close a locator's files, and a borrowed buffer's view outlives what points into it.
struct PyLocator {
  nb::object runtime;
  std::shared_ptr<View> view;  // borrowed memory: the Python object's
  Locator locator;
};

struct PyPipe {
  PyLocator from, to;
  Pipe pipe;
};

FileMode ParseMode(const std::string& m) {
  if (m == "read") return FileMode::kRead;
  if (m == "create") return FileMode::kCreate;
  if (m == "replace") return FileMode::kReplace;
  if (m == "modify") return FileMode::kModify;
  Check(Status::InvalidArgument("mode='" + m + "': give 'read', 'create', 'replace' or 'modify'"));
  return FileMode::kRead;
}

PipeRuntime& Runtime(nb::handle self) { return nb::cast<PipeRuntime&>(self); }

PyLocator Wrap(nb::handle runtime, Result<Locator> r, std::shared_ptr<View> view = {}) {
  return PyLocator{nb::borrow(runtime), std::move(view), Take(std::move(r))};
}

// A locator from a string ("file:/x", "dram:0:1GiB"), or over a Python buffer.
PyLocator Locate(nb::handle self, nb::handle what, const std::string& mode, size_t size) {
  if (nb::isinstance<PyLocator>(what)) return nb::cast<PyLocator>(what);
  if (nb::isinstance<nb::str>(what)) {
    return Wrap(self, Runtime(self).Parse(nb::cast<std::string>(what), ParseMode(mode), size));
  }
  // Read-only memory (bytes, a read-only array) may only be a source: Connect refuses it as a
  // destination.
  auto v = std::make_shared<View>(View::Of(what, false, "locator"));
  return Wrap(self, Runtime(self).Borrow(v->data(), v->size()), v);
}

std::unique_ptr<PipeRuntime> Create(int cpu_workers, bool use_dsa, bool dsa_model,
                                    const std::string& calibration_path,
                                    const std::string& topology_xml, bool model_placement) {
  PipeRuntimeOptions o;
  o.model_placement = model_placement;
  o.cpu_workers = cpu_workers;
  o.use_dsa = use_dsa;
  o.dsa_model = dsa_model;
  o.calibration_path = calibration_path;
  o.topology_xml = topology_xml;
  return Take(PipeRuntime::Create(o));
}

PyPipe Connect(nb::handle self, nb::handle from, nb::handle to, unsigned queue_depth,
               size_t chunk_bytes, std::optional<std::string> mechanism, bool in_order) {
  PyPipe p;
  p.from = Locate(self, from, "read", 0);
  p.to = Locate(self, to, "create", p.from.locator.capacity());
  if (p.to.view && p.to.view->readonly()) {
    Check(Status::InvalidArgument(
        "dst: it is read-only memory; give a writable buffer (a numpy array, bytearray, ...)"));
  }
  PipeOptions o;
  o.queue_depth = queue_depth;
  o.chunk_bytes = chunk_bytes;
  if (mechanism) o.mechanism = Take(ParseMechanism(*mechanism));
  o.in_order_completions = in_order;
  p.pipe = Take(Runtime(self).Connect(p.from.locator, p.to.locator, o));
  return p;
}

nb::object Json(const std::string& text) {
  return nb::module_::import_("json").attr("loads")(text);
}

// PipeRuntime::Tiered with keyword arguments; tiers by name ("dram", "hbm", "cxl"; "storage"
// in the limits: the directories' file systems).
PyLocator Tiered(nb::handle self, uint64_t capacity, const std::vector<std::string>& tiers,
                 const std::vector<std::string>& directories, double occupancy_limit,
                 const std::map<std::string, double>& occupancy_limits,
                 const std::map<std::string, uint64_t>& tier_limits, uint64_t extent_bytes,
                 int near_node) {
  TieredOptions o;
  o.capacity = capacity;
  for (const std::string& t : tiers) o.tiers.push_back(Take(ParseTierKind(t)));
  o.directories = directories;
  o.occupancy_limit = occupancy_limit;
  for (const auto& [t, v] : occupancy_limits)
    o.occupancy_limits.emplace_back(Take(ParseTierKind(t)), v);
  for (const auto& [t, v] : tier_limits) o.tier_limits.emplace_back(Take(ParseTierKind(t)), v);
  o.extent_bytes = extent_bytes;
  o.near_node = near_node;
  return Wrap(self, Runtime(self).Tiered(o));
}

nb::dict TieredState(nb::handle self, const PyLocator& area) {
  std::vector<std::string> switches;
  std::vector<TieredStage> stages = Take(Runtime(self).TieredState(area.locator, &switches));
  nb::list list;
  for (const TieredStage& t : stages) {
    nb::dict d;
    d["stage"] = t.stage;
    d["bytes"] = t.bytes;
    d["limit"] = t.limit;
    d["occupancy"] = t.occupancy;
    d["modelled"] = t.modelled;
    d["state"] = t.state;
    list.append(d);
  }
  nb::dict out;
  out["stages"] = list;
  out["switches"] = nb::cast(switches);
  return out;
}

void Transfer(PyPipe& p, uint64_t src, uint64_t dst, uint64_t length) {
  Status s;
  {
    nb::gil_scoped_release r;
    s = p.pipe.Transfer(src, dst, length);
  }
  Check(s);
}

PyHandle Submit(nb::handle self, uint64_t src, uint64_t dst, uint64_t length, nb::object callback) {
  PyPipe& p = nb::cast<PyPipe&>(self);
  // The pipe holds its locators' buffers: owning it keeps them.
  return StartHandle(nb::borrow(self), {}, std::move(callback), [&](CompletionCallback done) {
    return p.pipe.Submit(src, dst, length, std::move(done));
  });
}

nb::list Reap(PyPipe& p, size_t most) {
  std::vector<PipeCompletion> got(std::max<size_t>(1, most));
  got.resize(p.pipe.Reap(got));
  nb::list out;
  for (const PipeCompletion& c : got) {
    out.append(nb::make_tuple(
        c.tag, c.bytes,
        c.status.ok() ? nb::object(nb::none()) : nb::object(nb::str(c.status.message().c_str()))));
  }
  return out;
}

void BindLocator(nb::module_& m) {
  nb::class_<PyLocator>(
      m, "Locator", "A place data moves from or to: memory, a file, a spill chain, a tiered area.")
      .def_prop_ro("name", [](const PyLocator& l) { return l.locator.name(); })
      .def_prop_ro(
          "kind", [](const PyLocator& l) { return std::string(LocatorKindName(l.locator.kind())); })
      .def_prop_ro("capacity", [](const PyLocator& l) { return l.locator.capacity(); })
      .def_prop_ro("tier",
                   [](const PyLocator& l) { return std::string(TierKindName(l.locator.tier())); })
      .def_prop_ro("node", [](const PyLocator& l) { return l.locator.node(); })
      .def_prop_ro("path", [](const PyLocator& l) { return l.locator.path(); })
      .def("__repr__",
           [](const PyLocator& l) { return "<tierflow.Locator " + l.locator.name() + ">"; });
}

void BindPipe(nb::module_& m) {
  nb::class_<PyPipe>(m, "Pipe", "A declared path between two locators, in three flavours.")
      .def("transfer", &Transfer, nb::arg("src_offset"), nb::arg("dst_offset"), nb::arg("length"),
           "Moves length bytes and returns when done (the GIL released).")
      .def("submit", &Submit, nb::arg("src_offset"), nb::arg("dst_offset"), nb::arg("length"),
           nb::arg("callback") = nb::none(), "Starts a transfer: a Handle (wait, await, callback).")
      .def(
          "post",
          [](PyPipe& p, uint64_t s, uint64_t d, uint64_t n, uint64_t tag) {
            Check(p.pipe.Post(s, d, n, tag));
          },
          nb::arg("src_offset"), nb::arg("dst_offset"), nb::arg("length"), nb::arg("tag"),
          "Starts a transfer whose completion reap() reports with `tag`; fd becomes readable. "
          "Never blocks: what exceeds the queue depth waits in the pipe.")
      .def(
          "try_post",
          [](PyPipe& p, uint64_t s, uint64_t d, uint64_t n, uint64_t tag) {
            return Take(p.pipe.TryPost(s, d, n, tag));
          },
          nb::arg("src_offset"), nb::arg("dst_offset"), nb::arg("length"), nb::arg("tag"),
          "As post, only when the pipe has room: True when started, False when full (nothing "
          "started; fd polls writable again when there is room: loop.add_writer).")
      .def("reap", &Reap, nb::arg("most") = 64,
           "Up to `most` completions as (tag, bytes, error or None); never blocks.")
      .def_prop_ro(
          "fd", [](const PyPipe& p) { return p.pipe.fd(); },
          "The readiness descriptor: readable while completions wait (loop.add_reader), "
          "writable while the pipe has room (loop.add_writer). Poll it; never read or close it.")
      .def_prop_ro("posted", [](const PyPipe& p) { return p.pipe.posted(); })
      .def(
          "drain",
          [](PyPipe& p) {
            Status s;
            {
              nb::gil_scoped_release r;
              s = p.pipe.Drain();
            }
            Check(s);
          },
          "Waits until every transfer is over; raises the first error.")
      .def(
          "explain", [](const PyPipe& p) { return Json(p.pipe.plan().ToJson()); },
          nb::sig("def explain(self) -> dict[str, typing.Any]"),
          "The plan as a dict: hops, mechanisms, expected GB/s, what was rejected and why.")
      .def_prop_ro(
          "stats", [](const PyPipe& p) { return Json(p.pipe.stats().ToJson()); },
          nb::for_getter(nb::sig("def stats(self) -> dict[str, typing.Any]")))
      .def_prop_ro("source", [](const PyPipe& p) { return p.from; })
      .def_prop_ro("destination", [](const PyPipe& p) { return p.to; })
      .def(
          "reap_async",
          [](nb::handle self, size_t most) { return AioFunction(Aio::kReap)(self, most); },
          nb::arg("most") = 64,
          nb::sig("def reap_async(self, most: int = 64) -> "
                  "collections.abc.Awaitable[list[tuple[int, int, str | None]]]"),
          "Awaitable: the next completions, waiting on fd in the event loop.");
}

}  // namespace

void BindPipes(nb::module_& m) {
  BindLocator(m);
  BindPipe(m);
  nb::class_<PipeRuntime>(m, "PipeRuntime", "Locators and pipes on this machine.")
      .def_static("create", &Create, nb::arg("cpu_workers") = 0, nb::arg("use_dsa") = true,
                  nb::arg("dsa_model") = false, nb::arg("calibration_path") = "",
                  nb::arg("topology_xml") = "", nb::arg("model_placement") = false,
                  "The runtime: its engines (CPU, io_uring, DSA when present or modelled), the "
                  "topology (this system's, or the hwloc XML topology_xml: then pipes are only "
                  "planned and explained, unless model_placement=True stands each node's memory "
                  "in on this machine's) and the calibration.")
      .def("locator", &Locate, nb::arg("what"), nb::arg("mode") = "read", nb::arg("size") = 0,
           "A locator: the CLI's spelling ('file:PATH[:OFFSET[:LENGTH]]', 'dram:0:1GiB', "
           "'hbm:0', 'spill:A,B', 'tiered:64GiB:/ssd') or a writable Python buffer (borrowed, not "
           "copied). mode "
           "for files: 'read', 'create', 'replace', 'modify'; size for memory and new files "
           "that name none.")
      .def("connect", &Connect, nb::arg("src"), nb::arg("dst"), nb::arg("queue_depth") = 0,
           nb::arg("chunk_bytes") = 0, nb::arg("mechanism") = nb::none(),
           nb::arg("in_order") = false,
           "A pipe from src to dst (Locators, strings or buffers; a new destination file "
           "takes the source's size). Raises what cannot be served, with the reason.")
      .def(
          "explain",
          [](nb::handle self, nb::handle from, nb::handle to) {
            PyLocator f = Locate(self, from, "read", 0);
            PyLocator t = Locate(self, to, "create", f.locator.capacity());
            return Json(Take(Runtime(self).Plan(f.locator, t.locator)).ToJson());
          },
          nb::arg("src"), nb::arg("dst"),
          nb::sig("def explain(self, src: object, dst: object) -> dict[str, typing.Any]"),
          "The plan a pipe would use, as a dict, without one.")
      .def("tiered", &Tiered, nb::arg("capacity"), nb::arg("tiers") = std::vector<std::string>{},
           nb::arg("directories") = std::vector<std::string>{}, nb::arg("occupancy_limit") = 0.9,
           nb::arg("occupancy_limits") = std::map<std::string, double>{},
           nb::arg("tier_limits") = std::map<std::string, uint64_t>{}, nb::arg("extent_bytes") = 0,
           nb::arg("near_node") = -1,
           "A tiered area of capacity bytes: each extent (extent_bytes, 0: 8 MiB) is placed "
           "when first written on the first stage with room: the memory tiers (all the "
           "topology has, or tiers), fastest first by calibration, then an unnamed file in "
           "each of directories. A stage takes no extent past its occupancy limit "
           "(occupancy_limits per tier, 'storage' for the directories) or its tier_limits "
           "bytes. Reading bytes never written raises ValueError.")
      .def(
          "release",
          [](nb::handle self, const PyLocator& area, uint64_t offset, uint64_t length) {
            Check(Runtime(self).Release(area.locator, offset, length));
          },
          nb::arg("area"), nb::arg("offset"), nb::arg("length"),
          "Gives back the extents of a tiered area wholly inside [offset, offset + length); "
          "no transfer may be using them.")
      .def("tiered_state", &TieredState, nb::arg("area"),
           nb::sig("def tiered_state(self, area: Locator) -> dict[str, typing.Any]"),
           "A tiered area's stages ({'stage', 'bytes', 'limit', 'occupancy', 'modelled', "
           "'state'}) and the placement's switches.");
}

}  // namespace tierflow::python
