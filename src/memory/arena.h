// The default allocation policy of the offloading cache: memory of one NUMA node taken from the
// kernel in prefaulted chunks (Buffer::OnNode), handed out first-fit in 64-byte units, freed
// blocks coalesced. Prefaulted because the thesis found page faults during fills turned cache
// hits into misses. Thread-safe (one mutex: allocation happens on cache misses only).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tierflow/buffer.h"

namespace tierflow::memory {

class NodeArena {
 public:
  // `chunk`: how much to take from the kernel at a time (larger blocks get a chunk of their own);
  // `options`: how each chunk is allocated (huge pages; chunks are always prefaulted).
  NodeArena(int node, std::size_t chunk, AllocOptions options = {})
      : node_(node), chunk_(chunk), options_(options) {
    options_.prefault = true;
  }

  // A block of at least `size` bytes, 64-byte aligned, or null with `*error` set when the node
  // has no memory for another chunk.
  void* Allocate(std::size_t size, Status* error);
  void Free(void* p, std::size_t size);
  // Takes chunks from the kernel until `bytes` are reserved (the last one only as large as
  // needed), so that later allocations up to that much find memory without a system call.
  Status Reserve(std::size_t bytes);
  std::size_t reserved() const;  // bytes taken from the kernel

  static constexpr std::size_t kUnit = 64;
  static std::size_t Round(std::size_t size) { return (size + kUnit - 1) / kUnit * kUnit; }

 private:
  struct Chunk {
    Buffer buffer;
    std::map<std::size_t, std::size_t> free;  // offset -> length
  };
  int node_;
  std::size_t chunk_;
  AllocOptions options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace tierflow::memory
