// SPDX-License-Identifier: Apache-2.0
#include "tierflow/dsa_inventory.h"

#include <gtest/gtest.h>

#include "testing/fixture_topology.h"

namespace tierflow {
namespace {

DsaDiscoveryOptions Fixture(const std::string& name, DsaCpuFeatures cpu) {
  DsaDiscoveryOptions o;
  o.sysfs_root = testkit::FixturePath("dsa/" + name + "/sys");
  o.dev_root = testkit::FixturePath("dsa/" + name + "/dev");
  o.cpu = cpu;
  return o;
}

DsaCpuFeatures Sapphire() {
  DsaCpuFeatures f;
  f.enqcmd = f.movdir64b = f.waitpkg = true;
  return f;
}

TEST(DsaInventory, XeonMaxEightSharedWqs) {
  Result<DsaInventory> inv = DsaInventory::Discover(Fixture("xeon-max-8swq", Sapphire()));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices().size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const DsaDevice& d = inv->devices()[i];
    EXPECT_EQ(d.name, "dsa" + std::to_string(2 * i));
    EXPECT_EQ(d.numa_node, i);
    EXPECT_EQ(d.state, "enabled");
    EXPECT_EQ(d.version, 0x100u);
    EXPECT_EQ(d.max_batch_size, 1024u);
    EXPECT_EQ(d.max_engines, 4u);
    EXPECT_TRUE(d.pasid_enabled);
    EXPECT_TRUE(d.SupportsOpcode(3));     // memmove
    EXPECT_TRUE(d.SupportsOpcode(0x10));  // crc
    EXPECT_TRUE(d.SupportsOpcode(0x20));  // cache flush
    EXPECT_FALSE(d.SupportsOpcode(0x0a));
    ASSERT_EQ(d.wqs.size(), 1u);
    const DsaWq& w = d.wqs[0];
    EXPECT_TRUE(w.shared);
    EXPECT_EQ(w.size, 128u);
    EXPECT_EQ(w.max_transfer_size, 2u << 20);
    EXPECT_EQ(w.max_batch_size, 32u);
    EXPECT_EQ(w.path, DsaSubmitPath::kEnqcmd);
    EXPECT_TRUE(w.reason.empty()) << w.reason;
    EXPECT_NE(w.cdev_path.find("/dev/dsa/wq" + std::to_string(2 * i) + ".0"), std::string::npos);
  }
  EXPECT_EQ(inv->UsableWqs(3).size(), 1u);
  EXPECT_EQ(inv->UsableWqs(3)[0]->device, "dsa6");
  EXPECT_EQ(inv->UsableWqs().size(), 8u);
  EXPECT_TRUE(inv->UsableWqs(9).empty());
}

TEST(DsaInventory, SharedWqWithoutEnqcmdFallsBackToWrite) {
  DsaCpuFeatures cpu;  // neither ENQCMD nor MOVDIR64B
  Result<DsaInventory> inv = DsaInventory::Discover(Fixture("xeon-max-8swq", cpu));
  ASSERT_TRUE(inv.ok());
  const DsaWq& w = inv->devices()[0].wqs[0];
  EXPECT_EQ(w.path, DsaSubmitPath::kWrite);
  EXPECT_NE(w.reason.find("lacks ENQCMD"), std::string::npos) << w.reason;
}

TEST(DsaInventory, DedicatedWqsAndOldCapabilityFormat) {
  Result<DsaInventory> inv = DsaInventory::Discover(Fixture("dedicated", Sapphire()));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices().size(), 2u);
  const DsaDevice& d = inv->devices()[1];
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_TRUE(d.SupportsOpcode(0x20));
  EXPECT_TRUE(d.SupportsOpcode(9));
  const DsaWq& w = d.wqs[0];
  EXPECT_FALSE(w.shared);
  EXPECT_TRUE(w.block_on_fault);
  EXPECT_EQ(w.size, 16u);
  EXPECT_EQ(w.path, DsaSubmitPath::kMovdir64b);

  DsaCpuFeatures no_movdir = Sapphire();
  no_movdir.movdir64b = false;
  inv = DsaInventory::Discover(Fixture("dedicated", no_movdir));
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->devices()[0].wqs[0].path, DsaSubmitPath::kWrite);
  EXPECT_NE(inv->devices()[0].wqs[0].reason.find("MOVDIR64B"), std::string::npos);
}

TEST(DsaInventory, EveryUnusableWqSaysWhyAndHowToFix) {
  DsaCpuFeatures cpu = Sapphire();
  cpu.la57 = true;
  Result<DsaInventory> inv = DsaInventory::Discover(Fixture("unusable", cpu));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices().size(), 4u);
  EXPECT_TRUE(inv->UsableWqs().empty());
  auto reason = [&](int dev, int wq) { return inv->devices()[dev].wqs[wq].reason; };
  EXPECT_NE(reason(0, 0).find("device dsa0 is disabled"), std::string::npos) << reason(0, 0);
  EXPECT_NE(reason(0, 0).find("accel-config enable-device dsa0"), std::string::npos);
  EXPECT_NE(reason(1, 0).find("type 'kernel'"), std::string::npos) << reason(1, 0);
  EXPECT_NE(reason(1, 0).find("--type=user"), std::string::npos);
  EXPECT_NE(reason(1, 1).find("wq2.1 is disabled"), std::string::npos) << reason(1, 1);
  EXPECT_NE(reason(1, 1).find("accel-config enable-wq dsa2/wq2.1"), std::string::npos);
  EXPECT_NE(reason(1, 2).find("does not exist"), std::string::npos) << reason(1, 2);
  EXPECT_NE(reason(2, 0).find("PASID"), std::string::npos) << reason(2, 0);
  EXPECT_NE(reason(2, 0).find("no5lvl"), std::string::npos) << "la57 hint";
  EXPECT_TRUE(inv->devices()[3].wqs.empty());
  EXPECT_NE(inv->devices()[3].note.find("no work queue"), std::string::npos);
}

