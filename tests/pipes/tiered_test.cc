// SPDX-License-Identifier: Apache-2.0
// Tiered areas: the stages found and ranked (fixtures with HBM and CXL, whose memory stands in
// here, and this machine), extents placed on first write and switched when a stage reaches its
// limit or occupancy, the switches visible in stats and plans, data read back whole from
// wherever it went, released extents reused, and every bad declaration refused.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/fixture_topology.h"
#include "testing/random_bytes.h"
#include "testing/temp_dir.h"
#include "tierflow/pipe_runtime.h"

namespace tierflow {
namespace {

using testkit::RandomBytes;
using testkit::TempDir;

constexpr std::uint64_t kMiB = 1 << 20;

std::unique_ptr<PipeRuntime> Runtime(const std::string& xml = "") {
  PipeRuntimeOptions o;
  o.cpu_workers = 2;
  o.calibration_path = "/nonexistent/calibration.json";
  if (!xml.empty()) {
    o.topology_xml = testkit::FixturePath(xml);
    o.model_placement = true;
    o.calibration_path = testkit::FixturePath("calibration-xeon-max.json");
    o.calibration_any_machine = true;
  }
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(*rt) : nullptr;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Writes `data` into the area at `at` from DRAM, then reads the area back and compares.
void RoundTrip(PipeRuntime& rt, const Locator& area, std::uint64_t at,
               const std::vector<unsigned char>& data, Pipe* down_out = nullptr) {
  Result<Locator> src = rt.Memory(TierKind::kDram, 0, data.size());
  Result<Locator> back = rt.Memory(TierKind::kDram, 0, data.size());
  ASSERT_TRUE(src.ok() && back.ok());
  std::memcpy(src->data(), data.data(), data.size());
  Result<Pipe> down = rt.Connect(*src, area);
  Result<Pipe> up = rt.Connect(area, *back);
  ASSERT_TRUE(down.ok() && up.ok()) << down.status().ToString() << up.status().ToString();
  Status w = down->Transfer(0, at, data.size());
  ASSERT_TRUE(w.ok()) << w.ToString();
  Status s = up->Transfer(at, 0, data.size());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(std::memcmp(back->data(), data.data(), data.size()), 0);
  if (down_out != nullptr) *down_out = *down;
}

TEST(Tiered, XeonMaxFixtureFillsHbmThenSwitches) {
  auto rt = Runtime("xeon-max-9468-snc4-flat.xml");
  TempDir dir;
  TieredOptions o;
  o.capacity = 64 * kMiB;
  o.extent_bytes = 4 * kMiB;
  o.tier_limits = {{TierKind::kHbm, 16 * kMiB}};
  o.directories = {dir.path()};
  Result<Locator> area = rt->Tiered(o);
  ASSERT_TRUE(area.ok()) << area.status().ToString();
  EXPECT_EQ(area->kind(), LocatorKind::kTiered);
  ASSERT_GE(area->members().size(), 3u);
  // The fixture's calibration: DRAM -> HBM 20 GB/s beats DRAM -> DRAM 14 GB/s.
  EXPECT_EQ(area->members()[0].name(), "hbm:8");
  EXPECT_EQ(area->members()[1].name(), "dram:0");
  EXPECT_EQ(area->members().back().tier(), TierKind::kStorage);
  Pipe down;
  RoundTrip(*rt, *area, 0, RandomBytes(32 * kMiB, 3), &down);
  const std::string plan = down.plan().ToText();
  EXPECT_TRUE(Contains(plan,
                       "ranked by calibration from dram:0 (hbm:8 20.00 GB/s, dram:0 "
                       "14.00 GB/s"))
      << plan;
  EXPECT_TRUE(Contains(plan, "stands in on this machine's memory")) << plan;
  EXPECT_EQ(down.plan().segments.size(), area->members().size());
  PipeStats st = down.stats();
  ASSERT_EQ(st.stages.size(), area->members().size());
  EXPECT_EQ(st.stages[0].bytes, 16 * kMiB);
  EXPECT_EQ(st.stages[1].bytes, 16 * kMiB);
  EXPECT_TRUE(st.stages[0].modelled);
  EXPECT_TRUE(Contains(st.stages[0].state, "holds its limit of 16MiB")) << st.stages[0].state;
  ASSERT_EQ(st.switches.size(), 2u);
  EXPECT_EQ(st.switches[0], "from byte 0 on: hbm:8");
  EXPECT_EQ(st.switches[1], "from byte 16777216 on: dram:0 (hbm:8: holds its limit of 16MiB)");
  auto j = nlohmann::json::parse(st.ToJson());
  EXPECT_EQ(j["stages"][0]["stage"], "hbm:8");
  EXPECT_EQ(j["switches"].size(), 2u);
  // Released, the HBM extents are free again and the next write goes there.
  ASSERT_TRUE(rt->Release(*area, 0, 16 * kMiB).ok());
  RoundTrip(*rt, *area, 32 * kMiB, RandomBytes(8 * kMiB, 4));
  Result<std::vector<TieredStage>> now = rt->TieredState(*area);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)[0].bytes, 8 * kMiB);
  EXPECT_EQ((*now)[1].bytes, 16 * kMiB);
}

TEST(Tiered, CxlFixtureSpillsToAFileWhenMemoryIsFull) {
  auto rt = Runtime("cxl-host.xml");
  TempDir dir;
  TieredOptions o;
  o.capacity = 32 * kMiB;
  o.extent_bytes = 2 * kMiB;
  o.tier_limits = {{TierKind::kDram, 8 * kMiB}, {TierKind::kCxl, 8 * kMiB}};
  o.directories = {dir.path()};
  Result<Locator> area = rt->Tiered(o);
  ASSERT_TRUE(area.ok()) << area.status().ToString();
  ASSERT_EQ(area->members().size(), 3u);
  EXPECT_EQ(area->members()[0].tier(), TierKind::kDram);
  EXPECT_EQ(area->members()[1].tier(), TierKind::kCxl);
  Pipe down;
  RoundTrip(*rt, *area, 2 * kMiB, RandomBytes(24 * kMiB, 5), &down);
  EXPECT_TRUE(Contains(down.plan().ToText(), "in preference order, uncalibrated"))
      << down.plan().ToText();
  PipeStats st = down.stats();
  EXPECT_EQ(st.stages[0].bytes, 8 * kMiB);
  EXPECT_EQ(st.stages[1].bytes, 8 * kMiB);
  EXPECT_EQ(st.stages[2].bytes, 8 * kMiB);
  ASSERT_EQ(st.switches.size(), 3u);
  EXPECT_TRUE(Contains(st.switches[2], "on: file in " + dir.path())) << st.switches[2];
  EXPECT_TRUE(Contains(st.switches[2], "cxl:")) << st.switches[2];
  // Bytes of the area never written are refused, naming the range.
  Result<Locator> back = rt->Memory(TierKind::kDram, 0, 2 * kMiB);
  Result<Pipe> up = rt->Connect(*area, *back);
  ASSERT_TRUE(up.ok());
  Status s = up->Transfer(0, 0, 2 * kMiB);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "bytes [0, 2097152) of the tiered area were never written"))
      << s.ToString();
  // Full everywhere: refused with every stage's reason, nothing started.
  Result<Locator> more = rt->Memory(TierKind::kDram, 0, 2 * kMiB);
  Result<Pipe> down2 = rt->Connect(*more, *area);
  o.directories.clear();
  Result<Locator> small = rt->Tiered(o);
  ASSERT_TRUE(small.ok());
  Result<Pipe> fill = rt->Connect(*more, *small);
  for (std::uint64_t at = 0; at < 16 * kMiB; at += 2 * kMiB)
    ASSERT_TRUE(fill->Transfer(0, at, 2 * kMiB).ok());
  Status full = fill->Transfer(0, 16 * kMiB, 2 * kMiB);
  EXPECT_EQ(full.code(), StatusCode::kOutOfMemory);
  EXPECT_TRUE(Contains(full.message(), "no stage of the tiered area can take bytes from 16777216"))
      << full.ToString();
  EXPECT_TRUE(Contains(full.message(), "holds its limit of 8MiB")) << full.ToString();
}

