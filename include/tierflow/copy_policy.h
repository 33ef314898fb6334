// Copy policies: which engines take part in one copy and how the bytes are divided.
//
// The policies of the Fürst thesis (§3.2.3) are expressed over any set of engines that sit on
// NUMA nodes (CPU engines now, DSA devices later):
//   single      one engine: the destination node's by default (not the caller's), or a chosen one
//   push-pull   the engines of the source and the destination node
//   socket      every engine on the destination's socket
//   brute-force every engine
// A CPU-less node (HBM, CXL) is served by the engine of its nearest CPU node. The bytes are
// divided in proportion to per-engine weights (equal by default) in multiples of `granularity`.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "tierflow/engine.h"
#include "tierflow/topology.h"

namespace tierflow {

enum class PolicyKind : std::uint8_t { kSingle, kPushPull, kSocket, kBruteForce };
std::string_view PolicyKindName(PolicyKind kind);  // "single", "push-pull", "socket", "brute-force"
Result<PolicyKind> ParsePolicyKind(std::string_view name);

struct CopyPolicy {
  PolicyKind kind = PolicyKind::kSingle;
  int engine_node = -1;   // kSingle: the node whose engine runs the copy; -1: the destination's
  int socket = -1;        // kSocket: the package to use; -1: the destination's
  std::map<int, double> weights;  // engine node -> share weight; missing nodes weigh 1
  std::size_t granularity = 4096;
};

struct CopyPart {
  Engine* engine = nullptr;
  std::size_t offset = 0;
  std::size_t size = 0;
};

// Plans how `size` bytes from `src_node` to `dst_node` are divided. Errors: unknown nodes, no
// engine for a node the policy needs, non-positive weights, granularity 0.
Result<std::vector<CopyPart>> PlanCopy(const CopyPolicy& policy, const Topology& topology,
                                       std::span<Engine* const> engines, int src_node,
                                       int dst_node, std::size_t size);

// Submits `op` divided as `parts` describe (offsets relative to the operation) and returns one
// handle that completes when every part has. `op` may be any kind that acts on a
// range except kCrc32c (one CRC, computed by one engine) and an overlapping move; the parts
// must tile [0, op.size) exactly.
Result<Handle> SubmitParts(const Operation& op, std::span<const CopyPart> parts,
                           SubmitOptions options = {});

// The NUMA node holding the page at `p` (which must be faulted in), from the kernel.
Result<int> NodeOfAddress(const void* p);

}  // namespace tierflow
