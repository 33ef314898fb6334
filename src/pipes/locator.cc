// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <fmt/format.h>

#include "pipes/locator_impl.h"
#include "tierflow/calibration.h"
#include "tierflow/locator.h"

namespace tierflow {

detail::SharedFd::~SharedFd() {
  if (fd >= 0) close(fd);
}

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
    case LocatorKind::kTiered:
      return "tiered";
  }
  return "?";
}

namespace {
// Every mechanism, in the order of the enum (a switch in MechanismName would let the compiler
// check coverage, but parsing needs the list).
constexpr Mechanism kMechanisms[] = {Mechanism::kCpu, Mechanism::kDsa, Mechanism::kUringRead,
                                     Mechanism::kUringWrite, Mechanism::kCopyFileRange};
static_assert(std::size(kMechanisms) == static_cast<std::size_t>(Mechanism::kCopyFileRange) + 1,
              "kMechanisms lists every mechanism");
}  // namespace

std::string_view MechanismName(Mechanism m) {
  switch (m) {
    case Mechanism::kCpu:
      return "cpu";
    case Mechanism::kDsa:
      return "dsa";
    case Mechanism::kUringRead:
      return "io_uring-read";
    case Mechanism::kUringWrite:
      return "io_uring-write";
    case Mechanism::kCopyFileRange:
      return "copy_file_range";
  }
  return "?";
}

Result<Mechanism> ParseMechanism(std::string_view name) {
  std::string names;
  for (Mechanism m : kMechanisms) {
    if (MechanismName(m) == name) return m;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", MechanismName(m));
  }
  return Status::InvalidArgument(fmt::format("unknown mechanism '{}': use one of {}", name, names));
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
