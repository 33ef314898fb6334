// SPDX-License-Identifier: Apache-2.0
// A simulated non-coherent memory: to prove that a protocol keeps shared data correct where
// hardware does not (CXL memory shared between hosts, non-coherent DMA, PCIe NTBs), on any
// machine, and to show which write-back, invalidate or fence it cannot do without.
//
// The model. A backing store (the shared memory) and, for each CPU agent, a private cache of
// whole lines. A CPU's load fills the line from memory (or from its own pending write-backs,
// as a core snoops its write buffer) and keeps it; a store dirties the cached line. Nothing
// moves between a cache and memory unless the agent says so or the seeded randomness does:
//   WriteBack            dirty lines of the range -> the agent's pending queue; lines stay, clean
//   Invalidate           lines of the range dropped. A partially covered line at either edge is
//                        written back first if dirty. A fully covered dirty line is written
//                        back (user space: clean+invalidate, what tierflow::Invalidate does) or,
//                        with Options::invalidate_discards, dropped with its stores (a kernel's
//                        or device's invalidate); a protocol must be right under both.
//   WriteBackInvalidate  both
//   Fence                later write-backs reach memory after the earlier ones
//   Complete             every pending write-back of the agent reaches memory now
// A written-back line carries the whole line, the bytes the agent did not store included, as
// caches do: two agents storing to one line lose each other's bytes unless a protocol orders
// them. Pending write-backs reach memory later, in random order within a fence's epoch.
// Randomness (seeded, per access of an agent): an early write-back of a random cached line
// (an eviction: into the pending queue if dirty, then dropped), a prefetch of a random line the
// agent does not hold (a clean copy that goes stale), and a pending write-back drained.
// Device agents (DMA engines) read and write memory directly, uncached, visible at once; their
// accesses let time pass too (pending write-backs land).
//
// Thread-safety: any thread may call any member at once (one lock); with a fixed seed, the
// same calls in the same order give the same results. Agents may be threads, or coroutines
// under a seeded scheduler (tests/testing/protocol_runner.h) for reproducible schedules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

class TIERFLOW_EXPORT NoncoherentMemory {
 public:
  struct Options {
    std::size_t size = 4096;           // bytes of shared memory (rounded up to whole lines)
    std::size_t line_size = 64;        // a power of two, 8 to 4096
    int cpus = 2;                      // caching agents, 1 to 64
    std::uint64_t seed = 1;            // the randomness below, reproducibly
    double eviction_rate = 0.02;       // per access: chance of one early write-back + drop
    double prefetch_rate = 0.02;       // per access: chance of one stale-to-be clean fill
    double drain_rate = 0.3;           // per access: chance that one pending write-back lands
    bool invalidate_discards = false;  // fully covered dirty lines dropped, not written back
  };
  // Errors (kInvalidArgument, naming the field and the allowed range): size 0, a line size
  // that is not a power of two in [8, 4096], cpus outside [1, 64], a rate outside [0, 1].
  static Result<std::unique_ptr<NoncoherentMemory>> Create(const Options& options);
  ~NoncoherentMemory();
  NoncoherentMemory(const NoncoherentMemory&) = delete;
  NoncoherentMemory& operator=(const NoncoherentMemory&) = delete;

  // CPU agent `cpu` (0 .. cpus-1). Errors (kInvalidArgument, nothing done): an unknown cpu, a
  // range outside the memory, a 64-bit access not 8-byte aligned.
  Result<std::uint64_t> Load(int cpu, std::size_t offset);
  Status Store(int cpu, std::size_t offset, std::uint64_t value);
  Status Read(int cpu, std::size_t offset, std::span<std::byte> out);
  Status Write(int cpu, std::size_t offset, std::span<const std::byte> in);
  Status WriteBack(int cpu, std::size_t offset, std::size_t size);
  Status Invalidate(int cpu, std::size_t offset, std::size_t size);
  Status WriteBackInvalidate(int cpu, std::size_t offset, std::size_t size);
  Status Fence(int cpu);
  Status Complete(int cpu);

  // A device (DMA): memory itself, no cache. Errors as above.
  Result<std::uint64_t> DeviceLoad(std::size_t offset);
  Status DeviceStore(std::size_t offset, std::uint64_t value);
  Status DeviceRead(std::size_t offset, std::span<std::byte> out);
  Status DeviceWrite(std::size_t offset, std::span<const std::byte> in);

  struct Stats {
    std::uint64_t accesses = 0;         // CPU loads, stores, reads and writes
    std::uint64_t evictions = 0;        // random early write-backs (lines dropped)
    std::uint64_t prefetches = 0;       // random clean fills
    std::uint64_t write_backs = 0;      // lines that reached memory
    std::uint64_t dirty_discarded = 0;  // dirty lines an invalidate dropped unwritten
  };
  Stats stats() const;
  const Options& options() const;

 private:
  struct Impl;
  explicit NoncoherentMemory(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
