// SPDX-License-Identifier: Apache-2.0
// Every DSA of the machine as engines, for placing work by data location: one DsaEngine per
// device (on its first usable WQ), each on the device's NUMA node, to be given to PlanCopy and
// ChooseBatchEngine (copy_policy.h). By default a copy goes to the DSA of the destination's
// node (not of the calling thread's node); push-pull, socket, brute-force and auto spread it.
//
// Thread-safety: every member may be called from any thread; the engines are engines.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tierflow/dsa_engine.h"
#include "tierflow/export.h"

namespace tierflow {

class TIERFLOW_EXPORT DsaFleet {
 public:
  struct Member {
    std::string device;  // "dsa0", or "model-dsa0"
    int node = -1;
    std::shared_ptr<DsaDeviceModel> model;  // null on hardware
    std::unique_ptr<DsaEngine> engine;
  };
  struct DeviceStats {
    std::string device;
    int node = -1;
    std::string wq;  // the engine's description
    DsaEngineStats stats;
  };

  // The hardware: every device with a usable WQ. Error when none (each device's reason).
  static Result<DsaFleet> Open(const DsaInventory& inventory, const DsaEngineOptions& options = {});
  // Device models, one per entry of `nodes` (a device on that node), each configured as `base`
  // with its numa_node set. For the layout of a real machine, pass the nodes of its inventory
  // (NodesOf). Everything that runs on these engines ran on a model.
  static Result<DsaFleet> OnModel(const std::vector<int>& nodes, const DsaModelConfig& base = {},
                                  const DsaEngineOptions& options = {});
  // The NUMA node of every device in an inventory (one entry per device with a WQ usable or
  // not: the layout), in device order.
  static std::vector<int> NodesOf(const DsaInventory& inventory);

  DsaFleet(DsaFleet&&) = default;
  DsaFleet& operator=(DsaFleet&&) = default;

  const std::vector<Member>& members() const { return members_; }
  std::vector<Engine*> engines() const;
  bool is_model() const { return !members_.empty() && members_.front().model != nullptr; }
  // Statistics per device (one engine per device).
  std::vector<DeviceStats> stats() const;

 private:
  DsaFleet() = default;
  std::vector<Member> members_;
};

}  // namespace tierflow
