// SPDX-License-Identifier: Apache-2.0
#include "tierflow/copy_policy.h"

#include <numaif.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "testing/engine_fixture.h"
#include "testing/fixture_topology.h"
#include "testing/manual_engine.h"

namespace tierflow {
namespace {

using testkit::ManualEngine;

class XeonMaxPolicies : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Topology> t = testkit::FixtureTopology("xeon-max-9468-snc4-flat.xml");
    ASSERT_TRUE(t.ok());
    topo_ = std::make_unique<Topology>(std::move(*t));
    for (int node = 0; node < 8; ++node) {  // one engine per DDR node, as one DSA per node
      owned_.push_back(std::make_unique<ManualEngine>(node, "dsa-like"));
      owned_.back()->set_kind(EngineKind::kOffload);
      engines_.push_back(owned_.back().get());
    }
  }
  std::vector<int> Nodes(const std::vector<CopyPart>& parts) {
    std::vector<int> out;
    for (const CopyPart& p : parts) out.push_back(p.engine->capabilities().node);
    return out;
  }
  std::unique_ptr<Topology> topo_;
  std::vector<std::unique_ptr<ManualEngine>> owned_;
  std::vector<Engine*> engines_;
};

// Auto: the CPU for small copies, the destination's DSA for medium ones, push-pull for large
// ones with an optional CPU share; many small operations as one DSA batch.
TEST_F(XeonMaxPolicies, AutoChoosesBySizeWithConfigurableThresholds) {
  std::vector<std::unique_ptr<ManualEngine>> cpus;
  std::vector<Engine*> all = engines_;
  for (int node : {0, 4}) {
    // Named unlike any engine of the library: the policy goes by kind alone.
    cpus.push_back(std::make_unique<ManualEngine>(node, "cores"));
    all.push_back(cpus.back().get());
  }
  CopyPolicy p;
  p.kind = PolicyKind::kAuto;
  p.thresholds.cpu_below = 64 << 10;
  p.thresholds.push_pull_from = 4 << 20;
  // Small, to HBM node 12 (socket 1, nearest CPU node 4): the CPU engine of node 4.
  Result<std::vector<CopyPart>> small = PlanCopy(p, *topo_, all, 0, 12, 4096);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  ASSERT_EQ(small->size(), 1u);
  EXPECT_EQ((*small)[0].engine, cpus[1].get());
  // Medium: the destination's DSA.
  Result<std::vector<CopyPart>> medium = PlanCopy(p, *topo_, all, 0, 12, 1 << 20);
  ASSERT_TRUE(medium.ok());
  EXPECT_EQ(Nodes(*medium), std::vector<int>({4}));
  EXPECT_FALSE(IsCpuEngine(*(*medium)[0].engine));
  // Large: push-pull, source DSA and destination DSA, half each.
  Result<std::vector<CopyPart>> large = PlanCopy(p, *topo_, all, 1, 12, 64 << 20);
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(Nodes(*large), std::vector<int>({1, 4}));
  EXPECT_EQ((*large)[0].size, std::size_t{32} << 20);
  // With a CPU share of 25%: the CPU engine of the destination takes a quarter.
  p.thresholds.cpu_share = 0.25;
  Result<std::vector<CopyPart>> shared = PlanCopy(p, *topo_, all, 1, 12, 64 << 20);
  ASSERT_TRUE(shared.ok());
  ASSERT_EQ(shared->size(), 3u);
  EXPECT_EQ((*shared)[2].engine, cpus[1].get());
  EXPECT_EQ((*shared)[2].size, std::size_t{16} << 20);
  EXPECT_EQ((*shared)[0].size + (*shared)[1].size, std::size_t{48} << 20);
  // Thresholds moved: 1 MiB is now "small".
  p.thresholds.cpu_below = 2 << 20;
  Result<std::vector<CopyPart>> moved = PlanCopy(p, *topo_, all, 0, 12, 1 << 20);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ((*moved)[0].engine, cpus[1].get());
  // Without DSAs, auto is the CPU for every size.
  std::vector<Engine*> only_cpus = {cpus[0].get(), cpus[1].get()};
  Result<std::vector<CopyPart>> no_dsa = PlanCopy(p, *topo_, only_cpus, 0, 0, 64 << 20);
  ASSERT_TRUE(no_dsa.ok());
  EXPECT_EQ((*no_dsa)[0].engine, cpus[0].get());
  p.thresholds.cpu_share = 1.5;
  Result<std::vector<CopyPart>> bad = PlanCopy(p, *topo_, all, 1, 12, 64 << 20);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpu_share 1.5: use 0 .. 0.9"), std::string::npos);
  EXPECT_NE(DescribeAutoThresholds(p.thresholds).find("CPU below 2097152 B"), std::string::npos);

  // Batches: 8 small operations go to the destination's DSA as one batch; 2 go to its CPU.
  p.thresholds = {};
  std::vector<unsigned char> a(8 * 4096), b(8 * 4096);
  std::vector<Operation> ops;
  for (int i = 0; i < 8; ++i)
    ops.push_back(Operation::Copy(a.data() + i * 4096, b.data() + i * 4096, 4096));
  Result<Engine*> many = ChooseBatchEngine(p, *topo_, all, 12, ops);
  ASSERT_TRUE(many.ok());
  EXPECT_EQ((*many)->capabilities().node, 4);
  EXPECT_FALSE(IsCpuEngine(**many));
  Result<Engine*> few = ChooseBatchEngine(p, *topo_, all, 12, std::span(ops).first(2));
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(*few, cpus[1].get());
}

