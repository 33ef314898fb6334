// SPDX-License-Identifier: Apache-2.0
#include "cache/entry_index.h"

namespace tierflow::cache {

namespace {

std::uintptr_t StartOf(const detail::CacheEntryState* e) {
  return reinterpret_cast<std::uintptr_t>(e->src);
}

// Whether a is the later of two entries by (start, size): the one a search prefers.
bool Later(const detail::CacheEntryState* a, const detail::CacheEntryState* b) {
  return b == nullptr || StartOf(a) > StartOf(b) || (StartOf(a) == StartOf(b) && a->size > b->size);
}

}  // namespace

EntryIndex::Entry* EntryIndex::FindContaining(std::uintptr_t p, std::size_t n) const {
  if (Entry* e = by_start_.Find(p); e != nullptr && e->size >= n) return e;
  for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
    const int c = __builtin_ctzll(bits);
    if (c < 63 && (std::size_t{2} << c) <= n) continue;  // too small to contain n bytes
    // A containing entry starts in p's block or the one before; of several, the latest.
    Entry* best = nullptr;
    auto consider = [&](Entry* e) {
      if (StartOf(e) <= p && StartOf(e) + e->size >= p + n && Later(e, best)) best = e;
    };
    const std::uintptr_t block = BlockOf(p, c);
    ForEachInList(by_class_[c].blocks.Find(KeyOf(block, c)), consider);
    if (block != 0)
      ForEachInList(by_class_[c].blocks.Find(KeyOf(block - BlockBytes(c), c)), consider);
    if (best != nullptr) return best;
  }
  return nullptr;
}

EntryIndex::Entry* EntryIndex::LargestAt(std::uintptr_t p) const {
  Entry* best = nullptr;
  for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
    const int c = __builtin_ctzll(bits);
    ForEachInList(by_class_[c].blocks.Find(KeyOf(BlockOf(p, c), c)), [&](Entry* e) {
      if (StartOf(e) == p && Later(e, best)) best = e;
    });
  }
  return best;
}

void EntryIndex::Insert(Entry* e) {
  ++version_;
  const int c = ClassOf(e->size);
  Class& k = by_class_[c];
  Entry*& head = k.blocks.At(KeyOf(BlockOf(StartOf(e), c), c));
  e->index_next = head;
  head = e;
  ++k.entries;
  classes_used_ |= std::uint64_t{1} << c;
  Entry*& largest = by_start_.At(StartOf(e));
  if (largest == nullptr || largest->size < e->size) largest = e;
}

void EntryIndex::Erase(Entry* e) {
  ++version_;
  const int c = ClassOf(e->size);
  Class& k = by_class_[c];
  const std::uintptr_t key = KeyOf(BlockOf(StartOf(e), c), c);
  Entry* head = k.blocks.Find(key);
  if (head == e) {
    if (e->index_next != nullptr) {
      k.blocks.Assign(key, e->index_next);
    } else {
      k.blocks.Erase(key);
    }
  } else {
    Entry* prev = head;
    while (prev != nullptr && prev->index_next != e) prev = prev->index_next;
    if (prev == nullptr) return;  // not indexed
    prev->index_next = e->index_next;
  }
  e->index_next = nullptr;
  if (--k.entries == 0) classes_used_ &= ~(std::uint64_t{1} << c);
  if (by_start_.Find(StartOf(e)) != e) return;
  if (Entry* next = LargestAt(StartOf(e))) {
    by_start_.Assign(StartOf(e), next);
  } else {
    by_start_.Erase(StartOf(e));
  }
}

}  // namespace tierflow::cache