TEST(Tiered, ThisMachineDramThenFileByLimitAndByOccupancy) {
  auto rt = Runtime();
  TempDir dir;
  TieredOptions o;
  o.capacity = 48 * kMiB;
  o.tiers = {TierKind::kDram};
  o.tier_limits = {{TierKind::kDram, 16 * kMiB}};
  o.directories = {dir.path()};
  Result<Locator> area = rt->Tiered(o);
  ASSERT_TRUE(area.ok()) << area.status().ToString();
  Pipe down;
  RoundTrip(*rt, *area, 0, RandomBytes(48 * kMiB, 6), &down);
  PipeStats st = down.stats();
  EXPECT_EQ(st.stages[0].bytes, 16 * kMiB);
  EXPECT_EQ(st.stages[1].bytes, 32 * kMiB);
  EXPECT_FALSE(st.stages[0].modelled);
  // The directory holds no name: the file has none.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.exists();
  EXPECT_EQ(entries, 0);
  // An occupancy limit the node is already above: DRAM takes nothing, and says why.
  o.tier_limits.clear();
  o.occupancy_limits = {{TierKind::kDram, 0.000001}};
  Result<Locator> busy = rt->Tiered(o);
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  RoundTrip(*rt, *busy, 8 * kMiB, RandomBytes(16 * kMiB, 7), &down);
  st = down.stats();
  EXPECT_EQ(st.stages[0].bytes, 0u);
  EXPECT_EQ(st.stages[1].bytes, 16 * kMiB);
  EXPECT_TRUE(Contains(st.stages[0].state, "above the limit of 0.0001%")) << st.stages[0].state;
  EXPECT_GT(st.stages[0].occupancy, 0.0);
}

