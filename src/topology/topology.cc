// SPDX-License-Identifier: Apache-2.0
#include "tierflow/topology.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tierflow {

namespace {

struct HwlocDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocDeleter>;

std::vector<int> CpuList(hwloc_const_cpuset_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  int i;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(i); }
  hwloc_bitmap_foreach_end();
  return out;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::optional<std::uint64_t> LocalAttr(hwloc_topology_t t, hwloc_memattr_id_t id,
                                       hwloc_obj_t node) {
  hwloc_uint64_t value = 0;
  if (node->cpuset != nullptr && !hwloc_bitmap_iszero(node->cpuset)) {
    hwloc_location loc{};
    loc.type = HWLOC_LOCATION_TYPE_CPUSET;
    loc.location.cpuset = node->cpuset;
    if (hwloc_memattr_get_value(t, id, node, &loc, 0, &value) == 0) return value;
  }
  hwloc_location best{};
  if (hwloc_memattr_get_best_initiator(t, id, node, 0, &best, &value) == 0) return value;
  return std::nullopt;
}

}  // namespace

class TopologyBuilder {
 public:
  static Result<Topology> Build(const TopologyOptions& options);

 private:
  static Result<HwlocTopology> Load(const TopologyOptions& options);
  static NumaNode NodeOf(hwloc_topology_t raw, hwloc_obj_t obj);
  static Status ReadNodes(hwloc_topology_t raw, Topology& topo);
  static void ReadDistances(hwloc_topology_t raw, Topology& topo);
  static void ReadCaches(hwloc_topology_t raw, Topology& topo);
  static Status ApplyOverrides(const TopologyOptions& options, Topology& topo);
  static void AssignCpus(Topology& topo);
  static void LinkCpuLessNodes(Topology& topo);
  static void Classify(Topology& topo);
};

namespace {

// The largest OS index of a CPU or NUMA node the XML may give. hwloc keeps a bitmap as wide as
// the largest index: 4294967295 would cost 512 MiB and turn into node -1.
constexpr std::uint64_t kMaxOsIndex = std::uint64_t{1} << 20;

// Refuses an XML whose os_index attributes lie beyond any machine's, before hwloc reads it.
Status CheckXmlIndexes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Ok();  // hwloc names the unreadable file
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::string_view kAttr = "os_index=\"";
  for (std::size_t at = text.find(kAttr); at != std::string::npos; at = text.find(kAttr, at + 1)) {
    std::uint64_t value = 0;
    const char* first = text.data() + at + kAttr.size();
    const auto [end, ec] = std::from_chars(first, text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > kMaxOsIndex)) {
      return Status::InvalidArgument(fmt::format(
          "hwloc XML topology '{}' gives an object os_index {}, beyond any CPU or NUMA node "
          "(at most {}): a damaged or hand-edited file; make it again with 'lstopo --of xml "
          "FILE'",
          path, std::string_view(first, static_cast<std::size_t>(end - first)), kMaxOsIndex));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<HwlocTopology> TopologyBuilder::Load(const TopologyOptions& options) {
  if (!options.xml_path.empty()) {
    if (Status s = CheckXmlIndexes(options.xml_path); !s.ok()) return s;
  }
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return Status::IoError("hwloc_topology_init failed");
  HwlocTopology t(raw);
  if (!options.xml_path.empty()) {
    if (hwloc_topology_set_xml(raw, options.xml_path.c_str()) != 0) {
      return Status::NotFound(fmt::format(
          "cannot read hwloc XML topology '{}' (missing or not an hwloc XML file; make one with "
          "'lstopo --of xml FILE')",
          options.xml_path));
    }
  }
  if (hwloc_topology_load(raw) != 0) {
    return Status::IoError(
        fmt::format("hwloc could not load the topology{}",
                    options.xml_path.empty() ? "" : " from " + options.xml_path));
  }
  return t;
}

NumaNode TopologyBuilder::NodeOf(hwloc_topology_t raw, hwloc_obj_t obj) {
  NumaNode n;
  n.os_index = static_cast<int>(obj->os_index);
  n.subtype = obj->subtype != nullptr ? obj->subtype : "";
  if (n.subtype.empty()) {
    if (const char* dax = hwloc_obj_get_info_by_name(obj, "DAXType"); dax != nullptr)
      n.subtype = dax;
  }
  n.capacity_bytes = obj->attr->numanode.local_memory;
  n.local_cpus = CpuList(obj->cpuset);
  for (hwloc_obj_t p = obj->parent; p != nullptr; p = p->parent) {
    if (p->type == HWLOC_OBJ_PACKAGE) {
      n.package = static_cast<int>(p->logical_index);
      break;
    }
  }
  n.bandwidth_mibps = LocalAttr(raw, HWLOC_MEMATTR_ID_BANDWIDTH, obj);
  n.latency_ns = LocalAttr(raw, HWLOC_MEMATTR_ID_LATENCY, obj);
  return n;
}

// The NUMA nodes in order of their OS index.
Status TopologyBuilder::ReadNodes(hwloc_topology_t raw, Topology& topo) {
  for (hwloc_obj_t obj = nullptr;
       (obj = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, obj)) != nullptr;) {
    topo.nodes_.push_back(NodeOf(raw, obj));
  }
  if (topo.nodes_.empty()) return Status::NotFound("the topology has no NUMA node");
  std::sort(topo.nodes_.begin(), topo.nodes_.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });
  return Status::Ok();
}

