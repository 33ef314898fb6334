#include "tierflow/qdp.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "tierflow/buffer.h"
#include "tierflow/cache.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"
#include "tierflow/uring_engine.h"

namespace tierflow {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kPage = 4096;

// A column on the storage tier: a file, its mapping, and a descriptor for page-cache control.
struct StoredColumn {
  std::string path;
  MappedFile map;
  int fd = -1;
  std::size_t bytes = 0;  // of data (the file is padded to a page multiple)
  ~StoredColumn() {
    if (fd >= 0) close(fd);
  }
};

Status WriteColumn(const std::string& path, const std::vector<std::uint64_t>& v, StoredColumn& out) {
  const std::size_t bytes = v.size() * sizeof(std::uint64_t);
  const std::size_t padded = (bytes + kPage - 1) / kPage * kPage;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  const char* p = reinterpret_cast<const char*>(v.data());
  for (std::size_t done = 0; done < bytes;) {
    ssize_t n = pwrite(fd, p + done, std::min<std::size_t>(bytes - done, 64 << 20), static_cast<off_t>(done));
    if (n <= 0) {
      close(fd);
      return Status::IoError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (ftruncate(fd, static_cast<off_t>(padded)) != 0 || fsync(fd) != 0) {
    close(fd);
    return Status::IoError(fmt::format("cannot finish {}: {}", path, std::strerror(errno)));
  }
  out.path = path;
  out.fd = fd;
  out.bytes = bytes;
  Result<MappedFile> m = MappedFile::Open(path);
  if (!m.ok()) return m.status();
  out.map = std::move(*m);
  return Status::Ok();
}

std::uint64_t ResidentPages(const StoredColumn& c) {
  const std::size_t pages = (c.map.size() + kPage - 1) / kPage;
  std::vector<unsigned char> vec(pages);
  if (mincore(const_cast<std::byte*>(c.map.data()), c.map.size(), vec.data()) != 0) return pages;
  std::uint64_t n = 0;
  for (unsigned char b : vec) n += b & 1;
  return n;
}

// Drops the column's pages from this process's mapping and from the page cache, so that the
// next read comes from storage. Fails if pages stay resident.
Status MakeCold(const StoredColumn& c) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    madvise(const_cast<std::byte*>(c.map.data()), c.map.size(), MADV_DONTNEED);
    posix_fadvise(c.fd, 0, 0, POSIX_FADV_DONTNEED);
    if (ResidentPages(c) == 0) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status(StatusCode::kFailed,
                fmt::format("{} keeps {} pages in the page cache after POSIX_FADV_DONTNEED (another "
                            "process maps it?): the run would not start cold",
                            c.path, ResidentPages(c)));
}

void PinTo(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

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

struct Layout {
  const std::uint64_t* a = nullptr;
  const std::uint64_t* b = nullptr;
  bool prefetch = false;
};

struct IterationResult {
  double ms = 0;
  QdpPipelineTimes pipelines;
  std::uint64_t sum = 0, hits = 0, late_hits = 0, misses = 0, failed = 0;
};

// One run of the query: G groups, each with its SCAN_a, SCAN_b (when prefetching) and
// AGGREGATE threads; group g handles chunks g, g+G, ...; within a group each pipeline's
// threads take chunks from a shared counter.
IterationResult RunQuery(const QdpConfig& cfg, const Layout& l, std::uint64_t x,
                         OffloadCache* cache, const std::vector<int>& cpus) {
  const std::uint64_t rows = cfg.rows, C = cfg.chunk_rows;
  const std::uint64_t chunks = (rows + C - 1) / C;
  std::vector<std::uint8_t> mask(rows);  // one byte per row: both loops vectorise
  auto ready = std::make_unique<std::atomic<std::uint32_t>[]>(chunks);
  const int G = cfg.groups;
  struct GroupCounters {
    std::atomic<std::uint64_t> a{0}, b{0}, agg{0};
  };
  std::vector<GroupCounters> next(static_cast<std::size_t>(G));
  struct ThreadTimes {
    Clock::time_point start, end;
    int pipeline = 0;
    std::uint64_t sum = 0, hits = 0, late = 0, misses = 0, failed = 0;
  };
  const int per_group = cfg.threads_scan_a + (l.prefetch ? cfg.threads_scan_b : 0) + cfg.threads_aggregate;
  std::vector<ThreadTimes> times(static_cast<std::size_t>(G * per_group));
  std::barrier start(G * per_group + 1);
  auto chunk_of = [&](int g, std::uint64_t j) { return static_cast<std::uint64_t>(g) + j * G; };

  auto scan_a = [&](int g, ThreadTimes& t) {
    for (std::uint64_t j; (j = next[g].a.fetch_add(1)), chunk_of(g, j) < chunks;) {
      const std::uint64_t k = chunk_of(g, j), base = k * C, n = std::min(C, rows - base);
      Filter(l.a + base, n, x, mask.data() + base);
      ready[k].store(1, std::memory_order_release);
    }
    t.end = Clock::now();
  };
  auto scan_b = [&](int g, ThreadTimes& t) {
    for (std::uint64_t j; (j = next[g].b.fetch_add(1)), chunk_of(g, j) < chunks;) {
      const std::uint64_t k = chunk_of(g, j), base = k * C, n = std::min(C, rows - base);
      (void)cache->Access(l.b + base, n * sizeof(std::uint64_t));  // submit, do not hold
    }
    t.end = Clock::now();
  };
  auto aggregate = [&](int g, ThreadTimes& t) {
    std::uint64_t sum = 0;
    for (std::uint64_t j; (j = next[g].agg.fetch_add(1)), chunk_of(g, j) < chunks;) {
      const std::uint64_t k = chunk_of(g, j), base = k * C, n = std::min(C, rows - base);
      const std::uint64_t* b = l.b + base;
      CacheEntry e;
      if (l.prefetch) {
        const std::size_t bytes = n * sizeof(std::uint64_t);
        e = cache->WeakAccess(b, bytes);
        if (e.valid() && e.cached()) {
          ++t.hits;
        } else if (e.valid()) {
          (void)e.Wait();  // a fill in progress: waiting beats reading the source again
          ++t.late;
        } else {
          ++t.misses;  // not prefetched (yet), or evicted: fill it now, from the file
          Result<CacheEntry> r = cache->Access(b, bytes);
          if (r.ok()) {
            e = std::move(*r);
            (void)e.Wait();
          }
        }
        if (e.valid() && !e.cached()) ++t.failed;  // failed fill or no room: the source
        if (e.valid()) b = static_cast<const std::uint64_t*>(e.data());
      }
      while (ready[k].load(std::memory_order_acquire) == 0) std::this_thread::yield();
      sum += Sum(b, mask.data() + base, n);
    }
    t.sum = sum;
    t.end = Clock::now();
  };

  std::vector<std::thread> threads;
  int index = 0, compute = 0;
  for (int g = 0; g < G; ++g) {
    auto spawn = [&](int pipeline, int count) {
      for (int i = 0; i < count; ++i, ++index) {
        ThreadTimes& t = times[static_cast<std::size_t>(index)];
        t.pipeline = pipeline;
        // SCAN_a and AGGREGATE threads get a CPU each; SCAN_b threads, which mostly wait for
        // storage, float (pinned, they would take a computing thread's CPU from it).
        int cpu = -1;
        if (cfg.pin && !cpus.empty() && pipeline != 1) {
          cpu = cpus[static_cast<std::size_t>(compute++) % cpus.size()];
        }
        threads.emplace_back([&, g, pipeline, cpu] {
          PinTo(cpu);
          start.arrive_and_wait();
          t.start = Clock::now();
          if (pipeline == 0) scan_a(g, t);
          if (pipeline == 1) scan_b(g, t);
          if (pipeline == 2) aggregate(g, t);
        });
      }
    };
    spawn(0, cfg.threads_scan_a);
    if (l.prefetch) spawn(1, cfg.threads_scan_b);
    spawn(2, cfg.threads_aggregate);
  }
  start.arrive_and_wait();
  const auto t0 = Clock::now();
  for (auto& t : threads) t.join();
  const auto t1 = Clock::now();
  IterationResult r;
  r.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  double busy[3] = {0, 0, 0};
  for (const ThreadTimes& t : times) {
    busy[t.pipeline] = std::max(busy[t.pipeline], std::chrono::duration<double, std::milli>(t.end - t0).count());
    r.sum += t.sum;
    r.hits += t.hits;
    r.late_hits += t.late;
    r.misses += t.misses;
    r.failed += t.failed;
  }
  r.pipelines = {busy[0], busy[1], busy[2]};
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Status Validate(const QdpConfig& c, int cpus) {
  if (c.rows == 0 || c.rows > (std::uint64_t{1} << 32)) return Status::Invalid("--rows must be 1 .. 2^32");
  if (c.chunk_rows < 512 || c.chunk_rows % 512 != 0) {
    return Status::Invalid(fmt::format(
        "--chunk-rows {}: use a multiple of 512 rows (4 KiB of uint64, the storage block size "
        "direct I/O reads in)", c.chunk_rows));
  }
  if (!(c.selectivity >= 0 && c.selectivity <= 1)) return Status::Invalid("--selectivity must be 0 .. 1");
  if (c.groups < 1 || c.threads_scan_a < 1 || c.threads_scan_b < 1 || c.threads_aggregate < 1) {
    return Status::Invalid("every pipeline needs at least one thread in at least one group");
  }
  const int compute = c.groups * (c.threads_scan_a + c.threads_aggregate);
  if (compute > cpus) {
    return Status::Invalid(fmt::format(
        "{} group(s) x ({} SCAN_a + {} AGGREGATE) threads = {} computing threads on {} CPUs: "
        "more threads than cores (SCAN_b threads, which mostly wait for storage, do not count)",
        c.groups, c.threads_scan_a, c.threads_aggregate, compute, cpus));
  }
  if (c.cache_capacity == 0) {
    return Status::Invalid(fmt::format(
        "cache capacity 0: the cache could hold nothing; give at least one chunk ({} bytes), or "
        "less than b to see eviction", c.chunk_rows * 8));
  }
  if (c.iterations < 1 || c.iterations > 100 || c.warmup < 0 || c.warmup > 10) {
    return Status::Invalid("--iterations must be 1..100 and --warmup 0..10");
  }
  const std::vector<std::string> known = {"baseline", "upper_limit", "prefetch",
                                          "prefetch_distributed", "all_dram"};
  for (const std::string& n : c.configs) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      return Status::Invalid(fmt::format("configuration '{}': use baseline, upper_limit, prefetch, "
                                         "prefetch_distributed or all_dram", n));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<QdpReport> RunQdp(const QdpConfig& cfg) {
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  const NumaNode* node = nullptr;
  for (const NumaNode& n : topo->nodes()) {
    if (n.has_cpus()) {
      node = &n;
      break;
    }
  }
  if (node == nullptr) return Status::NotFound("no NUMA node with CPUs");
  const std::vector<int> cpus = node->cpus;
  if (Status s = Validate(cfg, static_cast<int>(cpus.size())); !s.ok()) return s;

  // Data: a uniform in [0, 2^32), b in [0, 2^32) (the sum of 2^32 rows fits 64 bits).
  const std::uint64_t rows = cfg.rows;
  std::vector<std::uint64_t> a(rows), b(rows);
  std::mt19937_64 rng(cfg.seed);
  for (std::uint64_t i = 0; i < rows; ++i) {
    a[i] = rng() >> 32;
    b[i] = rng() >> 32;
  }
  const std::uint64_t x = static_cast<std::uint64_t>(cfg.selectivity * 4294967296.0);
  std::uint64_t expected = 0;
  for (std::uint64_t i = 0; i < rows; ++i) expected += a[i] < x ? b[i] : 0;

  std::string dir = cfg.data_dir;
  bool remove_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/tierflow-qdp-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Status::IoError(fmt::format("cannot create a data directory in /tmp: {}", std::strerror(errno)));
    dir = tmpl;
    remove_dir = true;
  }
  struct Cleanup {
    std::string dir;
    bool remove;
    ~Cleanup() {
      if (remove) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    }
  } cleanup{dir, remove_dir};
  StoredColumn fa, fb;
  if (Status s = WriteColumn(dir + "/a.u64", a, fa); !s.ok()) return s;
  if (Status s = WriteColumn(dir + "/b.u64", b, fb); !s.ok()) return s;
  const std::size_t bytes = rows * sizeof(std::uint64_t);
  Result<Buffer> da = Buffer::OnNode(node->os_index, bytes), db = Buffer::OnNode(node->os_index, bytes);
  if (!da.ok()) return da.status();
  if (!db.ok()) return db.status();
  std::memcpy(da->data(), a.data(), bytes);
  std::memcpy(db->data(), b.data(), bytes);
  a = {};
  b = {};

  // Engines: the storage engine reads b's file; the CPU engine serves memory sources.
  IoUringEngineOptions uo;
  uo.queue_depth = 64;
  uo.max_read_bytes = 1 << 20;
  Result<std::unique_ptr<IoUringEngine>> uring = IoUringEngine::Create(uo);
  if (!uring.ok()) return uring.status();
  for (StoredColumn* c : {&fa, &fb}) {
    if (Status s = (*uring)->RegisterFile(c->map); !s.ok()) return s;
  }
  CpuEngineOptions co;
  co.node = node->os_index;
  Result<std::unique_ptr<CpuEngine>> cpu = CpuEngine::Create(*topo, co);
  if (!cpu.ok()) return cpu.status();

  QdpReport report;
  report.expected_sum = expected;
  report.rows = rows;
  report.chunk_rows = cfg.chunk_rows;
  report.data_dir = dir;
  report.threads = cfg.groups * (cfg.threads_scan_a + cfg.threads_scan_b + cfg.threads_aggregate);
  report.cache_capacity_bytes = cfg.cache_capacity != QdpConfig::kCapacityOfB
                                    ? cfg.cache_capacity
                                    : (bytes + kPage - 1) / kPage * kPage;

  // The storage floor: b's file read with large direct reads, cold.
  {
    if (Status s = MakeCold(fb); !s.ok()) return s;
    const auto t0 = Clock::now();
    Result<Handle> h = (*uring)->Submit(Operation::Copy(db->data(), fb.map.data(), bytes));
    if (!h.ok()) return h.status();
    if (Status s = h->Wait(); !s.ok()) return s;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    report.storage_gbps = static_cast<double>(bytes) / s / 1e9;
    report.storage_floor_ms = static_cast<double>(bytes) / (report.storage_gbps * 1e9) * 1e3;
    if (std::memcmp(db->data(), fb.map.data(), bytes) != 0) {
      return Status(StatusCode::kInternal, "b read back from storage differs from what was written");
    }
  }

  const auto* dram_a = reinterpret_cast<const std::uint64_t*>(da->data());
  const auto* dram_b = reinterpret_cast<const std::uint64_t*>(db->data());
  const auto* file_a = reinterpret_cast<const std::uint64_t*>(fa.map.data());
  const auto* file_b = reinterpret_cast<const std::uint64_t*>(fb.map.data());
  double baseline_ms = 0;
  for (const std::string& name : cfg.configs) {
    Layout l;
    if (name == "baseline") l = {file_a, file_b, false};
    if (name == "upper_limit") l = {file_a, dram_b, false};
    if (name == "prefetch") l = {file_a, file_b, true};
    if (name == "prefetch_distributed") l = {dram_a, file_b, true};
    if (name == "all_dram") l = {dram_a, dram_b, false};
    QdpConfigResult res;
    res.name = name;
    std::vector<double> sa, sb, ag;
    std::uint64_t peak = 0;
    for (int it = 0; it < cfg.warmup + cfg.iterations; ++it) {
      // Cold: column pages out of the page cache, a fresh cache.
      for (StoredColumn* c : {&fa, &fb}) {
        if (Status s = MakeCold(*c); !s.ok()) return s;
      }
      res.resident_pages_at_start = ResidentPages(fa) + ResidentPages(fb);
      CacheConfig cc;
      cc.engines = {cpu->get(), uring->get()};
      cc.capacity[node->os_index] = report.cache_capacity_bytes;
      cc.arena_chunk = std::max<std::size_t>(std::size_t{1} << 20,
                                             std::min<std::size_t>(report.cache_capacity_bytes, 64 << 20));
      const int fast = node->os_index;
      cc.placement = [fast](const void*, std::size_t, int) { return fast; };
      Result<std::unique_ptr<OffloadCache>> cache = OffloadCache::Create(*topo, cc);
      if (!cache.ok()) return cache.status();
      const IoUringEngineStats before = (*uring)->stats();
      if (cfg.inject_storage_errors > 0) (*uring)->InjectReadErrors(cfg.inject_storage_errors, EIO);
      IterationResult r = RunQuery(cfg, l, x, cache->get(), cpus);
      (*uring)->InjectReadErrors(0, 0);
      (*cache)->WaitForFills();
      if (r.sum != expected) {
        return Status(StatusCode::kInternal,
                      fmt::format("{}: the query returned {} but the sum is {}: a wrong result is "
                                  "never reported; please report this", name, r.sum, expected));
      }
      CacheNodeStats cs;
      for (const CacheNodeStats& n : (*cache)->stats()) {
        if (n.node == node->os_index) cs = n;
      }
      peak = std::max(peak, cs.peak_bytes);
      if (it < cfg.warmup) continue;
      res.times_ms.push_back(r.ms);
      sa.push_back(r.pipelines.scan_a_ms);
      sb.push_back(r.pipelines.scan_b_ms);
      ag.push_back(r.pipelines.aggregate_ms);
      res.sum = r.sum;
      res.hits = r.hits;
      res.late_hits = r.late_hits;
      res.misses = r.misses;
      res.failed_fills = cs.failed_fills;
      const std::uint64_t through = r.hits + r.late_hits + r.misses;
      res.hit_rate = through == 0 ? 0 : static_cast<double>(r.hits + r.late_hits) / static_cast<double>(through);
      const IoUringEngineStats after = (*uring)->stats();
      res.bytes_from_storage = (after.bytes - before.bytes) + (ResidentPages(fa) + ResidentPages(fb)) * kPage;
      res.bytes_to_fast_tier = cs.bytes_filled;
    }
    res.time_ms_median = Median(res.times_ms);
    res.pipelines = {Median(sa), Median(sb), Median(ag)};
    res.cache_peak_bytes = peak;
    report.fast_tier_peak_bytes = std::max(report.fast_tier_peak_bytes, peak);
    if (name == "baseline") baseline_ms = res.time_ms_median;
    report.configs.push_back(res);
  }
  for (QdpConfigResult& r : report.configs) {
    r.speedup = baseline_ms > 0 && r.time_ms_median > 0 ? baseline_ms / r.time_ms_median : 0;
  }
  return report;
}

}  // namespace tierflow
