// SPDX-License-Identifier: Apache-2.0
// Exact-start lookup of cache entries: an open-addressing hash table from a range's start
// address to its entry, next to the ordered map that answers "which entry contains this
// range". Most accesses name the start of an entry (a chunk of a column, a block), and a probe
// of one or two cache lines is far cheaper than walking a tree of thousands of nodes. Changed
// only under the cache's exclusive lock; read under the shared lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tierflow::cache {

template <typename Value>
class AddressIndex {
 public:
  AddressIndex() : slots_(16) {}

  Value* Find(std::uintptr_t key) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == key && s.value != nullptr) return s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  void Insert(std::uintptr_t key, Value* value) {
    if ((used_ + 1) * 2 > slots_.size()) Grow();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == kEmpty || (s.key == key && s.value == nullptr)) {
        if (s.key == kEmpty) ++used_;
        s.key = key;
        s.value = value;
        return;
      }
    }
  }
  // The value `key` points at, to read and set in one probe: null when it has none (a slot is
  // taken for it then; left null it stays absent, as after Erase).
  Value*& At(std::uintptr_t key) {
    for (;;) {
      const std::size_t mask = slots_.size() - 1;
      for (std::size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.key == key) return s.value;
        if (s.key != kEmpty) continue;
        if ((used_ + 1) * 2 > slots_.size()) break;  // grow first, then look again
        ++used_;
        s.key = key;
        return s.value;
      }
      Grow();
    }
  }
  // Points `key` at `value`, replacing the value it had (Insert would add a second slot).
  void Assign(std::uintptr_t key, Value* value) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == key && s.value != nullptr) {
        s.value = value;
        return;
      }
      if (s.key == kEmpty) break;
    }
    Insert(key, value);
  }
  // Calls f(value) for every live key, in no particular order. f must not change the index.
  template <typename F>
  void ForEachValue(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.value != nullptr) f(s.value);
    }
  }
  // Leaves a tombstone (key kept, value null) so that probes continue past it.
  void Erase(std::uintptr_t key) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == key && s.value != nullptr) {
        s.value = nullptr;
        return;
      }
      if (s.key == kEmpty) return;
    }
  }

 private:
  static constexpr std::uintptr_t kEmpty = 0;  // address 0 is never a cached source
  struct Slot {
    std::uintptr_t key = kEmpty;
    Value* value = nullptr;
  };
  static std::size_t Hash(std::uintptr_t key) {
    return static_cast<std::size_t>((key >> 4) * 0x9E3779B97F4A7C15ull >> 20);
  }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    std::size_t live = 0;
    for (const Slot& s : old) live += s.value != nullptr;
    std::size_t size = 16;
    while (size < live * 4) size *= 2;
    slots_.assign(size, Slot{});
    used_ = 0;
    for (const Slot& s : old) {
      if (s.value != nullptr) Insert(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  std::size_t used_ = 0;  // slots ever taken (live + tombstones)
};

}  // namespace tierflow::cache
