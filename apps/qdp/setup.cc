// SPDX-License-Identifier: Apache-2.0
#include "qdp/setup.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <fmt/format.h>

#include "qdp/columns.h"
#include "tierflow/dsa_inventory.h"

namespace tierflow::qdp {
namespace {

Status ValidateSizes(const Config& c) {
  if (c.rows == 0 || c.rows > (std::uint64_t{1} << 32))
    return Status::InvalidArgument("--rows must be 1 .. 2^32");
  if (c.chunk_rows < 512 || c.chunk_rows % 512 != 0 || c.chunk_rows > (std::uint64_t{1} << 32)) {
    return Status::InvalidArgument(fmt::format(
        "--chunk-rows {}: use a multiple of 512 rows (4 KiB of uint64, the storage block size "
        "direct I/O reads in) up to 2^32",
        c.chunk_rows));
  }
  if (!(c.selectivity >= 0 && c.selectivity <= 1))
    return Status::InvalidArgument("--selectivity must be 0 .. 1");
  return Status::Ok();
}

Status ValidateThreads(const Config& c, int cpus) {
  if (c.groups < 1 || c.threads_scan_a < 1 || c.threads_scan_b < 1 || c.threads_aggregate < 1) {
    return Status::InvalidArgument(
        "every pipeline needs at least one thread in at least one group");
  }
  const long long threads = static_cast<long long>(c.groups) *
                            (c.threads_scan_a + c.threads_scan_b + c.threads_aggregate);
  if (threads > 1024) {
    return Status::InvalidArgument(
        fmt::format("{} group(s) x ({} SCAN_a + {} SCAN_b + {} AGGREGATE) = {} threads: use at "
                    "most 1024 in all",
                    c.groups, c.threads_scan_a, c.threads_scan_b, c.threads_aggregate, threads));
  }
  const int compute = c.groups * (c.threads_scan_a + c.threads_aggregate);
  if (compute > cpus && !c.oversubscribe) {
    return Status::InvalidArgument(fmt::format(
        "{} group(s) x ({} SCAN_a + {} AGGREGATE) threads = {} computing threads on {} CPUs: "
        "more threads than cores (SCAN_b threads, which mostly wait for storage, do not count); "
        "use fewer, or --oversubscribe to run anyway with meaningless times",
        c.groups, c.threads_scan_a, c.threads_aggregate, compute, cpus));
  }
  return Status::Ok();
}

Status ValidateStorageAndCache(const Config& c) {
  // The cache must hold one chunk (the floor reads b in whole chunks, the query caches them).
  const std::uint64_t min_capacity = MinCacheCapacity(c);
  if (c.cache_capacity < min_capacity) {
    return Status::InvalidArgument(fmt::format(
        "--cache-capacity {}: the cache must hold at least one chunk of b ({} bytes with "
        "--chunk-rows {}); give at least {}, or less than b's {} bytes to see eviction",
        c.cache_capacity, min_capacity, c.chunk_rows, min_capacity, c.rows * 8));
  }
  if (c.storage_queue_depth < 1 || c.storage_queue_depth > 4096) {
    return Status::InvalidArgument(
        fmt::format("--queue-depth {}: use 1..4096", c.storage_queue_depth));
  }
  if (c.storage_read_bytes < 4096 || c.storage_read_bytes % 4096 != 0 ||
      c.storage_read_bytes > (std::size_t{1} << 30)) {
    return Status::InvalidArgument(
        fmt::format("--read-size {}: use a multiple of 4 KiB up to 1 GiB", c.storage_read_bytes));
  }
  return Status::Ok();
}

Status ValidateRun(const Config& c) {
  if (c.engine != "cpu" && c.engine != "dsa" && c.engine != "dsa-model") {
    return Status::InvalidArgument(
        fmt::format("--engine '{}': use cpu, dsa or dsa-model", c.engine));
  }
  if (c.reuse_data && c.data_dir.empty()) {
    return Status::InvalidArgument(
        "--reuse-data reads the columns from --data-dir: give the directory");
  }
  if (c.iterations < 1 || c.iterations > 100 || c.warmup < 0 || c.warmup > 10) {
    return Status::InvalidArgument("--iterations must be 1..100 and --warmup 0..10");
  }
  const std::vector<std::string> known = {"baseline", "upper_limit", "prefetch",
                                          "prefetch_distributed", "all_dram"};
  if (c.configs.empty()) {
    return Status::InvalidArgument(
        "--configs is empty: name at least one of baseline, upper_limit, "
        "prefetch, prefetch_distributed, all_dram");
  }
  for (const std::string& n : c.configs) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      return Status::InvalidArgument(
          fmt::format("configuration '{}': use baseline, upper_limit, prefetch, "
                      "prefetch_distributed or all_dram",
                      n));
    }
  }
  return Status::Ok();
}

// MemAvailable of /proc/meminfo (free memory plus what the kernel can reclaim), or 0.
std::uint64_t AvailableMemory() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib * 1024;
}

}  // namespace

std::uint64_t MinCacheCapacity(const Config& c) {
  const std::uint64_t chunk = std::min(c.chunk_rows, c.rows) * sizeof(std::uint64_t);
  return (chunk + kPage - 1) / kPage * kPage;
}

