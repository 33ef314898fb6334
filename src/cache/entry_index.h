// The offloading cache's index of entries by source range. Several entries may start at the
// same address (a larger access next to a smaller entry that someone still holds or modifies),
// so entries are keyed by (start, size).
//
// Entries are kept in one ordered map per size class (class c: sizes in [2^c, 2^(c+1))): an
// entry of class c that contains or overlaps an address starts less than 2^(c+1) bytes below
// it, so a search walks back only over that class's entries in that window, not over every
// smaller entry in between. An open-addressing table finds the largest entry starting at an
// exact address in one or two cache lines (most accesses name an entry's start: a chunk of a
// column, a block). Not thread-safe: the cache changes it under its exclusive lock and reads
// it under its shared lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
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
  // The caller makes sure p+n does not wrap. f must not change the index.
  template <typename F>
  void ForEachOverlapping(std::uintptr_t p, std::size_t n, F&& f) const {
    for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
      const int c = __builtin_ctzll(bits);
      const std::uintptr_t reach = c < 63 ? (std::uintptr_t{2} << c) - 1 : UINTPTR_MAX;
      const std::uintptr_t from = n == 0 ? p : p - std::min(p, reach);
      const std::uintptr_t end = n == 0 ? p + 1 : p + n;
      const Map& m = by_class_[c];
      for (auto it = m.lower_bound({from, 0}); it != m.end() && it->first.first < end; ++it) {
        if (n == 0 || it->first.first + it->second->size > p) f(it->second);
      }
    }
  }
  // Calls f(entry) for every entry. f must not change the index.
  template <typename F>
  void ForEach(F&& f) const {
    for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
      for (const auto& kv : by_class_[__builtin_ctzll(bits)]) f(kv.second);
    }
  }

  void Insert(Entry* e);
  void Erase(Entry* e);
  bool empty() const { return classes_used_ == 0; }
  // Changes with every Insert and Erase: a search repeated at the same version finds the same.
  std::uint64_t version() const { return version_; }

 private:
  using Key = std::pair<std::uintptr_t, std::size_t>;
  using Map = std::map<Key, Entry*>;
  static constexpr int kClasses = 64;
  static int ClassOf(std::size_t size) { return 63 - __builtin_clzll(size); }
  static Key KeyOf(const Entry* e) { return {reinterpret_cast<std::uintptr_t>(e->src), e->size}; }
  // The largest entry starting at p, or null.
  Entry* LargestAt(std::uintptr_t p) const;

  std::array<Map, kClasses> by_class_;
  std::uint64_t classes_used_ = 0;  // bit c: by_class_[c] is not empty
  AddressIndex<Entry> by_start_;    // the largest entry of each start address
  std::uint64_t version_ = 0;
};

}  // namespace tierflow::cache
