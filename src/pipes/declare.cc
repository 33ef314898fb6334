// SPDX-License-Identifier: Apache-2.0
// Declaring locators: each is checked and acquired here, so that a pipe never finds out later.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "tierflow/size.h"

namespace tierflow {

namespace {

using detail::LocatorImpl;

std::string TierList(const Topology& t) {
  std::string out;
  for (const NumaNode& n : t.nodes()) {
    out += fmt::format("{}{} (node {})", out.empty() ? "" : ", ", TierKindName(n.kind), n.os_index);
  }
  return out;
}

}  // namespace

std::uint32_t PipeRuntime::Impl::MemoryMechanisms() const {
  std::uint32_t bits = MechanismBit(Mechanism::kCpu) | MechanismBit(Mechanism::kUringRead) |
                       MechanismBit(Mechanism::kUringWrite);
  if (dsa) bits |= MechanismBit(Mechanism::kDsa);
  return bits;
}

Result<Locator> PipeRuntime::Impl::MakeMemory(const NumaNode& node, std::size_t size,
                                              LocatorKind kind, const char* prefix) const {
  if (size == 0) {
    return Status::InvalidArgument(
        fmt::format("{} memory of 0 bytes: give a size (e.g. {}:{}:64MiB)", TierKindName(node.kind),
                    TierKindName(node.kind), node.os_index));
  }
  auto impl = std::make_shared<LocatorImpl>();
  Result<Buffer> b = Allocate(node.os_index, size, &impl->modelled);
  if (!b.ok()) return b.status();
  impl->kind = kind;
  impl->buffer = std::move(*b);
  impl->data = impl->buffer.data();
  impl->capacity = size;
  impl->alignment = 4096;
  impl->tier = node.kind;
  impl->node = node.os_index;
  impl->mechanisms = MemoryMechanisms();
  impl->name =
      fmt::format("{}{}:{}:{}", prefix, TierKindName(node.kind), node.os_index, FormatSize(size));
  return detail::LocatorAccess::Make(std::move(impl));
}

Result<Locator> PipeRuntime::Node(int node, std::size_t size) {
  Result<const NumaNode*> n = impl_->topology.FindNode(node);
  if (!n.ok()) return n.status();
  return impl_->MakeMemory(**n, size, LocatorKind::kMemory, "");
}

std::vector<TierKind> detail::TiersPresent(const Topology& t,
                                           std::initializer_list<TierKind> order) {
  std::vector<TierKind> out;
  for (TierKind k : order) {
    if (!t.NodesOfKind(k).empty()) out.push_back(k);
  }
  return out;
}

Result<const NumaNode*> detail::TierNode(const Topology& t, TierKind tier, int near_node) {
  if (t.NodesOfKind(tier).empty()) {
    return Status::NotFound(fmt::format("{} memory: the topology ({}) has no {} node; it has {}",
                                        TierKindName(tier), t.source(), TierKindName(tier),
                                        TierList(t)));
  }
  if (near_node < 0) near_node = t.nodes().front().os_index;
  return t.NearestOfKind(near_node, tier);
}

Result<Locator> PipeRuntime::Memory(TierKind tier, int near_node, std::size_t size) {
  Result<const NumaNode*> n = detail::TierNode(impl_->topology, tier, near_node);
  if (!n.ok()) return n.status();
  return impl_->MakeMemory(**n, size, LocatorKind::kMemory, "");
}

Result<Locator> PipeRuntime::Staging(TierKind tier, int near_node, std::size_t size) {
  Result<const NumaNode*> n = detail::TierNode(impl_->topology, tier, near_node);
  if (!n.ok()) return n.status();
  return impl_->MakeMemory(**n, size, LocatorKind::kStaging, "staging:");
}

Result<Locator> PipeRuntime::Borrow(void* data, std::size_t size, int node) {
  if (data == nullptr || size == 0) {
    return Status::InvalidArgument("a borrowed locator needs memory: a pointer and a size above 0");
  }
  const NumaNode* n = node >= 0 ? impl_->topology.node(node) : nullptr;
  if (node >= 0 && n == nullptr) return impl_->topology.FindNode(node).status();
  auto impl = std::make_shared<LocatorImpl>();
  impl->kind = LocatorKind::kBorrowed;
  impl->data = static_cast<std::byte*>(data);
  impl->capacity = size;
  impl->alignment = std::size_t{1} << __builtin_ctzll(reinterpret_cast<std::uintptr_t>(data));
  impl->tier = n != nullptr ? n->kind : TierKind::kDram;
  impl->node = node;
  impl->mechanisms = impl_->MemoryMechanisms();
  impl->name =
      fmt::format("borrowed:{}:{}", node >= 0 ? fmt::format("{}", node) : "?", FormatSize(size));
  return detail::LocatorAccess::Make(std::move(impl));
}

}  // namespace tierflow
