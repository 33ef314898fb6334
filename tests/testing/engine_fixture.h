#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"

namespace tierflow::testing {

inline const Topology& ThisSystem() {
  static const Topology* t = [] {
    TopologyOptions o;
    o.use_environment = false;
    Result<Topology> r = Topology::Discover(o);
    if (!r.ok()) std::abort();
    return new Topology(std::move(r).value());
  }();
  return *t;
}

inline std::unique_ptr<CpuEngine> MakeCpuEngine(CpuEngineOptions o = {}) {
  Result<std::unique_ptr<CpuEngine>> e = CpuEngine::Create(ThisSystem(), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

}  // namespace tierflow::testing