TEST(Tiered, ConcurrentWritersPlaceEachExtentOnce) {
  auto rt = Runtime();
  TieredOptions o;
  o.capacity = 64 * kMiB;
  o.extent_bytes = 1 * kMiB;
  o.tiers = {TierKind::kDram};
  Result<Locator> area = rt->Tiered(o);
  ASSERT_TRUE(area.ok());
  auto data = RandomBytes(60 * kMiB, 8);  // ten blocks of four 1.5 MiB pieces
  Result<Locator> src = rt->Memory(TierKind::kDram, 0, data.size());
  std::memcpy(src->data(), data.data(), data.size());
  Result<Pipe> down = rt->Connect(*src, *area);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      // Unaligned pieces that share extents with the neighbours' pieces.
      for (std::uint64_t at = t * 3 * kMiB / 2; at + 3 * kMiB / 2 <= data.size(); at += 6 * kMiB) {
        EXPECT_TRUE(down->Transfer(at, at, 3 * kMiB / 2).ok());
      }
    });
  }
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(down->stats().stages[0].bytes, 60 * kMiB);
  Result<Locator> back = rt->Memory(TierKind::kDram, 0, data.size());
  Result<Pipe> up = rt->Connect(*area, *back);
  ASSERT_TRUE(up->Transfer(0, 0, data.size()).ok());
  EXPECT_EQ(std::memcmp(back->data(), data.data(), data.size()), 0);
}

