// SPDX-License-Identifier: Apache-2.0
#include "bench/cache_bench.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "tierflow/cache.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"

namespace tierflow::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The cache one would write first: one shared_mutex, one hash map of shared_ptr entries, a
// malloc per entry, the same engine for fills. No sub-ranges, eviction or statistics.
class BaselineCache {
 public:
  struct Entry {
    const void* src = nullptr;
    std::size_t size = 0;
    std::unique_ptr<char, decltype(&std::free)> mem{nullptr, &std::free};
    Handle fill;
    const void* data() const { return fill.done() && fill.status().ok() ? mem.get() : src; }
  };
  explicit BaselineCache(Engine& engine) : engine_(engine) {}

  Result<std::shared_ptr<Entry>> Access(const void* src, std::size_t size) {
    {
      std::shared_lock lock(mu_);
      auto it = map_.find(src);
      if (it != map_.end()) return it->second;
    }
    std::unique_lock lock(mu_);
    auto it = map_.find(src);
    if (it != map_.end()) return it->second;
    auto e = std::make_shared<Entry>();
    e->src = src;
    e->size = size;
    e->mem.reset(static_cast<char*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    Result<Handle> h = engine_.Submit(Operation::Copy(e->mem.get(), src, size));
    if (!h.ok()) return h.status();
    e->fill = std::move(*h);
    map_.emplace(src, e);
    return e;
  }
  void Clear() {
    std::unique_lock lock(mu_);
    for (auto& [k, e] : map_) (void)e->fill.Wait();
    map_.clear();
  }

 private:
  Engine& engine_;
  std::shared_mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<Entry>> map_;
};

struct Numbers {
  double hit_ns = 0, hit_mops_1t = 0, hit_mops_2t = 0, miss_ns = 0;
};

// Median ns per call of `fn(i)` over `samples` runs of `iters` calls.
template <typename Fn>
double MedianNs(int samples, int iters, Fn&& fn) {
  std::vector<double> ns;
  for (int s = 0; s < samples; ++s) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) fn(i);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / iters);
  }
  return Summarize(ns).median;
}

// Aggregate million operations per second of `threads` threads each calling `fn(i, t)` `iters`
// times, started together, thread t pinned to the t-th allowed CPU (otherwise a new thread may
// queue behind the first on one CPU for the whole short run), median over samples.
template <typename Fn>
double Mops(int threads, int samples, int iters, Fn&& fn) {
  static const std::vector<int> cpus = AllowedCpus();
  std::vector<double> mops;
  for (int s = 0; s < samples; ++s) {
    std::barrier start(threads + 1);
    std::vector<double> secs(static_cast<std::size_t>(threads));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        if (static_cast<std::size_t>(t) < cpus.size()) PinThisThreadTo(cpus[t]);
        start.arrive_and_wait();
        auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) fn(i, t);
        secs[t] = std::chrono::duration<double>(Clock::now() - t0).count();
      });
    }
    start.arrive_and_wait();
    for (auto& t : ts) t.join();
    const double slowest = *std::max_element(secs.begin(), secs.end());
    mops.push_back(static_cast<double>(threads) * iters / slowest / 1e6);
  }
  return Summarize(mops).median;
}

nlohmann::json ToJson(const Numbers& n) {
  return {{"hit_ns_median", n.hit_ns},
          {"hit_mops_1t", n.hit_mops_1t},
          {"hit_mops_2t", n.hit_mops_2t},
          {"miss_ns_median", n.miss_ns}};
}

Status Validate(const CacheBenchConfig& cfg) {
  if (cfg.entries < 2 || cfg.entries > (1u << 20))
    return Status::InvalidArgument("--entries must be 2..1048576");
  if (cfg.entry_bytes < 64 || cfg.entry_bytes > (16u << 20)) {
    return Status::InvalidArgument("--entry-size must be 64 B .. 16 MiB");
  }
  if (cfg.entries * cfg.entry_bytes > (std::size_t{1} << 30)) {
    return Status::InvalidArgument("--entries x --entry-size must stay within 1 GiB");
  }
  if (cfg.samples < 3 || cfg.samples > 1001)
    return Status::InvalidArgument("--samples must be 3..1001");
  return Status::Ok();
}

