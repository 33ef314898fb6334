// SPDX-License-Identifier: Apache-2.0
// The hwloc topologies under tests/fixtures (TIERFLOW_FIXTURES, set per test by CMake).
#pragma once

#include <string>

#include "tierflow/topology.h"

namespace tierflow::testkit {

inline std::string FixturePath(const std::string& name) {
  return std::string(TIERFLOW_FIXTURES) + "/" + name;
}

// e.g. FixtureTopology("xeon-max-9468-snc4-flat.xml")
inline Result<Topology> FixtureTopology(const std::string& xml) {
  return Topology::FromXmlFile(FixturePath(xml));
}

}  // namespace tierflow::testkit
