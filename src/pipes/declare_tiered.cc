// SPDX-License-Identifier: Apache-2.0
// Declaring tiered areas: the stages found from the topology and the directories given,
// ranked by calibration, checked here so that a transfer never finds out later.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/own_file.h"
#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "pipes/tiered.h"
#include "tierflow/size.h"

namespace tierflow {

namespace {

using detail::LocatorAccess;
using detail::LocatorImpl;
using detail::TieredStageImpl;
using detail::TierNode;

constexpr std::uint64_t kDefaultExtent = 8ull << 20;
constexpr std::uint64_t kMaxExtents = 1ull << 24;  // the placement table stays under ~1 GiB

Status CheckOptions(const TieredOptions& o, std::uint64_t extent) {
  if (o.capacity == 0) {
    return Status::InvalidArgument("a tiered area needs a capacity: TieredOptions::capacity");
  }
  if (extent % 4096 != 0) {
    return Status::InvalidArgument(fmt::format(
        "TieredOptions::extent_bytes {} is not a multiple of 4096: give e.g. 8 MiB", extent));
  }
  std::vector<double> limits{o.occupancy_limit};
  for (const auto& [tier, limit] : o.occupancy_limits) limits.push_back(limit);
  for (double limit : limits) {
    if (!(limit > 0 && limit <= 1)) {
      return Status::InvalidArgument(
          fmt::format("an occupancy limit of {} is outside (0, 1]: give the fraction a stage may "
                      "fill, e.g. 0.9 (TieredOptions::occupancy_limit, occupancy_limits)",
                      limit));
    }
  }
  if (o.capacity > kMaxExtents * extent) {
    return Status::InvalidArgument(
        fmt::format("a tiered area of {} in extents of {} has more than {} extents: raise "
                    "TieredOptions::extent_bytes",
                    FormatSize(o.capacity), FormatSize(extent), kMaxExtents));
  }
  return Status::Ok();
}

// The memory tiers asked for, or every one the topology has (HBM, DRAM, CXL in that order).
Result<std::vector<TierKind>> StageTiers(const Topology& t, const TieredOptions& o) {
  if (o.tiers.empty()) {
    return detail::TiersPresent(t, {TierKind::kHbm, TierKind::kDram, TierKind::kCxl});
  }
  for (std::size_t i = 0; i < o.tiers.size(); ++i) {
    const TierKind k = o.tiers[i];
    if (k != TierKind::kDram && k != TierKind::kHbm && k != TierKind::kCxl) {
      return Status::InvalidArgument(fmt::format(
          "TieredOptions::tiers names {}: stages are memory tiers (dram, hbm, cxl); files go "
          "in TieredOptions::directories",
          TierKindName(k)));
    }
    if (std::find(o.tiers.begin(), o.tiers.begin() + i, k) != o.tiers.begin() + i) {
      return Status::InvalidArgument(
          fmt::format("TieredOptions::tiers names {} twice: name each tier once", TierKindName(k)));
    }
  }
  return o.tiers;
}

std::uint64_t LimitOf(const TieredOptions& o, TierKind k) {
  for (const auto& [tier, bytes] : o.tier_limits) {
    if (tier == k) return bytes;
  }
  return 0;
}

double OccupancyLimitOf(const TieredOptions& o, TierKind k) {
  for (const auto& [tier, limit] : o.occupancy_limits) {
    if (tier == k) return limit;
  }
  return o.occupancy_limit;
}

// Limits are for stages only: a limit on a tier that is none is a mistake worth naming.
Status CheckLimitTiers(const TieredOptions& o, const std::vector<TierKind>& tiers) {
  std::vector<std::pair<TierKind, const char*>> named;
  for (const auto& l : o.tier_limits) named.emplace_back(l.first, "tier_limits");
  for (const auto& l : o.occupancy_limits) named.emplace_back(l.first, "occupancy_limits");
  for (const auto& [tier, field] : named) {
    const bool files = tier == TierKind::kStorage && !o.directories.empty();
    if (!files && std::find(tiers.begin(), tiers.end(), tier) == tiers.end()) {
      return Status::InvalidArgument(
          fmt::format("TieredOptions::{} names {}, which is not a stage of the area: limit "
                      "only the tiers it uses",
                      field, TierKindName(tier)));
    }
  }
  return Status::Ok();
}

// A stage's leaf for planning: memory of a tier's node that holds no memory itself (extents
// bring their own), or the unnamed file of a directory.
LocatorImpl StageBase(std::uint64_t capacity) {
  LocatorImpl l;
  l.capacity = capacity;
  l.alignment = 4096;
  l.stage = true;
  return l;
}

Result<TieredStageImpl> MemoryStage(const PipeRuntime::Impl& rt, TierKind k, int near,
                                    const TieredOptions& o, std::uint32_t mechanisms) {
  Result<const NumaNode*> n = TierNode(rt.topology, k, near);
  if (!n.ok()) return n.status();
  auto leaf = std::make_shared<LocatorImpl>(StageBase(o.capacity));
  leaf->kind = LocatorKind::kMemory;
  leaf->tier = k;
  leaf->node = (*n)->os_index;
  leaf->mechanisms = mechanisms;
  leaf->modelled = !rt.topology.is_this_system();
  if (leaf->modelled && !rt.options.model_placement) {
    return Status::Unsupported(
        fmt::format("a tiered area on the topology read from {} needs "
                    "PipeRuntimeOptions::model_placement to stand its memory in on this machine",
                    rt.topology.source()));
  }
  leaf->name = fmt::format("{}:{}", TierKindName(k), leaf->node);
  TieredStageImpl s;
  s.label = leaf->name;
  s.capacity = (*n)->capacity_bytes;
  s.limit = LimitOf(o, k);
  s.occupancy_limit = OccupancyLimitOf(o, k);
  s.leaf = detail::LocatorAccess::Make(std::move(leaf));
  return s;
}

Result<TieredStageImpl> FileStage(PipeRuntime::Impl& rt, const std::string& dir,
                                  const TieredOptions& o) {
  Result<int> fd = UnnamedFile(dir, "a tiered area");
  if (!fd.ok()) return fd.status();
  const detail::SharedFd owned{*fd};  // closed on return: the leaf keeps a descriptor of its own
  const std::string path = dir + "/(tiered area file)";
  Result<FileWindow> w = rt.uring->OpenDescriptor(*fd, path, {FileAccess::kReadWrite, o.capacity});
  if (!w.ok()) return w.status();
  TieredStageImpl s;
  s.directory = dir;
  s.label = "file in " + dir;
  s.occupancy_limit = OccupancyLimitOf(o, TierKind::kStorage);
  auto leaf = std::make_shared<LocatorImpl>(StageBase(o.capacity));
  rt.FileLeaf(*leaf, *fd, std::move(*w), path, FileMode::kCreate);
  leaf->name = s.label;
  s.leaf = detail::LocatorAccess::Make(std::move(leaf));
  return s;
}

// Memory stages ranked by the calibrated bandwidth of writing to them from DRAM, where every
// one has a figure; otherwise left in preference order. Returns what the plan notes say.
std::string Rank(const PipeRuntime::Impl& rt, int near, std::vector<TieredStageImpl>& stages) {
  const Calibration cal = rt.CalibrationCopy();
  Result<const NumaNode*> dram = TierNode(rt.topology, TierKind::kDram, near);
  const std::string from = CalibrationEndpoint(TierKind::kDram, dram.ok() ? (*dram)->os_index : 0);
  std::vector<std::pair<double, TieredStageImpl>> ranked;
  bool all = true;
  for (TieredStageImpl& s : stages) {
    const std::string to = LocatorAccess::Get(s.leaf)->Endpoint();
    double gbps = 0;
    for (Mechanism m : {Mechanism::kCpu, Mechanism::kDsa}) {
      if (auto e = cal.Find(m, from, to)) gbps = std::max(gbps, e->gbps);
    }
    all = all && gbps > 0;
    ranked.emplace_back(gbps, std::move(s));
  }
  if (all) {
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
  }
  std::vector<std::string> parts;
  stages.clear();
  for (auto& [gbps, s] : ranked) {
    parts.push_back(gbps > 0 ? fmt::format("{} {:.2f} GB/s", s.label, gbps) : s.label);
    stages.push_back(std::move(s));
  }
  return fmt::format("memory stages {} from {} ({})",
                     all ? "ranked by calibration" : "in preference order, uncalibrated", from,
                     fmt::join(parts, ", "));
}

Locator MakeTiered(const PipeRuntime::Impl& rt, const TieredOptions& o, std::uint64_t extent,
                   std::vector<TieredStageImpl> stages, std::string note) {
  auto impl = std::make_shared<LocatorImpl>();
  impl->kind = LocatorKind::kTiered;
  impl->capacity = o.capacity;
  impl->alignment = 4096;
  impl->mechanisms = ~0u;
  std::vector<std::string> dirs;
  for (const TieredStageImpl& s : stages) {
    const LocatorImpl& leaf = *LocatorAccess::Get(s.leaf);
    impl->alignment = std::min(impl->alignment, leaf.alignment);
    impl->mechanisms &= leaf.mechanisms;
    impl->modelled = impl->modelled || leaf.modelled;
    impl->members.push_back(s.leaf);
    if (!s.directory.empty()) dirs.push_back(s.directory);
  }
  impl->tier = impl->members.front().tier();
  impl->node = impl->members.front().node();
  impl->name = fmt::format("tiered:{}{}{}", FormatSize(o.capacity), dirs.empty() ? "" : ":",
                           fmt::join(dirs, ","));
  std::vector<std::string> limits;
  for (const TieredStageImpl& s : stages) {
    limits.push_back(fmt::format("{} {:g}%{}", s.label, s.occupancy_limit * 100,
                                 s.limit != 0 ? " or " + FormatSize(s.limit) : ""));
  }
  impl->tiered = std::make_shared<detail::TieredArea>(&rt, o.capacity, extent, std::move(stages),
                                                      rt.modelled_usage);
  impl->tiered->note = fmt::format(
      "{}: extents of {} placed on first write on the first stage with room (limits: {}); {}",
      impl->name, FormatSize(extent), fmt::join(limits, ", "), note);
  return detail::LocatorAccess::Make(std::move(impl));
}

detail::TieredArea* AreaOf(const Locator& l) {
  return l.kind() == LocatorKind::kTiered ? LocatorAccess::Get(l)->tiered.get() : nullptr;
}

Status NotTiered(const Locator& l, const char* call) {
  if (!l.valid())
    return Status::InvalidArgument(fmt::format("PipeRuntime::{} of no locator", call));
  return Status::InvalidArgument(
      fmt::format("PipeRuntime::{} takes a tiered area (PipeRuntime::Tiered); {} is {}", call,
                  l.valid() ? l.name() : "no locator", LocatorKindName(l.kind())));
}

}  // namespace

Result<Locator> PipeRuntime::Tiered(const TieredOptions& o) {
  const std::uint64_t extent = o.extent_bytes != 0 ? o.extent_bytes : kDefaultExtent;
  if (Status s = CheckOptions(o, extent); !s.ok()) return s;
  Result<std::vector<TierKind>> tiers = StageTiers(impl_->topology, o);
  if (!tiers.ok()) return tiers.status();
  if (Status s = CheckLimitTiers(o, *tiers); !s.ok()) return s;
  std::vector<TieredStageImpl> stages;
  for (TierKind k : *tiers) {
    Result<TieredStageImpl> s = MemoryStage(*impl_, k, o.near_node, o, impl_->MemoryMechanisms());
    if (!s.ok()) return s.status();
    stages.push_back(std::move(*s));
  }
  std::string note = stages.empty() ? "no memory stage" : Rank(*impl_, o.near_node, stages);
  for (const std::string& dir : o.directories) {
    Result<TieredStageImpl> s = FileStage(*impl_, dir, o);
    if (!s.ok()) return s.status();
    stages.push_back(std::move(*s));
  }
  if (stages.empty()) {
    return Status::InvalidArgument(
        "a tiered area needs a stage: a memory tier (TieredOptions::tiers) or a directory");
  }
  return MakeTiered(*impl_, o, extent, std::move(stages), std::move(note));
}

namespace {

// Files declared for writing: their blocks punched out. Memory the runtime allocated: its
// whole pages inside the range discarded.
Status ReleasePlain(const Locator& l, std::uint64_t offset, std::uint64_t length) {
  const LocatorImpl& impl = *LocatorAccess::Get(l);
  if (impl.is_file()) {
    if (!impl.file) {
      return Status::InvalidArgument(fmt::format(
          "{} was declared for reading: only files declared for writing give blocks back",
          impl.name));
    }
    const auto at = static_cast<off_t>(impl.file_offset + offset);
    struct stat st {};
    if (fstat(impl.file->fd, &st) == 0 && at + static_cast<off_t>(length) >= st.st_size) {
      // The tail: cut off, so that the file is again as one never written there (writes into
      // holes can be slower than writes that extend a file).
      if (at < st.st_size && ftruncate(impl.file->fd, at) != 0) {
        return Status::IoError(
            fmt::format("cannot shorten {}: {}", impl.path, std::strerror(errno)));
      }
      return Status::Ok();
    }
    if (fallocate(impl.file->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at,
                  static_cast<off_t>(length)) != 0) {
      return errno == EOPNOTSUPP
                 ? Status::Unsupported(fmt::format(
                       "the file system of {} cannot give blocks back (no hole punching)",
                       impl.path))
                 : Status::IoError(fmt::format("cannot give back blocks of {}: {}", impl.path,
                                               std::strerror(errno)));
    }
    return Status::Ok();
  }
  const std::uintptr_t page = 4096;
  const auto begin =
      (reinterpret_cast<std::uintptr_t>(impl.data + offset) + page - 1) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(impl.data + offset + length) & ~(page - 1);
  if (end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) {
    return Status::IoError(
        fmt::format("cannot give back pages of {}: {}", impl.name, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace

Status PipeRuntime::Release(const Locator& l, std::uint64_t offset, std::uint64_t length) {
  if (!l.valid()) return Status::InvalidArgument("PipeRuntime::Release of no locator");
  if (detail::TieredArea* area = AreaOf(l)) return area->Release(offset, length);
  const LocatorKind k = l.kind();
  if (k != LocatorKind::kFile && k != LocatorKind::kMemory && k != LocatorKind::kStaging) {
    return Status::InvalidArgument(
        fmt::format("PipeRuntime::Release gives back a tiered area's extents, a file's blocks "
                    "or the runtime's memory; {} is {}",
                    l.name(), LocatorKindName(k)));
  }
  if (offset > l.capacity() || length > l.capacity() - offset) {
    return Status::InvalidArgument(fmt::format("release of [{}, +{}) is beyond {} ({} bytes)",
                                               offset, length, l.name(), l.capacity()));
  }
  return ReleasePlain(l, offset, length);
}

Result<std::vector<TieredStage>> PipeRuntime::TieredState(
    const Locator& tiered, std::vector<std::string>* switches) const {
  detail::TieredArea* area = AreaOf(tiered);
  if (area == nullptr) return NotTiered(tiered, "TieredState");
  if (switches != nullptr) *switches = area->Switches();
  return area->State();
}

}  // namespace tierflow