TEST(DsaInventory, NoDriverIsAnEmptyInventoryWithANote) {
  DsaDiscoveryOptions o;
  o.sysfs_root = testkit::FixturePath("does-not-exist");
  Result<DsaInventory> inv = DsaInventory::Discover(o);
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->devices().empty());
  EXPECT_NE(inv->note().find("modprobe idxd"), std::string::npos) << inv->note();
}

TEST(DsaInventory, CapabilityMaskFormats) {
  std::uint64_t bits[4];
  ASSERT_TRUE(ParseDsaCapMask(
                  "00000000,00000000,00000000,00000000,00000000,00000000,00000001,003f03ff", bits)
                  .ok());
  EXPECT_EQ(bits[0], 0x1003f03ffull);
  EXPECT_EQ(bits[1], 0u);
  ASSERT_TRUE(ParseDsaCapMask(
                  "80000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001", bits)
                  .ok());
  EXPECT_EQ(bits[3], 0x8000000000000000ull);
  EXPECT_EQ(bits[0], 1u);
  ASSERT_TRUE(ParseDsaCapMask("0x1003f03ff,0x0,0x0,0x2", bits).ok());
  EXPECT_EQ(bits[0], 0x1003f03ffull);
  EXPECT_EQ(bits[3], 2u);
  EXPECT_FALSE(ParseDsaCapMask("", bits).ok());
  Status s = ParseDsaCapMask("00zz0000", bits);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not hexadecimal"), std::string::npos);
  EXPECT_FALSE(ParseDsaCapMask("0x1,0x2,0x3,0x4,0x5", bits).ok());
  EXPECT_FALSE(ParseDsaCapMask("100000000", bits).ok()) << "a 32-bit chunk cannot hold 9 digits";
}

TEST(DsaInventory, MalformedAttributeNamesTheFile) {
  // Built at run time: a copy of one device with a broken size.
  std::string root = ::testing::TempDir() + "/dsa-broken";
  std::string dev = root + "/sys/bus/dsa/devices";
  ASSERT_EQ(
      std::system(("rm -rf " + root + " && mkdir -p " + dev + "/dsa0 " + dev + "/wq0.0").c_str()),
      0);
  auto put = [](const std::string& p, const std::string& v) {
    FILE* f = std::fopen(p.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(v.c_str(), f);
    std::fclose(f);
  };
  put(dev + "/dsa0/state", "enabled\n");
  put(dev + "/wq0.0/mode", "shared\n");
  put(dev + "/wq0.0/state", "enabled\n");
  put(dev + "/wq0.0/size", "lots\n");
  DsaDiscoveryOptions o;
  o.sysfs_root = root + "/sys";
  // A bad entry is listed as unusable with what is wrong in it; the rest is still discovered.
  const auto reason = [&]() -> std::string {
    Result<DsaInventory> inv = DsaInventory::Discover(o);
    EXPECT_TRUE(inv.ok()) << inv.status().ToString();
    if (!inv.ok() || inv->devices().empty() || inv->devices()[0].wqs.empty()) return "";
    EXPECT_FALSE(inv->devices()[0].wqs[0].usable());
    return inv->devices()[0].wqs[0].reason;
  };
  EXPECT_NE(reason().find("wq0.0/size holds 'lots'"), std::string::npos) << reason();
  put(dev + "/wq0.0/size", "16\n");
  put(dev + "/wq0.0/mode", "exclusive\n");
  EXPECT_NE(reason().find("expected shared or dedicated"), std::string::npos) << reason();
  // Security review, item 17: numbers out of range are refused, never wrapped or thrown.
  put(dev + "/wq0.0/mode", "shared\n");
  put(dev + "/wq0.0/size", "-1\n");
  EXPECT_NE(reason().find("wq0.0/size holds -1, outside 0..4294967295"), std::string::npos)
      << reason();
  put(dev + "/wq0.0/size", "16\n");
  put(dev + "/dsa0/numa_node", "99999999999\n");
  EXPECT_NE(reason().find("numa_node holds 99999999999"), std::string::npos) << reason();
  put(dev + "/dsa0/numa_node", "0\n");
  ASSERT_EQ(
      std::system(("mkdir -p " + dev + "/dsa99999999999 " + dev + "/wq0.99999999999").c_str()), 0);
  Result<DsaInventory> inv = DsaInventory::Discover(o);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->devices().size(), 1u);
  EXPECT_NE(inv->note().find("dsa99999999999: its number is out of range"), std::string::npos)
      << inv->note();
  EXPECT_NE(inv->note().find("wq0.99999999999: its number is out of range"), std::string::npos)
      << inv->note();
}

}  // namespace
}  // namespace tierflow
