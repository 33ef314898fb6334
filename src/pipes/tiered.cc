// SPDX-License-Identifier: Apache-2.0
// Tiered areas: extents placed on the first stage with room when first written.
#include "pipes/tiered.h"

#include <sys/mman.h>
#include <sys/statvfs.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "pipes/locator_impl.h"
#include "tierflow/size.h"

namespace tierflow::detail {

namespace {

constexpr std::size_t kMaxSwitches = 64;  // the latest kept; older ones counted

// A file system's occupancy were `extra` more bytes written to it.
Result<double> FileSystemOccupancy(const std::string& dir, std::uint64_t extra) {
  struct statvfs v {};
  if (statvfs(dir.c_str(), &v) != 0 || v.f_blocks == 0) {
    return Status::IoError(
        fmt::format("cannot read the space of {}: {}", dir, std::strerror(errno)));
  }
  // As df: what is used over what is used or available to an unprivileged writer.
  const double unit = static_cast<double>(v.f_frsize);
  const double used = static_cast<double>(v.f_blocks - v.f_bfree) * unit;
  const double avail = static_cast<double>(v.f_bavail) * unit;
  return (used + static_cast<double>(extra)) / std::max(used + avail, 1.0);
}

}  // namespace

TieredArea::TieredArea(const PipeRuntime::Impl* rt, std::uint64_t capacity, std::uint64_t extent,
                       std::vector<TieredStageImpl> stages, std::shared_ptr<ModelledUsage> modelled)
    : capacity_(capacity),
      extent_(extent),
      stages_(std::move(stages)),
      modelled_(std::move(modelled)),
      rt_(rt),
      extents_((capacity + extent - 1) / extent) {}

TieredArea::~TieredArea() {
  for (Extent& e : extents_) Forget(e);
}

// Why stage `s` cannot take one more extent now ("" when it can); records its occupancy.
std::string TieredArea::Refusal(TieredStageImpl& s) {
  if (s.limit != 0 && s.placed + extent_ > s.limit) {
    return fmt::format("holds its limit of {}", FormatSize(s.limit));
  }
  const LocatorImpl& leaf = *LocatorAccess::Get(s.leaf);
  if (leaf.is_file()) {
    Result<double> occ = FileSystemOccupancy(s.directory, extent_);
    if (!occ.ok()) return occ.status().message();
    s.occupancy = *occ;
  } else if (leaf.modelled) {
    std::lock_guard lock(modelled_->mu);
    s.occupancy = static_cast<double>(modelled_->bytes[leaf.node] + extent_) /
                  static_cast<double>(std::max<std::uint64_t>(s.capacity, 1));
  } else {
    Result<NodeMemory> m = QueryNodeMemory(leaf.node);
    if (!m.ok()) return m.status().message();
    s.occupancy =
        static_cast<double>(m->total_bytes - std::min(m->free_bytes, m->total_bytes) + extent_) /
        static_cast<double>(std::max<std::uint64_t>(m->total_bytes, 1));
  }
  if (s.occupancy > s.occupancy_limit) {
    return fmt::format("{:.1f}% occupancy with one more extent, above the limit of {:g}%",
                       s.occupancy * 100, s.occupancy_limit * 100);
  }
  return "";
}

// The stage for the extent at `first_byte`: the first that can take it. A change of stage
// from the last placement is recorded with the reason the earlier stages gave.
Result<std::size_t> TieredArea::Choose(std::uint64_t first_byte) {
  std::string reasons;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    TieredStageImpl& s = stages_[i];
    std::string why = Refusal(s);
    if (why.empty()) {
      s.state = "taking extents";
      if (last_stage_ != static_cast<int>(i)) {
        if (switches_.size() == kMaxSwitches) {
          switches_.erase(switches_.begin());
          ++switches_dropped_;
        }
        switches_.push_back(fmt::format("from byte {} on: {}{}", first_byte, s.label,
                                        reasons.empty() ? "" : " (" + reasons + ")"));
        last_stage_ = static_cast<int>(i);
      }
      return i;
    }
    s.state = why;
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", s.label, why);
  }
  return Status::OutOfMemory(
      fmt::format("no stage of the tiered area can take bytes from {} on ({}): release extents "
                  "no longer needed (PipeRuntime::Release), add a directory or raise the "
                  "occupancy limit or tier limits (TieredOptions)",
                  first_byte, reasons));
}

