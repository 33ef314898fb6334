// SPDX-License-Identifier: Apache-2.0
// Calibration: what each data-movement mechanism achieves on this machine, per pair of tiers,
// measured by tierflow itself. The pipe planner chooses mechanisms and staging from these
// figures, not from constants; a pair with no figure is planned by preference and says so.
//
// Figures are cached in a JSON file (default $XDG_CACHE_HOME/tierflow/calibration.json, else
// ~/.cache/tierflow/calibration.json, with the home directory from the user database when HOME
// is unset; never a shared directory) keyed by the machine they were measured on; a file from
// another machine is not used. Refresh with Calibration::Measure (`tierflow pipes calibrate`).
// The cache directory must belong to the user and be writable by nobody else; a cache file
// that does not parse is ignored with a warning by PipeRuntime and replaced by the next
// calibration.
//
// Thread-safety: a Calibration is a value; its const members may be used from any threads at
// once. Measure runs the engines it is given (do not measure an engine that is busy).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/locator.h"
#include "tierflow/status.h"
#include "tierflow/topology.h"

namespace tierflow {

class IoUringEngine;

class Engine;

// One measured figure: `mechanism` moving data from `from` to `to`. Endpoints are spelled
// "dram:0", "hbm:8", "cxl:2" (tier and node) or "file" (storage in the directory measured).
struct CalibrationEntry {
  Mechanism mechanism = Mechanism::kCpu;
  std::string from, to;
  double gbps = 0;        // bandwidth of large transfers, 10^9 bytes per second
  double latency_us = 0;  // time of one small transfer (4 KiB), submission to completion
};

struct CalibrationOptions {
  std::size_t bytes = std::size_t{64} << 20;  // moved per figure (more: steadier, slower)
  // Where file figures are measured: on the storage you plan for. Empty: TMPDIR.
  std::string file_dir;
  int repeats = 3;  // the best of these is kept (more: steadier, slower)
  // Default empty: every memory node of the system, each pair of them. Else only the pairs of
  // these nodes (one node: its own figure), for a caller that needs few figures quickly.
  std::vector<int> nodes;
};

class TIERFLOW_EXPORT Calibration {
 public:
  Calibration() = default;

  // The figure for a mechanism between two endpoints; nullopt where none was measured.
  std::optional<CalibrationEntry> Find(Mechanism m, const std::string& from,
                                       const std::string& to) const;
  void Set(const CalibrationEntry& e);  // replaces the figure for the same triple
  const std::vector<CalibrationEntry>& entries() const { return entries_; }

  // The machine the figures describe (host name, CPU model, memory nodes); figures measured
  // elsewhere are refused by Load.
  const std::string& machine() const { return machine_; }
  const std::string& measured_at() const { return measured_at_; }  // ISO 8601, UTC
  const std::string& source() const { return source_; }  // the file read, or "measured now"
  bool empty() const { return entries_.empty(); }

  // Measures each memory engine by its EngineKind — a kCpu engine's figures as Mechanism::kCpu,
  // a kOffload engine's as Mechanism::kDsa — between the memory nodes of the running system
  // (or options.nodes), and, when `storage` is given, its io_uring reads, writes and
  // copy_file_range in options.file_dir. `repeats` moves of `bytes` each per figure. Errors:
  // the directory cannot be written, an engine fails, a kStorage engine among `engines` (give
  // it as `storage`), a node in options.nodes that is not a memory node of this system.
  static Result<Calibration> Measure(const std::vector<Engine*>& engines, IoUringEngine* storage,
                                     const CalibrationOptions& options = {});
  // Reads a file written by Save. `any_machine`: accept figures of another machine (fixtures
  // and planning for a machine you do not run on). Errors: unreadable, malformed (the message
  // names the entry), another machine's figures without any_machine.
  static Result<Calibration> Load(const std::string& path, bool any_machine = false);
  // Writes atomically: a new temporary file beside `path` (created with O_EXCL, so never a
  // planted name or link), synced, renamed over `path`. Errors: the directory does not exist
  // or cannot be written.
  Status Save(const std::string& path) const;
  // The default cache path (see above); empty when the user has no home directory to keep it.
  static std::string DefaultPath();
  // Whether `dir` may hold the cache: a directory of the effective user that nobody else can
  // write. Errors say which and how to fix it.
  static Status CheckCacheDirectory(const std::string& dir);
  // Creates the default path's directories where missing (mode 0700) and checks the one
  // holding the file with CheckCacheDirectory.
  static Status PrepareCacheDirectory(const std::string& path);
  // A description of the running machine, as machine() holds it.
  static std::string ThisMachine();

 private:
  static Status WriteAtomically(const std::string& path, const std::string& text);
  std::vector<CalibrationEntry> entries_;
  std::string machine_, measured_at_, source_;
};

// The endpoint spelling of a memory node ("dram:0") as calibration entries use it.
TIERFLOW_EXPORT std::string CalibrationEndpoint(TierKind tier, int node);

}  // namespace tierflow
