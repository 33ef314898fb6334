// SPDX-License-Identifier: Apache-2.0
// Copy policies: which engines take part in one copy and how the bytes are divided.
//
// The policies of the Fürst thesis (§3.2.3) are expressed over any set of engines that sit on
// NUMA nodes (CPU engines now, DSA devices later):
//   single      one engine: the destination node's by default (not the caller's), or a chosen one
//   push-pull   the engines of the source and the destination node
//   socket      every engine on the destination's socket
//   brute-force every engine
//   auto        by size (thresholds in AutoThresholds): the CPU engine for small copies, the
//               destination node's DSA for medium ones, push-pull over DSAs for large ones,
//               optionally with a share of a large copy on the CPU (as Intel DTO does); and for
//               many small operations, one batch on the destination's DSA (ChooseBatchEngine)
// A CPU-less node (HBM, CXL) is served by the engine of its nearest CPU node. The bytes are
// divided in proportion to per-engine weights (equal by default) in multiples of `granularity`.
//
// Thread-safety: the functions below keep no state; any threads may call them at once.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "tierflow/engine.h"
#include "tierflow/export.h"
#include "tierflow/topology.h"

namespace tierflow {

enum class PolicyKind : std::uint8_t { kSingle, kPushPull, kSocket, kBruteForce, kAuto };
// "single", "push-pull", "socket", "brute-force", "auto"
TIERFLOW_EXPORT std::string_view PolicyKindName(PolicyKind kind);
TIERFLOW_EXPORT Result<PolicyKind> ParsePolicyKind(std::string_view name);

// Where PolicyKind::kAuto switches. The defaults follow the Fürst thesis' measurements (§3.2:
// submission costs dominate DSA copies below ~64 KiB; two DSAs reach most of the peak, more
// add little); measure your machine with `tierflow bench copy --engine dsa` and set them.
// Each: its default; raising a threshold keeps more work on the CPU (lower latency for those
// sizes, more cores busy), lowering it offloads more.
struct AutoThresholds {
  std::size_t cpu_below = 64 * 1024;      // one copy below this: the CPU engine
  std::size_t push_pull_from = 4u << 20;  // from this size: the source's and destination's DSA
  double cpu_share = 0.0;                 // fraction of a push-pull copy the CPU takes (0..0.9)
  std::size_t batch_min_ops = 8;          // this many small operations: one DSA batch
};
// One line stating the thresholds, for reports.
TIERFLOW_EXPORT std::string DescribeAutoThresholds(const AutoThresholds& t);
// Whether an engine runs on the host's cores (EngineKind::kCpu): auto sends small copies
// there and the rest to the other engines.
TIERFLOW_EXPORT bool IsCpuEngine(const Engine& engine);

struct CopyPolicy {
  PolicyKind kind = PolicyKind::kSingle;
  int engine_node = -1;  // kSingle: the node whose engine runs the copy; -1: the destination's
  int socket = -1;       // kSocket: the package to use; -1: the destination's
  std::map<int, double> weights;  // engine node -> share weight; missing nodes weigh 1
  // Default 4096: parts are multiples of this. Smaller: shares closer to the weights; larger:
  // parts that suit the engines (pages, a device's transfer unit).
  std::size_t granularity = 4096;
  AutoThresholds thresholds;  // kAuto
};

// The one check of a policy's own values, which PlanCopy, PlanFill and ChooseBatchEngine make
// first. Errors: granularity 0, a weight that is not a positive number, cpu_share outside
// 0..0.9.
TIERFLOW_EXPORT Status CheckCopyPolicy(const CopyPolicy& policy);

// One engine's share of a planned copy (engine.h).
using CopyPart = EnginePart;

// Plans how `size` bytes from `src_node` to `dst_node` are divided. Errors: unknown nodes, no
// engine for a node the policy needs, non-positive weights, granularity 0.
TIERFLOW_EXPORT Result<std::vector<CopyPart>> PlanCopy(const CopyPolicy& policy,
                                                       const Topology& topology,
                                                       std::span<Engine* const> engines,
                                                       int src_node, int dst_node,
                                                       std::size_t size);

// A copy planned by where its source lives: an engine that reads the source directly (a
// storage engine for a registered file) takes it whole; otherwise PlanCopy over the engines
// that do not. The first piece of the Data Pipes planner: callers name tiers, not engines.
TIERFLOW_EXPORT Result<std::vector<CopyPart>> PlanFill(const CopyPolicy& policy,
                                                       const Topology& topology,
                                                       std::span<Engine* const> engines,
                                                       const void* src, int src_node, int dst_node,
                                                       std::size_t size);

// The engine for a batch of small operations under `policy`: with kAuto, the destination
// node's non-CPU engine (a DSA batch) when there are at least batch_min_ops operations each
// below cpu_below, otherwise the destination's CPU engine; with other policies, the engine
// kSingle would choose. Errors: no engine serves the node.
TIERFLOW_EXPORT Result<Engine*> ChooseBatchEngine(const CopyPolicy& policy,
                                                  const Topology& topology,
                                                  std::span<Engine* const> engines, int dst_node,
                                                  std::span<const Operation> ops);

// Engine::SubmitParts (the engine layer splits an operation over engines), for a plan.
TIERFLOW_EXPORT Result<Handle> SubmitParts(const Operation& op, std::span<const CopyPart> parts,
                                           SubmitOptions options = {});

// The NUMA node holding the page at `p` (which must be faulted in), from the kernel.
TIERFLOW_EXPORT Result<int> NodeOfAddress(const void* p);

}  // namespace tierflow
