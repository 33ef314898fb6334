// SPDX-License-Identifier: Apache-2.0
// Record formats of `tierflow sort`: 16-byte records (u64 key, u64 payload, little-endian) and
// the Sort Benchmark's 100-byte records (a 10-byte key compared as bytes, as gensort writes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tierflow/status.h"

namespace tierflow::extsort {

enum class Format : std::uint8_t { kU64, kGensort };
Result<Format> ParseFormat(std::string_view name);  // "u64", "gensort"
std::string_view FormatName(Format f);
std::size_t RecordBytes(Format f);  // 16 or 100

// The key as an order-preserving pair: hi compared first, then lo (0 for u64 records).
struct Key {
  std::uint64_t hi = 0;
  std::uint16_t lo = 0;
  friend bool operator<(const Key& a, const Key& b) {
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
  }
  friend bool operator==(const Key&, const Key&) = default;
  // The key as one 80-bit number, ordered as the key: compared without branches.
  unsigned __int128 Number() const { return (static_cast<unsigned __int128>(hi) << 16) | lo; }
};

inline Key KeyOf(Format f, const std::byte* r) {
  Key k;
  if (f == Format::kU64) {
    std::memcpy(&k.hi, r, 8);
    return k;
  }
  std::uint64_t hi;
  std::uint16_t lo;
  std::memcpy(&hi, r, 8);
  std::memcpy(&lo, r + 8, 2);
  k.hi = __builtin_bswap64(hi);  // bytes compare as a big-endian number
  k.lo = static_cast<std::uint16_t>(__builtin_bswap16(lo));
  return k;
}

// SplitMix64: one independent 64-bit value per input (the generator's, and any other
// seeded choice the sorts make).
std::uint64_t Mix(std::uint64_t x);

// How generated keys are distributed: uniform (every key its own random value), equal (one key
// for all records), zipf (a record's key is the k-th of 2^24 keys with probability about 1/k:
// a few keys very often), sorted (keys in record-number order).
enum class Keys : std::uint8_t { kUniform, kEqual, kZipf, kSorted };
Result<Keys> ParseKeys(std::string_view name);  // "uniform", "equal", "zipf", "sorted"
std::string_view KeysName(Keys k);

// Fills `count` records starting at record number `first` of the input `seed` generates (the
// same records whatever the split into calls).
void GenerateRecords(Format f, std::uint64_t seed, std::uint64_t first, std::uint64_t count,
                     std::byte* out, Keys keys = Keys::kUniform);

// The order-independent checksum of records: the sum of each record's CRC-32 (zlib).
std::uint64_t ChecksumRecords(Format f, const std::byte* p, std::uint64_t count);

}  // namespace tierflow::extsort
