// SPDX-License-Identifier: Apache-2.0
// The offloading cache's index of entries by source range. Several entries may start at the
// same address (a larger access next to a smaller entry that someone still holds or modifies),
// so an entry is known by (start, size).
//
// Entries are kept per size class (class c: sizes in [2^c, 2^(c+1))), each class in a hash
// table by the block of 2^(c+1) bytes its start lies in, the entries of one block in a list. An
// entry of class c that contains or overlaps an address starts less than 2^(c+1) bytes below
// it, so in that address's block or the one before: a search looks at two slots per class
// used, and an insertion allocates nothing (an ordered map per class cost a node allocation and
// about ten dependent loads per miss). An open-addressing table finds the largest entry
// starting at an exact address in one or two cache lines (most accesses name an entry's start:
// a chunk of a column, a block). Not thread-safe: the cache changes it under its exclusive
// lock and reads it under its shared lock.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cache/address_index.h"
#include "cache/entry_state.h"

namespace tierflow::cache {

class EntryIndex {
 public:
  using Entry = detail::CacheEntryState;

  // The entry containing [p, p+n) (the largest of those starting at p first), or null.
  Entry* FindContaining(std::uintptr_t p, std::size_t n) const;

  // Calls f(entry) for every entry overlapping [p, p+n); n == 0: every entry starting at p.
  // The caller makes sure p+n does not wrap. f must not change the index. No particular order.
  template <typename F>
  void ForEachOverlapping(std::uintptr_t p, std::size_t n, F&& f) const {
    const std::uintptr_t end = n == 0 ? p + 1 : p + n;
    auto visit = [&](Entry* e) {
      const auto start = reinterpret_cast<std::uintptr_t>(e->src);
      if (n == 0 ? start == p : start < end && start + e->size > p) f(e);
    };
    for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
      const int c = __builtin_ctzll(bits);
      const Class& k = by_class_[c];
      const std::uintptr_t reach = c < 63 ? (std::uintptr_t{2} << c) - 1 : UINTPTR_MAX;
      const std::uintptr_t first = BlockOf(n == 0 ? p : p - std::min(p, reach), c);
      const std::uintptr_t last = BlockOf(end - 1, c);
      if (BlockSpan(first, last, c) > k.entries) {  // fewer entries than blocks: look at all
        k.blocks.ForEachValue([&](Entry* head) { ForEachInList(head, visit); });
        continue;
      }
      for (std::uintptr_t b = first;; b += BlockBytes(c)) {
        ForEachInList(k.blocks.Find(KeyOf(b, c)), visit);
        if (b == last) break;
      }
    }
  }
  // Calls f(entry) for every entry, in no particular order. f must not change the index.
  template <typename F>
  void ForEach(F&& f) const {
    for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
      by_class_[__builtin_ctzll(bits)].blocks.ForEachValue(
          [&](Entry* head) { ForEachInList(head, f); });
    }
  }

  void Insert(Entry* e);
  void Erase(Entry* e);
  bool empty() const { return classes_used_ == 0; }
  // Changes with every Insert and Erase: a search repeated at the same version finds the same.
  std::uint64_t version() const { return version_; }

 private:
  struct Class {
    AddressIndex<Entry> blocks;  // KeyOf(block) -> the block's first entry (index_next: more)
    std::size_t entries = 0;
  };
  static constexpr int kClasses = 64;
  static int ClassOf(std::size_t size) { return 63 - __builtin_clzll(size); }
  static std::uintptr_t BlockBytes(int c) { return c < 63 ? std::uintptr_t{2} << c : 0; }
  // The start of the block holding address a (class 63: one block, the whole space).
  static std::uintptr_t BlockOf(std::uintptr_t a, int c) {
    return c < 63 ? a & ~(BlockBytes(c) - 1) : 0;
  }
  // A block's key in its class's table: its middle, never 0 (AddressIndex's empty key).
  static std::uintptr_t KeyOf(std::uintptr_t block, int c) {
    return block | (std::uintptr_t{1} << c);
  }
  static std::uintptr_t BlockSpan(std::uintptr_t first, std::uintptr_t last, int c) {
    return c < 63 ? ((last - first) >> (c + 1)) + 1 : 1;
  }
  template <typename F>
  static void ForEachInList(Entry* head, F&& f) {
    for (Entry* e = head; e != nullptr;) {
      Entry* next = e->index_next;  // read first: f may be the caller's collector
      f(e);
      e = next;
    }
  }
  // The largest entry starting at p, or null.
  Entry* LargestAt(std::uintptr_t p) const;

  std::array<Class, kClasses> by_class_;
  std::uint64_t classes_used_ = 0;  // bit c: by_class_[c] is not empty
  AddressIndex<Entry> by_start_;    // the largest entry of each start address
  std::uint64_t version_ = 0;
};

}  // namespace tierflow::cache