TEST(Tiered, BadDeclarationsAreRefusedWithTheFix) {
  auto rt = Runtime();
  TempDir dir;
  auto refused = [&](TieredOptions o, const std::string& part) {
    Result<Locator> a = rt->Tiered(o);
    ASSERT_FALSE(a.ok()) << part;
    EXPECT_TRUE(Contains(a.status().message(), part)) << a.status().ToString();
  };
  TieredOptions o;
  refused(o, "needs a capacity");
  o.capacity = 64 * kMiB;
  o.extent_bytes = 1000;
  refused(o, "not a multiple of 4096");
  o.extent_bytes = 0;
  o.occupancy_limit = 0;
  refused(o, "outside (0, 1]");
  o.occupancy_limit = 1.5;
  refused(o, "outside (0, 1]");
  o.occupancy_limit = 0.9;
  o.occupancy_limits = {{TierKind::kDram, -1}};
  refused(o, "outside (0, 1]");
  o.occupancy_limits = {{TierKind::kStorage, 0.5}};
  refused(o, "occupancy_limits names storage, which is not a stage");
  o.occupancy_limits.clear();
  o.tiers = {TierKind::kStorage};
  refused(o, "files go in TieredOptions::directories");
  o.tiers = {TierKind::kDram, TierKind::kDram};
  refused(o, "names dram twice");
  o.tiers = {TierKind::kHbm};
  refused(o, "has no hbm node");
  o.tiers = {TierKind::kDram};
  o.tier_limits = {{TierKind::kCxl, kMiB}};
  refused(o, "names cxl, which is not a stage");
  o.tier_limits.clear();
  o.directories = {dir.File("missing")};
  refused(o, "does not exist");
  o.directories = {dir.Write("plain", std::vector<unsigned char>(4, 0))};
  refused(o, "give a directory");
  o.directories.clear();
  o.tiers = {};
  o.capacity = (1ull << 24) * 4096 + 1;
  o.extent_bytes = 4096;
  refused(o, "raise TieredOptions::extent_bytes");
  // Parsed spellings.
  EXPECT_TRUE(rt->Parse("tiered:16MiB:" + dir.path(), FileMode::kCreate).ok());
  EXPECT_FALSE(rt->Parse("tiered:lots", FileMode::kCreate).ok());
  Result<Locator> none = rt->Parse("tiered:", FileMode::kCreate);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Contains(none.status().message(), "needs a size")) << none.status().ToString();
  // A stage is not a locator of its own; Release and TieredState take areas only.
  o = {};
  o.capacity = 8 * kMiB;
  Result<Locator> area = rt->Tiered(o);
  ASSERT_TRUE(area.ok());
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, kMiB);
  Result<Pipe> p = rt->Connect(*mem, area->members()[0]);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(Contains(p.status().message(), "is a stage of a tiered area"))
      << p.status().ToString();
  EXPECT_FALSE(rt->TieredState(*mem).ok());
  EXPECT_FALSE(rt->Release(Locator(), 0, kMiB).ok());
  std::vector<unsigned char> mine(kMiB, 1);
  Result<Locator> borrowed = rt->Borrow(mine.data(), mine.size());
  Status b = rt->Release(*borrowed, 0, kMiB);
  EXPECT_TRUE(Contains(b.message(), "is borrowed")) << b.ToString();
  Status beyond = rt->Release(*area, 4 * kMiB, 8 * kMiB);
  EXPECT_TRUE(Contains(beyond.message(), "beyond the tiered area")) << beyond.ToString();
}

TEST(Release, FilesGiveBlocksBackAndMemoryItsPages) {
  auto rt = Runtime();
  TempDir dir;
  auto data = RandomBytes(8 * kMiB, 11);
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, data.size());
  Result<Locator> file = rt->File(dir.File("f"), 0, data.size(), FileMode::kCreate);
  ASSERT_TRUE(mem.ok() && file.ok());
  std::memcpy(mem->data(), data.data(), data.size());
  ASSERT_TRUE(rt->Connect(*mem, *file)->Transfer(0, 0, data.size()).ok());
  struct stat before {};
  ASSERT_EQ(stat(dir.File("f").c_str(), &before), 0);
  Status s = rt->Release(*file, 0, 4 * kMiB);
  if (s.code() == StatusCode::kUnsupported) GTEST_SKIP() << s.ToString();
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat after {};
  ASSERT_EQ(stat(dir.File("f").c_str(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size) << "the size stays";
  EXPECT_LT(after.st_blocks, before.st_blocks) << "the blocks went";
  ASSERT_TRUE(rt->Connect(*file, *mem)->Transfer(0, 0, data.size()).ok());
  EXPECT_EQ(mem->data()[4 * kMiB - 1], std::byte{0});
  EXPECT_EQ(std::memcmp(mem->data() + 4 * kMiB, data.data() + 4 * kMiB, 4 * kMiB), 0);
  ASSERT_TRUE(rt->Release(*mem, 4096, 2 * kMiB).ok());
  EXPECT_EQ(mem->data()[4096], std::byte{0});
  EXPECT_EQ(mem->data()[4 * kMiB], static_cast<std::byte>(data[4 * kMiB]));
  Result<Locator> readonly = rt->File(dir.File("f"), 0, 0, FileMode::kRead);
  Status r = rt->Release(*readonly, 0, kMiB);
  EXPECT_TRUE(Contains(r.message(), "declared for reading")) << r.ToString();
  EXPECT_TRUE(Contains(rt->Release(*file, kMiB, 8 * kMiB).message(), "is beyond"));
  // The tail is cut off: the file ends where the range starts.
  ASSERT_TRUE(rt->Release(*file, 6 * kMiB, 2 * kMiB).ok());
  EXPECT_EQ(std::filesystem::file_size(dir.File("f")), 6 * kMiB);
}

}  // namespace
}  // namespace tierflow
