// SPDX-License-Identifier: Apache-2.0
#include "qdp/qdp.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "qdp/columns.h"
#include "qdp/floor.h"
#include "qdp/query.h"
#include "qdp/setup.h"
#include "tierflow/buffer.h"
#include "tierflow/cache.h"
#include "tierflow/node_arena.h"
#include "tierflow/topology.h"
#include "tierflow/uring_engine.h"

namespace tierflow::qdp {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The machine as the run sees it: the CPUs' node (DRAM for all_dram and a) and the tiers.
struct Machine {
  Topology topo;
  int cpu_node = -1;
  std::vector<int> cpus;
  Tier slow, fast, a_tier;
};

Status ResolveTiers(const Config& cfg, Machine& m) {
  const std::string dram = fmt::format("node:{}", m.cpu_node);
  Result<Tier> slow = ResolveTier(m.topo, cfg.b_tier, m.cpu_node, "--b-tier", true);
  if (!slow.ok()) return slow.status();
  Result<Tier> fast = ResolveTier(m.topo, cfg.cache_tier.empty() ? dram : cfg.cache_tier,
                                  m.cpu_node, "--cache-tier", false);
  if (!fast.ok()) return fast.status();
  Result<Tier> a_tier =
      ResolveTier(m.topo, cfg.a_tier.empty() ? dram : cfg.a_tier, m.cpu_node, "--a-tier", false);
  if (!a_tier.ok()) return a_tier.status();
  m.slow = std::move(*slow);
  m.fast = std::move(*fast);
  m.a_tier = std::move(*a_tier);
  return Status::Ok();
}

// Stage 1: the machine, the parameters checked against it, the tiers.
Result<std::unique_ptr<Machine>> Prepare(const Config& cfg) {
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  auto m = std::make_unique<Machine>();
  m->topo = std::move(*topo);
  for (const NumaNode& n : m->topo.nodes()) {
    if (n.has_cpus()) {
      m->cpu_node = n.os_index;
      m->cpus = n.cpus;
      break;
    }
  }
  if (m->cpu_node < 0) return Status::NotFound("no NUMA node with CPUs");
  if (Status s = Validate(cfg, static_cast<int>(m->cpus.size())); !s.ok()) return s;
  if (Status s = CheckMemory(cfg); !s.ok()) return s;
  if (Status s = ResolveTiers(cfg, *m); !s.ok()) return s;
  return m;
}

// Every configuration's columns, placed before the first query: one copy per (column, node).
struct Placement {
  const std::uint64_t* a_slow = nullptr;
  const std::uint64_t* b_slow = nullptr;
  const std::uint64_t* a_dist = nullptr;
  const std::uint64_t* b_fast = nullptr;
  const std::uint64_t* a_dram = nullptr;
  const std::uint64_t* b_dram = nullptr;
  std::map<std::pair<char, int>, Buffer> copies;
};

// The columns, the mask and the cache's memory are large and streamed: transparent huge pages
// unless turned off (fewer TLB misses for the loops, fewer pages for the kernel to pin for
// each direct read; all_dram ran 3-10 % faster with them here).
AllocOptions BigAllocations(const Config& cfg) {
  AllocOptions big;
  if (cfg.huge_pages) big.huge_pages = HugePages::kTransparent;
  return big;
}

Result<const std::uint64_t*> ColumnOn(const Config& cfg, const ColumnData& data, char col, int node,
                                      Placement& p) {
  auto it = p.copies.find({col, node});
  if (it == p.copies.end()) {
    const std::size_t bytes = cfg.rows * sizeof(std::uint64_t);
    Result<Buffer> buf = Buffer::OnNode(node, bytes, BigAllocations(cfg));
    if (!buf.ok()) return buf.status();
    std::memcpy(buf->data(), (col == 'a' ? data.a : data.b).data(), bytes);
    it = p.copies.emplace(std::make_pair(col, node), std::move(*buf)).first;
  }
  return reinterpret_cast<const std::uint64_t*>(it->second.data());
}

// What configuration `name` needs placed: (where the pointer goes, column, node).
using Need = std::vector<std::pair<const std::uint64_t**, std::pair<char, int>>>;
Need NeedsOf(const std::string& name, const Machine& m, Placement& p) {
  Need need;
  if (!m.slow.storage) {
    need.push_back({&p.b_slow, {'b', m.slow.node}});  // also what the floor is measured with
    if (name != "prefetch_distributed" && name != "all_dram")
      need.push_back({&p.a_slow, {'a', m.slow.node}});
  }
  if (name == "upper_limit") need.push_back({&p.b_fast, {'b', m.fast.node}});
  if (name == "prefetch_distributed") need.push_back({&p.a_dist, {'a', m.a_tier.node}});
  if (name == "all_dram") {
    need.push_back({&p.a_dram, {'a', m.cpu_node}});
    need.push_back({&p.b_dram, {'b', m.cpu_node}});
  }
  return need;
}

// Stage 2: the data placed on its tiers.
Result<Placement> PlaceColumns(const Config& cfg, const Machine& m, const ColumnData& data,
                               const ColumnFiles& files) {
  Placement p;
  for (const std::string& name : cfg.configs) {
    for (auto& [where, what] : NeedsOf(name, m, p)) {
      Result<const std::uint64_t*> column = ColumnOn(cfg, data, what.first, what.second, p);
      if (!column.ok()) return column.status();
      *where = *column;
    }
  }
  if (m.slow.storage) {
    p.a_slow = reinterpret_cast<const std::uint64_t*>(files.a.map.data());
    p.b_slow = reinterpret_cast<const std::uint64_t*>(files.b.map.data());
  }
  return p;
}

// io_uring reads the column files; memory sources go to cfg.engine. The cache plans which one
// fills an entry (PlanFill), from where the source lives.
struct Engines {
  std::unique_ptr<IoUringEngine> uring;
  MemoryEngines memory;
  std::unique_ptr<Engine> wrapped_storage;
  std::vector<Engine*> fill;   // what the floor measures
  std::vector<Engine*> cache;  // the same, with the storage engine wrapped when asked
};

// Stage 3: the engines.
Result<Engines> MakeEngines(const Config& cfg, const Machine& m, const ColumnFiles& files) {
  Engines e;
  IoUringEngineOptions uo;
  uo.queue_depth = cfg.storage_queue_depth;
  uo.max_read_bytes = cfg.storage_read_bytes;
  Result<std::unique_ptr<IoUringEngine>> uring = IoUringEngine::Create(uo);
  if (!uring.ok()) return uring.status();
  e.uring = std::move(*uring);
  for (const StoredColumn* c : {&files.a, &files.b}) {
    if (Status s = e.uring->RegisterFile(c->map); !s.ok()) return s;
  }
  Result<MemoryEngines> memory = MakeMemoryEngines(m.topo, cfg.engine, m.cpu_node, m.fast.node);
  if (!memory.ok()) return memory.status();
  e.memory = std::move(*memory);
  e.fill = e.memory.engines;
  e.fill.push_back(e.uring.get());
  e.cache = e.fill;
  if (cfg.wrap_storage_engine) {
    Result<std::unique_ptr<Engine>> w = cfg.wrap_storage_engine(*e.uring);
    if (!w.ok()) return w.status();
    e.wrapped_storage = std::move(*w);
    e.cache.back() = e.wrapped_storage.get();
  }
  return e;
}

Report StartReport(const Config& cfg, const Machine& m, const ColumnData& data,
                   const ColumnFiles& files, const Engines& e) {
  Report report;
  report.expected_sum = data.expected_sum;
  report.x = data.x;
  report.rows = cfg.rows;
  report.chunk_rows = cfg.chunk_rows;
  report.data_dir = files.dir;
  report.threads = cfg.groups * (cfg.threads_scan_a + cfg.threads_scan_b + cfg.threads_aggregate);
  report.compute_threads = cfg.groups * (cfg.threads_scan_a + cfg.threads_aggregate);
  report.slow_tier = m.slow.label;
  report.fast_tier = m.fast.label;
  report.distributed_a_tier = m.a_tier.label;
  report.fill_engine = m.slow.storage ? "io_uring" : cfg.engine;
  report.fills_on_model = !m.slow.storage && e.memory.model;
  const std::uint64_t b_bytes = cfg.rows * sizeof(std::uint64_t);
  report.cache_capacity_bytes = cfg.cache_capacity != Config::kCapacityOfB
                                    ? cfg.cache_capacity
                                    : (b_bytes + kPage - 1) / kPage * kPage;
  return report;
}

// The fast tier's memory for the cache, taken once before anything is measured and used by
// the floor and by every configuration's cache: what a destination page costs can differ
// between pages (on a VM with free-page reporting, by a factor of 1.6 for storage reads), so
// all of them pay the same. And the filter's mask, one byte per row on the CPUs' node, made
// once: a buffer allocated and freed by every iteration would hand memory back to the host
// and fault it in again.
struct FastMemory {
  std::size_t arena_chunk = 0;
  std::unique_ptr<NodeArena> arena;
  Buffer mask;
};

// Stage 4: the fast tier's memory.
Result<FastMemory> TakeFastMemory(const Config& cfg, const Machine& m, std::uint64_t capacity) {
  FastMemory f;
  f.arena_chunk = std::max<std::size_t>(
      {std::size_t{1} << 20, MinCacheCapacity(cfg), std::min<std::size_t>(capacity, 64 << 20)});
  f.arena = std::make_unique<NodeArena>(m.fast.node, f.arena_chunk, BigAllocations(cfg));
  if (Status s = f.arena->Reserve(capacity); !s.ok()) {
    return Status(s.code(), fmt::format("the cache's {} bytes on {}: {}", capacity, m.fast.label,
                                        s.message()));
  }
  Result<Buffer> mask = Buffer::OnNode(m.cpu_node, cfg.rows, BigAllocations(cfg));
  if (!mask.ok()) return mask.status();
  f.mask = std::move(*mask);
  return f;
}

// The floor, measured in pieces of an arena chunk (whole chunks of b: its fingerprint is taken
// per uint64, and reads stay page-aligned), as many in flight as the capacity holds, right
// before every timed iteration in the pages that iteration's cache then fills: this VM's
// storage varies 2-3x between reads seconds apart.
FloorSetup MakeFloorSetup(const Config& cfg, const Machine& m, const ColumnData& data,
                          const ColumnFiles& files, const Placement& p, const Engines& e,
                          FastMemory& fast, std::uint64_t capacity) {
  FloorSetup f;
  f.topology = &m.topo;
  f.engines = e.fill;
  f.b = reinterpret_cast<const std::byte*>(p.b_slow);
  f.bytes = cfg.rows * sizeof(std::uint64_t);
  f.b_fingerprint = data.b_fingerprint;
  f.b_file = m.slow.storage ? &files.b : nullptr;
  f.source_node = m.slow.storage ? m.cpu_node : m.slow.node;
  f.fast_node = m.fast.node;
  f.arena = fast.arena.get();
  const std::size_t chunk = MinCacheCapacity(cfg);
  f.piece = std::min(f.bytes, std::min<std::size_t>(fast.arena_chunk, capacity) / chunk * chunk);
  f.pieces_in_flight = std::max<std::size_t>(1, capacity / f.piece);
  return f;
}

// Everything a configuration runs with.
struct RunContext {
  const Config& cfg;
  const Machine& machine;
  const ColumnData& data;
  const ColumnFiles& files;
  const Placement& placement;
  const Engines& engines;
  FastMemory& fast;
  const FloorSetup& floor;
  std::uint64_t capacity;
};

Layout LayoutFor(const std::string& name, const Placement& p, bool slow_is_storage) {
  Layout l;
  if (name == "baseline") l = {p.a_slow, p.b_slow, false};
  if (name == "upper_limit") l = {p.a_slow, p.b_fast, false};
  if (name == "prefetch") l = {p.a_slow, p.b_slow, true};
  if (name == "prefetch_distributed") l = {p.a_dist, p.b_slow, true};
  if (name == "all_dram") l = {p.a_dram, p.b_dram, false};
  // What the query reads from a slow memory tier, by the configuration's definition (on a
  // machine where the tiers are one node, pointers alone would not tell).
  l.a_slow =
      !slow_is_storage && (name == "baseline" || name == "upper_limit" || name == "prefetch");
  l.b_slow = !slow_is_storage && (name == "baseline" || l.prefetch);
  return l;
}

// One cache per configuration on the fast memory (the fast tier's memory is the cache's before
// the first query, as a database's buffer is), emptied before every iteration.
Result<std::unique_ptr<OffloadCache>> MakeCache(const RunContext& run) {
  CacheConfig cc;
  cc.engines = run.engines.cache;
  cc.capacity[run.machine.fast.node] = run.capacity;
  NodeArena* arena = run.fast.arena.get();
  cc.allocator.allocate = [arena](std::size_t size, int) -> void* {
    return arena->Allocate(size, nullptr);  // null: no memory; the cache serves the source
  };
  cc.allocator.free = [arena](void* p, std::size_t size, int) { arena->Free(p, size); };
  const int fast_node = run.machine.fast.node;
  cc.placement = [fast_node](const void*, std::size_t, int) { return fast_node; };
  return OffloadCache::Create(run.machine.topo, cc);
}

CacheNodeStats FastNodeStats(const OffloadCache& cache, int fast_node) {
  for (const CacheNodeStats& n : cache.stats()) {
    if (n.node == fast_node) return n;
  }
  return {};
}

// One iteration's measurements.
struct Iteration {
  IterationResult query;
  CacheNodeStats cache;
  double floor_ms = 0;                  // timed iterations only
  std::uint64_t resident_at_start = 0;  // storage: column pages in the page cache before
  std::uint64_t storage_bytes = 0;      // storage: io_uring reads plus pages faulted in
};

// Empties the cache, measures the floor (timed iterations: in the memory the cache just gave
// back), makes the column files cold, runs the query and checks its sum.
Result<Iteration> RunIteration(const RunContext& run, const std::string& name, const Layout& l,
                               OffloadCache& cache, bool timed) {
  Iteration it;
  cache.WaitForFills();
  if (Result<std::size_t> cleared = cache.Clear(DirtyEntries::kDiscard); !cleared.ok())
    return cleared.status();
  cache.ResetStats();
  if (timed) {
    Result<double> f = MeasureFloor(run.floor);
    if (!f.ok()) return f.status();
    it.floor_ms = *f;
  }
  const bool storage = run.machine.slow.storage;
  if (storage) {  // cold: no page of either column file in the page cache
    for (const StoredColumn* c : {&run.files.a, &run.files.b}) {
      if (Status s = MakeCold(*c); !s.ok()) return s;
    }
    it.resident_at_start = ResidentPages(run.files.a) + ResidentPages(run.files.b);
  }
  const IoUringEngineStats before = run.engines.uring->ring_stats();
  it.query = RunQuery(run.cfg, l, run.data.x, &cache, run.machine.cpus,
                      reinterpret_cast<std::uint8_t*>(run.fast.mask.data()));
  cache.WaitForFills();
  if (it.query.sum != run.data.expected_sum) {
    return Status(StatusCode::kInternal,
                  fmt::format("{}: the query returned {} but the sum is {}: a wrong result is "
                              "never reported; please report this",
                              name, it.query.sum, run.data.expected_sum));
  }
  it.cache = FastNodeStats(cache, run.machine.fast.node);
  if (storage) {
    const std::uint64_t faulted = ResidentPages(run.files.a) + ResidentPages(run.files.b);
    it.storage_bytes = (run.engines.uring->ring_stats().bytes - before.bytes) + faulted * kPage;
  }
  return it;
}

// The per-pipeline times of the timed iterations.
struct PipelineSamples {
  std::vector<double> scan_a, scan_b, aggregate;
};

// A timed iteration into the configuration's result (counters: the last iteration's).
void Record(const Iteration& it, const Layout& l, bool storage, ConfigResult& res,
            PipelineSamples& samples) {
  const IterationResult& r = it.query;
  res.times_ms.push_back(r.ms);
  res.floor_ms.push_back(it.floor_ms);
  samples.scan_a.push_back(r.pipelines.scan_a_ms);
  samples.scan_b.push_back(r.pipelines.scan_b_ms);
  samples.aggregate.push_back(r.pipelines.aggregate_ms);
  res.sum = r.sum;
  res.hits = r.hits;
  res.late_hits = r.late_hits;
  res.misses = r.misses;
  res.failed_fills = it.cache.failed_fills;
  const std::uint64_t through = r.hits + r.late_hits + r.misses;
  res.hit_rate =
      through == 0 ? 0 : static_cast<double>(r.hits + r.late_hits) / static_cast<double>(through);
  res.resident_pages_at_start = it.resident_at_start;
  res.bytes_from_slow_tier =
      storage ? it.storage_bytes : r.slow_bytes + (l.prefetch ? it.cache.bytes_filled : 0);
  res.bytes_to_fast_tier = it.cache.bytes_filled;
}

// Stage 5: one configuration, its warm-up and timed iterations.
Result<ConfigResult> RunConfiguration(const RunContext& run, const std::string& name,
                                      Report& report) {
  const bool storage = run.machine.slow.storage;
  const Layout l = LayoutFor(name, run.placement, storage);
  Result<std::unique_ptr<OffloadCache>> cache = MakeCache(run);
  if (!cache.ok()) return cache.status();
  ConfigResult res;
  res.name = name;
  PipelineSamples samples;
  const int total = run.cfg.warmup + run.cfg.iterations;
  for (int i = 0; i < total; ++i) {
    const bool timed = i >= run.cfg.warmup;
    if (run.cfg.progress)
      run.cfg.progress(fmt::format("{}, iteration {} of {}", name, i + 1, total));
    Result<Iteration> it = RunIteration(run, name, l, **cache, timed);
    if (!it.ok()) return it.status();
    res.cache_peak_bytes = std::max(res.cache_peak_bytes, it->cache.peak_bytes);
    if (!timed) continue;
    report.floor_samples_ms.push_back(it->floor_ms);
    Record(*it, l, storage, res, samples);
  }
  res.time_ms_median = Median(res.times_ms);
  const double floor_median = Median(res.floor_ms);
  res.vs_floor = floor_median > 0 ? res.time_ms_median / floor_median : 0;
  res.pipelines = {Median(samples.scan_a), Median(samples.scan_b), Median(samples.aggregate)};
  report.fast_tier_peak_bytes = std::max(report.fast_tier_peak_bytes, res.cache_peak_bytes);
  return res;
}

// Stage 6: the floor over all samples and the speedups against baseline.
void Summarize(Report& report) {
  double baseline_ms = 0;
  for (const ConfigResult& r : report.configs) {
    if (r.name == "baseline") baseline_ms = r.time_ms_median;
  }
  report.storage_floor_ms =
      *std::min_element(report.floor_samples_ms.begin(), report.floor_samples_ms.end());
  const double b_bytes = static_cast<double>(report.rows * sizeof(std::uint64_t));
  report.storage_gbps = b_bytes / (report.storage_floor_ms * 1e-3) / 1e9;
  for (ConfigResult& r : report.configs) {
    r.speedup = baseline_ms > 0 && r.time_ms_median > 0 ? baseline_ms / r.time_ms_median : 0;
  }
}

}  // namespace