TEST_F(XeonMaxPolicies, SingleUsesTheDestinationsEngine) {
  CopyPolicy p;
  Result<std::vector<CopyPart>> plan = PlanCopy(p, *topo_, engines_, 0, 11, 1 << 30);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Nodes(*plan), std::vector<int>{3}) << "HBM node 11 is served by node 3's engine";
  EXPECT_EQ((*plan)[0].size, 1u << 30);
  p.engine_node = 5;
  EXPECT_EQ(Nodes(*PlanCopy(p, *topo_, engines_, 0, 11, 1 << 30)), std::vector<int>{5});
}

TEST_F(XeonMaxPolicies, PushPullUsesSourceAndDestination) {
  CopyPolicy p;
  p.kind = PolicyKind::kPushPull;
  Result<std::vector<CopyPart>> plan = PlanCopy(p, *topo_, engines_, 0, 12, 1 << 30);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Nodes(*plan), (std::vector<int>{0, 4}));
  EXPECT_EQ((*plan)[0].size, 512u << 20);
  EXPECT_EQ((*plan)[1].offset, 512u << 20);
  // Source and destination served by the same engine: one part.
  EXPECT_EQ(Nodes(*PlanCopy(p, *topo_, engines_, 0, 8, 1 << 30)), std::vector<int>{0});
}

TEST_F(XeonMaxPolicies, SocketAndBruteForce) {
  CopyPolicy p;
  p.kind = PolicyKind::kSocket;
  EXPECT_EQ(Nodes(*PlanCopy(p, *topo_, engines_, 0, 15, 1 << 30)), (std::vector<int>{4, 5, 6, 7}));
  p.socket = 0;
  EXPECT_EQ(Nodes(*PlanCopy(p, *topo_, engines_, 0, 15, 1 << 30)), (std::vector<int>{0, 1, 2, 3}));
  p.kind = PolicyKind::kBruteForce;
  Result<std::vector<CopyPart>> all = PlanCopy(p, *topo_, engines_, 0, 15, 1 << 30);
  ASSERT_EQ(all->size(), 8u);
  std::size_t covered = 0;
  for (const CopyPart& part : *all) {
    EXPECT_EQ(part.offset, covered);
    EXPECT_EQ(part.size, 128u << 20);
    covered += part.size;
  }
  EXPECT_EQ(covered, 1u << 30);
}

TEST_F(XeonMaxPolicies, WeightsAndGranularity) {
  CopyPolicy p;
  p.kind = PolicyKind::kPushPull;
  p.weights[0] = 3;
  Result<std::vector<CopyPart>> plan = PlanCopy(p, *topo_, engines_, 0, 4, 1000000);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].size % 4096, 0u);
  EXPECT_NEAR(static_cast<double>((*plan)[0].size), 750000.0, 4096);
  EXPECT_EQ((*plan)[0].size + (*plan)[1].size, 1000000u);
  // Tiny copies collapse to one part rather than producing empty ones.
  Result<std::vector<CopyPart>> tiny = PlanCopy(p, *topo_, engines_, 0, 4, 100);
  ASSERT_TRUE(tiny.ok());
  std::size_t total = 0;
  for (const CopyPart& part : *tiny) {
    EXPECT_GT(part.size, 0u);
    total += part.size;
  }
  EXPECT_EQ(total, 100u);
}