Status TieredArea::Place(Extent& e, std::size_t stage) {
  TieredStageImpl& s = stages_[stage];
  const LocatorImpl& leaf = *LocatorAccess::Get(s.leaf);
  if (leaf.is_file()) {
    if (!s.free_offsets.empty()) {
      e.file_offset = s.free_offsets.back();
      s.free_offsets.pop_back();
    } else {
      e.file_offset = s.file_next;
      s.file_next += extent_;
    }
  } else {
    bool modelled = false;
    Result<Buffer> b = rt_->Allocate(leaf.node, extent_, &modelled);
    if (!b.ok()) return b.status();
    e.memory = std::move(*b);
    if (modelled) {
      std::lock_guard lock(modelled_->mu);
      modelled_->bytes[leaf.node] += extent_;
    }
  }
  e.stage = static_cast<int>(stage);
  s.placed += extent_;
  return Status::Ok();
}

// Gives an extent's space back: memory freed, file blocks punched out for the next one.
void TieredArea::Forget(Extent& e) {
  if (e.stage < 0) return;
  TieredStageImpl& s = stages_[e.stage];
  const LocatorImpl& leaf = *LocatorAccess::Get(s.leaf);
  if (leaf.is_file()) {
    // Best effort: a file system without hole punching keeps the blocks until the area goes.
    fallocate(leaf.file->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              static_cast<off_t>(e.file_offset), static_cast<off_t>(extent_));
    s.free_offsets.push_back(e.file_offset);
  } else {
    if (leaf.modelled) {
      std::lock_guard lock(modelled_->mu);
      modelled_->bytes[leaf.node] -= extent_;
    }
    e.memory = Buffer();
  }
  s.placed -= extent_;
  e.stage = -1;
}

std::byte* TieredArea::Address(const Extent& e, std::uint64_t within) const {
  const LocatorImpl& leaf = *LocatorAccess::Get(stages_[e.stage].leaf);
  return leaf.is_file() ? leaf.window.at(e.file_offset + within) : e.memory.data() + within;
}

Result<TieredArea::Spot> TieredArea::ForWrite(std::uint64_t offset, std::uint64_t len) {
  std::lock_guard lock(mu_);
  Extent& e = extents_[offset / extent_];
  if (e.stage < 0) {
    Result<std::size_t> stage = Choose(offset / extent_ * extent_);
    if (!stage.ok()) return stage.status();
    if (Status s = Place(e, *stage); !s.ok()) return s;
  }
  const std::uint64_t within = offset % extent_;
  return Spot{static_cast<std::size_t>(e.stage), Address(e, within),
              std::min({len, extent_ - within, capacity_ - offset})};
}

Result<TieredArea::Spot> TieredArea::ForRead(std::uint64_t offset, std::uint64_t len) const {
  std::lock_guard lock(mu_);
  const Extent& e = extents_[offset / extent_];
  if (e.stage < 0) {
    const std::uint64_t first = offset / extent_ * extent_;
    return Status::InvalidArgument(fmt::format(
        "bytes [{}, {}) of the tiered area were never written (or were released): read only "
        "what a transfer wrote",
        first, std::min(first + extent_, capacity_)));
  }
  const std::uint64_t within = offset % extent_;
  return Spot{static_cast<std::size_t>(e.stage), Address(e, within),
              std::min({len, extent_ - within, capacity_ - offset})};
}

Status TieredArea::Release(std::uint64_t offset, std::uint64_t len) {
  if (offset > capacity_ || len > capacity_ - offset) {
    return Status::InvalidArgument(fmt::format(
        "release of [{}, +{}) is beyond the tiered area's {} bytes", offset, len, capacity_));
  }
  std::lock_guard lock(mu_);
  const std::uint64_t end = offset + len;
  for (std::uint64_t i = (offset + extent_ - 1) / extent_; i < extents_.size(); ++i) {
    if (std::min((i + 1) * extent_, capacity_) > end) break;  // not wholly inside
    Forget(extents_[i]);
  }
  return Status::Ok();
}

std::vector<TieredStage> TieredArea::State() const {
  std::lock_guard lock(mu_);
  std::vector<TieredStage> out;
  for (const TieredStageImpl& s : stages_) {
    out.push_back(
        {s.label, s.placed, s.limit, s.occupancy, LocatorAccess::Get(s.leaf)->modelled, s.state});
  }
  return out;
}

std::vector<std::string> TieredArea::Switches() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  if (switches_dropped_ > 0) {
    out.push_back(fmt::format("({} earlier switches not kept)", switches_dropped_));
  }
  out.insert(out.end(), switches_.begin(), switches_.end());
  return out;
}

}  // namespace tierflow::detail
