// SPDX-License-Identifier: Apache-2.0
#include "sort/radix.h"

#include <array>
#include <cstring>
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
Entry* RadixSort(Entry* a, Entry* b, std::uint64_t n) {
  constexpr int kKeyPasses = (64 + kBits - 1) / kBits;
  constexpr int kPasses = kRestPasses + kKeyPasses;
  std::vector<std::array<std::uint64_t, kBuckets>> count(kPasses);
  for (auto& c : count) c.fill(0);
  for (std::uint64_t i = 0; i < n; ++i) {
    for (int p = 0; p < kPasses; ++p) ++count[p][Digit<kRestPasses>(a[i], p)];
  }
  for (int p = 0; p < kPasses; ++p) {
    std::array<std::uint64_t, kBuckets>& c = count[p];
    if (n != 0 && c[Digit<kRestPasses>(a[0], p)] == n) continue;  // every record shares it
    std::uint64_t sum = 0;
    for (std::uint64_t& x : c) sum += std::exchange(x, sum);
    for (std::uint64_t i = 0; i < n; ++i) b[c[Digit<kRestPasses>(a[i], p)]++] = a[i];
    std::swap(a, b);
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
