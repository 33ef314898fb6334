// SPDX-License-Identifier: Apache-2.0
// The hwloc topologies under tests/fixtures (TIERFLOW_FIXTURES, set per test by CMake).
#pragma once

#include <string>

#include "tierflow/topology.h"

namespace tierflow::testkit {

inline std::string FixturePath(const std::string& name) {
  // Appended in place: GCC 12 reports a false -Warray-bounds on string + "/" once inlined.
  std::string path = TIERFLOW_FIXTURES;
  path += '/';
  path += name;
  return path;
}

// e.g. FixtureTopology("xeon-max-9468-snc4-flat.xml")
inline Result<Topology> FixtureTopology(const std::string& xml) {
  return Topology::FromXmlFile(FixturePath(xml));
}

}  // namespace tierflow::testkit
