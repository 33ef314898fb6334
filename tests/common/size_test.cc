// SPDX-License-Identifier: Apache-2.0
// Sizes as text: every unit means what it says, in any case; ambiguous and overflowing sizes
// are refused with the fix.
#include "tierflow/size.h"

#include <string>

#include <gtest/gtest.h>

namespace tierflow {
namespace {

std::uint64_t Parsed(const char* text) {
  Result<std::uint64_t> r = ParseSize(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : 0;
}

std::string Refused(const char* text) {
  Result<std::uint64_t> r = ParseSize(text);
  EXPECT_FALSE(r.ok()) << text << " was taken as " << (r.ok() ? *r : 0);
  return r.ok() ? "" : r.status().message();
}

TEST(ParseSize, BinaryUnitsInAnyCase) {
  EXPECT_EQ(Parsed("4096"), 4096u);
  EXPECT_EQ(Parsed("4096B"), 4096u);
  EXPECT_EQ(Parsed("4096b"), 4096u);
  EXPECT_EQ(Parsed("4KiB"), 4096u);
  EXPECT_EQ(Parsed("4kib"), 4096u);
  EXPECT_EQ(Parsed("4KIB"), 4096u);
  EXPECT_EQ(Parsed("3MiB"), 3u << 20);
  EXPECT_EQ(Parsed("2gib"), std::uint64_t{2} << 30);
  EXPECT_EQ(Parsed("5TiB"), std::uint64_t{5} << 40);
}

TEST(ParseSize, DecimalUnitsArePowersOfAThousand) {
  EXPECT_EQ(Parsed("4kB"), 4000u);
  EXPECT_EQ(Parsed("4KB"), 4000u);
  EXPECT_EQ(Parsed("500MB"), 500000000u);
  EXPECT_EQ(Parsed("2GB"), 2000000000u);
  EXPECT_EQ(Parsed("1tb"), 1000000000000u);
}

TEST(ParseSize, AmbiguousUnknownAndOverflowingSizesAreRefused) {
  const std::string k = Refused("64K");
  EXPECT_NE(k.find("ambiguous: write KiB for 1024 bytes or kB for 1000"), std::string::npos) << k;
  EXPECT_NE(Refused("1g").find("GiB for 1073741824 bytes or GB for 1000000000"), std::string::npos);
  EXPECT_NE(Refused("12XB").find("unknown unit 'XB'"), std::string::npos);
  EXPECT_NE(Refused("KiB").find("does not start with a number"), std::string::npos);
  EXPECT_NE(Refused("18446744073709551619B").find("too large"), std::string::npos);
  EXPECT_NE(Refused("18446744073709551616").find("too large"), std::string::npos);
  EXPECT_NE(Refused("16777216TiB").find("too large"), std::string::npos);
  EXPECT_NE(Refused("18446744073709552TB").find("too large"), std::string::npos);
  EXPECT_EQ(Parsed("18446744073709551615"), ~std::uint64_t{0});
  EXPECT_EQ(Parsed("16777215TiB"), std::uint64_t{16777215} << 40);
}

TEST(FormatSize, ShortestExactSpelling) {
  EXPECT_EQ(FormatSize(std::uint64_t{1} << 30), "1GiB");
  EXPECT_EQ(FormatSize(64 << 10), "64KiB");
  EXPECT_EQ(FormatSize(1536), "1536B");
}

}  // namespace
}  // namespace tierflow
