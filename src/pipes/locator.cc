// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "pipes/locator_impl.h"
#include "tierflow/calibration.h"
#include "tierflow/locator.h"

namespace tierflow {

std::string_view LocatorKindName(LocatorKind kind) {
  switch (kind) {
    case LocatorKind::kMemory:
      return "memory";
    case LocatorKind::kBorrowed:
      return "borrowed";
    case LocatorKind::kFile:
      return "file";
    case LocatorKind::kStaging:
      return "staging";
    case LocatorKind::kSpill:
      return "spill";
  }
  return "?";
}

namespace {
constexpr std::string_view kMechanismNames[kMechanismCount] = {"cpu", "dsa", "io_uring-read",
                                                               "io_uring-write", "copy_file_range"};
}

std::string_view MechanismName(Mechanism m) {
  return kMechanismNames[static_cast<unsigned>(m) % kMechanismCount];
}

Result<Mechanism> ParseMechanism(std::string_view name) {
  for (int i = 0; i < kMechanismCount; ++i) {
    if (kMechanismNames[i] == name) return static_cast<Mechanism>(i);
  }
  return Status::Invalid(fmt::format(
      "unknown mechanism '{}': use cpu, dsa, io_uring-read, io_uring-write or copy_file_range",
      name));
}

std::string_view FileModeName(FileMode mode) {
  switch (mode) {
    case FileMode::kRead:
      return "read";
    case FileMode::kCreate:
      return "create";
    case FileMode::kReplace:
      return "replace";
    case FileMode::kModify:
      return "modify";
  }
  return "?";
}

std::string detail::LocatorImpl::Endpoint() const {
  if (kind == LocatorKind::kFile) return "file";
  return CalibrationEndpoint(tier, node < 0 ? 0 : node);
}

namespace {
const std::string kEmpty;
const std::vector<Locator> kNoMembers;
}  // namespace

LocatorKind Locator::kind() const { return impl_ ? impl_->kind : LocatorKind::kMemory; }
const std::string& Locator::name() const { return impl_ ? impl_->name : kEmpty; }
std::uint64_t Locator::capacity() const { return impl_ ? impl_->capacity : 0; }
std::size_t Locator::alignment() const { return impl_ ? impl_->alignment : 1; }
TierKind Locator::tier() const { return impl_ ? impl_->tier : TierKind::kUnknown; }
int Locator::node() const { return impl_ ? impl_->node : -1; }
std::uint32_t Locator::mechanisms() const { return impl_ ? impl_->mechanisms : 0; }
bool Locator::is_file() const { return impl_ && impl_->is_file(); }
bool Locator::writable() const { return impl_ && impl_->writable; }
std::byte* Locator::data() const { return impl_ ? impl_->data : nullptr; }
const std::string& Locator::path() const { return impl_ ? impl_->path : kEmpty; }
std::uint64_t Locator::file_offset() const { return impl_ ? impl_->file_offset : 0; }
const std::vector<Locator>& Locator::members() const { return impl_ ? impl_->members : kNoMembers; }
bool Locator::modelled() const { return impl_ && impl_->modelled; }

}  // namespace tierflow
