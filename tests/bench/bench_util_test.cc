// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace tierflow::bench {
namespace {

// A quantile of equal neighbours is that value exactly: the benchmarks report p50 and p99 of
// samples that often repeat, and p50 > p99 by a rounding step would break their JSON contract.
TEST(Percentile, EqualNeighboursGiveThatValueExactly) {
  for (double value : {0.35052145640567517, 350.52145640567517, 1.0 / 3.0, 1e-9, 7.0}) {
    const std::vector<double> samples(101, value);
    for (int step = 0; step <= 1000; ++step) {
      const double q = step / 1000.0;
      EXPECT_EQ(Percentile(samples, q), value) << "q " << q << " value " << value;
    }
  }
}

TEST(Percentile, EndsAreTheExtremesAndTheMiddleInterpolates) {
  const std::vector<double> samples{1, 2, 4, 8};
  EXPECT_EQ(Percentile(samples, 0), 1);
  EXPECT_EQ(Percentile(samples, 1), 8);
  EXPECT_EQ(Percentile(samples, 0.5), 3);
  EXPECT_EQ(Percentile({5}, 0.99), 5);
}

TEST(Percentile, NeverDecreasesAsTheQuantileGrows) {
  std::mt19937_64 rng(20261202);
  std::uniform_int_distribution<int> size(1, 400), distinct(1, 6);
  std::uniform_real_distribution<double> value(0.01, 1000.0);
  for (int round = 0; round < 300; ++round) {
    // Few distinct values, so that most neighbours are equal.
    std::vector<double> pool(distinct(rng));
    for (double& v : pool) v = value(rng);
    std::vector<double> samples(size(rng));
    std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
    for (double& v : samples) v = pool[pick(rng)];
    std::sort(samples.begin(), samples.end());
    double previous = samples.front();
    for (int step = 0; step <= 200; ++step) {
      const double p = Percentile(samples, step / 200.0);
      ASSERT_GE(p, previous) << "round " << round << " q " << step / 200.0;
      ASSERT_LE(p, samples.back());
      previous = p;
    }
  }
}

}  // namespace
}  // namespace tierflow::bench
