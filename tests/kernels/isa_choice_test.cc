// SPDX-License-Identifier: Apache-2.0
// TIERFLOW_ISA naming an ISA this CPU lacks (security review, item 16): refused with the reason
// where an engine is made, never used. Where this CPU has every ISA, ctest runs this test again
// under qemu-x86_64 with a CPU model that lacks AVX2 and AVX-512.
#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "tierflow/cpu_isa.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_model.h"

namespace tierflow {
namespace {

class IsaChoice : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override { setenv("TIERFLOW_ISA", std::string(CpuIsaName(GetParam())).c_str(), 1); }
  void TearDown() override { unsetenv("TIERFLOW_ISA"); }
};

TEST_P(IsaChoice, AnIsaThisCpuLacksIsRefusedAndNeverUsed) {
  const CpuIsa named = GetParam();
  EXPECT_TRUE(kernels::IsaSupported(DetectCpuIsa())) << "DetectCpuIsa chose an ISA it lacks";
  Result<CpuIsa> chosen = ChooseCpuIsa();
  Result<std::unique_ptr<DsaEngine>> dsa =
      DsaEngine::CreateOnModel(DsaDeviceModel::Create().value(), 0);
  if (kernels::IsaSupported(named)) {
    ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
    EXPECT_EQ(*chosen, named);
    EXPECT_EQ(DetectCpuIsa(), named);
    EXPECT_TRUE(dsa.ok()) << dsa.status().ToString();
    return;
  }
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(chosen.status().message().find("this CPU lacks it"), std::string::npos)
      << chosen.status().message();
  ASSERT_FALSE(dsa.ok()) << "the DSA engine's CPU fallback took an ISA this CPU lacks";
  EXPECT_NE(dsa.status().message().find("TIERFLOW_ISA"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, IsaChoice,
                         ::testing::Values(CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kBaseline),
                         [](const auto& info) { return std::string(CpuIsaName(info.param)); });

}  // namespace
}  // namespace tierflow
