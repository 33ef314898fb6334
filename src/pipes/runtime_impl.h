// SPDX-License-Identifier: Apache-2.0
// What a PipeRuntime holds. Private to the pipes component.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "tierflow/buffer.h"
#include "tierflow/calibration.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/dsa_model.h"
#include "tierflow/pipe_runtime.h"
#include "tierflow/topology.h"
#include "tierflow/uring_engine.h"

namespace tierflow {

namespace detail {
struct LocatorImpl;    // pipes/locator_impl.h
struct ModelledUsage;  // pipes/tiered.h
}  // namespace detail

struct [[gnu::visibility("hidden")]] PipeRuntime::Impl {
  PipeRuntimeOptions options;
  Topology topology;  // planned for
  // The memory engines hops use: the caller's (PipeRuntimeOptions::engines) or the runtime's
  // own, below. Mechanism::kCpu runs on `cpu`, Mechanism::kDsa on `dsa` (an offload engine).
  Engine* cpu = nullptr;
  Engine* dsa = nullptr;
  std::unique_ptr<CpuEngine> own_cpu;
  std::shared_ptr<DsaDeviceModel> dsa_model;
  std::unique_ptr<DsaEngine> own_dsa;
  std::string dsa_note;  // why there is no offload engine, or that it is a model
  std::unique_ptr<IoUringEngine> uring;
  mutable std::mutex calibration_mu;
  Calibration calibration;
  std::string calibration_note;

  // Memory of `size` bytes on `node` of the planning topology: on that node when it is this
  // machine's, on node 0 (modelled) when model_placement allows.
  Result<Buffer> Allocate(int node, std::size_t size, bool* modelled) const;
  // What can reach this runtime's memory: the CPU, io_uring, and DSA when there is an engine.
  std::uint32_t MemoryMechanisms() const;
  // Makes `l` a file locator over `w`, the window of the file open as `fd` and named `path`:
  // its direct-I/O alignment, tier and mechanisms for `mode`, and for a writing mode a
  // descriptor of its own (PipeRuntime::Release gives back its blocks).
  void FileLeaf(detail::LocatorImpl & l, int fd, FileWindow w, const std::string& path,
                FileMode mode) const;
  // A memory or staging locator of `size` bytes on `node`, named prefix + "dram:0:64MiB".
  Result<Locator> MakeMemory(const NumaNode& node, std::size_t size, LocatorKind kind,
                             const char* prefix) const;
  // What tiered areas placed on memory standing in for absent nodes (their occupancy).
  std::shared_ptr<detail::ModelledUsage> modelled_usage;
  Calibration CalibrationCopy() const {
    std::lock_guard lock(calibration_mu);
    return calibration;
  }
};

namespace detail {
// The node of `tier` nearest `near_node` (-1: the topology's first node's nearest). Errors:
// the topology has no node of that tier (the message lists what it has).
Result<const NumaNode*> TierNode(const Topology& t, TierKind tier, int near_node);
// Of the memory tiers in `order`, those the topology has a node of.
std::vector<TierKind> TiersPresent(const Topology& t, std::initializer_list<TierKind> order);
}  // namespace detail

}  // namespace tierflow
