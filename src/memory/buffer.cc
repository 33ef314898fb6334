// SPDX-License-Identifier: Apache-2.0
#include "tierflow/buffer.h"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace tierflow {

namespace {

std::size_t PageSize() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
constexpr std::size_t kHugePage = 2u << 20;

bool NumaAvailable() {
  static const bool available = numa_available() >= 0;
  return available;
}

}  // namespace

std::vector<int> SystemMemoryNodes() {
  std::vector<int> out;
  if (!NumaAvailable()) {
    out.push_back(0);
    return out;
  }
  for (int n = 0; n <= numa_max_node(); ++n) {
    if (numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(n))) out.push_back(n);
  }
  return out;
}

Result<NodeMemory> QueryNodeMemory(int node) {
  std::vector<int> nodes = SystemMemoryNodes();
  if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
    return Status::NotFound(
        fmt::format("NUMA node {} does not exist on this system (nodes with "
                    "memory: {}); 'tierflow topology' lists them",
                    node, fmt::join(nodes, ",")));
  }
  NodeMemory m;
  if (!NumaAvailable()) {
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
    m.total_bytes = static_cast<std::uint64_t>(pages) * PageSize();
    m.free_bytes = static_cast<std::uint64_t>(avail) * PageSize();
    return m;
  }
  long long free_bytes = 0;
  long long total = numa_node_size64(node, &free_bytes);
  if (total < 0) return Status::IoError(fmt::format("cannot read the size of NUMA node {}", node));
  m.total_bytes = static_cast<std::uint64_t>(total);
  m.free_bytes = static_cast<std::uint64_t>(free_bytes);
  if (nodes.size() == 1) {
    // With one node all memory is its memory, but some kernels (memory hot-plugged into
    // ZONE_MOVABLE, seen on VMs) leave part of it out of the node's meminfo. Trust the larger.
    auto pages = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES));
    auto avail = static_cast<std::uint64_t>(sysconf(_SC_AVPHYS_PAGES));
    m.total_bytes = std::max<std::uint64_t>(m.total_bytes, pages * PageSize());
    m.free_bytes = std::max<std::uint64_t>(m.free_bytes, avail * PageSize());
  }
  return m;
}

Result<Buffer> Buffer::OnNode(int node, std::size_t size, const AllocOptions& options) {
  if (size == 0) return Status::InvalidArgument("buffer size 0: ask for at least one byte");
  Result<NodeMemory> mem = QueryNodeMemory(node);
  if (!mem.ok()) return mem.status();
  const std::size_t align = options.huge_pages == HugePages::kExplicit ? kHugePage : PageSize();
  if (size > (std::size_t{1} << 50)) {
    return Status::InvalidArgument(fmt::format("buffer size {} bytes is beyond any machine", size));
  }
  const std::size_t mapped = (size + align - 1) / align * align;
  // The kernel's free count includes reclaimable page cache only partly; refuse what clearly
  // cannot fit rather than letting the OOM killer decide during prefault.
  if (mapped > mem->total_bytes) {
    return Status::OutOfMemory(
        fmt::format("{} bytes requested on NUMA node {}, which has {} bytes in total", mapped, node,
                    mem->total_bytes));
  }
  if (options.prefault && mapped > mem->free_bytes) {
    return Status::OutOfMemory(fmt::format(
        "{} bytes requested on NUMA node {}, which has {} bytes free; free memory, use another "
        "node or allocate without prefault",
        mapped, node, mem->free_bytes));
  }
  // Explicit huge pages are reserved at mmap time (no MAP_NORESERVE), so an empty pool fails
  // here instead of raising SIGBUS on first touch.
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (options.huge_pages == HugePages::kExplicit)
    flags |= MAP_HUGETLB;
  else
    flags |= MAP_NORESERVE;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    if (options.huge_pages == HugePages::kExplicit) {
      return Status::OutOfMemory(fmt::format(
          "no explicit huge pages for {} bytes ({}); reserve some with 'echo N > "
          "/sys/devices/system/node/node{}/hugepages/hugepages-2048kB/nr_hugepages' or use "
          "transparent huge pages",
          mapped, std::strerror(err), node));
    }
    return Status::OutOfMemory(
        fmt::format("mmap of {} bytes failed: {}", mapped, std::strerror(err)));
  }
  Buffer b;
  b.data_ = static_cast<std::byte*>(p);
  b.size_ = size;
  b.mapped_ = mapped;
  b.node_ = node;
  if (NumaAvailable()) {
    unsigned long mask[16] = {};
    if (node < 0 || node >= static_cast<int>(sizeof(mask) * 8)) {
      return Status::InvalidArgument(fmt::format(
          "NUMA node {} is beyond the {} nodes tierflow supports", node, sizeof(mask) * 8));
    }
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    if (mbind(p, mapped, MPOL_BIND, mask, sizeof(mask) * 8, MPOL_MF_STRICT) != 0) {
      return Status::IoError(
          fmt::format("mbind to NUMA node {} failed: {}", node, std::strerror(errno)));
    }
  }
  if (options.huge_pages == HugePages::kTransparent) madvise(p, mapped, MADV_HUGEPAGE);
  if (options.prefault) {
    if (madvise(p, mapped, MADV_POPULATE_WRITE) != 0) {
      int err = errno;
      if (err != EINVAL) {
        return Status::OutOfMemory(
            fmt::format("NUMA node {} ran out of memory while prefaulting "
                        "{} bytes ({})",
                        node, mapped, std::strerror(err)));
      }
      // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch one byte per page instead.
      const std::size_t step = options.huge_pages == HugePages::kNone ? PageSize() : align;
      for (std::size_t off = 0; off < mapped; off += step) {
        static_cast<volatile char*>(p)[off] = 0;
      }
    }
  }
  return b;
}

Result<Buffer> Buffer::OnTier(const Topology& topology, TierKind kind, int near_node,
                              std::size_t size, const AllocOptions& options) {
  if (!topology.is_this_system()) {
    return Status::InvalidArgument(fmt::format(
        "cannot allocate on a topology loaded from '{}': discover this system's topology",
        topology.source()));
  }
  Result<const NumaNode*> node = topology.NearestOfKind(near_node, kind);
  if (!node.ok()) return node.status();
  return OnNode((*node)->os_index, size, options);
}

Buffer::~Buffer() { Release(); }

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)),
      node_(std::exchange(o.node_, -1)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    node_ = std::exchange(o.node_, -1);
  }
  return *this;
}

void Buffer::Release() {
  if (data_ != nullptr) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
  node_ = -1;
}

}  // namespace tierflow
