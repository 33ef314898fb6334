// SPDX-License-Identifier: Apache-2.0
#include "sort/radix.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace tierflow::extsort {

namespace {

constexpr unsigned kBits = 11;
constexpr std::size_t kBuckets = std::size_t{1} << kBits;

// 16-byte entries: the key to sort by and the rest carried along (the payload of a u64 record,
// or the index and the two low key bytes of a gensort record).
struct Entry {
  std::uint64_t key;
  std::uint64_t rest;
};
static_assert(sizeof(Entry) == 16);

// The digit of pass p: passes over `rest`'s low 16 bits first (gensort key bytes 8-9), then
// over the 64-bit key.
template <int kRestPasses>
inline unsigned Digit(const Entry& e, int p) {
  if (p < kRestPasses) return static_cast<unsigned>((e.rest >> (8 * p)) & 0xff);
  const int q = p - kRestPasses;
  return static_cast<unsigned>((e.key >> (kBits * q)) & (kBuckets - 1));
}

template <int kRestPasses>
using Counts =
    std::array<std::array<std::uint64_t, kBuckets>, kRestPasses + (64 + kBits - 1) / kBits>;

// Whether x and y agree on every digit from `low` up (low: a pass number, as Digit's p).
template <int kRestPasses>
inline bool SameFrom(const Entry& x, const Entry& y, int low) {
  if (low >= kRestPasses) return (x.key ^ y.key) >> (kBits * (low - kRestPasses)) == 0;
  return x.key == y.key && ((x.rest ^ y.rest) & 0xffff) >> (8 * low) == 0;
}

template <int kRestPasses>
inline bool Less(const Entry& x, const Entry& y) {
  if (x.key != y.key) return x.key < y.key;
  return kRestPasses != 0 && (x.rest & 0xffff) < (y.rest & 0xffff);
}

// The lowest digit the radix passes need: from the most significant varying digit down, until
// the digits taken tell about 16 x n keys apart (the product of their bucket counts), which
// leaves runs of entries they do not tell apart of one or two where keys are spread.
template <int kRestPasses>
int LowestDigit(const Counts<kRestPasses>& count, std::uint64_t n) {
  int low = static_cast<int>(count.size());
  double told = 1;
  for (int p = static_cast<int>(count.size()) - 1; p >= 0 && told < 16.0 * n; --p) {
    const auto used = std::count_if(count[p].begin(), count[p].end(), [](auto c) { return c; });
    if (used > 1) {
      told *= static_cast<double>(used);
      low = p;
    }
  }
  return low;
}

// LSD radix passes over the significant digits only (those from LowestDigit up), then each run
// of entries those digits leave tied sorted by the whole key: for spread 64-bit keys three
// passes instead of six.
template <int kRestPasses>
Entry* RadixSort(Entry* a, Entry* b, std::uint64_t n) {
  auto count = std::make_unique<Counts<kRestPasses>>();
  for (auto& c : *count) c.fill(0);
  for (std::uint64_t i = 0; i < n; ++i) {
    for (int p = 0; p < static_cast<int>(count->size()); ++p) {
      ++(*count)[p][Digit<kRestPasses>(a[i], p)];
    }
  }
  const int low = LowestDigit<kRestPasses>(*count, n);
  bool tied = false;  // some digit below `low` varies: runs tied above it need a sort
  for (int p = 0; p < static_cast<int>(count->size()); ++p) {
    std::array<std::uint64_t, kBuckets>& c = (*count)[p];
    if (n == 0 || c[Digit<kRestPasses>(a[0], p)] == n) continue;  // every record shares it
    if (p < low) {
      tied = true;
      continue;
    }
    std::uint64_t sum = 0;
    for (std::uint64_t& x : c) sum += std::exchange(x, sum);
    for (std::uint64_t i = 0; i < n; ++i) b[c[Digit<kRestPasses>(a[i], p)]++] = a[i];
    std::swap(a, b);
  }
  for (std::uint64_t i = 0; tied && i < n;) {
    std::uint64_t j = i + 1;
    while (j < n && SameFrom<kRestPasses>(a[i], a[j], low)) ++j;
    if (j - i > 1) std::sort(a + i, a + j, Less<kRestPasses>);
    i = j;
  }
  return a;
}

// The index entries follow the gathered records, aligned for Entry.
std::size_t EntriesOffset(std::uint64_t count) { return (count * 100 + 15) / 16 * 16; }

}  // namespace

std::size_t SortScratchBytes(Format f, std::uint64_t count) {
  return f == Format::kU64 ? count * 16 : EntriesOffset(count) + count * 2 * sizeof(Entry);
}

std::byte* SortRun(Format f, std::byte* data, std::byte* scratch, std::uint64_t count) {
  if (f == Format::kU64) {
    auto* a = reinterpret_cast<Entry*>(data);
    return reinterpret_cast<std::byte*>(RadixSort<0>(a, reinterpret_cast<Entry*>(scratch), count));
  }
  // Gensort: sort (key bytes 0-7, index | key bytes 8-9) entries, then gather the records.
  auto* e = reinterpret_cast<Entry*>(scratch + EntriesOffset(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    const Key k = KeyOf(f, data + i * 100);
    e[i].key = k.hi;
    e[i].rest = (i << 16) | k.lo;
  }
  const Entry* sorted = RadixSort<2>(e, e + count, count);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::memcpy(scratch + i * 100, data + (sorted[i].rest >> 16) * 100, 100);
  }
  return scratch;
}

}  // namespace tierflow::extsort