TEST_F(XeonMaxPolicies, Errors) {
  CopyPolicy p;
  EXPECT_EQ(PlanCopy(p, *topo_, engines_, 0, 42, 4096).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(PlanCopy(p, *topo_, engines_, 0, 1, 0).status().code(), StatusCode::kInvalidArgument);
  std::vector<Engine*> few = {engines_[0]};
  Result<std::vector<CopyPart>> none = PlanCopy(p, *topo_, few, 0, 12, 4096);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no engine serves NUMA node 12"), std::string::npos);
  p.weights[1] = -1;
  p.engine_node = 1;
  EXPECT_FALSE(PlanCopy(p, *topo_, engines_, 0, 1, 4096).ok());
  p = {};
  p.granularity = 0;
  EXPECT_FALSE(PlanCopy(p, *topo_, engines_, 0, 1, 4096).ok());
  EXPECT_EQ(*ParsePolicyKind("push-pull"), PolicyKind::kPushPull);
  EXPECT_FALSE(ParsePolicyKind("random").ok());
}

TEST_F(XeonMaxPolicies, SubmitPartsCompletesWhenAllEnginesHave) {
  std::vector<char> src(1 << 20, 7), dst(1 << 20);
  CopyPolicy p;
  p.kind = PolicyKind::kBruteForce;
  Result<std::vector<CopyPart>> plan = PlanCopy(p, *topo_, engines_, 0, 15, src.size());
  Result<Handle> h = SubmitParts(Operation::Copy(dst.data(), src.data(), src.size()), *plan);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  for (int i = 0; i < 7; ++i) owned_[i]->CompleteNext();
  EXPECT_FALSE(h->done()) << "one engine still holds its part";
  owned_[7]->CompleteNext();
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(h->bytes_completed(), src.size());
}

TEST_F(XeonMaxPolicies, SubmitPartsFailureOfOnePartFailsTheWhole) {
  std::vector<char> src(8192, 7), dst(8192);
  std::vector<CopyPart> parts = {{engines_[0], 0, 4096}, {engines_[1], 4096, 4096}};
  Result<Handle> h = SubmitParts(Operation::Copy(dst.data(), src.data(), src.size()), parts);
  ASSERT_TRUE(h.ok());
  owned_[0]->CompleteNext();
  owned_[1]->CompleteNext(StatusCode::kFailed, "page fault at part 1");
  EXPECT_EQ(h->Wait().message(), "page fault at part 1");
  EXPECT_EQ(h->bytes_completed(), 4096u);
}

TEST_F(XeonMaxPolicies, SubmitPartsRejectsBadTiling) {
  std::vector<char> src(8192), dst(8192);
  Operation op = Operation::Copy(dst.data(), src.data(), src.size());
  std::vector<CopyPart> gap = {{engines_[0], 0, 4096}, {engines_[1], 4097, 4095}};
  EXPECT_NE(SubmitParts(op, gap).status().message().find("does not continue"), std::string::npos);
  std::vector<CopyPart> short_parts = {{engines_[0], 0, 4096}};
  EXPECT_NE(SubmitParts(op, short_parts).status().message().find("cover 4096"), std::string::npos);
  EXPECT_FALSE(SubmitParts(op, {}).ok());
  std::vector<char> buf(8192);
  std::vector<CopyPart> halves = {{engines_[0], 0, 4000}, {engines_[1], 4000, 4000}};
  EXPECT_FALSE(SubmitParts(Operation::Move(buf.data() + 100, buf.data(), 8000), halves).ok());
  for (auto& e : owned_) EXPECT_EQ(e->pending(), 0u) << "nothing was submitted";
}

TEST(CopyPolicyCpu, SplitFillAndCompareOverRealEngines) {
  auto a = testkit::MakeCpuEngine();
  auto b = testkit::MakeCpuEngine();
  std::vector<unsigned char> dst((1 << 20) + 3);
  std::vector<CopyPart> parts = {{a.get(), 0, 4099}, {b.get(), 4099, dst.size() - 4099}};
  const std::uint64_t pat = 0x8877665544332211ull;
  Result<Handle> h = SubmitParts(Operation::Fill(dst.data(), pat, dst.size()), parts);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->Wait().ok());
  for (std::size_t i = 0; i < dst.size(); ++i) {
    ASSERT_EQ(dst[i], static_cast<unsigned char>(pat >> (8 * (i % 8)))) << i;
  }
  std::vector<unsigned char> other = dst;
  other[5000] ^= 1;
  Result<Handle> c = SubmitParts(Operation::Compare(dst.data(), other.data(), dst.size()), parts);
  ASSERT_TRUE(c->Wait().ok());
  EXPECT_FALSE(c->result().equal);
  EXPECT_EQ(c->result().first_difference, 5000u);
}

TEST(CopyPolicyCpu, NodeOfAddress) {
  std::vector<char> v(4096, 1);
  Result<int> node = NodeOfAddress(v.data());
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(*node, 0);
}

}  // namespace
}  // namespace tierflow
