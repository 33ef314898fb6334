// SPDX-License-Identifier: Apache-2.0
#include "sort/format.h"

#include <zlib.h>

#include <cmath>

#include <fmt/format.h>

namespace tierflow::extsort {

Result<Format> ParseFormat(std::string_view name) {
  if (name == "u64") return Format::kU64;
  if (name == "gensort") return Format::kGensort;
  return Status::InvalidArgument(fmt::format(
      "unknown record format '{}': use u64 (16-byte records: u64 key, u64 payload) or gensort "
      "(100-byte Sort Benchmark records, 10-byte keys)",
      name));
}

std::string_view FormatName(Format f) { return f == Format::kU64 ? "u64" : "gensort"; }
std::size_t RecordBytes(Format f) { return f == Format::kU64 ? 16 : 100; }

std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace {

// The 64-bit key of record n (for gensort records, the first 8 bytes of the key, big-endian).
std::uint64_t KeyValue(Keys keys, std::uint64_t seed, std::uint64_t n) {
  switch (keys) {
    case Keys::kEqual:
      return 0x5555555555555555ull;
    case Keys::kSorted:
      return n;
    case Keys::kZipf: {
      // Inverse of the continuous 1/k law over [1, 2^24]: k = (2^24 + 1)^u.
      const double u = static_cast<double>(Mix(seed ^ Mix(n)) >> 11) * 0x1.0p-53;
      const auto k = static_cast<std::uint64_t>(std::exp(u * std::log(16777217.0)));
      return Mix(seed + k);  // the popular keys scattered over the key space
    }
    case Keys::kUniform:
      break;
  }
  return Mix(seed ^ Mix(n));
}

// gensort's binary layout: key[10], 0x00 0x11, the record number as 32 hex digits, 0x88 0x99
// 0xAA 0xBB, 48 filler bytes (a letter pattern), 0xCC 0xDD 0xEE 0xFF.
void GensortRecord(Keys keys, std::uint64_t seed, std::uint64_t n, std::byte* r) {
  const std::uint64_t a = Mix(seed ^ Mix(n)), b = Mix(a);
  if (keys == Keys::kUniform) {
    std::memcpy(r, &a, 8);
    std::memcpy(r + 8, &b, 2);
  } else {
    const std::uint64_t big = __builtin_bswap64(KeyValue(keys, seed, n));
    std::memcpy(r, &big, 8);
    r[8] = r[9] = std::byte{0};
  }
  r[10] = std::byte{0x00};
  r[11] = std::byte{0x11};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int i = 0; i < 32; ++i) {
    const unsigned shift = static_cast<unsigned>(4 * (31 - i));
    const unsigned digit = shift >= 64 ? 0 : static_cast<unsigned>((n >> shift) & 15);
    r[12 + i] = static_cast<std::byte>(kHex[digit]);
  }
  const unsigned char mid[4] = {0x88, 0x99, 0xAA, 0xBB}, end[4] = {0xCC, 0xDD, 0xEE, 0xFF};
  std::memcpy(r + 44, mid, 4);
  for (int i = 0; i < 48; ++i) r[48 + i] = static_cast<std::byte>('A' + (n + i / 4) % 26);
  std::memcpy(r + 96, end, 4);
}

}  // namespace

Result<Keys> ParseKeys(std::string_view name) {
  for (Keys k : {Keys::kUniform, Keys::kEqual, Keys::kZipf, Keys::kSorted}) {
    if (name == KeysName(k)) return k;
  }
  return Status::InvalidArgument(
      fmt::format("unknown key distribution '{}': use uniform, equal, zipf or sorted", name));
}

std::string_view KeysName(Keys k) {
  switch (k) {
    case Keys::kEqual:
      return "equal";
    case Keys::kZipf:
      return "zipf";
    case Keys::kSorted:
      return "sorted";
    case Keys::kUniform:
      break;
  }
  return "uniform";
}

void GenerateRecords(Format f, std::uint64_t seed, std::uint64_t first, std::uint64_t count,
                     std::byte* out, Keys keys) {
  if (f == Format::kGensort) {
    for (std::uint64_t i = 0; i < count; ++i) GensortRecord(keys, seed, first + i, out + i * 100);
    return;
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t n = first + i;
    const std::uint64_t key = KeyValue(keys, seed, n), payload = n;
    std::memcpy(out + i * 16, &key, 8);
    std::memcpy(out + i * 16 + 8, &payload, 8);
  }
}

std::uint64_t ChecksumRecords(Format f, const std::byte* p, std::uint64_t count) {
  const std::size_t size = RecordBytes(f);
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    sum += crc32_z(0, reinterpret_cast<const Bytef*>(p + i * size), size);
  }
  return sum;
}

}  // namespace tierflow::extsort
