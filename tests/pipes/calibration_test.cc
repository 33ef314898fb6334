// SPDX-License-Identifier: Apache-2.0
// Calibration::Measure restricted to chosen memory nodes: only their pairs are measured, and a
// node the system does not have is refused by name.
#include "tierflow/calibration.h"

#include <gtest/gtest.h>

#include "tierflow/buffer.h"
#include "tierflow/cpu_engine.h"

namespace tierflow {
namespace {

std::unique_ptr<CpuEngine> Engine() {
  Result<Topology> t = Topology::Discover();
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  CpuEngineOptions o;
  o.workers = 1;
  Result<std::unique_ptr<CpuEngine>> e = CpuEngine::Create(*t, o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

TEST(CalibrationMeasure, OnlyTheNodesAskedFor) {
  auto e = Engine();
  const int node = SystemMemoryNodes().front();
  CalibrationOptions o;
  o.bytes = 1 << 20;
  o.repeats = 1;
  o.nodes = {node};
  Result<Calibration> c = Calibration::Measure({e.get()}, nullptr, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->entries().size(), 1u);
  const std::string here = CalibrationEndpoint(TierKind::kDram, node);
  const auto f = c->Find(Mechanism::kCpu, here, here);
  ASSERT_TRUE(f.has_value());
  EXPECT_GT(f->gbps, 0);
  EXPECT_GT(f->latency_us, 0);
}

TEST(CalibrationMeasure, ANodeTheSystemLacksIsRefusedByName) {
  auto e = Engine();
  CalibrationOptions o;
  o.bytes = 1 << 20;
  o.nodes = {SystemMemoryNodes().front(), 4095};
  Result<Calibration> c = Calibration::Measure({e.get()}, nullptr, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("node 4095: not a memory node of this system"),
            std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace tierflow
