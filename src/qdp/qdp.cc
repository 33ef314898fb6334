#include "tierflow/qdp.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "memory/arena.h"
#include "tierflow/buffer.h"
#include "tierflow/cache.h"
#include "tierflow/copy_policy.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_fleet.h"
#include "tierflow/dsa_inventory.h"
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
  ~StoredColumn() {
    if (fd >= 0) close(fd);
  }
};

// A column file as the storage tier: its mapping and a descriptor for page-cache control.
Status OpenColumn(const std::string& path, StoredColumn& out) {
  out.path = path;
  out.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (out.fd < 0)
    return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  Result<MappedFile> m = MappedFile::Open(path);
  if (!m.ok()) return m.status();
  out.map = std::move(*m);
  return Status::Ok();
}

Status WriteColumn(const std::string& path, const std::vector<std::uint64_t>& v,
                   StoredColumn& out) {
  const std::size_t bytes = v.size() * sizeof(std::uint64_t);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  const char* p = reinterpret_cast<const char*>(v.data());
  for (std::size_t done = 0; done < bytes;) {
    ssize_t n = pwrite(fd, p + done, std::min<std::size_t>(bytes - done, 64 << 20),
                       static_cast<off_t>(done));
    if (n <= 0) {
      close(fd);
      return Status::IoError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
  // Not padded to a page: the file's length says how many rows it holds (--reuse-data checks
  // it); the storage engine reads an unaligned tail through the page cache.
  const bool synced = fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!synced)
    return Status::IoError(fmt::format("cannot finish {}: {}", path, std::strerror(err)));
  return OpenColumn(path, out);
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
  return Status(
      StatusCode::kFailed,
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
  bool a_slow = false, b_slow = false;  // on a slow memory tier: count the bytes read there
};

struct IterationResult {
  double ms = 0;
  QdpPipelineTimes pipelines;
  std::uint64_t sum = 0, hits = 0, late_hits = 0, misses = 0, failed = 0;
  std::uint64_t slow_bytes = 0;  // read by the query itself from a slow memory tier
};

// One run of the query: G groups, each with its SCAN_a, SCAN_b (when prefetching) and
// AGGREGATE threads; group g handles chunks g, g+G, ...; within a group each pipeline's
// threads take chunks from a shared counter. `mask` has a byte per row (both loops
// vectorise); SCAN_a writes a chunk's bytes before AGGREGATE may read them.
IterationResult RunQuery(const QdpConfig& cfg, const Layout& l, std::uint64_t x,
                         OffloadCache* cache, const std::vector<int>& cpus, std::uint8_t* mask) {
  const std::uint64_t rows = cfg.rows, C = cfg.chunk_rows;
  const std::uint64_t chunks = (rows + C - 1) / C;
  auto ready = std::make_unique<std::atomic<std::uint32_t>[]>(chunks);
  const int G = cfg.groups;
  struct GroupCounters {
    std::atomic<std::uint64_t> a{0}, b{0}, agg{0};
  };
  std::vector<GroupCounters> next(static_cast<std::size_t>(G));
  struct ThreadTimes {
    Clock::time_point start, end;
    int pipeline = 0;
    std::uint64_t sum = 0, hits = 0, late = 0, misses = 0, failed = 0, slow_bytes = 0;
  };
  const int per_group =
      cfg.threads_scan_a + (l.prefetch ? cfg.threads_scan_b : 0) + cfg.threads_aggregate;
  std::vector<ThreadTimes> times(static_cast<std::size_t>(G * per_group));
  std::barrier start(G * per_group + 1);
  auto chunk_of = [&](int g, std::uint64_t j) { return static_cast<std::uint64_t>(g) + j * G; };

  auto scan_a = [&](int g, ThreadTimes& t) {
    for (std::uint64_t j; (j = next[g].a.fetch_add(1)), chunk_of(g, j) < chunks;) {
      const std::uint64_t k = chunk_of(g, j), base = k * C, n = std::min(C, rows - base);
      Filter(l.a + base, n, x, mask + base);
      ready[k].store(1, std::memory_order_release);
      if (l.a_slow) t.slow_bytes += n * sizeof(std::uint64_t);
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
      sum += Sum(b, mask + base, n);
      if (l.b_slow && b == l.b + base) t.slow_bytes += n * sizeof(std::uint64_t);
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
    busy[t.pipeline] =
        std::max(busy[t.pipeline], std::chrono::duration<double, std::milli>(t.end - t0).count());
    r.sum += t.sum;
    r.hits += t.hits;
    r.late_hits += t.late;
    r.misses += t.misses;
    r.failed += t.failed;
    r.slow_bytes += t.slow_bytes;
  }
  r.pipelines = {busy[0], busy[1], busy[2]};
  return r;
}

// Rows first_row .. first_row+n-1 of a column with their values, as one number: sum of
// value * (2 * row + 1) mod 2^64. Pieces add up to the whole column's, and a value in the wrong
// row changes it but for a coincidence of powers of two (the weights differ).
std::uint64_t Fingerprint(const std::uint64_t* v, std::uint64_t n, std::uint64_t first_row) {
  std::uint64_t f = 0;
  for (std::uint64_t i = 0; i < n; ++i) f += v[i] * (2 * (first_row + i) + 1);
  return f;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One chunk of b (the table's only chunk when it has fewer rows), in whole pages.
std::uint64_t MinCacheCapacity(const QdpConfig& c) {
  const std::uint64_t chunk = std::min(c.chunk_rows, c.rows) * sizeof(std::uint64_t);
  return (chunk + kPage - 1) / kPage * kPage;
}

Status Validate(const QdpConfig& c, int cpus) {
  if (c.rows == 0 || c.rows > (std::uint64_t{1} << 32))
    return Status::Invalid("--rows must be 1 .. 2^32");
  if (c.chunk_rows < 512 || c.chunk_rows % 512 != 0 || c.chunk_rows > (std::uint64_t{1} << 32)) {
    return Status::Invalid(fmt::format(
        "--chunk-rows {}: use a multiple of 512 rows (4 KiB of uint64, the storage block size "
        "direct I/O reads in) up to 2^32",
        c.chunk_rows));
  }
  if (!(c.selectivity >= 0 && c.selectivity <= 1))
    return Status::Invalid("--selectivity must be 0 .. 1");
  if (c.groups < 1 || c.threads_scan_a < 1 || c.threads_scan_b < 1 || c.threads_aggregate < 1) {
    return Status::Invalid("every pipeline needs at least one thread in at least one group");
  }
  const long long threads = static_cast<long long>(c.groups) *
                            (c.threads_scan_a + c.threads_scan_b + c.threads_aggregate);
  if (threads > 1024) {
    return Status::Invalid(
        fmt::format("{} group(s) x ({} SCAN_a + {} SCAN_b + {} AGGREGATE) = {} threads: use at "
                    "most 1024 in all",
                    c.groups, c.threads_scan_a, c.threads_scan_b, c.threads_aggregate, threads));
  }
  const int compute = c.groups * (c.threads_scan_a + c.threads_aggregate);
  if (compute > cpus && !c.oversubscribe) {
    return Status::Invalid(fmt::format(
        "{} group(s) x ({} SCAN_a + {} AGGREGATE) threads = {} computing threads on {} CPUs: "
        "more threads than cores (SCAN_b threads, which mostly wait for storage, do not count); "
        "use fewer, or --oversubscribe to run anyway with meaningless times",
        c.groups, c.threads_scan_a, c.threads_aggregate, compute, cpus));
  }
  // The cache must hold one chunk (the floor reads b in whole chunks, the query caches them).
  const std::uint64_t min_capacity = MinCacheCapacity(c);
  if (c.cache_capacity < min_capacity) {
    return Status::Invalid(fmt::format(
        "--cache-capacity {}: the cache must hold at least one chunk of b ({} bytes with "
        "--chunk-rows {}); give at least {}, or less than b's {} bytes to see eviction",
        c.cache_capacity, min_capacity, c.chunk_rows, min_capacity, c.rows * 8));
  }
  if (c.storage_queue_depth < 1 || c.storage_queue_depth > 4096) {
    return Status::Invalid(fmt::format("--queue-depth {}: use 1..4096", c.storage_queue_depth));
  }
  if (c.storage_read_bytes < 4096 || c.storage_read_bytes % 4096 != 0 ||
      c.storage_read_bytes > (std::size_t{1} << 30)) {
    return Status::Invalid(
        fmt::format("--read-size {}: use a multiple of 4 KiB up to 1 GiB", c.storage_read_bytes));
  }
  if (c.engine != "cpu" && c.engine != "dsa" && c.engine != "dsa-model") {
    return Status::Invalid(fmt::format("--engine '{}': use cpu, dsa or dsa-model", c.engine));
  }
  if (c.reuse_data && c.data_dir.empty()) {
    return Status::Invalid("--reuse-data reads the columns from --data-dir: give the directory");
  }
  if (c.iterations < 1 || c.iterations > 100 || c.warmup < 0 || c.warmup > 10) {
    return Status::Invalid("--iterations must be 1..100 and --warmup 0..10");
  }
  const std::vector<std::string> known = {"baseline", "upper_limit", "prefetch",
                                          "prefetch_distributed", "all_dram"};
  if (c.configs.empty()) {
    return Status::Invalid(
        "--configs is empty: name at least one of baseline, upper_limit, "
        "prefetch, prefetch_distributed, all_dram");
  }
  for (const std::string& n : c.configs) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      return Status::Invalid(
          fmt::format("configuration '{}': use baseline, upper_limit, prefetch, "
                      "prefetch_distributed or all_dram",
                      n));
    }
  }
  return Status::Ok();
}

// A tier of the experiment: the storage tier (column files) or a memory node.
struct Tier {
  bool storage = false;
  int node = -1;
  std::string label;  // "storage", "node 0 (dram)"
};

Result<Tier> ResolveTier(const Topology& topo, const std::string& spec, int cpu_node,
                         std::string_view option, bool storage_allowed) {
  auto label = [](const NumaNode& n) {
    return fmt::format("node {} ({})", n.os_index, TierKindName(n.kind));
  };
  if (spec == "storage") {
    if (!storage_allowed) {
      return Status::Invalid(
          fmt::format("{} storage: this tier holds data the CPUs read and the "
                      "cache writes; name a memory node (node:N) or kind",
                      option));
    }
    return Tier{true, -1, "storage"};
  }
  if (spec.rfind("node:", 0) == 0) {
    int id = -1;
    const char* first = spec.data() + 5;
    const char* last = spec.data() + spec.size();
    auto [end, ec] = std::from_chars(first, last, id);
    if (ec != std::errc() || end != last || first == last) {
      return Status::Invalid(
          fmt::format("{} '{}': write node:N with N a NUMA node number", option, spec));
    }
    Result<const NumaNode*> n = topo.FindNode(id);
    if (!n.ok())
      return Status::NotFound(fmt::format("{} {}: {}", option, spec, n.status().message()));
    return Tier{false, id, label(**n)};
  }
  Result<TierKind> kind = ParseTierKind(spec);
  if (!kind.ok() || *kind == TierKind::kStorage || *kind == TierKind::kUnknown) {
    return Status::Invalid(
        fmt::format("{} '{}': use {}node:N, or a memory kind (dram, hbm, cxl, nvm)", option, spec,
                    storage_allowed ? "storage, " : ""));
  }
  Result<const NumaNode*> n = topo.NearestOfKind(cpu_node, *kind);
  if (!n.ok()) {
    std::string have;
    for (const NumaNode& m : topo.nodes()) {
      have +=
          fmt::format("{}node {} ({})", have.empty() ? "" : ", ", m.os_index, TierKindName(m.kind));
    }
    return Status::NotFound(
        fmt::format("{} {}: this machine has no {} node (it has {})", option, spec, spec, have));
  }
  return Tier{false, (*n)->os_index, label(**n)};
}

// Reads the first `rows` values of a column file written earlier (--reuse-data).
Status ReadColumnFile(const std::string& path, std::uint64_t rows,
                      std::vector<std::uint64_t>& out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return Status::NotFound(fmt::format(
          "{} is missing: write the columns there first (tierflow qdp --data-dir DIR without "
          "--reuse-data), or drop --reuse-data to generate them",
          path));
    }
    return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  const std::uint64_t need = rows * sizeof(std::uint64_t);
  if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::Invalid(fmt::format(
        "{} is not a regular file (a directory?): --reuse-data reads the column files a.u64 and "
        "b.u64 that an earlier run wrote into --data-dir",
        path));
  }
  if (fstat(fd, &st) == 0 && st.st_size < static_cast<off_t>(sizeof(std::uint64_t))) {
    close(fd);
    return Status::Invalid(fmt::format(
        "{} is empty: write the columns again (tierflow qdp --data-dir DIR without --reuse-data)",
        path));
  }
  if (fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < need) {
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    close(fd);
    return Status::Invalid(fmt::format(
        "{} is short: its {} bytes hold {} rows, --rows {} needs {} bytes; use --rows {} or "
        "fewer, or write the columns again (drop --reuse-data)",
        path, size, size / sizeof(std::uint64_t), rows, need, size / sizeof(std::uint64_t)));
  }
  out.resize(rows);
  auto* p = reinterpret_cast<char*>(out.data());
  for (std::uint64_t done = 0; done < need;) {
    ssize_t n = pread(fd, p + done, std::min<std::uint64_t>(need - done, 64 << 20),
                      static_cast<off_t>(done));
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      close(fd);
      return Status::IoError(
          fmt::format("cannot read {} at offset {}: {}", path, done, std::strerror(err)));
    }
    done += static_cast<std::uint64_t>(n);
  }
  close(fd);
  return Status::Ok();
}

