// SPDX-License-Identifier: Apache-2.0
// The pipe runtime: the machine as pipes see it (a topology, engines, a calibration) and the
// place where locators are declared and pipes connected (Data Pipes, Vogel et al.).
//
//   std::unique_ptr<PipeRuntime> rt = *PipeRuntime::Create();
//   Locator in  = *rt->File("/data/input", 0, 0, FileMode::kRead);
//   Locator buf = *rt->Memory(TierKind::kDram, 0, 64 << 20);
//   Pipe up = *rt->Connect(in, buf);         // planned and checked here
//   std::cout << up.Explain().ToText();      // which mechanism, why, what it should achieve
//   Status s = up.Transfer(0, 0, 64 << 20);  // flavour (a); Submit and Post/Reap: pipe.h
//
// Thread-safety: declaring locators and connecting pipes are thread-safe; the runtime must
// outlive its locators' transfers and its pipes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tierflow/calibration.h"
#include "tierflow/export.h"
#include "tierflow/locator.h"
#include "tierflow/pipe.h"
#include "tierflow/status.h"
#include "tierflow/topology.h"

namespace tierflow {

class Engine;
class IoUringEngine;

struct PipeRuntimeOptions {
  // The machine to plan for. Empty xml: this system. A topology read from a file (e.g. a Xeon
  // Max with HBM) can be planned and explained; transfers then need model_placement.
  std::string topology_xml;
  // Memory of nodes this machine lacks is allocated on the running system's node 0 and marked
  // modelled (Locator::modelled, Explain says so). Off: declaring such memory is an error.
  bool model_placement = false;
  // Calibration file; empty: Calibration::DefaultPath(). Missing or from another machine: the
  // planner uses preference order and says the figures are missing.
  std::string calibration_path;
  bool calibration_any_machine = false;  // accept another machine's figures (fixtures)
  // Memory engines the caller owns, to be used instead of the runtime's own; each must outlive
  // the runtime. An engine's EngineKind picks what it serves: a kCpu engine the Mechanism::kCpu
  // hops, a kOffload engine the Mechanism::kDsa hops (plans name its capabilities().name).
  // At most one of each kind; the runtime makes what is not given, as below. Files always go
  // through the runtime's own io_uring engine. Default: none.
  std::vector<Engine*> engines;
  // The runtime's own engines. CPU: workers on node 0 (cpu_workers 0: one per CPU). DSA: the
  // first usable hardware device (use_dsa), else none unless dsa_model is set (a software model:
  // said so in every plan). io_uring: uring_queue_depth entries (more: more reads in flight,
  // more locked memory).
  int cpu_workers = 0;
  bool use_dsa = true;
  bool dsa_model = false;
  unsigned uring_queue_depth = 64;
  // Touch memory locators' pages when they are declared (steadier transfers). Off: pages are
  // allocated on first use (cheap declarations, e.g. only to explain a plan).
  bool prefault = true;
};

// A tiered area (PipeRuntime::Tiered): where its extents may go and when a stage is full.
struct TieredOptions {
  // Bytes of the area: offsets [0, capacity) may be written and, once written, read. Required.
  std::uint64_t capacity = 0;
  // Memory tiers that may hold extents, on the node of each nearest `near_node` (-1: node 0's
  // nearest). Empty: every memory tier the topology has (DRAM, HBM, CXL). A tier the topology
  // lacks is an error.
  std::vector<TierKind> tiers;
  int near_node = -1;
  // Directories where a file (unnamed: nothing is left behind, whatever happens) may hold
  // extents, tried after the memory tiers in the order given. Each must exist and be writable.
  // Empty: memory only.
  std::vector<std::string> directories;
  // A stage takes no new extent that would raise its occupancy above this fraction (0 to 1]:
  // for memory the node's (1 - free/total, as QueryNodeMemory reads it; for memory that stands
  // in for an absent node, what this runtime's areas placed there over the node's capacity),
  // for a directory its file system's (used / (used + available), as df shows it).
  double occupancy_limit = 0.9;
  // The same per tier, overriding occupancy_limit (TierKind::kStorage: the directories' file
  // systems), e.g. {{TierKind::kDram, 0.5}} to leave half of DRAM to the application.
  std::vector<std::pair<TierKind, double>> occupancy_limits;
  // At most this many bytes of the area on a tier (e.g. {{TierKind::kDram, 1 << 30}}); tiers
  // not named are bound by occupancy alone.
  std::vector<std::pair<TierKind, std::uint64_t>> tier_limits;
  // Placement granularity: a multiple of 4096 (0: 8 MiB). An extent is placed as a whole, on
  // the first write of any of its bytes, and stays where it was placed until released.
  std::uint64_t extent_bytes = 0;
};

class TIERFLOW_EXPORT PipeRuntime {
 public:
  // Errors: the topology cannot be read; io_uring unavailable; the calibration file exists but
  // is malformed (a missing one is fine: plans say the figures are missing); an engine in
  // options.engines that is null, does not copy memory, or is a second one of its kind.
  static Result<std::unique_ptr<PipeRuntime>> Create(const PipeRuntimeOptions& options = {});
  ~PipeRuntime();
  PipeRuntime(const PipeRuntime&) = delete;
  PipeRuntime& operator=(const PipeRuntime&) = delete;