// Distances: the OS-provided latency matrix (SLIT) when there is one, else the first matrix.
void TopologyBuilder::ReadDistances(hwloc_topology_t raw, Topology& topo) {
  unsigned nr = 0;
  if (hwloc_distances_get_by_type(raw, HWLOC_OBJ_NUMANODE, &nr, nullptr, 0, 0) != 0 || nr == 0)
    return;
  std::vector<hwloc_distances_s*> all(nr);
  hwloc_distances_get_by_type(raw, HWLOC_OBJ_NUMANODE, &nr, all.data(), 0, 0);
  hwloc_distances_s* pick = all[0];
  for (unsigned i = 0; i < nr; ++i) {
    const char* name = hwloc_distances_get_name(raw, all[i]);
    if (name != nullptr && std::string_view(name) == "NUMALatency") pick = all[i];
  }
  for (unsigned i = 0; i < pick->nbobjs; ++i) {
    for (unsigned j = 0; j < pick->nbobjs; ++j) {
      topo.distances_[{static_cast<int>(pick->objs[i]->os_index),
                       static_cast<int>(pick->objs[j]->os_index)}] =
          static_cast<std::uint32_t>(pick->values[i * pick->nbobjs + j]);
    }
  }
  for (unsigned i = 0; i < nr; ++i) hwloc_distances_release(raw, all[i]);
}

void TopologyBuilder::ReadCaches(hwloc_topology_t raw, Topology& topo) {
  auto cache_size = [&](hwloc_obj_type_t type) -> std::uint64_t {
    hwloc_obj_t c = hwloc_get_obj_by_type(raw, type, 0);
    return c != nullptr ? c->attr->cache.size : 0;
  };
  topo.caches_.l1d_bytes = cache_size(HWLOC_OBJ_L1CACHE);
  topo.caches_.l2_bytes = cache_size(HWLOC_OBJ_L2CACHE);
  topo.caches_.l3_bytes = cache_size(HWLOC_OBJ_L3CACHE);
}

// Overrides from `options` and, when asked, from the environment, applied after the
// classification. Errors: a malformed environment variable, a node the topology lacks.
Status TopologyBuilder::ApplyOverrides(const TopologyOptions& options, Topology& topo) {
  TierOverrides overrides = options.overrides;
  if (options.use_environment) {
    Result<TierOverrides> env = TierOverrides::FromEnvironment();
    if (!env.ok()) return env.status();
    overrides.Merge(*env);
  }
  for (const auto& [index, kind] : overrides.kinds()) {
    auto it = std::find_if(topo.nodes_.begin(), topo.nodes_.end(),
                           [id = index](const NumaNode& n) { return n.os_index == id; });
    if (it == topo.nodes_.end()) {
      std::vector<int> have;
      for (const NumaNode& n : topo.nodes_) have.push_back(n.os_index);
      return Status::InvalidArgument(
          fmt::format("tier override names node {}, which {} does not have (nodes: {})", index,
                      topo.source_, fmt::join(have, ",")));
    }
    it->kind = kind;
    it->kind_reason = "override";
  }
  return Status::Ok();
}

