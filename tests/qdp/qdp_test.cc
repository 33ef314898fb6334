// The query-driven prefetching experiment: every configuration returns the exact sum, whatever
// the selectivity, chunking, cache capacity or storage errors; bad parameters are refused.
#include "tierflow/qdp.h"

#include <gtest/gtest.h>

namespace tierflow {
namespace {

QdpConfig Small() {
  QdpConfig c;
  c.rows = 100000;  // not a multiple of the chunk size
  c.chunk_rows = 4096;
  c.iterations = 1;
  c.warmup = 0;
  c.threads_scan_a = 1;
  c.threads_aggregate = 1;
  return c;
}

void ExpectAllExact(const QdpReport& r) {
  ASSERT_EQ(r.configs.size(), 5u);
  for (const QdpConfigResult& c : r.configs) {
    EXPECT_EQ(c.sum, r.expected_sum) << c.name;
    EXPECT_EQ(c.resident_pages_at_start, 0u) << c.name << " did not start cold";
    EXPECT_GT(c.time_ms_median, 0) << c.name;
  }
}

TEST(Qdp, ExactSumsForSelectivitiesAndSeeds) {
  for (double sel : {0.0, 0.1, 0.5, 1.0}) {
    QdpConfig c = Small();
    c.selectivity = sel;
    c.seed = 7 + static_cast<std::uint64_t>(sel * 10);
    Result<QdpReport> r = RunQdp(c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectAllExact(*r);
    if (sel == 0.0) {
      EXPECT_EQ(r->expected_sum, 0u) << "empty filter";
    } else {
      EXPECT_GT(r->expected_sum, 0u);
    }
    const QdpConfigResult& pd = r->configs[3];
    EXPECT_EQ(pd.name, "prefetch_distributed");
    EXPECT_EQ(pd.hits + pd.late_hits + pd.misses, (c.rows + c.chunk_rows - 1) / c.chunk_rows);
    EXPECT_GT(pd.bytes_to_fast_tier, 0u);
  }
}

TEST(Qdp, CacheSmallerThanBStillExactAndWithinCapacity) {
  QdpConfig c = Small();
  c.rows = 300000;
  c.cache_capacity = 4 * 4096 * 8;  // four chunks of b's 74
  Result<QdpReport> r = RunQdp(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectAllExact(*r);
  EXPECT_LE(r->fast_tier_peak_bytes, r->cache_capacity_bytes);
}

TEST(Qdp, StorageErrorsDuringFillsNeverGiveAWrongSum) {
  QdpConfig c = Small();
  c.configs = {"prefetch", "prefetch_distributed"};
  c.inject_storage_errors = 5;
  Result<QdpReport> r = RunQdp(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const QdpConfigResult& cr : r->configs) {
    EXPECT_EQ(cr.sum, r->expected_sum) << cr.name;
    EXPECT_GT(cr.failed_fills, 0u) << cr.name << ": the injected errors were counted";
  }
}

TEST(Qdp, BadParametersAreRefused) {
  auto refuse = [](QdpConfig c, const char* words) {
    Result<QdpReport> r = RunQdp(c);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  QdpConfig c = Small();
  c.chunk_rows = 1000;
  refuse(c, "multiple of 512");
  c = Small();
  c.cache_capacity = 0;
  refuse(c, "cache capacity 0");
  c = Small();
  c.threads_scan_a = 64;
  refuse(c, "more threads than cores");
  c = Small();
  c.configs = {"turbo"};
  refuse(c, "configuration 'turbo'");
  c = Small();
  c.selectivity = 2;
  refuse(c, "selectivity");
  c = Small();
  c.data_dir = "/nonexistent/dir";
  refuse(c, "cannot create");
}

}  // namespace
}  // namespace tierflow
