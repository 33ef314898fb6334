// SPDX-License-Identifier: Apache-2.0
#include "tierflow/buffer.h"

#include <numaif.h>

#include <cstring>

#include <gtest/gtest.h>

#include "testing/fixture_topology.h"
namespace tierflow {
namespace {

TEST(Buffer, AllocatesPrefaultedOnNode) {
  Result<Buffer> b = Buffer::OnNode(0, 1 << 20);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->size(), 1u << 20);
  EXPECT_EQ(b->node(), 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % 4096, 0u);
  std::memset(b->data(), 7, b->size());
  int node = -1;
  ASSERT_EQ(get_mempolicy(&node, nullptr, 0, b->data(), MPOL_F_NODE | MPOL_F_ADDR), 0);
  EXPECT_EQ(node, 0);
}

TEST(Buffer, RoundsToPagesAndMoves) {
  Result<Buffer> b = Buffer::OnNode(0, 5000, {HugePages::kNone, false});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->mapped_size(), 8192u);
  std::byte* p = b->data();
  Buffer moved = std::move(*b);
  EXPECT_EQ(moved.data(), p);
  EXPECT_TRUE(b->empty());
  Buffer other;
  other = std::move(moved);
  EXPECT_EQ(other.data(), p);
}

TEST(Buffer, TransparentHugePages) {
  Result<Buffer> b = Buffer::OnNode(0, 8 << 20, {HugePages::kTransparent, true});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  b->data()[b->size() - 1] = std::byte{1};
}

TEST(Buffer, ExplicitHugePagesSucceedOrSayHowToReserve) {
  Result<Buffer> b = Buffer::OnNode(0, 2 << 20, {HugePages::kExplicit, true});
  if (b.ok()) {
    EXPECT_EQ(b->mapped_size() % (2u << 20), 0u);
  } else {
    EXPECT_EQ(b.status().code(), StatusCode::kOutOfMemory);
    EXPECT_NE(b.status().message().find("nr_hugepages"), std::string::npos);
  }
}

TEST(Buffer, BadInputs) {
  Result<Buffer> zero = Buffer::OnNode(0, 0);
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  Result<Buffer> missing = Buffer::OnNode(63, 4096);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("node 63"), std::string::npos);
  Result<Buffer> negative = Buffer::OnNode(-1, 4096);
  EXPECT_EQ(negative.status().code(), StatusCode::kNotFound);
  Result<Buffer> huge = Buffer::OnNode(0, std::size_t{1} << 49);
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(huge.status().message().find("node 0"), std::string::npos);
}

TEST(Buffer, OnTier) {
  Result<Topology> t =
      Topology::Discover({.xml_path = "", .overrides = {}, .use_environment = false});
  ASSERT_TRUE(t.ok());
  Result<Buffer> dram = Buffer::OnTier(*t, TierKind::kDram, 0, 4096);
  ASSERT_TRUE(dram.ok()) << dram.status().ToString();
  if (t->NodesOfKind(TierKind::kHbm).empty()) {
    Result<Buffer> hbm = Buffer::OnTier(*t, TierKind::kHbm, 0, 4096);
    EXPECT_EQ(hbm.status().code(), StatusCode::kNotFound);
  }
  Result<Topology> xml = testkit::FixtureTopology("cxl-host.xml");
  ASSERT_TRUE(xml.ok());
  Result<Buffer> remote = Buffer::OnTier(*xml, TierKind::kCxl, 0, 4096);
  EXPECT_EQ(remote.status().code(), StatusCode::kInvalidArgument);
}

TEST(Buffer, NodeMemory) {
  Result<NodeMemory> m = QueryNodeMemory(0);
  ASSERT_TRUE(m.ok());
  EXPECT_GT(m->total_bytes, 0u);
  EXPECT_LE(m->free_bytes, m->total_bytes);
  EXPECT_FALSE(QueryNodeMemory(200).ok());
}

}  // namespace
}  // namespace tierflow
