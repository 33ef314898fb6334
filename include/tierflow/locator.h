// SPDX-License-Identifier: Apache-2.0
// Resource locators (Data Pipes, Vogel et al.): a named source or destination of data movement
// that owns acquiring and releasing what it names.
//
// A locator is one of
//   memory    `size` bytes on a NUMA node, or on the node of a tier (DRAM, HBM, CXL) nearest a
//             node; allocated when declared, freed with the last copy of the locator
//   borrowed  memory the caller owns (it must outlive every pipe using the locator)
//   file      a byte range of a file: read from, or written to (created, replaced or modified as
//             FileMode says; a file is never overwritten unless the locator says so); I/O is
//             O_DIRECT where the file system and the alignment allow
//   staging   memory the planner may use for intermediate hops (bounce buffers)
//   spill     a chain of locators filled in order (DRAM, then CXL, then a file): byte offsets
//             run through the first member's capacity, then the second's, ...
//   tiered    a byte range whose extents the runtime places when they are first written, on the
//             first of its stages (memory tiers, files in directories) that has room: stages
//             are tried fastest first, and one whose occupancy would pass a limit takes no more
//             (PipeRuntime::Tiered)
// Every locator states its capacity, its alignment, its tier and node, and the mechanisms that
// can reach it. Locators are declared through a PipeRuntime (pipe_runtime.h), which checks them
// then: a missing file, a read-only file as a destination, a range beyond the end, a tier or
// node that does not exist are refused with the reason, never found out during a transfer.
//
// Copies of a Locator share the resource. Thread-safe: a locator is immutable once declared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/status.h"
#include "tierflow/topology.h"

namespace tierflow {

enum class LocatorKind : std::uint8_t { kMemory, kBorrowed, kFile, kStaging, kSpill, kTiered };
TIERFLOW_EXPORT std::string_view LocatorKindName(LocatorKind kind);

// The ways data moves; a pipe's plan is a sequence of hops, each done by one mechanism.
enum class Mechanism : std::uint8_t {
  kCpu,            // the CPU engine: memory to memory
  kDsa,            // a DSA engine (hardware or its model): memory to memory
  kUringRead,      // io_uring reads: file to memory
  kUringWrite,     // io_uring writes: memory to file
  kCopyFileRange,  // copy_file_range: file to file (in the kernel, reflinks where it can)
};
TIERFLOW_EXPORT std::string_view MechanismName(Mechanism m);  // "cpu", "dsa", "io_uring-read", ...
// Errors: a name that is none of MechanismName's (the message lists them).
TIERFLOW_EXPORT Result<Mechanism> ParseMechanism(std::string_view name);
constexpr std::uint32_t MechanismBit(Mechanism m) { return 1u << static_cast<unsigned>(m); }

// What a file locator may do to its file.
enum class FileMode : std::uint8_t {
  kRead,     // an existing file, read only
  kCreate,   // a new file; refused if the path exists (the default for destinations)
  kReplace,  // created, or truncated if it exists: says in code that overwriting is intended
             // (from offset 0 only: a range further in would leave zeros before it)
  kModify,   // an existing file, written in place
};
TIERFLOW_EXPORT std::string_view FileModeName(FileMode mode);

namespace detail {
struct LocatorImpl;
struct LocatorAccess;  // the library's way in (src/pipes/locator_impl.h)
}  // namespace detail

class TIERFLOW_EXPORT Locator {
 public:
  Locator() = default;  // names nothing; a pipe refuses it

  bool valid() const { return impl_ != nullptr; }
  LocatorKind kind() const;
  // How the locator was declared, in the command-line spelling: "dram:0:1GiB",
  // "file:/data/x:0:4096", "spill[dram:0:64MiB,file:/tmp/s:0:1GiB]".
  const std::string& name() const;
  std::uint64_t capacity() const;  // bytes that can be transferred to or from it
  // Alignment of its start (memory: the address; files: the direct-I/O alignment, or 1 where
  // direct I/O is impossible).
  std::size_t alignment() const;
  TierKind tier() const;  // kStorage for files; a spill chain or tiered area: its first member's
  int node() const;       // NUMA node of memory (-1 for files, borrowed memory of unknown node)
  std::uint32_t mechanisms() const;  // MechanismBit mask of what can read or write it
  bool is_file() const;
  bool writable() const;  // files: opened for writing; memory: always
  // Memory locators: the first byte; files and spill chains: nullptr.
  std::byte* data() const;
  // A file locator's path and the file offset of its first byte; empty and 0 otherwise.
  const std::string& path() const;
  std::uint64_t file_offset() const;
  // A spill chain's members, in the order they are filled; a tiered area's stages, in the order
  // they are tried (memory stages name a tier and node and hold no memory of their own); empty
  // otherwise.
  const std::vector<Locator>& members() const;
  // True when the memory stands in for a node this machine does not have (a planning topology
  // read from a file, PipeRuntimeOptions::model_placement): transfers are real, placement is not.
  bool modelled() const;

 private:
  friend struct detail::LocatorAccess;
  explicit Locator(std::shared_ptr<detail::LocatorImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::LocatorImpl> impl_;
};

}  // namespace tierflow