// The offloading cache and the baseline over the same source ranges and fill engine.
class CacheBench {
 public:
  static Result<std::unique_ptr<CacheBench>> Create(const CacheBenchConfig& cfg) {
    auto b = std::unique_ptr<CacheBench>(new CacheBench(cfg));
    if (Status s = b->Init(); !s.ok()) return s;
    return b;
  }

  // Misses first (each sample: every range once, then clear).
  Status MeasureMisses(Numbers& ours, Numbers& baseline) {
    Status err;
    auto ours_miss = [&](int i) {
      if (Result<CacheEntry> e = cache_->Access(Range(i), bytes_); !e.ok()) err = e.status();
    };
    auto base_miss = [&](int i) {
      if (auto e = base_->Access(Range(i), bytes_); !e.ok()) err = e.status();
    };
    std::vector<double> ours_m, base_m;
    for (int s = 0; s < cfg_.samples && err.ok(); ++s) {
      ours_m.push_back(MedianNs(1, static_cast<int>(n_), ours_miss));
      cache_->WaitForFills();
      if (Result<std::size_t> c = cache_->Clear(); !c.ok()) return c.status();
      base_m.push_back(MedianNs(1, static_cast<int>(n_), base_miss));
      base_->Clear();
    }
    ours.miss_ns = Summarize(ours_m).median;
    baseline.miss_ns = Summarize(base_m).median;
    return err;
  }

  // Every range in both caches, filled, for the hits.
  Status FillAll() {
    for (std::size_t i = 0; i < n_; ++i) {
      Result<CacheEntry> e = cache_->Access(Range(i), bytes_);
      if (!e.ok()) return e.status();
      if (Status s = e->Wait(); !s.ok()) return s;
      auto b = base_->Access(Range(i), bytes_);
      if (!b.ok()) return b.status();
      if (Status s = (*b)->fill.Wait(); !s.ok()) return s;
    }
    return Status::Ok();
  }

  // Interleaved, so that drifting machine conditions affect both alike.
  void MeasureHits(Numbers& ours, Numbers& baseline) {
    auto ours_hit = [&](int i, int t = 0) {
      Result<CacheEntry> e = cache_->Access(At(i, t), bytes_);
      sinks_[t].p = e->data();
    };
    auto base_hit = [&](int i, int t = 0) {
      auto e = base_->Access(At(i, t), bytes_);
      sinks_[t].p = (*e)->data();
    };
    constexpr int kIters = 20000;
    const int samples = cfg_.samples, mops_samples = cfg_.samples / 3 + 1;
    std::vector<double> oh, bh, o1, b1, o2, b2;
    for (int r = 0; r < 3; ++r) {
      oh.push_back(MedianNs(samples, kIters, [&](int i) { ours_hit(i); }));
      bh.push_back(MedianNs(samples, kIters, [&](int i) { base_hit(i); }));
      o1.push_back(Mops(1, mops_samples, 10 * kIters, ours_hit));
      b1.push_back(Mops(1, mops_samples, 10 * kIters, base_hit));
      o2.push_back(Mops(2, mops_samples, 10 * kIters, ours_hit));
      b2.push_back(Mops(2, mops_samples, 10 * kIters, base_hit));
    }
    ours.hit_ns = Summarize(oh).median;
    baseline.hit_ns = Summarize(bh).median;
    ours.hit_mops_1t = Summarize(o1).median;
    baseline.hit_mops_1t = Summarize(b1).median;
    ours.hit_mops_2t = Summarize(o2).median;
    baseline.hit_mops_2t = Summarize(b2).median;
  }

  nlohmann::json Json(const Numbers& ours, const Numbers& baseline) const {
    CacheNodeStats st = cache_->stats().front();
    nlohmann::json doc = ToJson(ours);
    doc["baseline"] = ToJson(baseline);
    doc["entries"] = n_;
    doc["entry_bytes"] = bytes_;
    doc["samples"] = cfg_.samples;
    doc["engine"] = "cpu";
    doc["model"] = false;
    doc["hits_counted"] = st.hits;
    doc["cache_tier"] = std::string(TierKindName(st.tier));
    return doc;
  }

 private:
  explicit CacheBench(const CacheBenchConfig& cfg)
      : cfg_(cfg), n_(cfg.entries), bytes_(cfg.entry_bytes), src_(n_ * bytes_, 0x5a) {}