  // --- declaring locators (locator.h) ---
  // `size` bytes on NUMA node `node`. Errors: size 0, a node that does not exist (the message
  // lists those that do), not enough free memory there.
  Result<Locator> Node(int node, std::size_t size);
  // `size` bytes on the node of tier `tier` nearest `near_node` (-1: node 0's nearest).
  // Errors: the topology has no node of that tier (the message lists the tiers it has).
  Result<Locator> Memory(TierKind tier, int near_node, std::size_t size);
  // Memory the caller owns; `node` -1: unknown (planned as DRAM of node 0).
  Result<Locator> Borrow(void* data, std::size_t size, int node = -1);
  // Bytes [offset, offset + length) of the file at `path`. length 0: to the end of the file
  // (kRead, kModify); required for kCreate and kReplace (the most that may be written).
  // The file is opened once (created with O_EXCL for kCreate) and the engine keeps that very
  // file, never opening `path` again.
  // Errors: kRead/kModify of a missing file or a range beyond its end; kCreate of a path that
  // exists; kReplace with an offset other than 0 (truncating would zero what lies before it:
  // kModify writes the range alone); a symbolic link for a writing mode; a directory, FIFO,
  // socket or character device; a file that cannot be written for a writing mode (read-only,
  // no permission) — each names the path and the fix.
  Result<Locator> File(const std::string& path, std::uint64_t offset, std::uint64_t length,
                       FileMode mode);
  // Memory the planner may use for intermediate hops of pipes that name it
  // (PipeOptions::staging); on a tier as Memory.
  Result<Locator> Staging(TierKind tier, int near_node, std::size_t size);
  // A chain filled in order: bytes [0, c0) are members[0]'s, [c0, c0 + c1) members[1]'s, ...
  // (e.g. DRAM, then CXL, then a file: what does not fit a tier goes to the next). Errors:
  // fewer than two members, an invalid or nested member.
  Result<Locator> Spill(const std::vector<Locator>& members);
  // A tiered area (the staging area of an external sort: runs go to the fastest tier with room):
  // extents are placed when first written, on the first stage that can take them. Stages are
  // the memory tiers and directories of `options`, memory ranked by the calibrated bandwidth
  // of writing to them from DRAM (uncalibrated: in the order of options.tiers, or HBM, DRAM,
  // CXL), then the directories. Reading bytes never written is an error; pipes' plans have one
  // segment per stage, and their stats() and TieredState() show where the extents went and why
  // the placement switched. Errors: capacity 0, extent_bytes not a multiple of 4096, an
  // occupancy limit outside (0, 1], no stage at all, a tier the topology lacks, a directory
  // that is missing, not a directory or not writable, a limit for a tier that is no stage
  // (each named, with the fix).
  Result<Locator> Tiered(const TieredOptions& options);
  // Gives back the storage of bytes [offset, offset + length) of `locator`, no longer needed:
  // a tiered area's extents that lie wholly inside (they read as never written afterwards); a
  // file declared for writing, its blocks (punched out: the range reads as zeros, the size
  // stays; a range that reaches the file's end is cut off instead: the file ends where the
  // range starts until it is written again); memory the runtime allocated, its whole pages
  // inside (they read as zeros). No transfer may be using the range. Errors: a borrowed
  // locator or a spill chain, a file declared for reading, a range beyond the capacity, a file
  // system that cannot punch holes.
  Status Release(const Locator& locator, std::uint64_t offset, std::uint64_t length);
  // A tiered area's stages and what each holds now, and the placement's switches so far
  // ("from byte 8388608 on: cxl:16 (hbm:8: holds its limit of 8MiB)"). Errors: not a tiered
  // area.
  Result<std::vector<TieredStage>> TieredState(const Locator& tiered,
                                               std::vector<std::string>* switches = nullptr) const;
  // The command-line spelling: "dram[:NODE[:SIZE]]", "hbm[:NEAR_NODE[:SIZE]]",
  // "cxl[:NODE[:SIZE]]", "node:N[:SIZE]", "file:PATH[:OFFSET[:LENGTH]]" (a destination file is
  // created: `mode` says how), "spill:A,B,..." of those, and "tiered:SIZE[:DIR]" (every memory
  // tier, then a file in DIR; TieredOptions' defaults otherwise). `default_size` is the size of
  // memory, and the length of a file to be created, that names none (0: one is required).
  // Errors name the part that is wrong.
  Result<Locator> Parse(std::string_view spec, FileMode file_mode, std::size_t default_size = 0);

  // --- pipes (pipe.h) ---
  // Plans a pipe from `from` to `to` and checks it can run: errors give the reason when no
  // mechanism can serve the path (e.g. a read-only file as destination) or an option cannot be
  // honoured (an overridden mechanism that cannot reach an end).
  Result<Pipe> Connect(const Locator& from, const Locator& to, const PipeOptions& options = {});
  // The plan Connect would make, without making the pipe (no staging memory is allocated).
  Result<PipePlan> Plan(const Locator& from, const Locator& to,
                        const PipeOptions& options = {}) const;

  const Topology& topology() const;
  const Calibration& calibration() const;
  // Replaces the calibration (e.g. after Calibration::Measure); pipes connected later use it.
  void SetCalibration(Calibration calibration);
  // The engines the runtime drives: its memory engines (the CPU-kind one first, then the
  // offload one if any), then its io_uring engine; for measuring them (Calibration::Measure
  // takes the memory engines and storage_engine()).
  std::vector<Engine*> engines() const;
  IoUringEngine& storage_engine() const;
  // Why the calibration was or was not loaded ("read ~/.cache/..., measured DATE on
  // host"; "none at PATH: run `tierflow pipes calibrate`").
  const std::string& calibration_note() const;
  bool models_placement() const;  // memory of absent nodes stands in on node 0

  struct Impl;

 private:
  friend class Blueprint;  // plans candidate bindings as the runtime plans pipes (blueprint.h)
  explicit PipeRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
