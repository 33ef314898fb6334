// SPDX-License-Identifier: Apache-2.0
#include "tierflow/size.h"

#include <cctype>
#include <string>

#include <fmt/format.h>

namespace tierflow {

namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The bytes a unit stands for (written in any case): binary units (KiB = 1024) and decimal
// ones (kB = 1000) each mean what they say; 0 for a unit that is unknown, or ambiguous (a bare
// K, M, G or T), with the fix in `why`.
std::uint64_t UnitBytes(std::string_view unit, std::string& why) {
  static constexpr std::string_view kPrefixes = "kmgt";
  const std::string u = Lower(unit);
  if (u.empty() || u == "b") return 1;
  const std::size_t power = kPrefixes.find(u[0]) + 1;  // 0: no prefix
  if (power != 0 && power <= kPrefixes.size()) {
    std::uint64_t decimal = 1;
    for (std::size_t i = 0; i < power; ++i) decimal *= 1000;
    const std::uint64_t binary = std::uint64_t{1} << (10 * power);
    if (u.size() == 3 && u.substr(1) == "ib") return binary;
    if (u.size() == 2 && u[1] == 'b') return decimal;
    if (u.size() == 1) {
      const char upper = static_cast<char>(std::toupper(u[0]));
      why = fmt::format("'{}' is ambiguous: write {}iB for {} bytes or {}B for {}", unit, upper,
                        binary, u[0] == 'k' ? 'k' : upper, decimal);
      return 0;
    }
  }
  why = fmt::format(
      "unknown unit '{}' (use B, KiB, MiB, GiB or TiB; kB, MB, GB, TB for powers "
      "of 1000)",
      unit);
  return 0;
}

}  // namespace

Result<std::uint64_t> ParseSize(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (__builtin_mul_overflow(value, 10u, &value) ||
        __builtin_add_overflow(value, static_cast<unsigned>(text[i] - '0'), &value)) {
      return Status::InvalidArgument(
          fmt::format("size '{}' is too large (at most 2^64-1 bytes)", text));
    }
    ++i;
  }
  if (i == 0) {
    return Status::InvalidArgument(
        fmt::format("size '{}' does not start with a number (e.g. 4KiB, 1MiB, 2GiB)", text));
  }
  std::string why;
  const std::uint64_t unit = UnitBytes(text.substr(i), why);
  if (unit == 0) return Status::InvalidArgument(fmt::format("size '{}': {}", text, why));
  if (__builtin_mul_overflow(value, unit, &value)) {
    return Status::InvalidArgument(
        fmt::format("size '{}' is too large (at most 2^64-1 bytes)", text));
  }
  return value;
}

std::string FormatSize(std::uint64_t b) {
  static constexpr const char* kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    const unsigned shift = 40 - 10 * static_cast<unsigned>(i);
    const std::uint64_t unit = std::uint64_t{1} << shift;
    if (b >= unit && b % unit == 0) return fmt::format("{}{}", b >> shift, kUnits[i]);
  }
  return fmt::format("{}B", b);
}

}  // namespace tierflow
