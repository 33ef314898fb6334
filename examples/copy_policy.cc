// SPDX-License-Identifier: Apache-2.0
// One copy divided between two engines by a copy policy, with one handle for the whole.
//
//   build/examples/copy_policy [BYTES]
//
// The engines are the CPU engine and Intel DSA — this machine's DSAs when it has them, else the
// DSA device model, which executes the same descriptors in software (the output says which).
// The auto policy gives small copies to the CPU and large ones to the DSAs; here a push-pull
// split with a CPU share makes both take part in one copy.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tierflow/buffer.h"
#include "tierflow/copy_policy.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_model.h"
#include "tierflow/topology.h"

int Fail(const tierflow::Status& s) {
  std::fprintf(stderr, "copy_policy: %s\n", s.ToString().c_str());
  return 1;
}

// A DSA engine on this machine's first usable work queue, or on a device model.
tierflow::Result<std::unique_ptr<tierflow::DsaEngine>> OpenDsa(
    std::shared_ptr<tierflow::DsaDeviceModel>& model) {
  if (tierflow::Result<tierflow::DsaInventory> inv = tierflow::DsaInventory::Discover(); inv.ok()) {
    tierflow::Result<std::unique_ptr<tierflow::DsaEngine>> hw = tierflow::DsaEngine::Create(*inv);
    if (hw.ok()) return hw;
  }
  tierflow::Result<std::shared_ptr<tierflow::DsaDeviceModel>> m =
      tierflow::DsaDeviceModel::Create({});
  if (!m.ok()) return m.status();
  model = *m;
  return tierflow::DsaEngine::CreateOnModel(model, /*wq=*/0);
}

int main(int argc, char** argv) {
  const std::size_t size = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{16} << 20;
  tierflow::Result<tierflow::Topology> topo = tierflow::Topology::Discover();
  if (!topo.ok()) return Fail(topo.status());
  tierflow::Result<std::unique_ptr<tierflow::CpuEngine>> cpu =
      tierflow::CpuEngine::Create(*topo, {.node = 0});
  if (!cpu.ok()) return Fail(cpu.status());
  std::shared_ptr<tierflow::DsaDeviceModel> model;
  tierflow::Result<std::unique_ptr<tierflow::DsaEngine>> dsa = OpenDsa(model);
  if (!dsa.ok()) return Fail(dsa.status());
  std::printf("DSA engine: %s\n", (*dsa)->description().c_str());

  // Push-pull over the DSAs of the source's and destination's nodes, a quarter on the CPU.
  tierflow::CopyPolicy policy;
  policy.kind = tierflow::PolicyKind::kAuto;
  policy.thresholds.push_pull_from = 0;
  policy.thresholds.cpu_share = 0.25;
  std::vector<tierflow::Engine*> engines = {cpu->get(), dsa->get()};
  tierflow::Result<std::vector<tierflow::CopyPart>> plan =
      tierflow::PlanCopy(policy, *topo, engines, /*src_node=*/0, /*dst_node=*/0, size);
  if (!plan.ok()) return Fail(plan.status());
  for (const tierflow::CopyPart& p : *plan) {
    std::printf("  %-10s bytes [%zu, %zu)\n", p.engine->capabilities().name.c_str(), p.offset,
                p.offset + p.size);
  }

  tierflow::Result<tierflow::Buffer> src = tierflow::Buffer::OnNode(0, size);
  tierflow::Result<tierflow::Buffer> dst = tierflow::Buffer::OnNode(0, size);
  if (!src.ok() || !dst.ok()) return Fail(src.ok() ? dst.status() : src.status());
  for (std::size_t i = 0; i < size; ++i) src->data()[i] = static_cast<std::byte>(i * 7);
  tierflow::Result<tierflow::Handle> h =
      tierflow::SubmitParts(tierflow::Operation::Copy(dst->data(), src->data(), size), *plan);
  if (!h.ok()) return Fail(h.status());
  if (tierflow::Status s = h->Wait(); !s.ok()) return Fail(s);
  const bool same = std::memcmp(dst->data(), src->data(), size) == 0;
  std::printf("copied %zu bytes over %zu engines: %s\n", size, plan->size(),
              same ? "equal" : "DIFFERENT");
  return same ? 0 : 1;
}
