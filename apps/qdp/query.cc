// SPDX-License-Identifier: Apache-2.0
#include "qdp/query.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <thread>

namespace tierflow::qdp {
namespace {

using Clock = std::chrono::steady_clock;

// The two loops of the query, written once so that the compiler vectorises them, and
// compiled for AVX2 as well (the bodies are inlined into the AVX2 functions) and chosen at run
// time. Values are below 2^32, so a signed 64-bit compare is exact.
// mask[i] = a[i] < x (0 or 1).
[[gnu::always_inline]] inline void FilterBody(const std::uint64_t* a, std::uint64_t n,
                                              std::uint64_t x, std::uint8_t* mask) {
  const auto* s = reinterpret_cast<const std::int64_t*>(a);
  const auto y = static_cast<std::int64_t>(x);
  for (std::uint64_t i = 0; i < n; ++i) mask[i] = static_cast<std::uint8_t>(s[i] < y);
}
[[gnu::always_inline]] inline std::uint64_t SumBody(const std::uint64_t* b,
                                                    const std::uint8_t* mask, std::uint64_t n) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) sum += b[i] & (0 - static_cast<std::uint64_t>(mask[i]));
  return sum;
}
__attribute__((target("avx2"))) void FilterAvx2(const std::uint64_t* a, std::uint64_t n,
                                                std::uint64_t x, std::uint8_t* mask) {
  FilterBody(a, n, x, mask);
}
__attribute__((target("avx2"))) std::uint64_t SumAvx2(const std::uint64_t* b,
                                                      const std::uint8_t* mask, std::uint64_t n) {
  return SumBody(b, mask, n);
}
const bool kAvx2 = __builtin_cpu_supports("avx2");
void Filter(const std::uint64_t* a, std::uint64_t n, std::uint64_t x, std::uint8_t* mask) {
  if (kAvx2) return FilterAvx2(a, n, x, mask);
  FilterBody(a, n, x, mask);
}
std::uint64_t Sum(const std::uint64_t* b, const std::uint8_t* mask, std::uint64_t n) {
  return kAvx2 ? SumAvx2(b, mask, n) : SumBody(b, mask, n);
}

