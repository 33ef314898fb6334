// SPDX-License-Identifier: Apache-2.0
// tierflow.Topology (tierflow/topology.h): the NUMA nodes, their tier kinds and the reasons,
// overrides; and Buffer.on_tier, which needs one.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "common.h"
#include "tierflow/topology.h"

namespace tierflow::python {

namespace {

TierKind Kind(const std::string& name) { return Take(ParseTierKind(name)); }

Topology Discover(const std::string& xml_path, const std::string& overrides, bool environment) {
  TopologyOptions o;
  o.xml_path = xml_path;
  o.use_environment = environment;
  if (!overrides.empty()) o.overrides = Take(TierOverrides::Parse(overrides));
  return Take(Topology::Discover(o));
}

std::vector<const NumaNode*> Nodes(const Topology& t) {
  std::vector<const NumaNode*> out;
  for (const NumaNode& n : t.nodes()) out.push_back(&n);
  return out;
}

void BindNode(nb::module_& m) {
  nb::class_<NumaNode>(m, "NumaNode", "One NUMA node: its memory's tier and its CPUs.")
      .def_ro("os_index", &NumaNode::os_index)
      .def_prop_ro(
          "kind", [](const NumaNode& n) { return std::string(TierKindName(n.kind)); },
          "'dram', 'hbm', 'cxl', 'nvm', 'storage' or 'unknown'.")
      .def_ro("kind_reason", &NumaNode::kind_reason, "Why it was classified so.")
      .def_ro("subtype", &NumaNode::subtype)
      .def_ro("capacity_bytes", &NumaNode::capacity_bytes)
      .def_ro("cpus", &NumaNode::cpus)
      .def_ro("local_cpus", &NumaNode::local_cpus)
      .def_ro("package", &NumaNode::package)
      .def_ro("near_cpu_node", &NumaNode::near_cpu_node)
      .def_ro("bandwidth_mibps", &NumaNode::bandwidth_mibps)
      .def_ro("latency_ns", &NumaNode::latency_ns)
      .def("__repr__", [](const NumaNode& n) {
        return "<tierflow.NumaNode " + std::to_string(n.os_index) + " " +
               std::string(TierKindName(n.kind)) + ">";
      });
}

}  // namespace

const Topology& ThisSystem() {
  static const Topology* system = nullptr;  // set once, the GIL held; never freed
  if (system == nullptr) system = new Topology(Take(Topology::Discover()));
  return *system;
}

void RequireThisSystem(const Topology& t, const char* what) {
  if (t.is_this_system()) return;
  Check(Status::InvalidArgument(std::string(what) + " uses this machine: give it " +
                                "Topology.discover() without xml_path, not the topology read " +
                                "from '" + t.source() + "'"));
}

void BindTopology(nb::module_& m) {
  BindNode(m);
  nb::class_<Topology>(m, "Topology", "The machine's memory nodes and their tiers.")
      .def_static("discover", &Discover, nb::arg("xml_path") = "", nb::arg("overrides") = "",
                  nb::arg("use_environment") = true,
                  "This system (or an hwloc XML file), with overrides such as '2=hbm,3=cxl' "
                  "applied, and TIERFLOW_TIERS when use_environment.")
      .def_prop_ro("nodes", &Nodes, nb::rv_policy::reference_internal)
      .def(
          "node", [](const Topology& t, int i) { return Take(t.FindNode(i)); }, nb::arg("os_index"),
          nb::rv_policy::reference_internal, "A node; NotFoundError names the nodes there are.")
      .def(
          "nearest_of_kind",
          [](const Topology& t, int from, const std::string& kind) {
            return Take(t.NearestOfKind(from, Kind(kind)));
          },
          nb::arg("from_node"), nb::arg("kind"), nb::rv_policy::reference_internal)
      .def("distance", &Topology::Distance, nb::arg("from_node"), nb::arg("to_node"))
      .def_prop_ro("package_count", &Topology::package_count)
      .def_prop_ro("is_this_system", &Topology::is_this_system)
      .def_prop_ro("source", &Topology::source);
}

}  // namespace tierflow::python
