#include "tools/topology_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tierflow/buffer.h"
#include "tierflow/cpu_engine.h"
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

}  // namespace

Status RunTopologyCommand(const TopologyCommandOptions& o, std::ostream& out) {
  TopologyOptions to;
  to.xml_path = o.xml;
  if (!o.tier_config.empty()) {
    Result<TierOverrides> f = TierOverrides::LoadFile(o.tier_config);
    if (!f.ok()) return f.status();
    to.overrides.Merge(*f);
  }
  if (!o.tiers.empty()) {
    Result<TierOverrides> t = TierOverrides::Parse(o.tiers);
    if (!t.ok()) return t.status();
    to.overrides.Merge(*t);
  }
  Result<Topology> topo = Topology::Discover(to);
  if (!topo.ok()) return topo.status();

  if (o.json) {
    nlohmann::json doc;
    doc["source"] = topo->source();
    doc["this_system"] = topo->is_this_system();
    doc["packages"] = topo->package_count();
    doc["caches"] = {{"l1d_bytes", topo->caches().l1d_bytes},
                     {"l2_bytes", topo->caches().l2_bytes},
                     {"l3_bytes", topo->caches().l3_bytes}};
    if (topo->is_this_system()) doc["cpu_isa"] = CpuIsaName(DetectCpuIsa());
    doc["nodes"] = nlohmann::json::array();
    for (const NumaNode& n : topo->nodes()) {
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
      if (topo->is_this_system()) {
        if (Result<NodeMemory> m = QueryNodeMemory(n.os_index); m.ok()) j["free_bytes"] = m->free_bytes;
      }
      nlohmann::json dist = nlohmann::json::object();
      for (const NumaNode& m : topo->nodes()) {
        if (auto d = topo->Distance(n.os_index, m.os_index)) dist[std::to_string(m.os_index)] = *d;
      }
      j["distances"] = dist;
      doc["nodes"].push_back(j);
    }
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }

  out << fmt::format("tiers of {} ({} package(s); L2 {}, L3 {}{})\n\n", topo->source(),
                     topo->package_count(), Bytes(topo->caches().l2_bytes),
                     Bytes(topo->caches().l3_bytes),
                     topo->is_this_system() ? fmt::format("; cpu isa {}", CpuIsaName(DetectCpuIsa()))
                                            : std::string());
  out << fmt::format("{:>4}  {:<5} {:>10} {:>10}  {:<12} {:>4} {:>4}  {:>10} {:>8}  {}\n", "node",
                     "kind", "capacity", "free", "cpus", "pkg", "near", "bw MiB/s", "lat ns",
                     "why this kind");
  for (const NumaNode& n : topo->nodes()) {
    std::string free = "-";
    if (topo->is_this_system()) {
      if (Result<NodeMemory> m = QueryNodeMemory(n.os_index); m.ok()) free = Bytes(m->free_bytes);
    }
    out << fmt::format("{:>4}  {:<5} {:>10} {:>10}  {:<12} {:>4} {:>4}  {:>10} {:>8}  {}\n",
                       n.os_index, TierKindName(n.kind), Bytes(n.capacity_bytes), free,
                       Ranges(n.cpus), n.package, n.near_cpu_node,
                       n.bandwidth_mibps ? fmt::format("{}", *n.bandwidth_mibps) : "-",
                       n.latency_ns ? fmt::format("{}", *n.latency_ns) : "-", n.kind_reason);
  }
  if (topo->has_distances()) {
    out << "\ndistances (SLIT, 10 = local)\n     ";
    for (const NumaNode& m : topo->nodes()) out << fmt::format("{:>4}", m.os_index);
    out << "\n";
    for (const NumaNode& n : topo->nodes()) {
      out << fmt::format("{:>4} ", n.os_index);
      for (const NumaNode& m : topo->nodes()) {
        auto d = topo->Distance(n.os_index, m.os_index);
        out << (d ? fmt::format("{:>4}", *d) : std::string("   -"));
      }
      out << "\n";
    }
  }
  return Status::Ok();
}

}  // namespace tierflow::tools
