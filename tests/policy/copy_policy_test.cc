#include "tierflow/copy_policy.h"

#include <numaif.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/engine_fixture.h"
#include "engine/manual_engine.h"

namespace tierflow {
namespace {

using testing::ManualEngine;

class XeonMaxPolicies : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Topology> t =
        Topology::FromXmlFile(std::string(TIERFLOW_FIXTURES) + "/xeon-max-9468-snc4-flat.xml");
    ASSERT_TRUE(t.ok());
    topo_ = std::make_unique<Topology>(std::move(*t));
    for (int node = 0; node < 8; ++node) {  // one engine per DDR node, as one DSA per node
      owned_.push_back(std::make_unique<ManualEngine>(node));
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
  auto a = testing::MakeCpuEngine();
  auto b = testing::MakeCpuEngine();
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
