// SPDX-License-Identifier: Apache-2.0
#include "tierflow/copy_policy.h"

#include <numaif.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace tierflow {

std::string_view PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kSingle:
      return "single";
    case PolicyKind::kPushPull:
      return "push-pull";
    case PolicyKind::kSocket:
      return "socket";
    case PolicyKind::kBruteForce:
      return "brute-force";
    case PolicyKind::kAuto:
      return "auto";
  }
  return "unknown";
}

Result<PolicyKind> ParsePolicyKind(std::string_view name) {
  for (PolicyKind k : {PolicyKind::kSingle, PolicyKind::kPushPull, PolicyKind::kSocket,
                       PolicyKind::kBruteForce, PolicyKind::kAuto}) {
    if (name == PolicyKindName(k)) return k;
  }
  return Status::InvalidArgument(fmt::format(
      "unknown copy policy '{}': use single, push-pull, socket, brute-force or auto", name));
}

bool IsCpuEngine(const Engine& engine) { return engine.capabilities().kind == EngineKind::kCpu; }

Status CheckCopyPolicy(const CopyPolicy& policy) {
  if (policy.granularity == 0) {
    return Status::InvalidArgument("copy policy granularity is 0: use e.g. 4096");
  }
  for (const auto& [node, w] : policy.weights) {
    if (!(w > 0) || !std::isfinite(w)) {
      return Status::InvalidArgument(
          fmt::format("copy policy weight {} for node {}: weights must be > 0", w, node));
    }
  }
  const double share = policy.thresholds.cpu_share;
  if (!(share >= 0 && share <= 0.9)) {
    return Status::InvalidArgument(fmt::format("auto policy cpu_share {}: use 0 .. 0.9", share));
  }
  return Status::Ok();
}

std::string DescribeAutoThresholds(const AutoThresholds& t) {
  return fmt::format(
      "auto: CPU below {} B; the destination's DSA up to {} B; push-pull from {} B with {:.0f}% "
      "on the CPU; {} or more small operations as one DSA batch",
      t.cpu_below, t.push_pull_from, t.push_pull_from, t.cpu_share * 100, t.batch_min_ops);
}

namespace {

Result<Engine*> EngineFor(const Topology& topology, std::span<Engine* const> engines, int node) {
  Result<const NumaNode*> n = topology.FindNode(node);
  if (!n.ok()) return n.status();
  for (int candidate : {node, (*n)->near_cpu_node}) {
    for (Engine* e : engines) {
      if (e != nullptr && e->capabilities().node == candidate) return e;
    }
  }
  return Status::NotFound(fmt::format(
      "no engine serves NUMA node {} (nor its nearest CPU node {}); create one there or choose "
      "another policy",
      node, (*n)->near_cpu_node));
}

// Splits [0, size) by weights (in granularity units; the last engine takes the rest).
std::vector<CopyPart> Divide(std::span<Engine* const> chosen, std::span<const double> weights,
                             std::size_t granularity, std::size_t size) {
  double total = 0;
  for (double w : weights) total += w;
  std::vector<CopyPart> parts;
  std::size_t offset = 0;
  double acc = 0;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    acc += weights[i];
    std::size_t end = size;
    if (i + 1 < chosen.size()) {
      auto ideal = static_cast<std::size_t>(static_cast<double>(size) * (acc / total));
      end = std::min(size, ideal / granularity * granularity);
      end = std::max(end, offset);
    }
    if (end > offset) parts.push_back({chosen[i], offset, end - offset});
    offset = end;
  }
  return parts;
}

Result<std::vector<CopyPart>> PlanAuto(const CopyPolicy& policy, const Topology& topology,
                                       std::span<Engine* const> engines, int src_node, int dst_node,
                                       std::size_t size) {
  const AutoThresholds& t = policy.thresholds;
  std::vector<Engine*> cpus, others;
  for (Engine* e : engines) {
    if (e != nullptr) (IsCpuEngine(*e) ? cpus : others).push_back(e);
  }
  auto one = [&](std::span<Engine* const> set, int node) -> Result<std::vector<CopyPart>> {
    Result<Engine*> e = EngineFor(topology, set, node);
    if (!e.ok()) return e.status();
    return std::vector<CopyPart>{{*e, 0, size}};
  };
  if (others.empty()) return one(cpus, dst_node);
  if (size < t.cpu_below && !cpus.empty()) return one(cpus, dst_node);
  if (size < t.push_pull_from) return one(others, dst_node);
  std::vector<Engine*> chosen;
  for (int node : {src_node, dst_node}) {
    Result<Engine*> e = EngineFor(topology, others, node);
    if (!e.ok()) return e.status();
    if (std::find(chosen.begin(), chosen.end(), *e) == chosen.end()) chosen.push_back(*e);
  }
  std::vector<double> weights(chosen.size(),
                              (1.0 - t.cpu_share) / static_cast<double>(chosen.size()));
  if (t.cpu_share > 0 && !cpus.empty()) {
    Result<Engine*> cpu = EngineFor(topology, cpus, dst_node);
    if (!cpu.ok()) return cpu.status();
    chosen.push_back(*cpu);
    weights.push_back(t.cpu_share);
  }
  return Divide(chosen, weights, policy.granularity, size);
}

}  // namespace

