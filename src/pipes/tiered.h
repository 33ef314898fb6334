// SPDX-License-Identifier: Apache-2.0
// A tiered area's placement: which stage holds each extent, decided when the extent is first
// written (the Data Pipes optimiser's choice of an intermediate tier, switching when a tier
// fills up). Private to the pipes component.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "tierflow/buffer.h"
#include "tierflow/locator.h"
#include "tierflow/pipe.h"
#include "tierflow/status.h"

namespace tierflow::detail {

// Bytes the tiered areas of one runtime placed on each node whose memory stands in for an
// absent one: their occupancy, since the machine cannot tell it. Shared with the areas, which
// may outlive the runtime.
struct ModelledUsage {
  std::mutex mu;
  std::map<int, std::uint64_t> bytes;  // node -> placed
};

struct TieredStageImpl {
  Locator leaf;                  // what pipes plan for: a memory stage (no memory) or a file
  std::string label;             // "hbm:8", "file in /var/tmp"
  std::string directory;         // file stages
  std::uint64_t capacity = 0;    // the node's bytes (memory stages), for modelled occupancy
  std::uint64_t limit = 0;       // TieredOptions::tier_limits (0: none)
  double occupancy_limit = 0.9;  // TieredOptions::occupancy_limit(s)
  std::uint64_t placed = 0;      // bytes of extents placed here now
  std::uint64_t file_next = 0;   // file stages: the next unused offset of the file
  std::vector<std::uint64_t> free_offsets;  // file stages: released extents' offsets
  double occupancy = 0;
  std::string state = "not needed yet";
};

class TieredArea {
 public:
  // Extents' memory comes from `rt` (PipeRuntime::Impl::Allocate), which must outlive every
  // transfer to or from the area (as the runtime's contract says).
  TieredArea(const PipeRuntime::Impl* rt, std::uint64_t capacity, std::uint64_t extent,
             std::vector<TieredStageImpl> stages, std::shared_ptr<ModelledUsage> modelled);
  ~TieredArea();
  TieredArea(const TieredArea&) = delete;
  TieredArea& operator=(const TieredArea&) = delete;

  // Where byte `offset` is: its stage, its address (memory, or the stage's file window), and
  // the bytes from there to the extent's end (at most `len`).
  struct Spot {
    std::size_t stage = 0;
    std::byte* address = nullptr;
    std::uint64_t len = 0;
  };
  // For a write: places the extent first if it has no stage yet. Errors: no stage can take it
  // (each stage's reason), memory or file space that cannot be had.
  Result<Spot> ForWrite(std::uint64_t offset, std::uint64_t len);
  // For a read. Errors: the extent was never written (or was released).
  Result<Spot> ForRead(std::uint64_t offset, std::uint64_t len) const;
  Status Release(std::uint64_t offset, std::uint64_t len);
  std::vector<TieredStage> State() const;
  std::vector<std::string> Switches() const;
  std::string note;  // for plans: the stages' order and why, the extent, the limit

 private:
  struct Extent {
    int stage = -1;
    std::uint64_t file_offset = 0;
    Buffer memory;
  };
  // Each under mu_.
  std::string Refusal(TieredStageImpl& s);
  Result<std::size_t> Choose(std::uint64_t first_byte);
  Status Place(Extent& e, std::size_t stage);
  void Forget(Extent& e);
  std::byte* Address(const Extent& e, std::uint64_t within) const;

  const std::uint64_t capacity_, extent_;
  std::vector<TieredStageImpl> stages_;
  std::shared_ptr<ModelledUsage> modelled_;
  const PipeRuntime::Impl* rt_;
  mutable std::mutex mu_;
  std::vector<Extent> extents_;
  int last_stage_ = -1;
  std::vector<std::string> switches_;
  std::uint64_t switches_dropped_ = 0;
};

}  // namespace tierflow::detail