  Status Init() {
    Result<Topology> topo = Topology::Discover();
    if (!topo.ok()) return topo.status();
    topo_ = std::move(*topo);
    CpuEngineOptions eo;
    eo.inline_max_bytes = 0;  // fills go to a worker: the miss path excludes the copy
    eo.waiter_runs_pieces = false;
    Result<std::unique_ptr<CpuEngine>> engine = CpuEngine::Create(topo_, eo);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    std::mt19937 rng(1);
    for (auto& o : order_) o = static_cast<std::uint32_t>(rng() % n_);
    CacheConfig cc;
    cc.engines = {engine_.get()};
    const int node = topo_.nodes().front().os_index;
    cc.capacity[node] = n_ * bytes_ * 2 + (64 << 20);
    cc.placement = [node](const void*, std::size_t, int) { return node; };
    Result<std::unique_ptr<OffloadCache>> cache = OffloadCache::Create(topo_, cc);
    if (!cache.ok()) return cache.status();
    cache_ = std::move(*cache);
    base_ = std::make_unique<BaselineCache>(*engine_);
    return Status::Ok();
  }

  const unsigned char* Range(std::size_t i) const { return src_.data() + i * bytes_; }
  // A random range, a different sequence per thread.
  const unsigned char* At(int i, int t) const {
    return Range(order_[static_cast<std::size_t>(i + t * 7919) & (order_.size() - 1)]);
  }

  const CacheBenchConfig& cfg_;
  const std::size_t n_, bytes_;
  std::vector<unsigned char> src_;
  std::vector<std::uint32_t> order_ = std::vector<std::uint32_t>(1 << 16);
  Topology topo_;
  std::unique_ptr<CpuEngine> engine_;
  std::unique_ptr<OffloadCache> cache_;
  std::unique_ptr<BaselineCache> base_;
  // Where each thread leaves the pointer it read, so the compiler keeps the reads; one line per
  // thread (a shared variable would itself bounce between the cores).
  struct alignas(64) Sink {
    const void* volatile p = nullptr;
  };
  Sink sinks_[2];
};

void PrintTable(const CacheBenchConfig& cfg, const Numbers& ours, const Numbers& baseline,
                std::ostream& out) {
  out << fmt::format(
      "tierflow bench cache  ({} entries of {} B, CPU engine fills, {} samples, medians)\n"
      "                                    tierflow     baseline (shared_mutex + unordered_map)\n"
      "  hit: Access + data(), 1 thread    {:8.1f} ns  {:8.1f} ns\n"
      "  hits, 1 thread                    {:8.2f} Mops {:8.2f} Mops\n"
      "  hits, 2 threads, shared entries   {:8.2f} Mops {:8.2f} Mops   (x{:.2f} vs x{:.2f} one "
      "thread)\n"
      "  miss: Access, excluding the copy  {:8.1f} ns  {:8.1f} ns\n",
      cfg.entries, cfg.entry_bytes, cfg.samples, ours.hit_ns, baseline.hit_ns, ours.hit_mops_1t,
      baseline.hit_mops_1t, ours.hit_mops_2t, baseline.hit_mops_2t,
      ours.hit_mops_2t / ours.hit_mops_1t, baseline.hit_mops_2t / baseline.hit_mops_1t,
      ours.miss_ns, baseline.miss_ns);
}

}  // namespace

Status RunCacheBench(const CacheBenchConfig& cfg, std::ostream& out) {
  if (Status s = Validate(cfg); !s.ok()) return s;
  Result<std::unique_ptr<CacheBench>> bench = CacheBench::Create(cfg);
  if (!bench.ok()) return bench.status();
  Numbers ours, baseline;
  if (Status s = (*bench)->MeasureMisses(ours, baseline); !s.ok()) return s;
  if (Status s = (*bench)->FillAll(); !s.ok()) return s;
  (*bench)->MeasureHits(ours, baseline);
  if (cfg.json) {
    out << (*bench)->Json(ours, baseline).dump(2) << "\n";
    return Status::Ok();
  }
  PrintTable(cfg, ours, baseline, out);
  return Status::Ok();
}

}  // namespace tierflow::bench