// The engines that fill the cache from memory: the CPU engine, or Intel DSA (hardware or model).
struct MemoryEngines {
  std::unique_ptr<CpuEngine> cpu;
  std::unique_ptr<DsaFleet> fleet;
  std::vector<Engine*> engines;
  bool model = false;
};

Result<MemoryEngines> MakeMemoryEngines(const Topology& topo, const std::string& name, int cpu_node,
                                        int fast_node) {
  MemoryEngines m;
  if (name == "cpu") {
    CpuEngineOptions co;
    co.node = cpu_node;
    Result<std::unique_ptr<CpuEngine>> cpu = CpuEngine::Create(topo, co);
    if (!cpu.ok()) return cpu.status();
    m.cpu = std::move(*cpu);
    m.engines = {m.cpu.get()};
    return m;
  }
  Result<DsaFleet> fleet = Status::Unsupported("");
  if (name == "dsa") {
    Result<DsaInventory> inv = DsaInventory::Discover();
    if (!inv.ok()) return inv.status();
    fleet = DsaFleet::Open(*inv);
    if (!fleet.ok()) {
      return Status(fleet.status().code(),
                    fleet.status().message() +
                        "\n--engine dsa-model runs the fills on the DSA "
                        "device model instead (software copies, labelled so)");
    }
  } else {
    // One model device next to the fast tier, where a real one would take the fills.
    const NumaNode* n = topo.node(fast_node);
    DsaModelConfig mc;
    mc.instant = false;  // engine threads: completion is asynchronous, as on hardware
    fleet = DsaFleet::OnModel({n != nullptr && n->near_cpu_node >= 0 ? n->near_cpu_node : cpu_node},
                              mc);
    m.model = true;
  }
  if (!fleet.ok()) return fleet.status();
  m.fleet = std::make_unique<DsaFleet>(std::move(*fleet));
  m.engines = m.fleet->engines();
  return m;
}

}  // namespace

