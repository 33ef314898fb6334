// SPDX-License-Identifier: Apache-2.0
#include "tierflow/topology.h"

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "testing/fixture_topology.h"
namespace tierflow {
namespace {

Topology Load(const std::string& name) {
  Result<Topology> t = testkit::FixtureTopology(name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

void CheckXeonMax(const Topology& t) {
  ASSERT_EQ(t.nodes().size(), 16u);
  EXPECT_EQ(t.package_count(), 2);
  EXPECT_FALSE(t.is_this_system());
  for (int i = 0; i < 8; ++i) {
    const NumaNode* ddr = t.node(i);
    const NumaNode* hbm = t.node(i + 8);
    ASSERT_NE(ddr, nullptr);
    ASSERT_NE(hbm, nullptr);
    EXPECT_EQ(ddr->kind, TierKind::kDram) << i;
    EXPECT_EQ(hbm->kind, TierKind::kHbm) << i + 8;
    EXPECT_EQ(ddr->cpus.size(), 12u);
    EXPECT_EQ(ddr->cpus.front(), 12 * i);
    EXPECT_TRUE(hbm->cpus.empty()) << "HBM node " << i + 8 << " must own no CPUs";
    EXPECT_EQ(hbm->local_cpus, ddr->cpus);
    EXPECT_EQ(ddr->capacity_bytes, 64ull << 30);
    EXPECT_EQ(hbm->capacity_bytes, 16ull << 30);
    EXPECT_EQ(ddr->package, i / 4);
    EXPECT_EQ(hbm->package, i / 4);
    EXPECT_EQ(hbm->near_cpu_node, i);
    // "HBM next to node i" is node i+8.
    Result<const NumaNode*> near = t.NearestOfKind(i, TierKind::kHbm);
    ASSERT_TRUE(near.ok());
    EXPECT_EQ((*near)->os_index, i + 8);
    Result<const NumaNode*> back = t.NearestOfKind(i + 8, TierKind::kDram);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ((*back)->os_index, i);
  }
  EXPECT_EQ(t.Distance(0, 0), 10u);
  EXPECT_EQ(t.Distance(0, 1), 12u);
  EXPECT_EQ(t.Distance(0, 4), 21u);
  EXPECT_EQ(t.Distance(0, 8), 13u);
  EXPECT_EQ(t.Distance(0, 9), 14u);
  EXPECT_EQ(t.Distance(0, 12), 31u);
  EXPECT_EQ(t.Distance(3, 11), 13u);
  EXPECT_EQ(t.NodesOfKind(TierKind::kHbm).size(), 8u);
  EXPECT_EQ(t.NodesOfPackage(1).size(), 8u);
  EXPECT_EQ(t.caches().l3_bytes, 110100480u);
}

TEST(Topology, XeonMaxWithSubtypes) {
  Topology t = Load("xeon-max-9468-snc4-flat.xml");
  CheckXeonMax(t);
  EXPECT_EQ(t.node(8)->kind_reason, "hwloc subtype HBM");
  EXPECT_EQ(t.node(8)->bandwidth_mibps, 409600u);
  EXPECT_EQ(t.node(0)->bandwidth_mibps, 76800u);
}

TEST(Topology, XeonMaxWithoutSubtypesUsesBandwidth) {
  Topology t = Load("xeon-max-9468-snc4-flat-nosubtype.xml");
  CheckXeonMax(t);
  EXPECT_NE(t.node(9)->kind_reason.find("bandwidth"), std::string::npos);
}

TEST(Topology, CxlHost) {
  Topology t = Load("cxl-host.xml");
  ASSERT_EQ(t.nodes().size(), 3u);
  EXPECT_EQ(t.node(0)->kind, TierKind::kDram);
  EXPECT_EQ(t.node(1)->kind, TierKind::kDram);
  EXPECT_EQ(t.node(2)->kind, TierKind::kCxl);
  EXPECT_TRUE(t.node(2)->cpus.empty());
  EXPECT_EQ(t.node(0)->cpus.size(), 16u);
  EXPECT_EQ(t.node(1)->cpus.front(), 16);
  EXPECT_EQ(t.node(2)->near_cpu_node, 0);
  EXPECT_EQ(t.node(2)->package, 0);
  EXPECT_EQ(t.Distance(0, 2), 24u);
  EXPECT_EQ(t.Distance(1, 2), 34u);
  EXPECT_EQ(t.Distance(1, 0), 21u);
  EXPECT_EQ((*t.NearestOfKind(1, TierKind::kCxl))->os_index, 2);
  Result<const NumaNode*> hbm = t.NearestOfKind(0, TierKind::kHbm);
  ASSERT_FALSE(hbm.ok());
  EXPECT_EQ(hbm.status().code(), StatusCode::kNotFound);
  EXPECT_NE(hbm.status().message().find("no hbm node"), std::string::npos);
}

TEST(Topology, ThisMachineFixture) {
  Topology t = Load("this-machine.xml");
  ASSERT_EQ(t.nodes().size(), 1u);
  EXPECT_EQ(t.node(0)->kind, TierKind::kDram);
  EXPECT_EQ(t.node(0)->cpus, (std::vector<int>{0, 1}));
  EXPECT_FALSE(t.has_distances());
  EXPECT_EQ(t.caches().l3_bytes, 32u << 20);
  EXPECT_EQ(t.caches().l2_bytes, 512u << 10);
}

TEST(Topology, DiscoverThisSystem) {
  Result<Topology> t = Topology::Discover();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->is_this_system());
  ASSERT_FALSE(t->nodes().empty());
  bool any_cpus = false;
  for (const NumaNode& n : t->nodes()) {
    any_cpus |= n.has_cpus();
    EXPECT_GT(n.capacity_bytes, 0u);
  }
  EXPECT_TRUE(any_cpus);
}

TEST(Topology, MissingXmlIsAClearError) {
  Result<Topology> t = Topology::FromXmlFile("/nonexistent/topo.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/topo.xml"), std::string::npos);
  EXPECT_NE(t.status().message().find("lstopo"), std::string::npos);
}

TEST(Topology, FindNodeNamesExistingNodes) {
  Topology t = Load("cxl-host.xml");
  Result<const NumaNode*> n = t.FindNode(7);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("nodes: 0,1,2"), std::string::npos) << n.status().message();
}

TEST(TierOverrides, ParsesInlineAndRanges) {
  Result<TierOverrides> o = TierOverrides::Parse("8-10=hbm, 2 = CXL,3 nvm");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->kinds().size(), 5u);
  EXPECT_EQ(o->kinds().at(9), TierKind::kHbm);
  EXPECT_EQ(o->kinds().at(2), TierKind::kCxl);
  EXPECT_EQ(o->kinds().at(3), TierKind::kNvm);
}

