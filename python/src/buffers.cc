// SPDX-License-Identifier: Apache-2.0
// tierflow.Buffer: memory on a NUMA node or tier (tierflow/buffer.h) that Python reaches without
// a copy: the buffer protocol (memoryview, numpy.frombuffer), __array_interface__ and DLPack.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "tierflow/buffer.h"
#include "tierflow/topology.h"

namespace tierflow::python {

namespace {

int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  Buffer* b = nb::inst_ptr<Buffer>(self);
  if (b->empty()) {
    PyErr_SetString(PyExc_BufferError, "tierflow.Buffer: this buffer was released");
    view->obj = nullptr;
    return -1;
  }
  return PyBuffer_FillInfo(view, self, b->data(), static_cast<Py_ssize_t>(b->size()), 0, flags);
}

PyType_Slot g_buffer_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(GetBuffer)},
                                {0, nullptr}};

HugePages ParseHugePages(const std::string& s) {
  if (s == "none") return HugePages::kNone;
  if (s == "transparent") return HugePages::kTransparent;
  if (s == "explicit") return HugePages::kExplicit;
  Check(
      Status::InvalidArgument("huge_pages='" + s + "': give 'none', 'transparent' or 'explicit'"));
  return HugePages::kNone;
}

AllocOptions Options(const std::string& huge_pages, bool prefault) {
  AllocOptions o;
  o.huge_pages = ParseHugePages(huge_pages);
  o.prefault = prefault;
  return o;
}

// A 1-D uint8 ndarray over the buffer, owned by it (the Buffer lives while the array does).
nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig> Bytes(nb::handle self) {
  Buffer* b = nb::inst_ptr<Buffer>(self);
  if (b->empty()) Check(Status::InvalidArgument("tierflow.Buffer: this buffer was released"));
  const size_t shape[1] = {b->size()};
  return nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig>(reinterpret_cast<uint8_t*>(b->data()), 1,
                                                         shape, self);
}

nb::dict ArrayInterface(nb::handle self) {
  Buffer* b = nb::inst_ptr<Buffer>(self);
  if (b->empty()) Check(Status::InvalidArgument("tierflow.Buffer: this buffer was released"));
  nb::dict d;
  d["shape"] = nb::make_tuple(b->size());
  d["typestr"] = "|u1";
  d["data"] = nb::make_tuple(reinterpret_cast<uintptr_t>(b->data()), false);
  d["version"] = 3;
  return d;
}

}  // namespace

void BindBuffers(nb::module_& m) {
  nb::class_<Buffer>(m, "Buffer", nb::type_slots(g_buffer_slots),
                     "Memory on one NUMA node, page-aligned, freed when the object goes (and no "
                     "view of it, handle or array holds it).")
      .def_static(
          "on_node",
          [](int node, size_t size, const std::string& huge_pages, bool prefault) {
            return Take(Buffer::OnNode(node, size, Options(huge_pages, prefault)));
          },
          nb::arg("node"), nb::arg("size"), nb::arg("huge_pages") = "none",
          nb::arg("prefault") = true,
          "Allocates `size` bytes on NUMA node `node` of this system. huge_pages: 'none', "
          "'transparent' (the kernel's 2 MiB pages where it can) or 'explicit' (the hugetlbfs "
          "pool; an error when it is empty). prefault: touch every page now. Raises "
          "InvalidArgumentError (size 0, no such node), OutOfMemoryError.")
      .def_static(
          "on_node",
          [](const Topology& t, int node, size_t size, const std::string& huge_pages,
             bool prefault) {
            RequireThisSystem(t, "Buffer.on_node");
            return Take(Buffer::OnNode(node, size, Options(huge_pages, prefault)));
          },
          nb::arg("topology"), nb::arg("node"), nb::arg("size"), nb::arg("huge_pages") = "none",
          nb::arg("prefault") = true,
          "The same, on node `node` of `topology` (which must describe this system).")
      .def_static(
          "on_tier",
          [](const Topology& t, const std::string& kind, int near_node, size_t size,
             const std::string& huge_pages, bool prefault) {
            const TierKind k = Take(ParseTierKind(kind));
            return Take(Buffer::OnTier(t, k, near_node, size, Options(huge_pages, prefault)));
          },
          nb::arg("topology"), nb::arg("kind"), nb::arg("near_node"), nb::arg("size"),
          nb::arg("huge_pages") = "none", nb::arg("prefault") = true,
          "Allocates on the node of tier `kind` ('dram', 'hbm', 'cxl', ...) nearest to "
          "`near_node` in `topology` (which must describe this system).")
      .def_prop_ro("size", &Buffer::size, "Bytes, as requested.")
      .def_prop_ro("mapped_size", &Buffer::mapped_size, "Bytes mapped (whole pages).")
      .def_prop_ro("node", &Buffer::node, "The NUMA node the memory is on.")
      .def_prop_ro(
          "address", [](const Buffer& b) { return reinterpret_cast<uintptr_t>(b.data()); },
          "The first byte's address.")
      .def("__len__", &Buffer::size)
      .def_prop_ro("__array_interface__", &ArrayInterface)
      .def(
          "__dlpack__", [](nb::handle self, nb::kwargs) { return nb::cast(Bytes(self)); },
          "A DLPack capsule of the bytes (kDLCPU, uint8).")
      .def("__dlpack_device__", [](nb::handle) { return nb::make_tuple(1, 0); });
  m.def("system_memory_nodes", &SystemMemoryNodes, "The NUMA nodes with memory on this system.");
}

}  // namespace tierflow::python
