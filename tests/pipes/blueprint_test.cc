// SPDX-License-Identifier: Apache-2.0
// Blueprints: roles bound on the machine found (a memory role to the tier whose stages plan
// fastest on the Xeon Max fixture, to DRAM here), stages connected and moving data, the plan
// explained as a whole, and every mistake refused with nothing left behind.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/fixture_topology.h"
#include "testing/random_bytes.h"
#include "testing/temp_dir.h"
#include "tierflow/blueprint.h"

namespace tierflow {
namespace {

using testkit::RandomBytes;
using testkit::TempDir;

constexpr std::uint64_t kMiB = 1 << 20;

std::unique_ptr<PipeRuntime> Runtime(bool fixture) {
  PipeRuntimeOptions o;
  o.cpu_workers = 2;
  o.calibration_path = "/nonexistent/calibration.json";
  if (fixture) {
    o.topology_xml = testkit::FixturePath("xeon-max-9468-snc4-flat.xml");
    o.model_placement = true;
    o.calibration_path = testkit::FixturePath("calibration-xeon-max.json");
    o.calibration_any_machine = true;
  }
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(*rt) : nullptr;
}

AbstractMemory Mem(std::uint64_t bytes, std::vector<TierKind> tiers = {}) {
  AbstractMemory m;
  m.bytes = bytes;
  m.tiers = std::move(tiers);
  return m;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Blueprint, BindsTheTierWhoseStagesPlanFastest) {
  auto rt = Runtime(true);
  TempDir dir;
  Result<Locator> src = rt->Memory(TierKind::kDram, 0, 16 * kMiB);
  ASSERT_TRUE(src.ok());
  Blueprint bp("spill");
  bp.Given("source")
      .Memory("buffer", Mem(16 * kMiB))
      .File("out", FileMode::kCreate)
      .Stage("fill", "source", "buffer")
      .Stage("spill", "buffer", "out");
  Blueprint::Bindings b;
  b.given["source"] = *src;
  b.files["out"] = {dir.File("out"), 0, 16 * kMiB};
  Result<PlanInstance> plan = bp.Instantiate(*rt, b);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // The fixture's figures: DRAM -> HBM 20, DRAM -> DRAM 14; HBM -> file 5.2, DRAM -> file 5.0.
  Result<Locator> buffer = plan->locator("buffer");
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->tier(), TierKind::kHbm);
  EXPECT_TRUE(buffer->modelled());
  const BlueprintPlan& e = plan->Explain();
  ASSERT_EQ(e.bindings.size(), 3u);
  EXPECT_EQ(e.bindings[1].role, "buffer");
  EXPECT_EQ(e.bindings[1].why, "the fastest candidate that fits: stage 'spill' plans 5.20 GB/s");
  ASSERT_EQ(e.bindings[1].rejected.size(), 1u);
  EXPECT_EQ(e.bindings[1].rejected[0].mechanism, "dram:0");
  EXPECT_EQ(e.bindings[1].rejected[0].reason,
            "plans 5.00 GB/s (stage 'spill'), below hbm:8's 5.20 GB/s");
  ASSERT_EQ(e.stages.size(), 2u);
  EXPECT_EQ(e.stages[1].plan.hops[0].mechanism, Mechanism::kUringWrite);
  const std::string text = e.ToText();
  EXPECT_TRUE(Contains(text, "blueprint spill\n  role source (given)")) << text;
  EXPECT_TRUE(Contains(text, "  stage spill: buffer -> out\n    pipe hbm:8:16MiB -> file:"))
      << text;
  auto j = nlohmann::json::parse(e.ToJson());
  EXPECT_EQ(j["bindings"][1]["bound_to"], "hbm:8:16MiB");
  EXPECT_EQ(j["stages"][0]["plan"]["hops"][0]["expected_gbps"], 20.0);
  // The stages move data.
  auto data = RandomBytes(16 * kMiB, 1);
  std::memcpy(src->data(), data.data(), data.size());
  ASSERT_TRUE(plan->pipe("fill")->Transfer(0, 0, data.size()).ok());
  ASSERT_TRUE(plan->pipe("spill")->Transfer(0, 0, data.size()).ok());
  std::vector<char> back(data.size());
  FILE* f = std::fopen(dir.File("out").c_str(), "rb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fread(back.data(), 1, back.size(), f), back.size());
  std::fclose(f);
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  // Only HBM asked for, and more than it has: refused with the reason.
  Blueprint big("big");
  big.Memory("huge", Mem(32ull << 30, {TierKind::kHbm}));
  Result<PlanInstance> none = big.Instantiate(*rt, {});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Contains(none.status().message(), "hbm:8: capacity 16GiB, needs 32GiB"))
      << none.status().ToString();
}

TEST(Blueprint, ThisMachineInPreferenceOrder) {
  auto rt = Runtime(false);
  TempDir dir;
  auto data = RandomBytes(8 * kMiB, 2);
  const std::string in = dir.Write("in", data);
  TieredOptions spill;
  spill.capacity = 16 * kMiB;
  spill.directories = {dir.path()};
  Blueprint bp("copy");
  bp.File("input", FileMode::kRead)
      .Memory("buffer", Mem(8 * kMiB))
      .Tiered("spill", spill)
      .Stage("read", "input", "buffer")
      .Stage("park", "buffer", "spill")
      .Stage("unpark", "spill", "buffer");
  Blueprint::Bindings b;
  b.files["input"] = {in};
  Result<PlanInstance> plan = bp.Instantiate(*rt, b);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->locator("buffer")->tier(), TierKind::kDram);
  EXPECT_EQ(plan->Explain().bindings[1].why, "the first candidate that fits, in preference order");
  EXPECT_EQ(plan->locator("spill")->kind(), LocatorKind::kTiered);
  ASSERT_TRUE(plan->pipe("read")->Transfer(0, 0, data.size()).ok());
  ASSERT_TRUE(plan->pipe("park")->Transfer(0, 4 * kMiB, data.size()).ok());
  std::memset(plan->locator("buffer")->data(), 0, data.size());
  ASSERT_TRUE(plan->pipe("unpark")->Transfer(4 * kMiB, 0, data.size()).ok());
  EXPECT_EQ(std::memcmp(plan->locator("buffer")->data(), data.data(), data.size()), 0);
  Result<Pipe> missing = plan->pipe("write");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), "it has 'park', 'read', 'unpark'"))
      << missing.status().ToString();
  EXPECT_FALSE(plan->locator("nothing").ok());
  EXPECT_FALSE(PlanInstance().pipe("read").ok());
}

