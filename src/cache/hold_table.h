// SPDX-License-Identifier: Apache-2.0
// Where cache hits keep their hold on an entry without writing a line that other cores write:
// biased reference counting. Each thread slot has a table of words [count:16 | entry:48]; a hit
// increments (or claims) a word of its own table, a release decrements the same word (from any
// thread, with a CAS). While an entry is in the cache, the cache's own reference keeps it alive,
// so table holds need no shared reference; when the cache lets go of an entry (eviction,
// invalidation — always under its exclusive lock, when no hit can run), Detach converts every
// table hold into references on the entry's shared count and clears the words, and releases
// that then find their word no longer naming the entry drop a shared reference instead.
// An entry is held through a table iff some word names it with a non-zero count.
//
// A word with count 0 may be claimed by any hit for any entry (no holder refers to it); an
// entry's words lie within kProbe positions of its hash, so lookups, claims and Detach look at
// kProbe words per table. No room (or an address above 2^48, or 65535 holds in one word): the
// caller falls back to the shared count.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tierflow::cache {

class HoldTables {
 public:
  static constexpr std::size_t kTables = 32;   // at most 32: TableMask has a bit for each
  static constexpr std::size_t kWords = 2048;  // per table
  static constexpr std::size_t kProbe = 16;

  using Word = std::atomic<std::uint64_t>;

  HoldTables() : tables_(std::make_unique<Table[]>(kTables)) {}

  // The tables an entry has been held in, one bit each (kTables fits): kept by the entry,
  // set by Acquire when it claims a new word, read by Held and Detach, which then look at
  // those tables only instead of every one (a removal read 32 tables' worth of cold lines,
  // about 7000 instructions).
  using TableMask = std::atomic<std::uint32_t>;

  // A hold on `entry` in table `table`: the word, or null (use the shared count). Sets the
  // table's bit in `used` when it claims a new word. Called under the cache's shared (or
  // exclusive) lock, so that Held and Detach, under the exclusive lock, see every bit set
  // before.
  Word* Acquire(std::size_t table, const void* entry, TableMask& used) {
    const std::uint64_t key = Key(entry);
    if (key == 0) return nullptr;
    Table& t = tables_[table % kTables];
    const std::size_t h = Hash(key);
    for (std::size_t d = 0; d < kProbe; ++d) {  // an existing word for this entry
      Word& w = t.words[(h + d) % kWords];
      std::uint64_t v = w.load(std::memory_order_relaxed);
      while ((v & kKeyMask) == key && Count(v) < kMaxCount) {
        if (w.compare_exchange_weak(v, v + kOne, std::memory_order_acq_rel)) return &w;
      }
    }
    // A free word. Only here does the entry get a word in this table (a word naming it was
    // claimed here before, and Detach clears every one), so only here is the bit set.
    const std::uint32_t bit = std::uint32_t{1} << (table % kTables);
    if ((used.load(std::memory_order_relaxed) & bit) == 0) {
      used.fetch_or(bit, std::memory_order_relaxed);
    }
    for (std::size_t d = 0; d < kProbe; ++d) {
      Word& w = t.words[(h + d) % kWords];
      std::uint64_t v = w.load(std::memory_order_relaxed);
      while (Count(v) == 0) {
        if (w.compare_exchange_weak(v, key | kOne, std::memory_order_acq_rel)) return &w;
      }
    }
    return nullptr;
  }

  // One more hold through `w` on `entry` (a copy of a holder); false: the word was detached or
  // is full, take a shared reference instead.
  // The loads acquire: a holder that sees its word cleared by Detach must also see the shared
  // references Detach added before clearing it, or its own release could come first.
  static bool Add(Word* w, const void* entry) {
    const std::uint64_t key = Key(entry);
    std::uint64_t v = w->load(std::memory_order_acquire);
    while ((v & kKeyMask) == key && Count(v) > 0 && Count(v) < kMaxCount) {
      if (w->compare_exchange_weak(v, v + kOne, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  // Releases a hold through `w`; false: the hold had been converted by Detach, drop a shared
  // reference instead.
  static bool Release(Word* w, const void* entry) {
    const std::uint64_t key = Key(entry);
    std::uint64_t v = w->load(std::memory_order_acquire);
    while ((v & kKeyMask) == key && Count(v) > 0) {
      if (w->compare_exchange_weak(v, v - kOne, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  // Whether any table holds `entry`. Only meaningful when no hit can run (exclusive lock).
  bool Held(const void* entry, const TableMask& used) const {
    const std::uint64_t key = Key(entry);
    if (key == 0) return false;
    return AnyWordOf(key, used, [key](const Word& w) {
      const std::uint64_t v = w.load(std::memory_order_acquire);
      return (v & kKeyMask) == key && Count(v) > 0;
    });
  }

  // Moves every table hold on `entry` to its shared count (`add` adds n shared references) and
  // clears its words. The references are added before a word is cleared, so that a release
  // that finds the word cleared always has a reference to drop. Exclusive lock held.
  template <typename AddRefs>
  void Detach(const void* entry, const TableMask& used, AddRefs&& add) {
    const std::uint64_t key = Key(entry);
    if (key == 0) return;
    AnyWordOf(key, used, [key, &add](Word& w) {
      std::uint64_t v = w.load(std::memory_order_acquire);
      while ((v & kKeyMask) == key) {
        const std::uint64_t n = Count(v);
        add(static_cast<long>(n));
        if (w.compare_exchange_weak(v, 0, std::memory_order_acq_rel)) break;
        add(-static_cast<long>(n));  // a release or copy changed the count: again
      }
      return false;  // every word
    });
  }

 private:
  static constexpr std::uint64_t kKeyMask = (std::uint64_t{1} << 48) - 1;
  static constexpr std::uint64_t kOne = std::uint64_t{1} << 48;
  static constexpr std::uint64_t kMaxCount = 0xFFFF;
  static std::uint64_t Count(std::uint64_t v) { return v >> 48; }
  static std::uint64_t Key(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a > kKeyMask ? 0 : a;
  }
  static std::size_t Hash(std::uint64_t key) {
    return static_cast<std::size_t>((key >> 6) * 0x9E3779B97F4A7C15ull >> 40);
  }
  // Calls f(word) on each word of `key`'s probe window in the tables `used` names, until f
  // returns true; whether it did.
  template <typename F>
  bool AnyWordOf(std::uint64_t key, const TableMask& used, F&& f) const {
    for (std::uint32_t m = used.load(std::memory_order_relaxed); m != 0; m &= m - 1) {
      const std::size_t t = static_cast<std::size_t>(__builtin_ctz(m));
      for (std::size_t d = 0; d < kProbe; ++d) {
        if (f(tables_[t].words[(Hash(key) + d) % kWords])) return true;
      }
    }
    return false;
  }
  struct alignas(64) Table {
    std::array<Word, kWords> words{};
  };
  std::unique_ptr<Table[]> tables_;
};

}  // namespace tierflow::cache