Result<Topology> TopologyBuilder::Build(const TopologyOptions& options) {
  Result<HwlocTopology> t = Load(options);
  if (!t.ok()) return t.status();
  hwloc_topology_t raw = t->get();
  Topology topo;
  topo.this_system_ = options.xml_path.empty() && hwloc_topology_is_thissystem(raw);
  topo.source_ = options.xml_path.empty() ? "this system" : options.xml_path;
  topo.package_count_ = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  if (Status s = ReadNodes(raw, topo); !s.ok()) return s;
  ReadDistances(raw, topo);
  ReadCaches(raw, topo);
  if (topo.this_system_ && topo.nodes_.size() == 1) {
    // See QueryNodeMemory: a single node owns all memory even where its meminfo says less.
    auto pages = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES));
    auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    topo.nodes_[0].capacity_bytes = std::max(topo.nodes_[0].capacity_bytes, pages * page);
  }
  AssignCpus(topo);
  LinkCpuLessNodes(topo);
  Classify(topo);
  if (Status s = ApplyOverrides(options, topo); !s.ok()) return s;
  return topo;
}

// A CPU belongs to the most local node that covers it (the smallest locality); among equally
// local nodes, the one hwloc did not mark as special memory (HBM/NVM/CXL/SPM), then the lowest
// index. This reproduces Linux's nodeN/cpulist for flat-mode HBM and CXL expanders.
void TopologyBuilder::AssignCpus(Topology& topo) {
  auto special = [](const NumaNode& n) {
    std::string s = Upper(n.subtype);
    return !(s.empty() || s == "DRAM");
  };
  std::map<int, std::size_t> owner;
  for (std::size_t i = 0; i < topo.nodes_.size(); ++i) {
    for (int cpu : topo.nodes_[i].local_cpus) {
      auto it = owner.find(cpu);
      if (it == owner.end()) {
        owner[cpu] = i;
        continue;
      }
      const NumaNode& a = topo.nodes_[i];
      const NumaNode& b = topo.nodes_[it->second];
      auto key = [&](const NumaNode& n, std::size_t idx) {
        return std::tuple(topo.nodes_[idx].local_cpus.size(), special(n), n.os_index);
      };
      if (key(a, i) < key(b, it->second)) it->second = i;
    }
  }
  for (const auto& [cpu, idx] : owner) topo.nodes_[idx].cpus.push_back(cpu);
}

void TopologyBuilder::LinkCpuLessNodes(Topology& topo) {
  for (NumaNode& n : topo.nodes_) {
    if (n.has_cpus()) {
      n.near_cpu_node = n.os_index;
      continue;
    }
    // Closest CPU node: by distance when known, else the one whose CPUs lie within this node's
    // locality with the largest overlap, then the lowest index.
    const NumaNode* best = nullptr;
    auto score = [&](const NumaNode& c) {
      std::uint32_t d = topo.Distance(n.os_index, c.os_index).value_or(UINT32_MAX);
      std::size_t inside = 0;
      for (int cpu : c.cpus) {
        inside += std::binary_search(n.local_cpus.begin(), n.local_cpus.end(), cpu) ? 1 : 0;
      }
      return std::tuple(d, -static_cast<long>(inside), c.os_index);
    };
    for (const NumaNode& c : topo.nodes_) {
      if (!c.has_cpus()) continue;
      if (best == nullptr || score(c) < score(*best)) best = &c;
    }
    if (best != nullptr) {
      n.near_cpu_node = best->os_index;
      if (n.package < 0) n.package = best->package;
    }
  }
}