TEST(Blueprint, MistakesAreRefusedAndCreatedFilesRemoved) {
  auto rt = Runtime(false);
  TempDir dir;
  const std::string in = dir.Write("in", RandomBytes(kMiB, 3));
  auto refused = [&](const Blueprint& bp, const Blueprint::Bindings& b, const std::string& part) {
    Result<PlanInstance> p = bp.Instantiate(*rt, b);
    ASSERT_FALSE(p.ok()) << part;
    EXPECT_TRUE(Contains(p.status().message(), part)) << p.status().ToString();
  };
  Blueprint::Bindings none;
  refused(Blueprint("a").Given("x").Given("x"), none, "role 'x' is declared twice");
  refused(Blueprint("a").Memory("m", {}), none, "memory role 'm' needs bytes");
  refused(Blueprint("a").Memory("m", Mem(kMiB)).Stage("s", "m", "n"), none,
          "stage 's' names role 'n', which is not declared");
  refused(Blueprint("a").Memory("m", Mem(kMiB)).Stage("s", "m", "m"), none,
          "goes from role 'm' to itself");
  Blueprint two("a");
  two.Memory("m", Mem(kMiB)).Memory("n", Mem(kMiB)).Stage("s", "m", "n").Stage("s", "n", "m");
  refused(two, none, "stage 's' is declared twice");
  refused(Blueprint("a").File("f", FileMode::kRead), none,
          "file role 'f' is not bound: give it in Bindings::files");
  Blueprint::Bindings stray;
  stray.files["g"] = {in};
  refused(Blueprint("a").Given("g"), stray, "Bindings::files binds 'g', which is not a file role");
  Blueprint::Bindings empty_given;
  empty_given.given["g"] = Locator();
  refused(Blueprint("a").Given("g"), empty_given, "role 'g': the given locator names nothing");
  refused(Blueprint("a").Memory("m", Mem(kMiB, {TierKind::kHbm})), none,
          "no memory tier can hold 1MiB (hbm: hbm memory: the topology");
  // A stage that cannot be connected (into a file opened for reading): the file the
  // instantiation created is removed, the input is not.
  Blueprint bad("bad");
  bad.File("input", FileMode::kRead)
      .File("out", FileMode::kCreate)
      .Memory("m", Mem(kMiB))
      .Stage("fill", "m", "out")
      .Stage("wrong", "m", "input");
  Blueprint::Bindings b;
  b.files["input"] = {in};
  b.files["out"] = {dir.File("out"), 0, kMiB};
  refused(bad, b, "stage 'wrong': the destination file:");
  EXPECT_FALSE(std::filesystem::exists(dir.File("out")));
  EXPECT_TRUE(std::filesystem::exists(in));
  // An existing file is never a file to create, and is left alone.
  b.files["out"] = {in, 0, kMiB};
  refused(bad, b, "exists and is not overwritten");
  EXPECT_TRUE(std::filesystem::exists(in));
}

}  // namespace
}  // namespace tierflow
