// SPDX-License-Identifier: Apache-2.0
#include "tierflow/dsa_fleet.h"

#include <fmt/format.h>

namespace tierflow {

Result<DsaFleet> DsaFleet::Open(const DsaInventory& inventory, const DsaEngineOptions& options) {
  DsaFleet fleet;
  std::string why;
  for (const DsaDevice& d : inventory.devices()) {
    const DsaWq* wq = nullptr;
    for (const DsaWq& w : d.wqs) {
      if (w.usable() && (wq == nullptr ||
                         (wq->path == DsaSubmitPath::kWrite && w.path != DsaSubmitPath::kWrite))) {
        wq = &w;
      }
    }
    if (wq == nullptr) {
      why += fmt::format("\n  {}: {}", d.name,
                         !d.note.empty() ? d.note
                         : d.wqs.empty() ? "no WQ"
                                         : d.wqs.front().reason);
      continue;
    }
    DsaEngineOptions o = options;
    o.wq = d.name + "/" + wq->name;
    Result<std::unique_ptr<DsaEngine>> e = DsaEngine::Create(inventory, o);
    if (!e.ok()) {
      why += fmt::format("\n  {}: {}", o.wq, e.status().message());
      continue;
    }
    fleet.members_.push_back({d.name, d.numa_node, nullptr, std::move(*e)});
  }
  if (fleet.members_.empty()) {
    if (inventory.devices().empty()) {
      return Status::Unsupported(
          fmt::format("no DSA devices: {}; the device model (DsaFleet::OnModel) runs the same "
                      "code in software",
                      inventory.note()));
    }
    return Status::Unsupported(fmt::format("no DSA device can be used:{}", why));
  }
  return fleet;
}

Result<DsaFleet> DsaFleet::OnModel(const std::vector<int>& nodes, const DsaModelConfig& base,
                                   const DsaEngineOptions& options) {
  if (nodes.empty())
    return Status::InvalidArgument("a DSA model fleet needs at least one device node");
  DsaFleet fleet;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    DsaModelConfig c = base;
    c.numa_node = nodes[i];
    Result<std::shared_ptr<DsaDeviceModel>> m = DsaDeviceModel::Create(c);
    if (!m.ok()) return m.status();
    Result<std::unique_ptr<DsaEngine>> e = DsaEngine::CreateOnModel(*m, 0, options);
    if (!e.ok()) return e.status();
    fleet.members_.push_back({fmt::format("model-dsa{}", i), nodes[i], *m, std::move(*e)});
  }
  return fleet;
}

std::vector<int> DsaFleet::NodesOf(const DsaInventory& inventory) {
  std::vector<int> nodes;
  for (const DsaDevice& d : inventory.devices()) nodes.push_back(d.numa_node < 0 ? 0 : d.numa_node);
  return nodes;
}

std::vector<Engine*> DsaFleet::engines() const {
  std::vector<Engine*> out;
  for (const Member& m : members_) out.push_back(m.engine.get());
  return out;
}

std::vector<DsaFleet::DeviceStats> DsaFleet::stats() const {
  std::vector<DeviceStats> out;
  for (const Member& m : members_) {
    out.push_back({m.device, m.node, m.engine->description(), m.engine->device_stats()});
  }
  return out;
}

}  // namespace tierflow
