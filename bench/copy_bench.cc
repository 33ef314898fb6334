// SPDX-License-Identifier: Apache-2.0
#include "bench/copy_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "tierflow/buffer.h"
#include "tierflow/coherence.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"

namespace tierflow::bench {
namespace {

constexpr std::size_t kMaxRoundBytes = std::size_t{1} << 30;  // per buffer, batch mode included
constexpr std::size_t kFlushLimit = std::size_t{512} << 20;   // larger buffers evict themselves

struct Row {
  std::string engine, mode, policy;
  std::size_t size = 0;
  int batch = 1, threads = 1, submitters = 1, src_node = 0, dst_node = 0, participants = 1;
  long repeat = 1;
  Summary gbps;
  std::string isa;  // the copy kernel that ran ("glibc" for memcpy; empty when not known)
  std::vector<double> rounds;  // GB/s of each timed round, in the order they ran
};

// The best baseline median for r's size and nodes (0: none).
double BestBaseline(const Row& r, const std::vector<Row>& base) {
  double best = 0;
  for (const Row& b : base) {
    if (b.size == r.size && b.src_node == r.src_node && b.dst_node == r.dst_node)
      best = std::max(best, b.gbps.median);
  }
  return best;
}

// The median over rounds of r's GB/s ÷ the best baseline's in the round of the same index (0:
// none). A size's candidates take turns round by round, so the two sides of each ratio ran
// within one round of each other: a change in the machine's speed during the run (another
// tenant, the host moving a vCPU) moves both, where it can move one side's median and not the
// other's.
double PairedVsBest(const Row& r, const std::vector<Row>& base) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < r.rounds.size(); ++i) {
    double best = 0;
    for (const Row& b : base) {
      if (b.size == r.size && b.src_node == r.src_node && b.dst_node == r.dst_node &&
          i < b.rounds.size())
        best = std::max(best, b.rounds[i]);
    }
    if (best > 0) ratios.push_back(r.rounds[i] / best);
  }
  return ratios.empty() ? 0.0 : Summarize(ratios).median;
}

nlohmann::json RowJson(const Row& r) {
  return {{"engine", r.engine},
          {"size_bytes", r.size},
          {"mode", r.mode},
          {"batch", r.batch},
          {"threads", r.threads},
          {"submitters", r.submitters},
          {"participants", r.participants},
          {"policy", r.policy},
          {"src_node", r.src_node},
          {"dst_node", r.dst_node},
          {"inner_repeat", r.repeat},
          {"gbps_median", r.gbps.median},
          {"gbps_min", r.gbps.min},
          {"gbps_max", r.gbps.max},
          {"gbps_rounds", r.rounds},
          {"isa", r.isa}};
}

// A slice of the work one submitting thread does each inner iteration.
struct Slice {
  Engine* engine = nullptr;    // nullptr: glibc memcpy
  std::vector<Operation> ops;  // batch members (one in single mode)
};

// One configuration to measure: its slices of work and, once measured, its results.
struct Candidate {
  Row row;
  std::vector<Slice> slices;
  bool batch = false;
  std::size_t bytes = 0;  // copied per inner iteration
  std::vector<double> gbps;
};

class Runner {
 public:
  Runner(const CopyBenchConfig& cfg, Buffer& src, Buffer& dst) : cfg_(cfg), src_(src), dst_(dst) {}

