#include "cache/entry_index.h"

#include <climits>

namespace tierflow::cache {

EntryIndex::Entry* EntryIndex::FindContaining(std::uintptr_t p, std::size_t n) const {
  if (Entry* e = by_start_.Find(p); e != nullptr && e->size >= n) return e;
  for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
    const int c = __builtin_ctzll(bits);
    if (c < 63 && (std::size_t{2} << c) <= n) continue;  // too small to contain n bytes
    const std::uintptr_t window = c < 63 ? std::uintptr_t{2} << c : UINTPTR_MAX;
    const Map& m = by_class_[c];
    auto it = m.upper_bound({p, SIZE_MAX});
    while (it != m.begin()) {
      --it;
      if (p - it->first.first >= window) break;
      if (it->first.first + it->second->size >= p + n) return it->second;
    }
  }
  return nullptr;
}

EntryIndex::Entry* EntryIndex::LargestAt(std::uintptr_t p) const {
  Entry* best = nullptr;
  for (std::uint64_t bits = classes_used_; bits != 0; bits &= bits - 1) {
    const Map& m = by_class_[__builtin_ctzll(bits)];
    auto it = m.upper_bound({p, SIZE_MAX});
    if (it == m.begin()) continue;
    --it;
    if (it->first.first == p && (best == nullptr || it->second->size > best->size))
      best = it->second;
  }
  return best;
}

void EntryIndex::Insert(Entry* e) {
  ++version_;
  const Key k = KeyOf(e);
  const int c = ClassOf(e->size);
  by_class_[c].emplace(k, e);
  classes_used_ |= std::uint64_t{1} << c;
  Entry* largest = by_start_.Find(k.first);
  if (largest == nullptr || largest->size < e->size) by_start_.Assign(k.first, e);
}

void EntryIndex::Erase(Entry* e) {
  ++version_;
  const Key k = KeyOf(e);
  const int c = ClassOf(e->size);
  by_class_[c].erase(k);
  if (by_class_[c].empty()) classes_used_ &= ~(std::uint64_t{1} << c);
  if (by_start_.Find(k.first) != e) return;
  if (Entry* next = LargestAt(k.first)) {
    by_start_.Assign(k.first, next);
  } else {
    by_start_.Erase(k.first);
  }
}

}  // namespace tierflow::cache
