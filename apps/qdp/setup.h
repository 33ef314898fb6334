// SPDX-License-Identifier: Apache-2.0
// Checks and setup of a qdp run: its parameters, the memory it needs, its tiers, and the
// engines that fill the cache from memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qdp/qdp.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_fleet.h"
#include "tierflow/topology.h"

namespace tierflow::qdp {

// One chunk of b (the table's only chunk when it has fewer rows), in whole pages: the least
// cache capacity.
std::uint64_t MinCacheCapacity(const Config& c);

// Errors: a parameter out of range (named, with its range); more computing threads than
// `cpus` unless cfg.oversubscribe.
Status Validate(const Config& c, int cpus);

// Refuses a run that could not fit in memory before anything is allocated: the columns as
// generated (a, b), one placed copy of each, the filter's mask and the cache's capacity.
Status CheckMemory(const Config& c);

// A tier of the experiment: the storage tier (column files) or a memory node.
struct Tier {
  bool storage = false;
  int node = -1;
  std::string label;  // "storage", "node 0 (dram)"
};

// Resolves "storage", "node:N" or a memory kind (the node of that kind nearest `cpu_node`).
// `option` names the parameter in errors; storage is refused unless `storage_allowed`.
Result<Tier> ResolveTier(const Topology& topo, const std::string& spec, int cpu_node,
                         std::string_view option, bool storage_allowed);

// The engines that fill the cache from memory: the CPU engine, or Intel DSA (hardware or model).
struct MemoryEngines {
  std::unique_ptr<CpuEngine> cpu;
  std::unique_ptr<DsaFleet> fleet;
  std::vector<Engine*> engines;
  bool model = false;
};

// `name`: cpu (on `cpu_node`), dsa (this machine's devices) or dsa-model (one model device
// next to `fast_node`). Errors: no usable DSA, engines that cannot start.
Result<MemoryEngines> MakeMemoryEngines(const Topology& topo, const std::string& name, int cpu_node,
                                        int fast_node);

}  // namespace tierflow::qdp