  // Seconds of one round of `times` inner iterations (caches flushed first).
  Result<double> Round(Candidate& c, long times) {
    std::vector<Status> errors(c.slices.size());
    auto body = [&](int t) {
      Slice& s = c.slices[t];
      for (long i = 0; i < times && errors[t].ok(); ++i) {
        if (s.engine == nullptr) {
          for (const Operation& op : s.ops) std::memcpy(op.dst, op.src, op.size);
          continue;
        }
        Result<Handle> h = c.batch ? s.engine->SubmitBatch(s.ops) : s.engine->Submit(s.ops[0]);
        errors[t] = h.ok() ? h->Wait() : h.status();
      }
    };
    auto flush = [&] {
      if (cfg_.flush && c.bytes <= kFlushLimit) {
        (void)WriteBackInvalidate(src_.data(), c.bytes);  // out of every cache level
        (void)WriteBackInvalidate(dst_.data(), c.bytes);
      }
    };
    std::vector<double> t = TimeRounds(static_cast<int>(c.slices.size()), 0, 1, body, flush);
    for (const Status& e : errors) {
      if (!e.ok()) return e;
    }
    return t[0];
  }

  // Grows the inner repeat count until a round lasts at least min_round_ms.
  Status Calibrate(Candidate& c) {
    c.row.repeat = 1;
    for (int attempt = 0; attempt < 24; ++attempt) {
      Result<double> t = Round(c, c.row.repeat);
      if (!t.ok()) return t.status();
      double ms = *t * 1e3;
      if (ms >= cfg_.min_round_ms || c.row.repeat >= (1l << 22)) break;
      double grow = ms <= 0 ? 64 : std::min(64.0, std::ceil(cfg_.min_round_ms / ms * 1.2));
      c.row.repeat = static_cast<long>(static_cast<double>(c.row.repeat) * std::max(2.0, grow));
    }
    return Status::Ok();
  }

  // Rounds of all candidates are interleaved (A B C A B C ...) so that drifting machine
  // conditions (other tenants, frequency) affect the engine and its baseline alike.
  Status Measure(std::vector<Candidate*>& group, Progress& progress) {
    for (Candidate* c : group) {
      if (Status s = Calibrate(*c); !s.ok()) return s;
    }
    for (int r = 0; r < cfg_.warmup + cfg_.reps; ++r) {
      for (Candidate* c : group) {
        Result<double> t = Round(*c, c->row.repeat);
        if (!t.ok()) return t.status();
        if (r >= cfg_.warmup) {
          c->gbps.push_back(static_cast<double>(c->bytes) * c->row.repeat / *t / 1e9);
        }
      }
    }
    for (Candidate* c : group) {
      c->row.gbps = Summarize(c->gbps);
      c->row.rounds = c->gbps;
      progress.Step(fmt::format("{} {}", c->row.engine, FormatSize(c->row.size)));
    }
    return Status::Ok();
  }

 private:
  const CopyBenchConfig& cfg_;
  Buffer& src_;
  Buffer& dst_;
};

// Divides [0, size) of each batch member into `parts` slices (offsets in 4 KiB units).
std::vector<std::pair<std::size_t, std::size_t>> Split(std::size_t size, std::size_t parts) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t off = 0;
  for (std::size_t i = 0; i < parts; ++i) {
    std::size_t end = i + 1 == parts ? size : (size * (i + 1) / parts) / 4096 * 4096;
    end = std::max(end, off);
    if (end > off) out.push_back({off, end - off});
    off = end;
  }
  return out;
}

void PrintTable(std::ostream& out, const std::vector<Row>& rows, const std::vector<Row>& base,
                const std::string& isa, const std::string& machine_note) {
  out << fmt::format(
      "tierflow bench copy  (GB/s = bytes copied / s / 1e9; STREAM would count "
      "twice that)\n{}  cpu isa: {}\n\n",
      machine_note, isa);
  out << fmt::format(
      "{:<8} {:>7} {:<6} {:>5} {:>7} {:>5} {:<11} {:>3} {:>3} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
      "engine", "size", "mode", "batch", "threads", "subm", "policy", "src", "dst", "min", "median",
      "max", "vs best", "paired");
  for (const auto* set : {&base, &rows}) {
    for (const Row& r : *set) {
      const double b = BestBaseline(r, base);
      out << fmt::format(
          "{:<8} {:>7} {:<6} {:>5} {:>7} {:>5} {:<11} {:>3} {:>3} {:>8.2f} {:>8.2f} {:>8.2f} "
          "{:>7.2f}x {:>7.2f}x\n",
          r.engine, FormatSize(r.size), r.mode, r.batch, r.threads, r.submitters, r.policy,
          r.src_node, r.dst_node, r.gbps.min, r.gbps.median, r.gbps.max,
          b > 0 ? r.gbps.median / b : 0.0, PairedVsBest(r, base));
    }
  }
  out << "\n'vs best' = median / best glibc memcpy median (any thread count) for the same size and "
         "nodes\n'paired'  = median over rounds of GB/s / the best glibc memcpy's in the same "
         "round (rounds interleaved)\n'+hwpf'   = streaming copies leave the source to the "
         "hardware prefetchers (measured faster on this CPU)\n";
}