Result<std::vector<CopyPart>> PlanFill(const CopyPolicy& policy, const Topology& topology,
                                       std::span<Engine* const> engines, const void* src,
                                       int src_node, int dst_node, std::size_t size) {
  std::vector<Engine*> memory;
  for (Engine* e : engines) {
    if (e == nullptr) continue;
    if (e->ReadsSourceDirectly(src, size)) return std::vector<CopyPart>{{e, 0, size}};
    if (e->capabilities().copies_memory) memory.push_back(e);
  }
  if (memory.empty()) {
    return Status::NotFound(fmt::format(
        "no engine can copy from [{}, +{}): the storage engines given do not hold that file and "
        "no memory engine (CPU, DSA) was given",
        src, size));
  }
  return PlanCopy(policy, topology, memory, src_node, dst_node, size);
}

Result<Engine*> ChooseBatchEngine(const CopyPolicy& policy, const Topology& topology,
                                  std::span<Engine* const> engines, int dst_node,
                                  std::span<const Operation> ops) {
  if (Status s = CheckCopyPolicy(policy); !s.ok()) return s;
  if (policy.kind != PolicyKind::kAuto) {
    return EngineFor(topology, engines, policy.engine_node >= 0 ? policy.engine_node : dst_node);
  }
  std::vector<Engine*> cpus, others;
  for (Engine* e : engines) {
    if (e != nullptr) (IsCpuEngine(*e) ? cpus : others).push_back(e);
  }
  bool small = ops.size() >= policy.thresholds.batch_min_ops;
  for (const Operation& op : ops) small = small && op.size < policy.thresholds.cpu_below;
  if ((small || cpus.empty()) && !others.empty()) return EngineFor(topology, others, dst_node);
  return EngineFor(topology, cpus.empty() ? others : cpus, dst_node);
}

Result<std::vector<CopyPart>> PlanCopy(const CopyPolicy& policy, const Topology& topology,
                                       std::span<Engine* const> engines, int src_node, int dst_node,
                                       std::size_t size) {
  if (Status s = CheckCopyPolicy(policy); !s.ok()) return s;
  if (size == 0) return Status::InvalidArgument("copy of size 0: nothing to plan");
  Result<const NumaNode*> src = topology.FindNode(src_node);
  if (!src.ok()) return src.status();
  Result<const NumaNode*> dst = topology.FindNode(dst_node);
  if (!dst.ok()) return dst.status();

  std::vector<Engine*> memory_engines;
  for (Engine* e : engines) {
    if (e != nullptr && e->capabilities().copies_memory) memory_engines.push_back(e);
  }
  engines = memory_engines;  // storage engines read only their own files: never planned here
  if (policy.kind == PolicyKind::kAuto)
    return PlanAuto(policy, topology, engines, src_node, dst_node, size);

  std::vector<Engine*> chosen;
  auto add = [&](Engine* e) {
    if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
  };
  switch (policy.kind) {
    case PolicyKind::kSingle: {
      Result<Engine*> e =
          EngineFor(topology, engines, policy.engine_node >= 0 ? policy.engine_node : dst_node);
      if (!e.ok()) return e.status();
      add(*e);
      break;
    }
    case PolicyKind::kPushPull:
      for (int node : {src_node, dst_node}) {
        Result<Engine*> e = EngineFor(topology, engines, node);
        if (!e.ok()) return e.status();
        add(*e);
      }
      break;
    case PolicyKind::kSocket: {
      int package = policy.socket >= 0 ? policy.socket : (*dst)->package;
      for (Engine* e : engines) {
        const NumaNode* n = e != nullptr ? topology.node(e->capabilities().node) : nullptr;
        if (n != nullptr && n->package == package) add(e);
      }
      if (chosen.empty()) {
        return Status::NotFound(fmt::format("no engine sits on socket {}", package));
      }
      break;
    }
    case PolicyKind::kBruteForce:
      for (Engine* e : engines) {
        if (e != nullptr) add(e);
      }
      if (chosen.empty()) return Status::InvalidArgument("brute-force policy given no engines");
      break;
    case PolicyKind::kAuto:
      break;  // planned above
  }

  std::vector<double> weights;
  for (Engine* e : chosen) {
    auto it = policy.weights.find(e->capabilities().node);
    weights.push_back(it == policy.weights.end() ? 1.0 : it->second);  // checked: > 0
  }
  return Divide(chosen, weights, policy.granularity, size);
}

Result<Handle> SubmitParts(const Operation& op, std::span<const CopyPart> parts,
                           SubmitOptions options) {
  return Engine::SubmitParts(op, parts, std::move(options));
}

Result<int> NodeOfAddress(const void* p) {
  int node = -1;
  if (get_mempolicy(&node, nullptr, 0, const_cast<void*>(p), MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    return Status::IoError(
        fmt::format("cannot find the node of address {}: {}", p, std::strerror(errno)));
  }
  return node;
}

}  // namespace tierflow
