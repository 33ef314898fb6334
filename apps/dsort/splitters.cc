// SPDX-License-Identifier: Apache-2.0
#include "dsort/splitters.h"

#include <algorithm>
#include <cstring>

namespace tierflow::dsort {

std::vector<Splitter> ChooseSplitters(std::vector<Key>& sample, int ranks) {
  std::sort(sample.begin(), sample.end());
  std::vector<Splitter> out;
  const std::size_t n = sample.size();
  for (int i = 1; i < ranks; ++i) {
    if (n == 0) {
      out.push_back({Key{~0ull, 0xffff}, 1.0});
      continue;
    }
    const std::size_t at = n * static_cast<std::size_t>(i) / static_cast<std::size_t>(ranks);
    const Key key = sample[at];
    // Of the sampled keys equal to this one, those before the quantile fall below it.
    const auto lo = std::lower_bound(sample.begin(), sample.end(), key) - sample.begin();
    const auto hi = std::upper_bound(sample.begin(), sample.end(), key) - sample.begin();
    out.push_back({key, static_cast<double>(static_cast<std::ptrdiff_t>(at) - lo) /
                            static_cast<double>(hi - lo)});
  }
  return out;
}

namespace {

// Where records go: a record's rank, or the splitters (first..last) whose key it equals.
class Router {
 public:
  explicit Router(const std::vector<Splitter>& s) : s_(s) {
    last_.resize(s.size());
    for (std::size_t i = s.size(); i-- > 0;) {
      last_[i] = i + 1 < s.size() && s[i + 1].key == s[i].key ? last_[i + 1] : i;
    }
    // Keys as one number each, so that the search below compares without branching: random
    // keys would mispredict a branch per level.
    packed_.reserve(s.size());
    for (const Splitter& x : s) packed_.push_back(x.key.Number());
  }
  // The rank of a record with `key`; -1 with `group` set when it equals splitter `group`'s key
  // (the first of the splitters with that key).
  int Rank(const Key& key, std::size_t& group) const {
    const unsigned __int128 k = key.Number();
    const std::size_t i = Below(k);
    if (i == packed_.size() || k != packed_[i]) return static_cast<int>(i);
    group = i;
    return -1;
  }
  // Of `equal` records in group `g`, how many go to ranks up to g, g + 1, ... last + 1.
  std::vector<std::uint64_t> Shares(std::size_t g, std::uint64_t equal) const {
    std::vector<std::uint64_t> shares;
    std::uint64_t given = 0;
    for (std::size_t t = g; t <= last_[g]; ++t) {
      const auto upto = std::min<std::uint64_t>(
          equal, static_cast<std::uint64_t>(s_[t].below * static_cast<double>(equal)));
      shares.push_back(std::max(upto, given) - given);
      given = std::max(upto, given);
    }
    shares.push_back(equal - given);
    return shares;
  }

 private:
  // How many splitters' keys are below k: a count of independent comparisons for a few
  // splitters, a search without branches (as std::lower_bound) for more.
  std::size_t Below(unsigned __int128 k) const {
    std::size_t below = 0;
    if (packed_.size() <= kCounted) {
      for (const unsigned __int128 s : packed_) below += s < k ? 1 : 0;
      return below;
    }
    const unsigned __int128* base = packed_.data();
    for (std::size_t len = packed_.size(); len > 1;) {
      const std::size_t half = len / 2;
      // A mask, not a conditional: GCC would branch on the latter.
      base += half & (0 - static_cast<std::size_t>(base[half - 1] < k));
      len -= half;
    }
    return static_cast<std::size_t>(base - packed_.data()) + (*base < k ? 1 : 0);
  }
  static constexpr std::size_t kCounted = 7;
  const std::vector<Splitter>& s_;
  std::vector<std::size_t> last_;          // per splitter: the last splitter with the same key
  std::vector<unsigned __int128> packed_;  // per splitter: its key's Number()
};

}  // namespace

namespace {

// Partition's two passes with the record's size known to the compiler (a 16-byte copy is then
// two moves, not a call).
template <std::size_t kSize>
std::vector<std::uint64_t> PartitionRecords(Format f, const std::byte* in, std::uint64_t count,
                                            const std::vector<Splitter>& splitters, std::byte* out,
                                            std::uint16_t* route) {
  const std::size_t ranks = splitters.size() + 1;
  const Router router(splitters);
  std::vector<std::uint64_t> per_rank(ranks, 0), equal(splitters.size(), 0);
  std::size_t g = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const int r = router.Rank(extsort::KeyOf(f, in + i * kSize), g);
    if (r >= 0) {
      ++per_rank[static_cast<std::size_t>(r)];
      route[i] = static_cast<std::uint16_t>(r);
    } else {
      ++equal[g];
      route[i] = static_cast<std::uint16_t>(kEqualKey | g);
    }
  }
  // Each group's records, in input order, fill its ranks' shares one after the other.
  std::vector<std::vector<std::uint64_t>> shares(splitters.size());
  for (std::size_t k = 0; k < splitters.size(); ++k) {
    if (equal[k] == 0) continue;
    shares[k] = router.Shares(k, equal[k]);
    for (std::size_t t = 0; t < shares[k].size(); ++t) per_rank[k + t] += shares[k][t];
  }
  std::vector<std::uint64_t> cut(ranks + 1, 0), next(ranks);
  for (std::size_t d = 0; d < ranks; ++d) cut[d + 1] = cut[d] + per_rank[d];
  std::copy(cut.begin(), cut.end() - 1, next.begin());
  std::vector<std::size_t> turn(splitters.size(), 0);  // the group's rank now being filled
  for (std::uint64_t i = 0; i < count; ++i) {
    std::size_t r = route[i];
    if (r & kEqualKey) {
      g = r & ~std::size_t{kEqualKey};
      while (shares[g][turn[g]] == 0) ++turn[g];
      --shares[g][turn[g]];
      r = g + turn[g];
    }
    std::memcpy(out + next[r]++ * kSize, in + i * kSize, kSize);
  }
  return cut;
}

}  // namespace

std::vector<std::uint64_t> Partition(Format f, const std::byte* in, std::uint64_t count,
                                     const std::vector<Splitter>& splitters, std::byte* out,
                                     std::uint16_t* route) {
  if (f == Format::kU64) return PartitionRecords<16>(f, in, count, splitters, out, route);
  return PartitionRecords<100>(f, in, count, splitters, out, route);
}

}  // namespace tierflow::dsort