TEST(TierOverrides, RejectsBadEntries) {
  for (const char* bad : {"8-15", "x=hbm", "8=fast", "10-8=hbm", "=hbm", "1-=dram"}) {
    Result<TierOverrides> o = TierOverrides::Parse(bad);
    EXPECT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(TierOverrides::Parse("8=fast").status().message().find("dram, hbm"), std::string::npos);
}

TEST(TierOverrides, FileWithCommentsAndLineNumbers) {
  std::string path = ::testing::TempDir() + "/tiers.conf";
  {
    std::ofstream f(path);
    f << "# HMAT on this box is wrong\n8-15 hbm\n\n2=cxl # expander\n";
  }
  Result<TierOverrides> o = TierOverrides::LoadFile(path);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->kinds().size(), 9u);
  {
    std::ofstream f(path);
    f << "8 hbm\nbogus line\n";
  }
  Result<TierOverrides> bad = TierOverrides::LoadFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":2"), std::string::npos) << bad.status().message();
  EXPECT_EQ(TierOverrides::LoadFile("/nonexistent.conf").status().code(), StatusCode::kNotFound);
  // Issue 12, item 12: a directory read as an empty file, with no error and no overrides.
  Result<TierOverrides> dir = TierOverrides::LoadFile("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos)
      << dir.status().message();
}

TEST(TierOverrides, OverrideReclassifiesAndUnknownNodeFails) {
  TopologyOptions o;
  o.xml_path = testkit::FixturePath("cxl-host.xml");
  o.use_environment = false;
  o.overrides.Set(2, TierKind::kNvm);
  Result<Topology> t = Topology::Discover(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->node(2)->kind, TierKind::kNvm);
  EXPECT_EQ(t->node(2)->kind_reason, "override");
  o.overrides.Set(9, TierKind::kHbm);
  Result<Topology> bad = Topology::Discover(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node 9"), std::string::npos);
}

TEST(TierOverrides, EnvironmentVariable) {
  setenv("TIERFLOW_TIERS", "2=hbm", 1);
  TopologyOptions o;
  o.xml_path = testkit::FixturePath("cxl-host.xml");
  Result<Topology> t = Topology::Discover(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->node(2)->kind, TierKind::kHbm);
  setenv("TIERFLOW_TIERS", "2=warp", 1);
  Result<Topology> bad = Topology::Discover(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TIERFLOW_TIERS"), std::string::npos);
  unsetenv("TIERFLOW_TIERS");
}

TEST(TierKind, NamesRoundTrip) {
  for (TierKind k :
       {TierKind::kDram, TierKind::kHbm, TierKind::kCxl, TierKind::kNvm, TierKind::kStorage}) {
    EXPECT_EQ(*ParseTierKind(TierKindName(k)), k);
  }
  EXPECT_FALSE(ParseTierKind("sram").ok());
}

}  // namespace
}  // namespace tierflow