// MemAvailable of /proc/meminfo (free memory plus what the kernel can reclaim), or 0.
std::uint64_t AvailableMemory() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib * 1024;
}

// Refuses a run that could not fit in memory before anything is allocated: the columns as
// generated (a, b), one placed copy of each, the filter's mask and the cache's capacity.
Status CheckMemory(const QdpConfig& c) {
  const std::uint64_t capacity =
      c.cache_capacity != QdpConfig::kCapacityOfB ? c.cache_capacity : c.rows * 8;
  const std::uint64_t need = c.rows * (16 + 16 + 1) + capacity;
  const std::uint64_t available = AvailableMemory();
  if (available == 0 || need <= available) return Status::Ok();
  if (capacity > available) {
    return Status::OutOfMemory(fmt::format(
        "--cache-capacity {}: more than the {} MiB of memory this machine has available; give "
        "less (b's {} bytes are enough to hold all of it)",
        capacity, available >> 20, c.rows * 8));
  }
  return Status::OutOfMemory(fmt::format(
      "--rows {} needs about {} MiB of memory (the two columns generated and placed, the mask "
      "and {} MiB of cache) and this machine has {} MiB available: use fewer rows or a smaller "
      "--cache-capacity",
      c.rows, need >> 20, capacity >> 20, available >> 20));
}