Result<Report> Run(const Config& cfg) {
  Result<std::unique_ptr<Machine>> machine = Prepare(cfg);
  if (!machine.ok()) return machine.status();
  const Machine& m = **machine;
  if (cfg.progress) cfg.progress(cfg.reuse_data ? "reading the columns" : "generating the columns");
  Result<ColumnData> data = LoadColumns(cfg);
  if (!data.ok()) return data.status();
  ColumnFiles files;
  if (Status s = StoreColumns(cfg, *data, files); !s.ok()) return s;
  if (cfg.progress) cfg.progress("placing the columns");
  Result<Placement> placement = PlaceColumns(cfg, m, *data, files);
  if (!placement.ok()) return placement.status();
  data->a = {};  // placed: the generated columns are not needed any more
  data->b = {};
  Result<Engines> engines = MakeEngines(cfg, m, files);
  if (!engines.ok()) return engines.status();
  Report report = StartReport(cfg, m, *data, files, *engines);
  const std::uint64_t capacity = report.cache_capacity_bytes;
  Result<FastMemory> fast = TakeFastMemory(cfg, m, capacity);
  if (!fast.ok()) return fast.status();
  const FloorSetup floor =
      MakeFloorSetup(cfg, m, *data, files, *placement, *engines, *fast, capacity);
  const RunContext run{cfg, m, *data, files, *placement, *engines, *fast, floor, capacity};
  for (const std::string& name : cfg.configs) {
    Result<ConfigResult> r = RunConfiguration(run, name, report);
    if (!r.ok()) return r.status();
    report.configs.push_back(std::move(*r));
  }
  Summarize(report);
  return report;
}

}  // namespace tierflow::qdp
