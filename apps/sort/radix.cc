// SPDX-License-Identifier: Apache-2.0
#include "sort/radix.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

namespace tierflow::extsort {

namespace {

// 16-byte entries: the key to sort by and the rest carried along (the payload of a u64 record,
// or the index and the two low key bytes of a gensort record).
struct Entry {
  std::uint64_t key;
  std::uint64_t rest;
};
static_assert(sizeof(Entry) == 16);

using Wide = unsigned __int128;

// The value entries are ordered by: the key, then (gensort, kRest = 16) rest's low 16 bits.
template <int kRest>
inline Wide Value(const Entry& e) {
  if constexpr (kRest == 0) {
    return e.key;
  } else {
    return (static_cast<Wide>(e.key) << 16) | (e.rest & 0xffff);
  }
}

// Entries at most, of a bucket or of a run of ties, that an insertion sort orders.
constexpr std::uint64_t kInsertion = 32;

template <int kRest>
void InsertionSort(Entry* x, std::uint64_t m) {
  for (std::uint64_t i = 1; i < m; ++i) {
    const Entry e = x[i];
    const Wide v = Value<kRest>(e);
    std::uint64_t j = i;
    for (; j > 0 && v < Value<kRest>(x[j - 1]); --j) x[j] = x[j - 1];
    x[j] = e;
  }
}

// The least number of bits that holds every bit in which the values of x[0, m) differ.
template <int kRest>
int VaryingBits(const Entry* x, std::uint64_t m) {
  const Wide first = Value<kRest>(x[0]);
  Wide diff = 0;
  for (std::uint64_t i = 1; i < m; ++i) diff |= Value<kRest>(x[i]) ^ first;
  const auto hi = static_cast<std::uint64_t>(diff >> 64), lo = static_cast<std::uint64_t>(diff);
  return hi != 0 ? 128 - __builtin_clzll(hi) : lo != 0 ? 64 - __builtin_clzll(lo) : 0;
}

constexpr int kLsdBits = 8;
constexpr std::size_t kLsdBuckets = std::size_t{1} << kLsdBits;
constexpr int kLsdDigits = (80 + kLsdBits - 1) / kLsdBits;  // of the widest value

template <int kRest>
inline unsigned Digit(const Entry& e, int at, unsigned mask) {
  return static_cast<unsigned>(Value<kRest>(e) >> at) & mask;
}

// x[0, m) are sorted by their values' bits [low, top) and agree above: each run of entries
// these bits leave tied is sorted by the whole value. Only runs out of order are touched:
// where keys are spread, few entries are tied and fewer out of order.
template <int kRest>
void SortTies(Entry* x, std::uint64_t m, int low) {
  auto tied = [low](const Entry& a, const Entry& b) {
    return (Value<kRest>(a) ^ Value<kRest>(b)) >> low == 0;
  };
  for (std::uint64_t i = 1; i < m; ++i) {
    if (!(Value<kRest>(x[i]) < Value<kRest>(x[i - 1]))) continue;
    std::uint64_t b = i - 1, e = i + 1;
    while (b > 0 && tied(x[b - 1], x[i])) --b;
    while (e < m && tied(x[e], x[i])) ++e;
    if (e - b <= kInsertion) {
      InsertionSort<kRest>(x + b, e - b);
    } else {
      std::sort(x + b, x + e,
                [](const Entry& p, const Entry& q) { return Value<kRest>(p) < Value<kRest>(q); });
    }
    i = e;
  }
}

// LSD passes of 8-bit digits over x[0, m), which fits in a core's cache, sorting by the
// values' bits [0, top) (all entries agree above). Digits are taken from the top down until
// they tell about 16 x m values apart, which leaves few entries tied: SortTies orders those.
// Returns where the entries are: x or y.
template <int kRest>
Entry* SortSmall(Entry* x, Entry* y, std::uint64_t m, int top) {
  std::array<std::array<std::uint32_t, kLsdBuckets>, kLsdDigits> count;
  std::array<int, kLsdDigits> at{};
  int digits = 0, low = top;
  double told = 1;
  for (; low > 0 && told < 16.0 * static_cast<double>(m);) {
    low = std::max(0, low - kLsdBits);
    std::array<std::uint32_t, kLsdBuckets>& c = count[digits];
    c.fill(0);
    for (std::uint64_t i = 0; i < m; ++i) ++c[Digit<kRest>(x[i], low, kLsdBuckets - 1)];
    const auto used = std::count_if(c.begin(), c.end(), [](std::uint32_t n) { return n != 0; });
    if (used < 2) continue;  // a digit every entry shares orders nothing
    told *= static_cast<double>(used);
    at[digits++] = low;
  }
  for (int d = digits - 1; d >= 0; --d) {
    std::array<std::uint32_t, kLsdBuckets>& c = count[d];
    std::uint32_t sum = 0;
    for (std::uint32_t& n : c) sum += std::exchange(n, sum);
    for (std::uint64_t i = 0; i < m; ++i) y[c[Digit<kRest>(x[i], at[d], kLsdBuckets - 1)]++] = x[i];
    std::swap(x, y);
  }
  if (low > 0) SortTies<kRest>(x, m, low);
  return x;
}

constexpr int kMsdBits = 11;
constexpr std::size_t kMsdBuckets = std::size_t{1} << kMsdBits;
// Entries SortSmall takes: with their scratch, within a core's cache.
constexpr std::uint64_t kSmall = 8192;

// Sorts x[0, m) by their values' bits [0, top) (all entries agree above), y being scratch of
// m entries: MSD passes on the highest 11 bits that vary until the buckets fit in a cache,
// then SortSmall per bucket. Returns where the entries are: x or y.
template <int kRest>
Entry* Sort(Entry* x, Entry* y, std::uint64_t m, int top) {
  if (m <= kInsertion) {
    InsertionSort<kRest>(x, m);
    return x;
  }
  top = std::min(top, VaryingBits<kRest>(x, m));
  if (top == 0) return x;
  if (m <= kSmall) return SortSmall<kRest>(x, y, m, top);
  const int shift = std::max(0, top - kMsdBits);
  std::vector<std::uint64_t> c(kMsdBuckets + 1, 0);
  for (std::uint64_t i = 0; i < m; ++i) ++c[Digit<kRest>(x[i], shift, kMsdBuckets - 1) + 1];
  for (std::size_t b = 1; b <= kMsdBuckets; ++b) c[b] += c[b - 1];
  std::vector<std::uint64_t> next(c.begin(), c.end() - 1);
  for (std::uint64_t i = 0; i < m; ++i)
    y[next[Digit<kRest>(x[i], shift, kMsdBuckets - 1)]++] = x[i];
  // Each bucket sorted back into x (copied there when its sort ends in y).
  for (std::size_t b = 0; b < kMsdBuckets; ++b) {
    const std::uint64_t lo = c[b], n = c[b + 1] - c[b];
    const Entry* sorted = Sort<kRest>(y + lo, x + lo, n, shift);
    if (sorted != x + lo) std::memcpy(x + lo, sorted, n * sizeof(Entry));
  }
  return x;
}

template <int kRest>
Entry* RadixSort(Entry* a, Entry* b, std::uint64_t n) {
  return Sort<kRest>(a, b, n, 64 + kRest);
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
  const Entry* sorted = RadixSort<16>(e, e + count, count);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::memcpy(scratch + i * 100, data + (sorted[i].rest >> 16) * 100, 100);
  }
  return scratch;
}

}  // namespace tierflow::extsort