Result<QdpReport> RunQdp(const QdpConfig& cfg) {
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  const NumaNode* node = nullptr;  // where the CPUs are: DRAM for all_dram and a
  for (const NumaNode& n : topo->nodes()) {
    if (n.has_cpus()) {
      node = &n;
      break;
    }
  }
  if (node == nullptr) return Status::NotFound("no NUMA node with CPUs");
  const std::vector<int> cpus = node->cpus;
  if (Status s = Validate(cfg, static_cast<int>(cpus.size())); !s.ok()) return s;
  if (Status s = CheckMemory(cfg); !s.ok()) return s;
  const std::string dram_spec = fmt::format("node:{}", node->os_index);
  Result<Tier> slow = ResolveTier(*topo, cfg.b_tier, node->os_index, "--b-tier", true);
  if (!slow.ok()) return slow.status();
  Result<Tier> fast = ResolveTier(*topo, cfg.cache_tier.empty() ? dram_spec : cfg.cache_tier,
                                  node->os_index, "--cache-tier", false);
  if (!fast.ok()) return fast.status();
  Result<Tier> a_tier = ResolveTier(*topo, cfg.a_tier.empty() ? dram_spec : cfg.a_tier,
                                    node->os_index, "--a-tier", false);
  if (!a_tier.ok()) return a_tier.status();

  // Data: generated (a, b uniform in [0, 2^32): the sum of 2^32 rows fits 64 bits) or read
  // back from column files.
  const std::uint64_t rows = cfg.rows;
  std::vector<std::uint64_t> a, b;
  if (cfg.reuse_data) {
    if (Status s = ReadColumnFile(cfg.data_dir + "/a.u64", rows, a); !s.ok()) return s;
    if (Status s = ReadColumnFile(cfg.data_dir + "/b.u64", rows, b); !s.ok()) return s;
  } else {
    a.resize(rows);
    b.resize(rows);
    std::mt19937_64 rng(cfg.seed);
    for (std::uint64_t i = 0; i < rows; ++i) {
      a[i] = rng() >> 32;
      b[i] = rng() >> 32;
    }
  }
  const std::uint64_t x = static_cast<std::uint64_t>(cfg.selectivity * 4294967296.0);
  __extension__ unsigned __int128 wide = 0;
  for (std::uint64_t i = 0; i < rows; ++i) {
    if (a[i] >> 63 != 0) {
      return Status::Invalid(
          fmt::format("row {} of a holds {}: the filter compares values below "
                      "2^63 (regenerate the columns)",
                      i, a[i]));
    }
    wide += a[i] < x ? b[i] : 0;
  }
  const std::uint64_t b_fingerprint = Fingerprint(b.data(), rows, 0);
  if (wide >> 64 != 0) {
    return Status::Invalid(
        "SUM(b) over these rows does not fit 64 bits: use fewer rows, smaller "
        "values of b, or a lower selectivity");
  }
  const auto expected = static_cast<std::uint64_t>(wide);

  std::string dir = cfg.data_dir;
  bool remove_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/tierflow-qdp-XXXXXX";
    if (mkdtemp(tmpl) == nullptr)
      return Status::IoError(
          fmt::format("cannot create a data directory in /tmp: {}", std::strerror(errno)));
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
  if (cfg.reuse_data) {
    if (Status s = OpenColumn(dir + "/a.u64", fa); !s.ok()) return s;
    if (Status s = OpenColumn(dir + "/b.u64", fb); !s.ok()) return s;
  } else {
    if (Status s = WriteColumn(dir + "/a.u64", a, fa); !s.ok()) return s;
    if (Status s = WriteColumn(dir + "/b.u64", b, fb); !s.ok()) return s;
  }

  // Every configuration's columns, placed before the first query: one copy per (column, node).
  // The columns, the mask and the cache's memory are large and streamed: transparent huge pages
  // unless turned off (fewer TLB misses for the loops, fewer pages for the kernel to pin for
  // each direct read; all_dram ran 3-10 % faster with them here).
  AllocOptions big;
  if (cfg.huge_pages) big.huge_pages = HugePages::kTransparent;
  const std::size_t bytes = rows * sizeof(std::uint64_t);
  std::map<std::pair<char, int>, Buffer> placed;
  auto column_on = [&](char col, int on) -> Result<const std::uint64_t*> {
    auto it = placed.find({col, on});
    if (it == placed.end()) {
      Result<Buffer> buf = Buffer::OnNode(on, bytes, big);
      if (!buf.ok()) return buf.status();
      std::memcpy(buf->data(), (col == 'a' ? a : b).data(), bytes);
      it = placed.emplace(std::make_pair(col, on), std::move(*buf)).first;
    }
    return reinterpret_cast<const std::uint64_t*>(it->second.data());
  };
  struct Placement {
    const std::uint64_t* a_slow = nullptr;
    const std::uint64_t* b_slow = nullptr;
    const std::uint64_t* a_dist = nullptr;
    const std::uint64_t* b_fast = nullptr;
    const std::uint64_t* a_dram = nullptr;
    const std::uint64_t* b_dram = nullptr;
  } on;
  for (const std::string& name : cfg.configs) {
    std::vector<std::pair<const std::uint64_t**, std::pair<char, int>>> need;
    if (!slow->storage) {
      need.push_back({&on.b_slow, {'b', slow->node}});  // also what the floor is measured with
      if (name != "prefetch_distributed" && name != "all_dram")
        need.push_back({&on.a_slow, {'a', slow->node}});
    }
    if (name == "upper_limit") need.push_back({&on.b_fast, {'b', fast->node}});
    if (name == "prefetch_distributed") need.push_back({&on.a_dist, {'a', a_tier->node}});
    if (name == "all_dram") {
      need.push_back({&on.a_dram, {'a', node->os_index}});
      need.push_back({&on.b_dram, {'b', node->os_index}});
    }
    for (auto& [where, what] : need) {
      Result<const std::uint64_t*> p = column_on(what.first, what.second);
      if (!p.ok()) return p.status();
      *where = *p;
    }
  }
  if (slow->storage) {
    on.a_slow = reinterpret_cast<const std::uint64_t*>(fa.map.data());
    on.b_slow = reinterpret_cast<const std::uint64_t*>(fb.map.data());
  }
  a = {};
  b = {};

  // Engines: io_uring reads the column files; memory sources go to `engine`. The cache plans
  // which one fills an entry (PlanFill), from where the source lives.
  IoUringEngineOptions uo;
  uo.queue_depth = cfg.storage_queue_depth;
  uo.max_read_bytes = cfg.storage_read_bytes;
  Result<std::unique_ptr<IoUringEngine>> uring = IoUringEngine::Create(uo);
  if (!uring.ok()) return uring.status();
  for (StoredColumn* c : {&fa, &fb}) {
    if (Status s = (*uring)->RegisterFile(c->map); !s.ok()) return s;
  }
  Result<MemoryEngines> memory = MakeMemoryEngines(*topo, cfg.engine, node->os_index, fast->node);
  if (!memory.ok()) return memory.status();
  std::vector<Engine*> engines = memory->engines;
  engines.push_back(uring->get());
  // The cache's engines: the same, with the storage engine wrapped when asked (the floor keeps
  // measuring the storage itself).
  std::vector<Engine*> cache_engines = engines;
  std::unique_ptr<Engine> wrapped_storage;
  if (cfg.wrap_storage_engine) {
    Result<std::unique_ptr<Engine>> w = cfg.wrap_storage_engine(**uring);
    if (!w.ok()) return w.status();
    wrapped_storage = std::move(*w);
    cache_engines.back() = wrapped_storage.get();
  }

  QdpReport report;
  report.expected_sum = expected;
  report.x = x;
  report.rows = rows;
  report.chunk_rows = cfg.chunk_rows;
  report.data_dir = dir;
  report.threads = cfg.groups * (cfg.threads_scan_a + cfg.threads_scan_b + cfg.threads_aggregate);
  report.compute_threads = cfg.groups * (cfg.threads_scan_a + cfg.threads_aggregate);
  report.slow_tier = slow->label;
  report.fast_tier = fast->label;
  report.distributed_a_tier = a_tier->label;
  report.fill_engine = slow->storage ? "io_uring" : cfg.engine;
  report.fills_on_model = !slow->storage && memory->model;
  report.cache_capacity_bytes = cfg.cache_capacity != QdpConfig::kCapacityOfB
                                    ? cfg.cache_capacity
                                    : (bytes + kPage - 1) / kPage * kPage;

  // The fast tier's memory for the cache, taken once before anything is measured and used by
  // the floor and by every configuration's cache: what a destination page costs can differ
  // between pages (on a VM with free-page reporting, by a factor of 1.6 for storage reads),
  // so all of them pay the same.
  const std::size_t chunk_bytes = MinCacheCapacity(cfg);
  const std::size_t arena_chunk =
      std::max<std::size_t>({std::size_t{1} << 20, chunk_bytes,
                             std::min<std::size_t>(report.cache_capacity_bytes, 64 << 20)});
  memory::NodeArena arena(fast->node, arena_chunk, big);
  if (Status s = arena.Reserve(report.cache_capacity_bytes); !s.ok()) {
    return Status(s.code(), fmt::format("the cache's {} bytes on {}: {}",
                                        report.cache_capacity_bytes, fast->label, s.message()));
  }

  // The filter's mask, one byte per row on the CPUs' node, made once: a buffer allocated and
  // freed by every iteration would hand memory back to the host and fault it in again.
  Result<Buffer> mask = Buffer::OnNode(node->os_index, rows, big);
  if (!mask.ok()) return mask.status();

  // The floor: b moved from the slow tier into that memory by what a fill would use (the plan
  // PlanFill makes: large direct reads of the cold file on storage, the fill engine on memory),
  // in pieces of an arena chunk, as many in flight as the capacity holds. It is measured right
  // before every timed iteration, in the pages that iteration's cache then fills (taken from
  // the arena and given back), so each query has a floor taken under the same conditions: this
  // VM's storage varies 2-3x between reads seconds apart. Checked untimed against b's
  // fingerprint (not against the file, which would fault b into the page cache).
  // Whole chunks (b's fingerprint is taken per uint64, and reads stay page-aligned).
  const std::size_t piece =
      std::min(bytes, std::min<std::size_t>(arena_chunk, report.cache_capacity_bytes) /
                          chunk_bytes * chunk_bytes);
  const std::size_t pieces_in_flight =
      std::max<std::size_t>(1, report.cache_capacity_bytes / piece);
  const auto* b_src = reinterpret_cast<const std::byte*>(on.b_slow);
  auto measure_floor = [&]() -> Result<double> {
    std::vector<void*> blocks;
    auto give_back = [&] {
      for (void* p : blocks) arena.Free(p, piece);
    };
    for (std::size_t i = 0; i < pieces_in_flight && i * piece < bytes; ++i) {
      Status err;
      void* p = arena.Allocate(piece, &err);
      if (p == nullptr) {
        give_back();
        return err;
      }
      blocks.push_back(p);
    }
    const CopyPolicy policy;
    double busy_s = 0;  // the check between rounds is not counted
    std::uint64_t fingerprint = 0;
    Status failed;
    for (std::size_t round = 0; round < bytes && failed.ok(); round += blocks.size() * piece) {
      if (slow->storage) {
        if (Status s = MakeCold(fb); !s.ok()) {
          failed = s;
          break;
        }
      }
      const auto t0 = Clock::now();
      std::vector<Handle> handles;
      for (std::size_t i = 0; i < blocks.size() && round + i * piece < bytes && failed.ok(); ++i) {
        const std::size_t off = round + i * piece, n = std::min(piece, bytes - off);
        Result<std::vector<CopyPart>> parts =
            PlanFill(policy, *topo, engines, b_src + off,
                     slow->storage ? node->os_index : slow->node, fast->node, n);
        Result<Handle> h = parts.ok()
                               ? SubmitParts(Operation::Copy(blocks[i], b_src + off, n), *parts)
                               : Result<Handle>(parts.status());
        if (!h.ok()) {
          failed = h.status();
          break;
        }
        handles.push_back(std::move(*h));
      }
      // Every submitted read finishes before its memory is given back; sleeping, as the cache
      // waits (a polling waiter would take a CPU from the completions).
      for (Handle& h : handles) {
        if (Status s = h.Wait(WaitMode::kBlock); !s.ok() && failed.ok()) failed = s;
      }
      busy_s += std::chrono::duration<double>(Clock::now() - t0).count();
      for (std::size_t i = 0; i < handles.size() && failed.ok(); ++i) {
        const std::size_t off = round + i * piece, n = std::min(piece, bytes - off);
        fingerprint += Fingerprint(static_cast<const std::uint64_t*>(blocks[i]),
                                   n / sizeof(std::uint64_t), off / sizeof(std::uint64_t));
      }
    }
    give_back();
    if (!failed.ok()) return failed;
    if (fingerprint != b_fingerprint) {
      return Status(StatusCode::kInternal,
                    "b as read from the slow tier differs from b: the floor "
                    "measurement read wrong data; please report this");
    }
    return busy_s * 1e3;
  };

  double baseline_ms = 0;
  for (const std::string& name : cfg.configs) {
    Layout l;
    if (name == "baseline") l = {on.a_slow, on.b_slow, false};
    if (name == "upper_limit") l = {on.a_slow, on.b_fast, false};
    if (name == "prefetch") l = {on.a_slow, on.b_slow, true};
    if (name == "prefetch_distributed") l = {on.a_dist, on.b_slow, true};
    if (name == "all_dram") l = {on.a_dram, on.b_dram, false};
    // What the query reads from a slow memory tier, by the configuration's definition (on a
    // machine where the tiers are one node, pointers alone would not tell).
    l.a_slow =
        !slow->storage && (name == "baseline" || name == "upper_limit" || name == "prefetch");
    l.b_slow = !slow->storage && (name == "baseline" || l.prefetch);
    QdpConfigResult res;
    res.name = name;
    std::vector<double> sa, sb, ag;
    // One cache per configuration on the arena above (the fast tier's memory is the cache's
    // before the first query, as a database's buffer is), emptied before every iteration.
    CacheConfig cc;
    cc.engines = cache_engines;
    cc.capacity[fast->node] = report.cache_capacity_bytes;
    cc.allocator.allocate = [&arena](std::size_t size, int) -> void* {
      Status ignored;  // null means "no memory": the cache serves the source and counts it
      return arena.Allocate(size, &ignored);
    };
    cc.allocator.free = [&arena](void* p, std::size_t size, int) { arena.Free(p, size); };
    const int fast_node = fast->node;
    cc.placement = [fast_node](const void*, std::size_t, int) { return fast_node; };
    Result<std::unique_ptr<OffloadCache>> cache = OffloadCache::Create(*topo, cc);
    if (!cache.ok()) return cache.status();
    std::uint64_t peak = 0;
    for (int it = 0; it < cfg.warmup + cfg.iterations; ++it) {
      (*cache)->WaitForFills();
      if (Result<std::size_t> cleared = (*cache)->Clear(DirtyEntries::kDiscard); !cleared.ok()) {
        return cleared.status();
      }
      (*cache)->ResetStats();
      double floor_ms = 0;
      if (it >= cfg.warmup) {  // in the memory the cache just gave back
        Result<double> f = measure_floor();
        if (!f.ok()) return f.status();
        floor_ms = *f;
        report.floor_samples_ms.push_back(floor_ms);
      }
      if (slow->storage) {  // cold: no page of either column file in the page cache
        for (StoredColumn* c : {&fa, &fb}) {
          if (Status s = MakeCold(*c); !s.ok()) return s;
        }
        res.resident_pages_at_start = ResidentPages(fa) + ResidentPages(fb);
      }
      const IoUringEngineStats before = (*uring)->stats();
      IterationResult r =
          RunQuery(cfg, l, x, cache->get(), cpus, reinterpret_cast<std::uint8_t*>(mask->data()));
      (*cache)->WaitForFills();
      if (r.sum != expected) {
        return Status(StatusCode::kInternal,
                      fmt::format("{}: the query returned {} but the sum is {}: a wrong result is "
                                  "never reported; please report this",
                                  name, r.sum, expected));
      }
      CacheNodeStats cs;
      for (const CacheNodeStats& n : (*cache)->stats()) {
        if (n.node == fast_node) cs = n;
      }
      peak = std::max(peak, cs.peak_bytes);
      if (it < cfg.warmup) continue;
      res.times_ms.push_back(r.ms);
      res.floor_ms.push_back(floor_ms);
      sa.push_back(r.pipelines.scan_a_ms);
      sb.push_back(r.pipelines.scan_b_ms);
      ag.push_back(r.pipelines.aggregate_ms);
      res.sum = r.sum;
      res.hits = r.hits;
      res.late_hits = r.late_hits;
      res.misses = r.misses;
      res.failed_fills = cs.failed_fills;
      const std::uint64_t through = r.hits + r.late_hits + r.misses;
      res.hit_rate = through == 0
                         ? 0
                         : static_cast<double>(r.hits + r.late_hits) / static_cast<double>(through);
      if (slow->storage) {
        const IoUringEngineStats after = (*uring)->stats();
        res.bytes_from_slow_tier =
            (after.bytes - before.bytes) + (ResidentPages(fa) + ResidentPages(fb)) * kPage;
      } else {
        res.bytes_from_slow_tier = r.slow_bytes + (l.prefetch ? cs.bytes_filled : 0);
      }
      res.bytes_to_fast_tier = cs.bytes_filled;
    }
    res.time_ms_median = Median(res.times_ms);
    const double floor_median = Median(res.floor_ms);
    res.vs_floor = floor_median > 0 ? res.time_ms_median / floor_median : 0;
    res.pipelines = {Median(sa), Median(sb), Median(ag)};
    res.cache_peak_bytes = peak;
    report.fast_tier_peak_bytes = std::max(report.fast_tier_peak_bytes, peak);
    if (name == "baseline") baseline_ms = res.time_ms_median;
    report.configs.push_back(res);
  }
  report.storage_floor_ms =
      *std::min_element(report.floor_samples_ms.begin(), report.floor_samples_ms.end());
  report.storage_gbps = static_cast<double>(bytes) / (report.storage_floor_ms * 1e-3) / 1e9;
  for (QdpConfigResult& r : report.configs) {
    r.speedup = baseline_ms > 0 && r.time_ms_median > 0 ? baseline_ms / r.time_ms_median : 0;
  }
  return report;
}

}  // namespace tierflow
