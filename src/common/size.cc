// SPDX-License-Identifier: Apache-2.0
#include "tierflow/size.h"

#include <fmt/format.h>

namespace tierflow {

namespace {

// The power of two a unit stands for, or -1.
int UnitShift(std::string_view unit) {
  struct Unit {
    std::string_view a, b, c;
    int shift;
  };
  static constexpr Unit kUnits[] = {{"", "B", "b", 0},
                                    {"K", "KiB", "KB", 10},
                                    {"M", "MiB", "MB", 20},
                                    {"G", "GiB", "GB", 30},
                                    {"T", "TiB", "TB", 40}};
  for (const Unit& u : kUnits) {
    if (unit == u.a || unit == u.b || unit == u.c) return u.shift;
  }
  if (unit == "k") return 10;
  return -1;
}

}  // namespace

Result<std::uint64_t> ParseSize(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (__builtin_mul_overflow(value, 10u, &value) ||
        __builtin_add_overflow(value, static_cast<unsigned>(text[i] - '0'), &value)) {
      return Status::Invalid(fmt::format("size '{}' is too large (at most 2^64-1 bytes)", text));
    }
    ++i;
  }
  if (i == 0) {
    return Status::Invalid(
        fmt::format("size '{}' does not start with a number (e.g. 4KiB, 1MiB, 2GiB)", text));
  }
  const int shift = UnitShift(text.substr(i));
  if (shift < 0) {
    return Status::Invalid(fmt::format("size '{}': unknown unit '{}' (use B, KiB, MiB, GiB or TiB)",
                                       text, text.substr(i)));
  }
  if (shift != 0 && value > ((~0ull) >> shift)) {
    return Status::Invalid(fmt::format("size '{}' is too large", text));
  }
  return value << shift;
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
