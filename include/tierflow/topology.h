// SPDX-License-Identifier: Apache-2.0
// Memory tiers: the NUMA nodes of a machine, what kind of memory each one is, and how they relate.
//
// A Topology is read through hwloc, either from the running system or from an hwloc XML file
// (so tests and planning tools can work on machines they do not run on). Each node is classified:
//   1. an explicit override (TierOverrides: config file or TIERFLOW_TIERS) wins;
//   2. otherwise hwloc's subtype (DRAM, HBM, SPM, NVM, CXL-DRAM) or DAX type;
//   3. otherwise a heuristic: a node that owns CPUs is DRAM; a CPU-less node whose bandwidth
//      attribute is at least twice its nearest CPU node's is HBM; any other CPU-less node is CXL.
// HMAT data is often missing or wrong, so every automatic decision records why it was taken
// (NumaNode::kind_reason) and can be overridden.
//
// Thread-safety: a Topology is immutable once made; its const members may be used from any
// threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

enum class TierKind : std::uint8_t { kDram, kHbm, kCxl, kNvm, kStorage, kUnknown };

TIERFLOW_EXPORT std::string_view TierKindName(TierKind kind);  // "dram", "hbm", "cxl", "nvm", ...
TIERFLOW_EXPORT Result<TierKind> ParseTierKind(std::string_view name);  // case-insensitive

struct NumaNode {
  int os_index = -1;
  TierKind kind = TierKind::kUnknown;
  std::string kind_reason;  // why it was classified so ("hwloc subtype HBM", "override", ...)
  std::string subtype;      // hwloc subtype as found, may be empty
  std::uint64_t capacity_bytes = 0;
  // CPUs (OS indices) whose local memory is this node, as Linux's nodeN/cpulist: a CPU belongs
  // to the most local node that covers it. Empty for CPU-less nodes (HBM in flat mode, CXL).
  std::vector<int> cpus;
  // CPUs hwloc considers close to this node (its locality); for an HBM node these are the cores
  // next to it even though it owns none.
  std::vector<int> local_cpus;
  int package = -1;  // socket, -1 if unknown
  // For a CPU-less node: the CPU-owning node closest to it (HBM node i+8 -> DDR node i on a Xeon
  // Max in SNC4). For a node with CPUs: itself.
  int near_cpu_node = -1;
  // HMAT-derived attributes for the local initiator; nullopt where hwloc has no value.
  std::optional<std::uint64_t> bandwidth_mibps;
  std::optional<std::uint64_t> latency_ns;

  bool has_cpus() const { return !cpus.empty(); }
};

// Classification overrides: node OS index -> kind. Parsed from text such as
//   "8-15=hbm,16=cxl"                 (the TIERFLOW_TIERS environment variable)
// or from a file with one "NODES KIND" or "NODES=KIND" entry per line, '#' starting a comment.
class TIERFLOW_EXPORT TierOverrides {
 public:
  static Result<TierOverrides> Parse(std::string_view text);
  static Result<TierOverrides> LoadFile(const std::string& path);
  // TIERFLOW_TIER_CONFIG (a file) and then TIERFLOW_TIERS (inline, wins on conflicts).
  static Result<TierOverrides> FromEnvironment();

  void Set(int node, TierKind kind) { kinds_[node] = kind; }
  void Merge(const TierOverrides& other);
  const std::map<int, TierKind>& kinds() const { return kinds_; }
  bool empty() const { return kinds_.empty(); }

 private:
  std::map<int, TierKind> kinds_;
};

struct TopologyOptions {
  std::string xml_path;         // empty: discover the running system
  TierOverrides overrides;      // applied after discovery; unknown nodes are an error
  bool use_environment = true;  // also apply TierOverrides::FromEnvironment()
};

struct CacheInfo {
  std::uint64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per instance, 0 if unknown
};

class TIERFLOW_EXPORT Topology {
 public:
  static Result<Topology> Discover(const TopologyOptions& options = {});
  static Result<Topology> FromXmlFile(const std::string& path);

  const std::vector<NumaNode>& nodes() const { return nodes_; }
  const NumaNode* node(int os_index) const;              // nullptr if absent
  Result<const NumaNode*> FindNode(int os_index) const;  // error names the nodes that exist
  std::vector<const NumaNode*> NodesOfKind(TierKind kind) const;

  // SLIT-style distance (10 = local), nullopt when the topology carries no distance matrix.
  std::optional<std::uint32_t> Distance(int from, int to) const;
  bool has_distances() const { return !distances_.empty(); }

  // The node of `kind` nearest to `from` (by distance, then same package, then lowest index).
  // "HBM next to node i" is NearestOfKind(i, kHbm).
  Result<const NumaNode*> NearestOfKind(int from, TierKind kind) const;

  // Nodes whose CPUs sit on `package`.
  std::vector<const NumaNode*> NodesOfPackage(int package) const;
  int package_count() const { return package_count_; }
  const CacheInfo& caches() const { return caches_; }
  // True when this describes the machine we run on (not an XML file): only then can memory be
  // allocated on its nodes and threads pinned to its CPUs.
  bool is_this_system() const { return this_system_; }
  const std::string& source() const { return source_; }  // "this system" or the XML path

 private:
  std::vector<NumaNode> nodes_;
  std::map<std::pair<int, int>, std::uint32_t> distances_;
  CacheInfo caches_;
  int package_count_ = 0;
  bool this_system_ = false;
  std::string source_;
  friend class TopologyBuilder;
};

}  // namespace tierflow