Status ValidateLists(const CopyBenchConfig& cfg) {
  if (cfg.engine != "cpu") {
    return Status::InvalidArgument(fmt::format(
        "unknown engine '{}': use cpu, dsa, or dsa-model (the DSA device model)", cfg.engine));
  }
  if (cfg.sizes.empty())
    return Status::InvalidArgument("no sizes given: e.g. --sizes 4KiB,1MiB,64MiB");
  for (std::size_t s : cfg.sizes) {
    if (s == 0 || s > kMaxRoundBytes) {
      return Status::InvalidArgument(fmt::format("size {} is out of range: use 1 B .. 1 GiB", s));
    }
  }
  for (const std::string& m : cfg.modes) {
    if (m != "single" && m != "batch") {
      return Status::InvalidArgument(fmt::format("mode '{}': use single or batch", m));
    }
  }
  for (int b : cfg.batch_sizes) {
    if (b < 1 || b > 4096)
      return Status::InvalidArgument(fmt::format("batch size {}: use 1..4096", b));
  }
  for (int s : cfg.submitters) {
    if (s < 1 || s > 256)
      return Status::InvalidArgument(fmt::format("submitters {}: use 1..256", s));
  }
  return Status::Ok();
}

Status Validate(const CopyBenchConfig& cfg) {
  if (Status s = ValidateLists(cfg); !s.ok()) return s;
  if (cfg.reps < 1 || cfg.reps > 1000) return Status::InvalidArgument("--reps must be 1..1000");
  if (cfg.warmup < 0 || cfg.warmup > 100) return Status::InvalidArgument("--warmup must be 0..100");
  if (!(cfg.min_round_ms >= 0 && cfg.min_round_ms <= 10000)) {  // also false for nan
    return Status::InvalidArgument(
        fmt::format("--min-round-ms {}: use 0..10000", cfg.min_round_ms));
  }
  return Status::Ok();
}

// The nodes and thread counts, against this machine.
Status ValidateForTopology(const CopyBenchConfig& cfg, const Topology& topo) {
  for (const auto& [option, list] :
       {std::pair{"--src-node", &cfg.src_nodes}, std::pair{"--dst-node", &cfg.dst_nodes}}) {
    for (int node : *list) {
      if (Result<NodeMemory> m = QueryNodeMemory(node); !m.ok()) {
        return Status(m.status().code(),
                      fmt::format("{} {}: {}", option, node, m.status().message()));
      }
    }
  }
  int cpus_total = 0;
  for (const NumaNode& n : topo.nodes()) cpus_total += static_cast<int>(n.cpus.size());
  for (int t : cfg.threads) {
    if (t < 0 || t > 4 * cpus_total) {
      return Status::InvalidArgument(
          fmt::format("--threads {}: use 0 (all CPUs of a node) .. {}", t, 4 * cpus_total));
    }
  }
  return Status::Ok();
}

