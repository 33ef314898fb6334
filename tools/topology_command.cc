// SPDX-License-Identifier: Apache-2.0
#include "tools/topology_command.h"

#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tierflow/buffer.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_inventory.h"
#include "tierflow/topology.h"

namespace tierflow::tools {
namespace {

// "0-11,24-35" from a sorted list.
std::string Ranges(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

std::string Bytes(std::uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.0f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} B", b);
}

// The DSA inventory to show: the given sysfs tree, or this system's.
Result<DsaInventory> DiscoverDsa(const TopologyCommandOptions& o) {
  namespace fs = std::filesystem;
  DsaDiscoveryOptions d;
  if (!o.sysfs_root.empty()) {
    fs::path root(o.sysfs_root);
    if (!fs::is_directory(root)) {
      return Status::NotFound(fmt::format("--sysfs-root {}: no such directory", o.sysfs_root));
    }
    if (!fs::exists(root / "bus" / "dsa") && fs::exists(root / "sys" / "bus" / "dsa")) {
      root /= "sys";
    }
    d.sysfs_root = root.string();
    fs::path beside = root.parent_path() / "dev";
    d.dev_root = fs::is_directory(beside) ? beside.string() : "/dev";
  }
  if (!o.dev_root.empty()) d.dev_root = o.dev_root;
  return DsaInventory::Discover(d);
}

nlohmann::json DsaJson(const DsaInventory& inv) {
  nlohmann::json list = nlohmann::json::array();
  for (const DsaDevice& dev : inv.devices()) {
    nlohmann::json wqs = nlohmann::json::array();
    for (const DsaWq& w : dev.wqs) {
      wqs.push_back({{"name", w.name},
                     {"mode", w.shared ? "shared" : "dedicated"},
                     {"type", w.type},
                     {"state", w.state},
                     {"size", w.size},
                     {"priority", w.priority},
                     {"group_id", w.group_id},
                     {"block_on_fault", w.block_on_fault},
                     {"max_transfer_size", w.max_transfer_size},
                     {"max_batch_size", w.max_batch_size},
                     {"cdev", w.cdev_path},
                     {"usable", w.usable()},
                     {"path", DsaSubmitPathName(w.path)},
                     {"reason", w.reason}});
    }
    list.push_back({{"device", dev.name},
                    {"node", dev.numa_node},
                    {"state", dev.state},
                    {"version", dev.version},
                    {"pasid_enabled", dev.pasid_enabled},
                    {"max_engines", dev.max_engines},
                    {"max_batch_size", dev.max_batch_size},
                    {"max_transfer_size", dev.max_transfer_size},
                    {"note", dev.note},
                    {"wqs", wqs}});
  }
  return list;
}

void PrintDsa(const DsaInventory& inv, std::ostream& out) {
  const DsaCpuFeatures& cpu = inv.cpu();
  out << fmt::format("\nIntel DSA (CPU: ENQCMD {}, MOVDIR64B {}, WAITPKG {})\n",
                     cpu.enqcmd ? "yes" : "no", cpu.movdir64b ? "yes" : "no",
                     cpu.waitpkg ? "yes" : "no");
  if (inv.devices().empty()) {
    out << "  " << inv.note() << "\n";
    return;
  }
  out << fmt::format("  {:<7} {:>4} {:<9} {:<7} {:<9} {:>5} {:<8} {:<10} {}\n", "device", "node",
                     "state", "wq", "mode", "size", "type", "submit", "reason / fix");
  for (const DsaDevice& dev : inv.devices()) {
    if (dev.wqs.empty()) {
      out << fmt::format("  {:<7} {:>4} {:<9} {:<7} {:<9} {:>5} {:<8} {:<10} {}\n", dev.name,
                         dev.numa_node, dev.state, "-", "-", "-", "-", "none", dev.note);
    }
    for (const DsaWq& w : dev.wqs) {
      out << fmt::format("  {:<7} {:>4} {:<9} {:<7} {:<9} {:>5} {:<8} {:<10} {}\n", dev.name,
                         dev.numa_node, dev.state, w.name, w.shared ? "shared" : "dedicated",
                         w.size, w.type, DsaSubmitPathName(w.path),
                         w.reason.empty() ? "-" : w.reason);
    }
  }
}

// The topology with the overrides of --tier-config and --tiers. Errors name the option whose
// overrides do not fit the topology.
Result<Topology> DiscoverWithOverrides(const TopologyCommandOptions& o) {
  TopologyOptions to;
  to.xml_path = o.xml;
  if (!o.tier_config.empty()) {
    Result<TierOverrides> f = TierOverrides::LoadFile(o.tier_config);
    if (!f.ok()) return Status(f.status().code(), "--tier-config: " + f.status().message());
    to.overrides.Merge(*f);
  }
  if (!o.tiers.empty()) {
    Result<TierOverrides> t = TierOverrides::Parse(o.tiers);
    if (!t.ok()) return Status(t.status().code(), "--tiers: " + t.status().message());
    to.overrides.Merge(*t);
  }
  Result<Topology> topo = Topology::Discover(to);
  if (!topo.ok() && (!o.tiers.empty() || !o.tier_config.empty())) {
    TopologyOptions plain = to;
    plain.overrides = {};
    if (Topology::Discover(plain).ok()) {  // the overrides do not fit this topology: say which
      return Status(topo.status().code(),
                    fmt::format("{}: {}", !o.tiers.empty() ? "--tiers" : "--tier-config",
                                topo.status().message()));
    }
  }
  return topo;
}

nlohmann::json NodeJson(const Topology& topo, const NumaNode& n) {
  nlohmann::json j = {{"os_index", n.os_index},
                      {"kind", TierKindName(n.kind)},
                      {"kind_reason", n.kind_reason},
                      {"subtype", n.subtype},
                      {"capacity_bytes", n.capacity_bytes},
                      {"cpus", n.cpus},
                      {"local_cpus", n.local_cpus},
                      {"package", n.package},
                      {"near_cpu_node", n.near_cpu_node}};
  j["bandwidth_mibps"] = n.bandwidth_mibps ? nlohmann::json(*n.bandwidth_mibps) : nlohmann::json();
  j["latency_ns"] = n.latency_ns ? nlohmann::json(*n.latency_ns) : nlohmann::json();
  if (topo.is_this_system()) {
    if (Result<NodeMemory> m = QueryNodeMemory(n.os_index); m.ok()) j["free_bytes"] = m->free_bytes;
  }
  nlohmann::json dist = nlohmann::json::object();
  for (const NumaNode& m : topo.nodes()) {
    if (auto d = topo.Distance(n.os_index, m.os_index)) dist[std::to_string(m.os_index)] = *d;
  }
  j["distances"] = dist;
  return j;
}

nlohmann::json TopologyJson(const Topology& topo, const DsaInventory* dsa) {
  nlohmann::json doc;
  doc["source"] = topo.source();
  doc["this_system"] = topo.is_this_system();
  doc["packages"] = topo.package_count();
  doc["caches"] = {{"l1d_bytes", topo.caches().l1d_bytes},
                   {"l2_bytes", topo.caches().l2_bytes},
                   {"l3_bytes", topo.caches().l3_bytes}};
  if (topo.is_this_system()) doc["cpu_isa"] = CpuIsaName(DetectCpuIsa());
  doc["nodes"] = nlohmann::json::array();
  for (const NumaNode& n : topo.nodes()) doc["nodes"].push_back(NodeJson(topo, n));
  if (dsa != nullptr) {
    doc["dsa"] = DsaJson(*dsa);
    doc["dsa_note"] = dsa->note();
    doc["dsa_cpu"] = {{"enqcmd", dsa->cpu().enqcmd},
                      {"movdir64b", dsa->cpu().movdir64b},
                      {"waitpkg", dsa->cpu().waitpkg}};
  }
  return doc;
}

void PrintNodes(const Topology& topo, std::ostream& out) {
  out << fmt::format("tiers of {} ({} package(s); L2 {}, L3 {}{})\n\n", topo.source(),
                     topo.package_count(), Bytes(topo.caches().l2_bytes),
                     Bytes(topo.caches().l3_bytes),
                     topo.is_this_system() ? fmt::format("; cpu isa {}", CpuIsaName(DetectCpuIsa()))
                                           : std::string());
  out << fmt::format("{:>4}  {:<5} {:>10} {:>10}  {:<12} {:>4} {:>4}  {:>10} {:>8}  {}\n", "node",
                     "kind", "capacity", "free", "cpus", "pkg", "near", "bw MiB/s", "lat ns",
                     "why this kind");
  for (const NumaNode& n : topo.nodes()) {
    std::string free = "-";
    if (topo.is_this_system()) {
      if (Result<NodeMemory> m = QueryNodeMemory(n.os_index); m.ok()) free = Bytes(m->free_bytes);
    }
    out << fmt::format("{:>4}  {:<5} {:>10} {:>10}  {:<12} {:>4} {:>4}  {:>10} {:>8}  {}\n",
                       n.os_index, TierKindName(n.kind), Bytes(n.capacity_bytes), free,
                       Ranges(n.cpus), n.package, n.near_cpu_node,
                       n.bandwidth_mibps ? fmt::format("{}", *n.bandwidth_mibps) : "-",
                       n.latency_ns ? fmt::format("{}", *n.latency_ns) : "-", n.kind_reason);
  }
}

void PrintDistances(const Topology& topo, std::ostream& out) {
  if (!topo.has_distances()) return;
  out << "\ndistances (SLIT, 10 = local)\n     ";
  for (const NumaNode& m : topo.nodes()) out << fmt::format("{:>4}", m.os_index);
  out << "\n";
  for (const NumaNode& n : topo.nodes()) {
    out << fmt::format("{:>4} ", n.os_index);
    for (const NumaNode& m : topo.nodes()) {
      auto d = topo.Distance(n.os_index, m.os_index);
      out << (d ? fmt::format("{:>4}", *d) : std::string("   -"));
    }
    out << "\n";
  }
}

}  // namespace

Status RunTopologyCommand(const TopologyCommandOptions& o, std::ostream& out) {
  Result<Topology> topo = DiscoverWithOverrides(o);
  if (!topo.ok()) return topo.status();
  // DSA devices of this system, or of a given sysfs tree; none for a foreign XML topology.
  std::optional<DsaInventory> dsa;
  if (topo->is_this_system() || !o.sysfs_root.empty()) {
    Result<DsaInventory> inv = DiscoverDsa(o);
    if (!inv.ok()) return inv.status();
    dsa = std::move(*inv);
  }
  if (o.json) {
    out << TopologyJson(*topo, dsa ? &*dsa : nullptr).dump(2) << "\n";
    return Status::Ok();
  }
  PrintNodes(*topo, out);
  PrintDistances(*topo, out);
  if (dsa) PrintDsa(*dsa, out);
  return Status::Ok();
}

}  // namespace tierflow::tools