void PinTo(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

enum Pipeline { kScanA = 0, kScanB = 1, kAggregate = 2 };

struct ThreadTimes {
  Clock::time_point start, end;
  Pipeline pipeline = kScanA;
  std::uint64_t sum = 0, hits = 0, late = 0, misses = 0, failed = 0, slow_bytes = 0;
};

// The state one run of the query shares between its threads.
class QueryRun {
 public:
  QueryRun(const Config& cfg, const Layout& l, std::uint64_t x, OffloadCache* cache,
           std::uint8_t* mask)
      : cfg_(cfg),
        l_(l),
        x_(x),
        cache_(cache),
        mask_(mask),
        chunks_((cfg.rows + cfg.chunk_rows - 1) / cfg.chunk_rows),
        ready_(std::make_unique<std::atomic<std::uint32_t>[]>(chunks_)),
        next_(static_cast<std::size_t>(cfg.groups)) {}

  void Run(int group, ThreadTimes& t) {
    if (t.pipeline == kScanA) ScanA(group, t);
    if (t.pipeline == kScanB) ScanB(group, t);
    if (t.pipeline == kAggregate) Aggregate(group, t);
    t.end = Clock::now();
  }

 private:
  struct GroupCounters {
    std::atomic<std::uint64_t> a{0}, b{0}, agg{0};
  };

  // Calls f(chunk, first row, rows) for the chunks of `group` that `counter` hands out.
  template <typename F>
  void ForChunks(int group, std::atomic<std::uint64_t>& counter, F&& f) {
    const std::uint64_t C = cfg_.chunk_rows;
    for (;;) {
      const std::uint64_t k = static_cast<std::uint64_t>(group) +
                              counter.fetch_add(1) * static_cast<std::uint64_t>(cfg_.groups);
      if (k >= chunks_) return;
      f(k, k * C, std::min(C, cfg_.rows - k * C));
    }
  }

  void ScanA(int g, ThreadTimes& t) {
    ForChunks(g, next_[g].a, [&](std::uint64_t k, std::uint64_t base, std::uint64_t n) {
      Filter(l_.a + base, n, x_, mask_ + base);
      ready_[k].store(1, std::memory_order_release);
      if (l_.a_slow) t.slow_bytes += n * sizeof(std::uint64_t);
    });
  }

  void ScanB(int g, ThreadTimes&) {
    ForChunks(g, next_[g].b, [&](std::uint64_t, std::uint64_t base, std::uint64_t n) {
      (void)cache_->Access(l_.b + base, n * sizeof(std::uint64_t));  // submit, do not hold
    });
  }

  void Aggregate(int g, ThreadTimes& t) {
    ForChunks(g, next_[g].agg, [&](std::uint64_t k, std::uint64_t base, std::uint64_t n) {
      const std::uint64_t* b = l_.b + base;
      CacheEntry e;
      if (l_.prefetch) e = ChunkOfB(b, n * sizeof(std::uint64_t), t);
      if (e.valid()) b = static_cast<const std::uint64_t*>(e.data());
      while (ready_[k].load(std::memory_order_acquire) == 0) std::this_thread::yield();
      t.sum += Sum(b, mask_ + base, n);
      if (l_.b_slow && b == l_.b + base) t.slow_bytes += n * sizeof(std::uint64_t);
    });
  }

  // b's chunk through the cache: a hit, a fill in progress (waiting beats reading the source
  // again), or a miss that fills it now. An entry whose fill failed or found no room serves
  // the source.
  CacheEntry ChunkOfB(const std::uint64_t* b, std::size_t bytes, ThreadTimes& t) {
    CacheEntry e = cache_->WeakAccess(b, bytes);
    if (e.valid() && e.cached()) {
      ++t.hits;
    } else if (e.valid()) {
      (void)e.Wait();
      ++t.late;
    } else {
      ++t.misses;  // not prefetched (yet), or evicted
      Result<CacheEntry> r = cache_->Access(b, bytes);
      if (r.ok()) {
        e = std::move(*r);
        (void)e.Wait();
      }
    }
    if (e.valid() && !e.cached()) ++t.failed;
    return e;
  }

  const Config& cfg_;
  const Layout& l_;
  const std::uint64_t x_;
  OffloadCache* const cache_;
  std::uint8_t* const mask_;
  const std::uint64_t chunks_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> ready_;
  std::vector<GroupCounters> next_;
};

// Every thread's role: per group, SCAN_a, SCAN_b (when prefetching) and AGGREGATE threads.
// SCAN_a and AGGREGATE threads get a CPU each; SCAN_b threads, which mostly wait for storage,
// float (pinned, they would take a computing thread's CPU from it).
struct Role {
  int group = 0;
  Pipeline pipeline = kScanA;
  int cpu = -1;
};
std::vector<Role> Roles(const Config& cfg, bool prefetch, const std::vector<int>& cpus) {
  std::vector<Role> roles;
  int compute = 0;
  for (int g = 0; g < cfg.groups; ++g) {
    auto add = [&](Pipeline p, int count) {
      for (int i = 0; i < count; ++i) {
        int cpu = -1;
        if (cfg.pin && !cpus.empty() && p != kScanB)
          cpu = cpus[static_cast<std::size_t>(compute++) % cpus.size()];
        roles.push_back({g, p, cpu});
      }
    };
    add(kScanA, cfg.threads_scan_a);
    if (prefetch) add(kScanB, cfg.threads_scan_b);
    add(kAggregate, cfg.threads_aggregate);
  }
  return roles;
}

IterationResult Collect(const std::vector<ThreadTimes>& times, Clock::time_point t0,
                        Clock::time_point t1) {
  IterationResult r;
  r.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  double busy[3] = {0, 0, 0};
  for (const ThreadTimes& t : times) {
    busy[t.pipeline] =
        std::max(busy[t.pipeline], std::chrono::duration<double, std::milli>(t.end - t0).count());
    r.sum += t.sum;
    r.hits += t.hits;
    r.late_hits += t.late;
    r.misses += t.misses;
    r.failed += t.failed;
    r.slow_bytes += t.slow_bytes;
  }
  r.pipelines = {busy[kScanA], busy[kScanB], busy[kAggregate]};
  return r;
}

}  // namespace

IterationResult RunQuery(const Config& cfg, const Layout& l, std::uint64_t x, OffloadCache* cache,
                         const std::vector<int>& cpus, std::uint8_t* mask) {
  QueryRun run(cfg, l, x, cache, mask);
  const std::vector<Role> roles = Roles(cfg, l.prefetch, cpus);
  std::vector<ThreadTimes> times(roles.size());
  std::barrier start(static_cast<std::ptrdiff_t>(roles.size()) + 1);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    times[i].pipeline = roles[i].pipeline;
    threads.emplace_back([&, i] {
      PinTo(roles[i].cpu);
      start.arrive_and_wait();
      times[i].start = Clock::now();
      run.Run(roles[i].group, times[i]);
    });
  }
  start.arrive_and_wait();
  const auto t0 = Clock::now();
  for (auto& t : threads) t.join();
  return Collect(times, t0, Clock::now());
}

}  // namespace tierflow::qdp