// glibc memcpy runs on one thread and on as many as every --threads value gives the engine.
std::vector<int> BaselineThreads(const CopyBenchConfig& cfg, const Topology& topo) {
  const NumaNode* src = topo.node(cfg.src_nodes[0]);
  const int all = src != nullptr && src->has_cpus() ? static_cast<int>(src->cpus.size()) : 1;
  std::vector<int> out = {1};
  for (int t : cfg.threads) {
    const int n = t == 0 ? all : t;
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

std::size_t CountConfigs(const CopyBenchConfig& cfg, std::size_t baselines) {
  const std::size_t pairs = cfg.sizes.size() * cfg.src_nodes.size() * cfg.dst_nodes.size();
  std::size_t total = baselines * pairs;
  for (const std::string& mode : cfg.modes) {
    total += cfg.threads.size() * cfg.policies.size() * cfg.submitters.size() * pairs *
             (mode == "batch" ? cfg.batch_sizes.size() : 1);
  }
  return total;
}

// The largest round: a size, or a batch of them that stays within kMaxRoundBytes.
std::size_t BufferBytes(const CopyBenchConfig& cfg) {
  std::size_t need = 0;
  const bool batches = std::find(cfg.modes.begin(), cfg.modes.end(), "batch") != cfg.modes.end();
  for (std::size_t size : cfg.sizes) {
    need = std::max(need, size);
    for (int b : batches ? cfg.batch_sizes : std::vector<int>{}) {
      const std::size_t used = size * static_cast<std::size_t>(b);
      if (used <= kMaxRoundBytes) need = std::max(need, used);
    }
  }
  return need;
}

// Where one (source node, destination node) pair copies.
struct Pair {
  int src_node = 0, dst_node = 0;
  Buffer* src = nullptr;
  Buffer* dst = nullptr;
};

// Baseline: glibc memcpy on 1 thread and split over N threads.
void AddBaselines(const CopyBenchConfig& cfg, const std::vector<int>& base_threads, const Pair& p,
                  std::vector<Candidate>& cands) {
  for (int nthreads : base_threads) {
    for (std::size_t size : cfg.sizes) {
      Candidate c;
      for (auto [off, len] : Split(size, nthreads)) {
        c.slices.push_back(
            {nullptr, {Operation::Copy(p.dst->data() + off, p.src->data() + off, len)}});
      }
      c.bytes = size;
      c.row = {"memcpy", "single", "split",    size,       1,
               nthreads, 1,        p.src_node, p.dst_node, static_cast<int>(c.slices.size()),
               1,        {},       "glibc",    {}};
      cands.push_back(std::move(c));
    }
  }
}

// The streaming kernel's ISA, "+hwpf" where it leaves the source to the hardware prefetchers.
std::string StreamingKernel(const CpuEngine& e) {
  return std::string(CpuIsaName(e.streaming_isa())) +
         (e.streaming_software_prefetch() ? "" : "+hwpf");
}

// CPU engines with `threads` workers each, one per node with CPUs.
struct EngineSet {
  std::vector<std::unique_ptr<CpuEngine>> owned;
  std::vector<Engine*> engines;
};

Result<EngineSet> MakeEngines(const Topology& topo, int threads, std::string& isa) {
  EngineSet set;
  for (const NumaNode& n : topo.nodes()) {
    if (!n.has_cpus()) continue;
    CpuEngineOptions o;
    o.node = n.os_index;
    o.workers = threads;
    Result<std::unique_ptr<CpuEngine>> e = CpuEngine::Create(topo, o);
    if (!e.ok()) return e.status();
    isa = (*e)->isa() == (*e)->streaming_isa() && (*e)->streaming_software_prefetch()
              ? std::string(CpuIsaName((*e)->isa()))
              : fmt::format("{} (streaming copies: {})", CpuIsaName((*e)->isa()),
                            StreamingKernel(**e));
    set.engines.push_back(e->get());
    set.owned.push_back(std::move(*e));
  }
  return set;
}

// One engine configuration: the policy's plan, each part split among the submitters, each
// slice a batch of `b` copies (one in single mode).
struct EngineSpec {
  PolicyKind policy;
  int submitters = 1, batch = 1;
  std::string mode;
  std::size_t size = 0;
};

// The ISA of the kernel that copies operations of `bytes`: streaming at or above the threshold.
std::string KernelOf(const CpuEngine& e, std::size_t bytes) {
  return bytes >= e.nt_threshold_bytes() ? StreamingKernel(e) : std::string(CpuIsaName(e.isa()));
}

Result<Candidate> EngineCandidate(const Topology& topo, const EngineSet& set,
                                  const EngineSpec& spec, const Pair& p) {
  CopyPolicy cp;
  cp.kind = spec.policy;
  Result<std::vector<CopyPart>> plan =
      PlanCopy(cp, topo, set.engines, p.src_node, p.dst_node, spec.size);
  if (!plan.ok()) return plan.status();
  Candidate c;
  c.batch = spec.mode == "batch";
  c.bytes = spec.size * static_cast<std::size_t>(spec.batch);
  for (const CopyPart& part : *plan) {
    for (auto [off, len] : Split(part.size, spec.submitters)) {
      Slice s{part.engine, {}};
      for (int m = 0; m < spec.batch; ++m) {
        const std::size_t at = static_cast<std::size_t>(m) * spec.size + part.offset + off;
        s.ops.push_back(Operation::Copy(p.dst->data() + at, p.src->data() + at, len));
      }
      c.slices.push_back(std::move(s));
    }
  }
  c.row = {"cpu",
           spec.mode,
           std::string(PolicyKindName(spec.policy)),
           spec.size,
           spec.batch,
           set.owned.front()->workers(),
           spec.submitters,
           p.src_node,
           p.dst_node,
           static_cast<int>(c.slices.size()),
           1,
           {},
           KernelOf(*set.owned.front(), c.slices.front().ops.front().size),
           {}};
  return c;
}

// Every engine configuration of one --threads value; batches over 1 GiB are skipped (said so).
Status AddEngineCandidates(const CopyBenchConfig& cfg, const Topology& topo, const EngineSet& set,
                           const Pair& p, Progress& progress, std::vector<Candidate>& cands) {
  for (PolicyKind policy : cfg.policies) {
    for (int subm : cfg.submitters) {
      for (const std::string& mode : cfg.modes) {
        for (int b : mode == "batch" ? cfg.batch_sizes : std::vector<int>{1}) {
          for (std::size_t size : cfg.sizes) {
            if (size * static_cast<std::size_t>(b) > kMaxRoundBytes) {
              progress.Step("skipped");
              std::fprintf(stderr, "skipped: %s batch of %d x %s exceeds 1 GiB per buffer\n",
                           mode.c_str(), b, FormatSize(size).c_str());
              continue;
            }
            Result<Candidate> c = EngineCandidate(topo, set, {policy, subm, b, mode, size}, p);
            if (!c.ok()) return c.status();
            cands.push_back(std::move(*c));
          }
        }
      }
    }
  }
  return Status::Ok();
}

// Every configuration for one pair of nodes, measured size by size (the candidates of a size
// interleaved), into `rows` (engines) and `base` (memcpy).
Status MeasurePair(const CopyBenchConfig& cfg, const Topology& topo,
                   const std::vector<int>& base_threads, int src_node, int dst_node,
                   Progress& progress, std::vector<Row>& rows, std::vector<Row>& base,
                   std::string& isa) {
  const std::size_t need = BufferBytes(cfg);
  Result<Buffer> src = Buffer::OnNode(src_node, need);
  if (!src.ok()) return src.status();
  Result<Buffer> dst = Buffer::OnNode(dst_node, need);
  if (!dst.ok()) return dst.status();
  std::memset(src->data(), 0x5a, need);
  const Pair p{src_node, dst_node, &*src, &*dst};
  std::vector<Candidate> cands;
  AddBaselines(cfg, base_threads, p, cands);
  std::vector<EngineSet> sets;  // alive until measured
  for (int threads : cfg.threads) {
    Result<EngineSet> set = MakeEngines(topo, threads, isa);
    if (!set.ok()) return set.status();
    if (Status s = AddEngineCandidates(cfg, topo, *set, p, progress, cands); !s.ok()) return s;
    sets.push_back(std::move(*set));
  }
  Runner runner(cfg, *src, *dst);
  for (std::size_t size : cfg.sizes) {
    std::vector<Candidate*> group;
    for (Candidate& c : cands) {
      if (c.row.size == size) group.push_back(&c);
    }
    if (Status s = runner.Measure(group, progress); !s.ok()) return s;
  }
  for (Candidate& c : cands) (c.row.engine == "memcpy" ? base : rows).push_back(c.row);
  return Status::Ok();
}

nlohmann::json ReportJson(const CopyBenchConfig& cfg, const std::vector<Row>& rows,
                          const std::vector<Row>& base, const std::string& isa) {
  nlohmann::json doc;
  doc["convention"] = "gbps = bytes copied / seconds / 1e9 (STREAM counts read+write: 2x)";
  doc["cpu_isa"] = isa;
  doc["reps"] = cfg.reps;
  doc["model"] = false;
  doc["configs"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json j = RowJson(r);
    const double best = BestBaseline(r, base);
    j["vs_best"] = best > 0 ? r.gbps.median / best : 0.0;
    j["vs_best_paired"] = PairedVsBest(r, base);
    doc["configs"].push_back(std::move(j));
  }
  doc["baseline"] = nlohmann::json::array();
  for (const Row& r : base) doc["baseline"].push_back(RowJson(r));
  return doc;
}

void PrintCsv(std::ostream& out, const std::vector<Row>& rows, const std::vector<Row>& base) {
  out << "engine,size_bytes,mode,batch,threads,submitters,policy,src_node,dst_node,gbps_min,"
         "gbps_median,gbps_max\n";
  for (const auto* set : {&base, &rows}) {
    for (const Row& r : *set) {
      out << fmt::format("{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f}\n", r.engine, r.size,
                         r.mode, r.batch, r.threads, r.submitters, r.policy, r.src_node, r.dst_node,
                         r.gbps.min, r.gbps.median, r.gbps.max);
    }
  }
}

}  // namespace

Status RunCopyBench(const CopyBenchConfig& cfg, std::ostream& out) {
  if (Status s = Validate(cfg); !s.ok()) return s;
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  if (Status s = ValidateForTopology(cfg, *topo); !s.ok()) return s;
  const std::vector<int> base_threads = BaselineThreads(cfg, *topo);
  Progress progress(CountConfigs(cfg, base_threads.size()), cfg.progress && StderrIsTerminal());
  std::vector<Row> rows, base;
  std::string isa;
  for (int src_node : cfg.src_nodes) {
    for (int dst_node : cfg.dst_nodes) {
      if (Status s =
              MeasurePair(cfg, *topo, base_threads, src_node, dst_node, progress, rows, base, isa);
          !s.ok()) {
        return s;
      }
    }
  }
  progress.Finish();
  const nlohmann::json doc = ReportJson(cfg, rows, base, isa);
  if (cfg.format == "json") {
    out << doc.dump(2) << "\n";
  } else if (cfg.format == "csv") {
    PrintCsv(out, rows, base);
  } else {
    const std::string note =
        fmt::format("machine: {} NUMA node(s), caches L2 {} L3 {}", topo->nodes().size(),
                    FormatSize(topo->caches().l2_bytes), FormatSize(topo->caches().l3_bytes));
    PrintTable(out, rows, base, isa, note);
  }
  if (!cfg.plot_path.empty()) {
    if (Status s = Plot("plot_copy.py", doc, cfg.plot_path); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
