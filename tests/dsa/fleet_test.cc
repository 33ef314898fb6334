// SPDX-License-Identifier: Apache-2.0
// A fleet of DSA engines placed by data location: the Xeon Max layout of the thesis (8 DSAs,
// one per DDR node of a 2-socket SNC4 machine) on device models, with the copy policies.
#include "tierflow/dsa_fleet.h"

#include <cstring>

#include <gtest/gtest.h>

#include "testing/fixture_topology.h"
#include "testing/random_bytes.h"
#include "tierflow/copy_policy.h"
#include "tierflow/topology.h"

namespace tierflow {
namespace {

using tierflow::testkit::RandomBytes;

DsaDiscoveryOptions Fixture(const std::string& name) {
  DsaDiscoveryOptions o;
  o.sysfs_root = testkit::FixturePath("dsa/" + name + "/sys");
  o.dev_root = testkit::FixturePath("dsa/" + name + "/dev");
  o.cpu.enqcmd = o.cpu.movdir64b = true;
  return o;
}

class XeonMaxFleet : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Topology> t = testkit::FixtureTopology("xeon-max-9468-snc4-flat.xml");
    ASSERT_TRUE(t.ok());
    topo_ = std::make_unique<Topology>(std::move(*t));
    Result<DsaInventory> inv = DsaInventory::Discover(Fixture("xeon-max-8swq"));
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    DsaModelConfig c;
    c.instant = true;
    Result<DsaFleet> f = DsaFleet::OnModel(DsaFleet::NodesOf(*inv), c);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    fleet_ = std::make_unique<DsaFleet>(std::move(*f));
  }
  std::unique_ptr<Topology> topo_;
  std::unique_ptr<DsaFleet> fleet_;
};

TEST_F(XeonMaxFleet, LayoutFollowsTheInventory) {
  ASSERT_EQ(fleet_->members().size(), 8u);
  EXPECT_TRUE(fleet_->is_model());
  std::vector<int> nodes;
  for (const auto& m : fleet_->members()) {
    nodes.push_back(m.node);
    EXPECT_EQ(m.engine->capabilities().node, m.node);
    EXPECT_TRUE(m.engine->capabilities().is_model);
  }
  EXPECT_EQ(nodes, std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7}))
      << "dsa0, dsa2, ... dsa14 (inventory order)";
}

// The DSA of the destination's node does the copy (DML used the caller's node), and the
// statistics say which device moved the bytes.
TEST_F(XeonMaxFleet, CopyRunsOnTheDestinationsDsaAndStatsSaySo) {
  const std::size_t n = 3 << 20;
  auto src = RandomBytes(n, 4);
  std::vector<unsigned char> dst(n);
  std::vector<Engine*> engines = fleet_->engines();
  CopyPolicy single;
  Result<std::vector<CopyPart>> plan =
      PlanCopy(single, *topo_, engines, 0, 13, n);  // HBM of node 5
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].engine->capabilities().node, 5);
  Result<Handle> h = SubmitParts(Operation::Copy(dst.data(), src.data(), n), *plan);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_EQ(dst, src);

  CopyPolicy pp;
  pp.kind = PolicyKind::kPushPull;
  Result<std::vector<CopyPart>> plan2 = PlanCopy(pp, *topo_, engines, 2, 13, n);
  ASSERT_TRUE(plan2.ok());
  std::fill(dst.begin(), dst.end(), 0);
  ASSERT_TRUE(SubmitParts(Operation::Copy(dst.data(), src.data(), n), *plan2)->Wait().ok());
  EXPECT_EQ(dst, src);

  std::uint64_t on5 = 0, on2 = 0, elsewhere = 0;
  for (const DsaFleet::DeviceStats& s : fleet_->stats()) {
    if (s.node == 5)
      on5 += s.stats.bytes;
    else if (s.node == 2)
      on2 += s.stats.bytes;
    else
      elsewhere += s.stats.bytes;
  }
  EXPECT_EQ(on5, n + n / 2);
  EXPECT_EQ(on2, n / 2);
  EXPECT_EQ(elsewhere, 0u);
}

TEST(DsaFleet, ErrorsNameEveryDevicesReason) {
  Result<DsaInventory> none = DsaInventory::Discover(Fixture("does-not-exist"));
  ASSERT_TRUE(none.ok());
  Result<DsaFleet> f = DsaFleet::Open(*none);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("device model"), std::string::npos) << f.status().message();

  // The fixture's WQ "devices" are plain files: each device says why it cannot be opened.
  Result<DsaInventory> inv = DsaInventory::Discover(Fixture("xeon-max-8swq"));
  ASSERT_TRUE(inv.ok());
  Result<DsaFleet> g = DsaFleet::Open(*inv);
  ASSERT_FALSE(g.ok());
  for (const char* dev : {"dsa0/wq0.0", "dsa14/wq14.0"}) {
    EXPECT_NE(g.status().message().find(dev), std::string::npos) << g.status().message();
  }
  EXPECT_FALSE(DsaFleet::OnModel({}).ok());
}

}  // namespace
}  // namespace tierflow