void TopologyBuilder::Classify(Topology& topo) {
  for (NumaNode& n : topo.nodes_) {
    std::string sub = Upper(n.subtype);
    const NumaNode* near = topo.node(n.near_cpu_node);
    std::optional<std::uint64_t> near_bw = near != nullptr ? near->bandwidth_mibps : std::nullopt;
    bool fast = n.bandwidth_mibps && near_bw && near != &n && *n.bandwidth_mibps >= 2 * *near_bw;
    if (sub == "HBM" || sub == "MCDRAM") {
      n.kind = TierKind::kHbm;
      n.kind_reason = "hwloc subtype " + n.subtype;
    } else if (sub == "NVM" || sub == "PMEM") {
      n.kind = TierKind::kNvm;
      n.kind_reason = "hwloc subtype " + n.subtype;
    } else if (sub == "CXL-DRAM" || sub == "CXL") {
      n.kind = TierKind::kCxl;
      n.kind_reason = "hwloc subtype " + n.subtype;
    } else if (sub == "DRAM") {
      n.kind = TierKind::kDram;
      n.kind_reason = "hwloc subtype DRAM";
    } else if (n.has_cpus()) {
      n.kind = TierKind::kDram;
      n.kind_reason = sub.empty() ? "owns CPUs" : "owns CPUs (subtype " + n.subtype + ")";
    } else if (fast) {
      n.kind = TierKind::kHbm;
      n.kind_reason = fmt::format("CPU-less, bandwidth {} MiB/s >= 2x node {}'s {} MiB/s",
                                  *n.bandwidth_mibps, near->os_index, *near_bw);
    } else {
      n.kind = TierKind::kCxl;
      n.kind_reason = sub.empty() ? "CPU-less memory without a faster bandwidth attribute"
                                  : "CPU-less memory, subtype " + n.subtype;
    }
  }
}

Result<Topology> Topology::Discover(const TopologyOptions& options) {
  return TopologyBuilder::Build(options);
}

Result<Topology> Topology::FromXmlFile(const std::string& path) {
  TopologyOptions o;
  o.xml_path = path;
  o.use_environment = false;
  return TopologyBuilder::Build(o);
}

const NumaNode* Topology::node(int os_index) const {
  for (const NumaNode& n : nodes_) {
    if (n.os_index == os_index) return &n;
  }
  return nullptr;
}

Result<const NumaNode*> Topology::FindNode(int os_index) const {
  if (const NumaNode* n = node(os_index)) return n;
  std::vector<int> have;
  for (const NumaNode& n : nodes_) have.push_back(n.os_index);
  return Status::NotFound(fmt::format("NUMA node {} does not exist in {} (nodes: {})", os_index,
                                      source_, fmt::join(have, ",")));
}

std::vector<const NumaNode*> Topology::NodesOfKind(TierKind kind) const {
  std::vector<const NumaNode*> out;
  for (const NumaNode& n : nodes_) {
    if (n.kind == kind) out.push_back(&n);
  }
  return out;
}

std::vector<const NumaNode*> Topology::NodesOfPackage(int package) const {
  std::vector<const NumaNode*> out;
  for (const NumaNode& n : nodes_) {
    if (n.package == package) out.push_back(&n);
  }
  return out;
}

std::optional<std::uint32_t> Topology::Distance(int from, int to) const {
  auto it = distances_.find({from, to});
  if (it == distances_.end()) return std::nullopt;
  return it->second;
}

Result<const NumaNode*> Topology::NearestOfKind(int from, TierKind kind) const {
  Result<const NumaNode*> origin = FindNode(from);
  if (!origin.ok()) return origin.status();
  const NumaNode* best = nullptr;
  auto score = [&](const NumaNode& n) {
    std::uint32_t d = Distance(from, n.os_index).value_or(UINT32_MAX);
    bool attached = n.near_cpu_node == (*origin)->near_cpu_node;
    bool same_package = n.package == (*origin)->package;
    return std::tuple(d, !attached, !same_package, n.os_index);
  };
  for (const NumaNode& n : nodes_) {
    if (n.kind != kind) continue;
    if (best == nullptr || score(n) < score(*best)) best = &n;
  }
  if (best == nullptr) {
    return Status::NotFound(
        fmt::format("{} has no {} node; 'tierflow topology' lists the tiers, "
                    "TIERFLOW_TIERS can reclassify nodes",
                    source_, TierKindName(kind)));
  }
  return best;
}

}  // namespace tierflow
