// SPDX-License-Identifier: Apache-2.0
// The distributed sort's cut of the key space (apps/dsort/splitters.h), as properties over
// random inputs: Partition is a permutation grouped by rank, every key of a rank's group is at
// most every key of the next rank's, and the groups stay near the mean for uniform, equal,
// Zipf and sorted keys when the splitters come from a sample of the same input.
#include "dsort/splitters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace tierflow::dsort {
namespace {

using extsort::Keys;

std::vector<std::byte> Records(Format f, Keys keys, std::uint64_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n * extsort::RecordBytes(f));
  extsort::GenerateRecords(f, seed, 0, n, out.data(), keys);
  return out;
}

std::vector<Splitter> FromSample(Format f, const std::vector<std::byte>& recs, std::uint64_t n,
                                 int ranks, std::uint64_t samples) {
  std::mt19937_64 rng(7);
  std::vector<Key> sample;
  for (std::uint64_t i = 0; i < samples; ++i) {
    sample.push_back(extsort::KeyOf(f, recs.data() + rng() % n * extsort::RecordBytes(f)));
  }
  return ChooseSplitters(sample, ranks);
}

// Checks the properties; returns the largest group over the mean.
double CheckPartition(Format f, const std::vector<std::byte>& in, std::uint64_t n,
                      const std::vector<Splitter>& s) {
  const std::size_t size = extsort::RecordBytes(f);
  std::vector<std::byte> out(in.size());
  std::vector<std::uint16_t> route(n);
  const std::vector<std::uint64_t> cut = Partition(f, in.data(), n, s, out.data(), route.data());
  EXPECT_EQ(cut.size(), s.size() + 2);
  EXPECT_EQ(cut.front(), 0u);
  EXPECT_EQ(cut.back(), n);
  // A permutation: the same multiset of records.
  auto sorted = [&](const std::vector<std::byte>& v) {
    std::vector<std::string> r;
    for (std::uint64_t i = 0; i < n; ++i) {
      r.emplace_back(reinterpret_cast<const char*>(v.data() + i * size), size);
    }
    std::sort(r.begin(), r.end());
    return r;
  };
  EXPECT_EQ(sorted(in), sorted(out));
  std::uint64_t largest = 0;
  bool any = false;
  Key last_max;
  for (std::size_t d = 0; d + 1 < cut.size(); ++d) {
    EXPECT_LE(cut[d], cut[d + 1]);
    largest = std::max(largest, cut[d + 1] - cut[d]);
    if (cut[d] == cut[d + 1]) continue;
    Key lo = extsort::KeyOf(f, out.data() + cut[d] * size), hi = lo;
    for (std::uint64_t i = cut[d]; i < cut[d + 1]; ++i) {
      const Key k = extsort::KeyOf(f, out.data() + i * size);
      lo = std::min(lo, k);
      hi = std::max(hi, k);
    }
    if (any) {
      EXPECT_FALSE(lo < last_max) << "rank " << d << " holds a key below the rank before";
    }
    last_max = hi;
    any = true;
  }
  return static_cast<double>(largest) /
         (static_cast<double>(n) / static_cast<double>(cut.size() - 1));
}

TEST(Splitters, GroupsAreOrderedAndNearTheMeanForEveryKeyDistribution) {
  for (Format f : {Format::kU64, Format::kGensort}) {
    for (Keys keys : {Keys::kUniform, Keys::kEqual, Keys::kZipf, Keys::kSorted}) {
      for (int ranks : {1, 2, 3, 4, 7}) {
        const std::uint64_t n = 20000;
        const std::vector<std::byte> in = Records(f, keys, n, 11 + ranks);
        const std::vector<Splitter> s = FromSample(f, in, n, ranks, 4096);
        const double worst = CheckPartition(f, in, n, s);
        EXPECT_LT(worst, 1.2) << extsort::FormatName(f) << " " << extsort::KeysName(keys) << " "
                              << ranks << " ranks";
      }
    }
  }
}

TEST(Splitters, AllEqualKeysAreSharedEvenly) {
  std::vector<Key> sample(1000, Key{5, 0});
  const std::vector<Splitter> s = ChooseSplitters(sample, 4);
  ASSERT_EQ(s.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].key, (Key{5, 0}));
    EXPECT_DOUBLE_EQ(s[i].below, (i + 1) / 4.0);
  }
  const std::vector<std::byte> in = Records(Format::kU64, Keys::kEqual, 1000, 3);
  std::vector<std::byte> out(in.size());
  std::vector<Splitter> on_input = s;
  for (Splitter& x : on_input) x.key = extsort::KeyOf(Format::kU64, in.data());
  std::vector<std::uint16_t> route(1000);
  const std::vector<std::uint64_t> cut =
      Partition(Format::kU64, in.data(), 1000, on_input, out.data(), route.data());
  EXPECT_EQ(cut, (std::vector<std::uint64_t>{0, 250, 500, 750, 1000}));
}

TEST(Splitters, EmptyInputsAndSamples) {
  std::vector<Key> none;
  const std::vector<Splitter> s = ChooseSplitters(none, 3);
  ASSERT_EQ(s.size(), 2u);
  std::vector<std::byte> out(16 * 10);
  const std::vector<std::byte> in = Records(Format::kU64, Keys::kUniform, 10, 1);
  std::vector<std::uint16_t> route(10);
  const std::vector<std::uint64_t> cut =
      Partition(Format::kU64, in.data(), 10, s, out.data(), route.data());
  EXPECT_EQ(cut, (std::vector<std::uint64_t>{0, 10, 10, 10}));
  const std::vector<std::uint64_t> empty = Partition(Format::kU64, nullptr, 0, s, nullptr, nullptr);
  EXPECT_EQ(empty, (std::vector<std::uint64_t>{0, 0, 0, 0}));
}

TEST(Splitters, OneRankTakesEverything) {
  std::vector<Key> sample{{1, 0}, {2, 0}};
  EXPECT_TRUE(ChooseSplitters(sample, 1).empty());
  const std::vector<std::byte> in = Records(Format::kGensort, Keys::kZipf, 100, 2);
  std::vector<std::byte> out(in.size());
  std::vector<std::uint16_t> route(100);
  EXPECT_EQ(Partition(Format::kGensort, in.data(), 100, {}, out.data(), route.data()),
            (std::vector<std::uint64_t>{0, 100}));
  EXPECT_EQ(in, out);
}

}  // namespace
}  // namespace tierflow::dsort
