// SPDX-License-Identifier: Apache-2.0
#include "tierflow/coherence.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "coherence/lines.h"
#include "common/fault_guard.h"

namespace tierflow {
namespace {

using coherence::Maintenance;

constexpr std::array<std::string_view, 6> kNames = {"auto",    "clwb",    "clflushopt",
                                                    "clflush", "dc-cvac", "dc-civac"};

std::string Which(std::size_t index) {
  return index == SIZE_MAX ? "the range" : fmt::format("range {}", index);
}

// Inline and allocation-free when the range is fine: it runs once per range of a list.
inline Status CheckRange(Maintenance m, std::size_t index, const MemorySpan& r) {
  const auto begin = reinterpret_cast<std::uintptr_t>(r.data);
  if (r.size == 0 || (r.data != nullptr && begin + r.size >= begin)) [[likely]] {
    return Status::Ok();
  }
  const std::string which = Which(index);
  if (r.data == nullptr) {
    return Status::InvalidArgument(fmt::format("{}: {} is null with size {}; pass its address",
                                               coherence::MaintenanceName(m), which, r.size));
  }
  return Status::InvalidArgument(fmt::format(
      "{}: {} at 0x{:x} with size {} wraps around the address space; pass its real size",
      coherence::MaintenanceName(m), which, begin, r.size));
}

Status Fault(Maintenance m, const MemoryFault& fault, std::span<const MemorySpan> ranges,
             std::size_t index) {
  const MemorySpan& r = ranges[index];
  const std::string name = ranges.size() == 1 ? "range" : fmt::format("range {}", index);
  const GuardedRange guarded[] = {{r.data, r.size, name.c_str(), false, 0}};
  MemoryFault one = fault;
  one.range = 0;
  one.address = std::max(fault.address, reinterpret_cast<std::uintptr_t>(r.data));
  return FaultError(coherence::MaintenanceName(m), one, guarded);
}

Status Run(Maintenance m, std::span<const MemorySpan> ranges, const CoherenceOptions& options) {
  coherence::LineLoop loop = coherence::ResolveQuickly(m, options.instruction);
  if (loop == nullptr) [[unlikely]] {  // an error, or called before the library's tables
    LineInstruction instruction;
    if (Status s = coherence::Resolve(m, options.instruction, &instruction); !s.ok()) return s;
    loop = coherence::LoopFor(instruction);
  }
  if (static_cast<unsigned>(options.fence) > static_cast<unsigned>(MaintenanceFence::kNone))
      [[unlikely]] {
    return Status::InvalidArgument(
        fmt::format("{}: unknown MaintenanceFence value {}; use kComplete, "
                    "kFence or kNone",
                    coherence::MaintenanceName(m), static_cast<unsigned>(options.fence)));
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (Status s = CheckRange(m, ranges.size() == 1 ? SIZE_MAX : i, ranges[i]); !s.ok()) return s;
  }
  static const bool handler_installed = InstallFaultHandler().ok();
  if (!handler_installed) [[unlikely]]
    return InstallFaultHandler();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    // A line that faults ends the loop through its fixup (coherence/lines.h): no sigsetjmp.
    if (coherence::RunLoop(loop, ranges[i].data, ranges[i].size) != 0) [[unlikely]] {
      return Fault(m, t_fixup_fault, ranges, i);
    }
  }
  if (options.fence == MaintenanceFence::kComplete) {
    coherence::CompleteNow();
  } else if (options.fence == MaintenanceFence::kFence) {
    coherence::FenceNow();
  }
  return Status::Ok();
}

Status RunOne(Maintenance m, const void* data, std::size_t size, const CoherenceOptions& o) {
  const MemorySpan one{data, size};
  return Run(m, std::span<const MemorySpan>(&one, 1), o);
}

}  // namespace

std::string_view LineInstructionName(LineInstruction instruction) {
  const auto i = static_cast<std::size_t>(instruction);
  return i < kNames.size() ? kNames[i] : "?";
}

Result<LineInstruction> ParseLineInstruction(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<LineInstruction>(i);
  }
  return Status::InvalidArgument(fmt::format("unknown cache-line instruction '{}'; use one of: {}",
                                             name, fmt::join(kNames, ", ")));
}

Status WriteBack(const void* data, std::size_t size, const CoherenceOptions& options) {
  return RunOne(Maintenance::kWriteBack, data, size, options);
}
Status WriteBack(std::span<const MemorySpan> ranges, const CoherenceOptions& options) {
  return Run(Maintenance::kWriteBack, ranges, options);
}
Status Invalidate(const void* data, std::size_t size, const CoherenceOptions& options) {
  return RunOne(Maintenance::kInvalidate, data, size, options);
}
Status Invalidate(std::span<const MemorySpan> ranges, const CoherenceOptions& options) {
  return Run(Maintenance::kInvalidate, ranges, options);
}
Status WriteBackInvalidate(const void* data, std::size_t size, const CoherenceOptions& options) {
  return RunOne(Maintenance::kWriteBackInvalidate, data, size, options);
}
Status WriteBackInvalidate(std::span<const MemorySpan> ranges, const CoherenceOptions& options) {
  return Run(Maintenance::kWriteBackInvalidate, ranges, options);
}

void Fence() { coherence::FenceNow(); }
void Complete() { coherence::CompleteNow(); }

}  // namespace tierflow
