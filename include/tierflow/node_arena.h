// SPDX-License-Identifier: Apache-2.0
// Memory of one NUMA node handed out in small blocks from large prefaulted chunks: the
// offloading cache's default allocator (tierflow/cache.h), public so that an application can
// give the cache its own arena (CacheConfig::allocator) and reserve the memory up front.
//
// Chunks come from the kernel as Buffers (node-bound, prefaulted: page faults during fills
// turned cache hits into misses in the thesis' measurements) and stay until the arena is
// destroyed. Blocks are handed out first-fit in 64-byte units (from the end of the first free
// block that is large enough); freed blocks are coalesced with
// their neighbours.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tierflow/buffer.h"
#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

// Thread-safe: every member may be called from any thread (one mutex; allocation is meant for
// cache misses, not for a hot path).
class TIERFLOW_EXPORT NodeArena {
 public:
  // Takes memory of NUMA node `node` from the kernel `chunk` bytes at a time (rounded up to
  // 64 bytes; a block larger than a chunk gets a chunk of its own). `options` says how each
  // chunk is allocated (huge pages); chunks are always prefaulted. Nothing is allocated until
  // the first Allocate or Reserve, so a node that does not exist is reported there.
  NodeArena(int node, std::size_t chunk, AllocOptions options = {});
  ~NodeArena();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // A block of at least `size` bytes, 64-byte aligned, on the arena's node. Returns null and
  // sets `*error` (when `error` is not null) if the block needs a new chunk and the node has no
  // memory for it (Buffer::OnNode's error: no such node, not enough free memory).
  void* Allocate(std::size_t size, Status* error);
  // Gives back a block: `p` and `size` as passed to and returned by one Allocate. A pointer
  // that no chunk of this arena holds is ignored; a wrong size is undefined behaviour.
  void Free(void* p, std::size_t size);
  // Takes chunks from the kernel until `bytes` are reserved in all (the last one only as
  // large as needed), so that later allocations up to that much make no system call. Errors:
  // more than the node has free (checked before anything is taken), or an allocation the
  // kernel refuses (what this call took is given back).
  Status Reserve(std::size_t bytes);
  std::size_t reserved() const;  // bytes taken from the kernel so far
  int node() const { return node_; }

  static constexpr std::size_t kUnit = 64;  // allocation granularity and alignment
  // What a block of `size` bytes takes from the arena.
  static std::size_t Round(std::size_t size) { return (size + kUnit - 1) / kUnit * kUnit; }

 private:
  struct Chunk;
  int node_;
  std::size_t chunk_;
  AllocOptions options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace tierflow
