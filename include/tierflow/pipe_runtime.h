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
  // The command-line spelling: "dram[:NODE[:SIZE]]", "hbm[:NEAR_NODE[:SIZE]]",
  // "cxl[:NODE[:SIZE]]", "node:N[:SIZE]", "file:PATH[:OFFSET[:LENGTH]]" (a destination file is
  // created: `mode` says how), and "spill:A,B,..." of those. `default_size` is the size of
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
  explicit PipeRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
