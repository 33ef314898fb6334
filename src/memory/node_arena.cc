// SPDX-License-Identifier: Apache-2.0
#include "tierflow/node_arena.h"

#include <algorithm>

#include <fmt/format.h>

namespace tierflow {

struct NodeArena::Chunk {
  Buffer buffer;
  std::map<std::size_t, std::size_t> free;  // offset -> length
};

NodeArena::NodeArena(int node, std::size_t chunk, AllocOptions options)
    : node_(node), chunk_(Round(std::max(chunk, kUnit))), options_(options) {
  options_.prefault = true;
}

NodeArena::~NodeArena() = default;

void* NodeArena::Allocate(std::size_t size, Status* error) {
  const std::size_t need = Round(size);
  std::lock_guard lock(mu_);
  for (auto& c : chunks_) {
    for (auto it = c->free.begin(); it != c->free.end(); ++it) {
      if (it->second < need) continue;
      // From the block's end: the rest keeps the block's offset, so its map node stays where
      // it is (taking the front re-keyed the node, an extraction and an insertion per call).
      const std::size_t at = it->first + (it->second - need);
      if (it->second == need) {
        c->free.erase(it);
      } else {
        it->second -= need;
      }
      return c->buffer.data() + at;
    }
  }
  Result<Buffer> b = Buffer::OnNode(node_, std::max(chunk_, need), options_);
  if (!b.ok()) {
    if (error != nullptr) *error = b.status();
    return nullptr;
  }
  auto c = std::make_unique<Chunk>();
  c->buffer = std::move(*b);
  if (c->buffer.size() > need) c->free.emplace(need, c->buffer.size() - need);
  void* p = c->buffer.data();
  chunks_.push_back(std::move(c));
  return p;
}

void NodeArena::Free(void* p, std::size_t size) {
  const std::size_t len = Round(size);
  auto* b = static_cast<std::byte*>(p);
  std::lock_guard lock(mu_);
  for (auto& c : chunks_) {
    if (b < c->buffer.data() || b >= c->buffer.data() + c->buffer.size()) continue;
    const auto off = static_cast<std::size_t>(b - c->buffer.data());
    auto next = c->free.lower_bound(off);
    if (next != c->free.begin()) {  // merge with the preceding block
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += len;
        if (next != c->free.end() && off + len == next->first) {  // ... and the following
          prev->second += next->second;
          c->free.erase(next);
        }
        return;
      }
    }
    if (next != c->free.end() && off + len == next->first) {  // the following block grows down
      auto hint = std::next(next);
      auto block = c->free.extract(next);
      block.mapped() += len;
      block.key() = off;
      c->free.insert(hint, std::move(block));
      return;
    }
    c->free.emplace_hint(next, off, len);
    return;
  }
}

Status NodeArena::Reserve(std::size_t bytes) {
  std::lock_guard lock(mu_);
  std::size_t have = 0;
  for (const auto& c : chunks_) have += c->buffer.size();
  if (have >= bytes) return Status::Ok();
  // Check the whole amount first: taking chunk after chunk until the kernel refuses would
  // leave the machine without memory (and the OOM killer choosing).
  Result<NodeMemory> mem = QueryNodeMemory(node_);
  if (!mem.ok()) return mem.status();
  if (bytes - have > mem->free_bytes) {
    return Status::OutOfMemory(fmt::format(
        "{} more bytes wanted on NUMA node {}, which has {} bytes free: configure a smaller "
        "capacity or free memory",
        bytes - have, node_, mem->free_bytes));
  }
  const std::size_t before = chunks_.size();
  while (have < bytes) {
    const std::size_t size = Round(std::min(chunk_, bytes - have));
    Result<Buffer> b = Buffer::OnNode(node_, size, options_);
    if (!b.ok()) {
      chunks_.resize(before);  // give back what this call took
      return b.status();
    }
    auto c = std::make_unique<Chunk>();
    c->buffer = std::move(*b);
    c->free.emplace(0, c->buffer.size());
    have += c->buffer.size();
    chunks_.push_back(std::move(c));
  }
  return Status::Ok();
}

std::size_t NodeArena::reserved() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& c : chunks_) n += c->buffer.size();
  return n;
}

}  // namespace tierflow
