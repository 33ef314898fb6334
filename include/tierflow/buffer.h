// SPDX-License-Identifier: Apache-2.0
// Memory placed on a chosen NUMA node or tier, owned RAII-style.
//
// Every page of a buffer lands on its node or the allocation fails: memory never spills
// silently to another node. Prefaulting (the default) populates every page at allocation, so
// that later copies take no page faults.
//
// Thread-safety: a Buffer is a movable owner; its memory may be used from any threads, the
// object itself (move, destroy) from one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tierflow/export.h"
#include "tierflow/status.h"
#include "tierflow/topology.h"

namespace tierflow {

enum class HugePages : std::uint8_t {
  kNone,         // 4 KiB pages
  kTransparent,  // madvise(MADV_HUGEPAGE): the kernel uses 2 MiB pages when it can
  kExplicit,     // MAP_HUGETLB from the hugetlbfs pool: fails clearly when the pool is empty
};

struct AllocOptions {
  // Default kNone. Huge pages: fewer TLB misses on large buffers, memory in 2 MiB steps.
  HugePages huge_pages = HugePages::kNone;
  // Default true: every page is touched now. Off: allocation is cheap and pages arrive on first
  // touch, whose faults land on whoever touches them first (a copy engine's workers).
  bool prefault = true;
};

class TIERFLOW_EXPORT Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Allocates `size` bytes (rounded up to the page size) on NUMA node `node` of the running
  // system. Errors: size 0, a node that does not exist here, not enough free memory on the
  // node, an empty huge page pool.
  static Result<Buffer> OnNode(int node, std::size_t size, const AllocOptions& options = {});
  // Allocates on the node of `kind` nearest to `near_node` in `topology` (which must describe
  // this system).
  static Result<Buffer> OnTier(const Topology& topology, TierKind kind, int near_node,
                               std::size_t size, const AllocOptions& options = {});

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }           // as requested
  std::size_t mapped_size() const { return mapped_; }  // rounded to pages
  int node() const { return node_; }
  std::span<std::byte> span() const { return {data_, size_}; }
  bool empty() const { return data_ == nullptr; }

 private:
  void Release();
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;
  int node_ = -1;
};

// Free and total memory of a node of the running system, from the kernel.
struct NodeMemory {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
};
TIERFLOW_EXPORT Result<NodeMemory> QueryNodeMemory(int node);

// NUMA nodes of the running system that hold memory (libnuma's view).
TIERFLOW_EXPORT std::vector<int> SystemMemoryNodes();

}  // namespace tierflow