Status Validate(const Config& c, int cpus) {
  if (Status s = ValidateSizes(c); !s.ok()) return s;
  if (Status s = ValidateThreads(c, cpus); !s.ok()) return s;
  if (Status s = ValidateStorageAndCache(c); !s.ok()) return s;
  return ValidateRun(c);
}

Status CheckMemory(const Config& c) {
  const std::uint64_t capacity =
      c.cache_capacity != Config::kCapacityOfB ? c.cache_capacity : c.rows * 8;
  const std::uint64_t need = c.rows * (16 + 16 + 1) + capacity;
  const std::uint64_t available = AvailableMemory();
  if (available == 0 || need <= available) return Status::Ok();
  if (capacity > available) {
    return Status::OutOfMemory(fmt::format(
        "--cache-capacity {}: more than the {} MiB of memory this machine has available; give "
        "less (b's {} bytes are enough to hold all of it)",
        capacity, available >> 20, c.rows * 8));
  }
  return Status::OutOfMemory(fmt::format(
      "--rows {} needs about {} MiB of memory (the two columns generated and placed, the mask "
      "and {} MiB of cache) and this machine has {} MiB available: use fewer rows or a smaller "
      "--cache-capacity",
      c.rows, need >> 20, capacity >> 20, available >> 20));
}

Result<Tier> ResolveTier(const Topology& topo, const std::string& spec, int cpu_node,
                         std::string_view option, bool storage_allowed) {
  auto label = [](const NumaNode& n) {
    return fmt::format("node {} ({})", n.os_index, TierKindName(n.kind));
  };
  if (spec == "storage") {
    if (!storage_allowed) {
      return Status::InvalidArgument(
          fmt::format("{} storage: this tier holds data the CPUs read and the "
                      "cache writes; name a memory node (node:N) or kind",
                      option));
    }
    return Tier{true, -1, "storage"};
  }
  if (spec.rfind("node:", 0) == 0) {
    int id = -1;
    const char* first = spec.data() + 5;
    const char* last = spec.data() + spec.size();
    auto [end, ec] = std::from_chars(first, last, id);
    if (ec != std::errc() || end != last || first == last) {
      return Status::InvalidArgument(
          fmt::format("{} '{}': write node:N with N a NUMA node number", option, spec));
    }
    Result<const NumaNode*> n = topo.FindNode(id);
    if (!n.ok())
      return Status::NotFound(fmt::format("{} {}: {}", option, spec, n.status().message()));
    return Tier{false, id, label(**n)};
  }
  Result<TierKind> kind = ParseTierKind(spec);
  if (!kind.ok() || *kind == TierKind::kStorage || *kind == TierKind::kUnknown) {
    return Status::InvalidArgument(
        fmt::format("{} '{}': use {}node:N, or a memory kind (dram, hbm, cxl, nvm)", option, spec,
                    storage_allowed ? "storage, " : ""));
  }
  Result<const NumaNode*> n = topo.NearestOfKind(cpu_node, *kind);
  if (!n.ok()) {
    std::string have;
    for (const NumaNode& m : topo.nodes()) {
      have +=
          fmt::format("{}node {} ({})", have.empty() ? "" : ", ", m.os_index, TierKindName(m.kind));
    }
    return Status::NotFound(
        fmt::format("{} {}: this machine has no {} node (it has {})", option, spec, spec, have));
  }
  return Tier{false, (*n)->os_index, label(**n)};
}

Result<MemoryEngines> MakeMemoryEngines(const Topology& topo, const std::string& name, int cpu_node,
                                        int fast_node) {
  MemoryEngines m;
  if (name == "cpu") {
    CpuEngineOptions co;
    co.node = cpu_node;
    Result<std::unique_ptr<CpuEngine>> cpu = CpuEngine::Create(topo, co);
    if (!cpu.ok()) return cpu.status();
    m.cpu = std::move(*cpu);
    m.engines = {m.cpu.get()};
    return m;
  }
  Result<DsaFleet> fleet = Status::Unsupported("");
  if (name == "dsa") {
    Result<DsaInventory> inv = DsaInventory::Discover();
    if (!inv.ok()) return inv.status();
    fleet = DsaFleet::Open(*inv);
    if (!fleet.ok()) {
      return Status(fleet.status().code(),
                    fleet.status().message() +
                        "\n--engine dsa-model runs the fills on the DSA "
                        "device model instead (software copies, labelled so)");
    }
  } else {
    // One model device next to the fast tier, where a real one would take the fills.
    const NumaNode* n = topo.node(fast_node);
    DsaModelConfig mc;
    mc.instant = false;  // engine threads: completion is asynchronous, as on hardware
    fleet = DsaFleet::OnModel({n != nullptr && n->near_cpu_node >= 0 ? n->near_cpu_node : cpu_node},
                              mc);
    m.model = true;
  }
  if (!fleet.ok()) return fleet.status();
  m.fleet = std::make_unique<DsaFleet>(std::move(*fleet));
  m.engines = m.fleet->engines();
  return m;
}

}  // namespace tierflow::qdp
