// SPDX-License-Identifier: Apache-2.0
// The offloading cache: a range is filled into the fast tier once, however many accesses ask,
// and read from there; a modification is marked dirty and written back.
//
//   build/examples/offload_cache
//
// Without HBM the cache's fast tier is DRAM (the default placement: the HBM next to the source,
// else the source's DRAM node), which shows the API, not a speed-up.
#include <cstdio>
#include <cstring>
#include <vector>

#include "tierflow/cache.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"

int Fail(const tierflow::Status& s) {
  std::fprintf(stderr, "offload_cache: %s\n", s.ToString().c_str());
  return 1;
}

int main() {
  tierflow::Result<tierflow::Topology> topo = tierflow::Topology::Discover();
  if (!topo.ok()) return Fail(topo.status());
  tierflow::Result<std::unique_ptr<tierflow::CpuEngine>> cpu =
      tierflow::CpuEngine::Create(*topo, {.node = 0});
  if (!cpu.ok()) return Fail(cpu.status());
  tierflow::CacheConfig config;
  config.engines = {cpu->get()};
  config.capacity[0] = 64 << 20;  // bytes the cache may hold on node 0
  tierflow::Result<std::unique_ptr<tierflow::OffloadCache>> cache =
      tierflow::OffloadCache::Create(*topo, config);
  if (!cache.ok()) return Fail(cache.status());

  // A "column" of 16 chunks; the chunks are accessed twice: the first access fills, the
  // second hits.
  constexpr std::size_t kChunk = 1 << 20, kChunks = 16;
  std::vector<unsigned char> column(kChunk * kChunks);
  for (std::size_t i = 0; i < column.size(); ++i) column[i] = static_cast<unsigned char>(i);
  unsigned long long sum = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t c = 0; c < kChunks; ++c) {
      tierflow::Result<tierflow::CacheEntry> e = (*cache)->Access(&column[c * kChunk], kChunk);
      if (!e.ok()) return Fail(e.status());
      (void)e->Wait();  // if the fill failed or found no room, data() is the source: still right
      const auto* p = static_cast<const unsigned char*>(e->data());
      for (std::size_t i = 0; i < kChunk; i += 4099) sum += p[i];  // a sample of the bytes
    }
  }

  // Modify the cached copy of chunk 3, acknowledge it, write it back with the invalidation.
  tierflow::Result<tierflow::CacheEntry> e = (*cache)->Access(&column[3 * kChunk], kChunk);
  if (!e.ok()) return Fail(e.status());
  if (tierflow::Status s = e->Wait(); !s.ok()) return Fail(s);
  static_cast<unsigned char*>(e->mutable_data())[0] = 0xee;
  if (tierflow::Status s = e->MarkDirty(); !s.ok()) return Fail(s);
  tierflow::Result<std::size_t> dropped =
      (*cache)->Invalidate(column.data(), column.size(), tierflow::DirtyEntries::kWriteBack);
  if (!dropped.ok()) return Fail(dropped.status());

  const tierflow::CacheNodeStats s = (*cache)->stats().front();
  std::printf(
      "sum %llu; node %d (%s): %llu misses, %llu hits, %llu write-backs, %zu entries "
      "invalidated; the source now holds 0x%02x\n",
      sum, s.node, tierflow::TierKindName(s.tier).data(), static_cast<unsigned long long>(s.misses),
      static_cast<unsigned long long>(s.hits + s.late_hits),
      static_cast<unsigned long long>(s.write_backs), *dropped, column[3 * kChunk]);
  return column[3 * kChunk] == 0xee && s.misses == kChunks ? 0 : 1;
}
