// SPDX-License-Identifier: Apache-2.0
#include "bench/submit_bench.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/handoff_floor.h"
#include "dsa/descriptor.h"
#include "kernels/kernels.h"
#include "tierflow/buffer.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/topology.h"

namespace tierflow::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t k4K = 4096;

// Median over `samples` of the per-iteration time of `iters` calls of `fn`, in ns. Heap
// allocations made inside the timed loops (not by this harness) are added to `*allocs` unless
// it is null (warm-up).
template <typename Fn>
Summary PerCallNs(int samples, int iters, Fn&& fn, Status& error, std::uint64_t (*count)(),
                  std::uint64_t* allocs) {
  std::vector<double> ns;
  ns.reserve(static_cast<std::size_t>(samples));
  for (int s = 0; s < samples && error.ok(); ++s) {
    const std::uint64_t a0 = count();
    auto t0 = Clock::now();
    for (int i = 0; i < iters && error.ok(); ++i) error = fn();
    auto t1 = Clock::now();
    if (allocs != nullptr) *allocs += count() - a0;
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
  }
  return Summarize(std::move(ns));
}

// A submission's outcome once waited for.
Status Waited(Result<Handle> h, WaitMode mode = WaitMode::kAdaptive) {
  return h.ok() ? h->Wait(mode) : h.status();
}

// The DSA measurements' work: 32 copies of 64 bytes (a descriptor's worth of data, so that the
// cost measured is the descriptor's, not the copy's).
struct SmallCopies {
  static constexpr std::size_t kBytes = 64;
  static constexpr int kBatch = 32;
  std::vector<unsigned char> src = std::vector<unsigned char>(kBatch * kBytes, 1);
  std::vector<unsigned char> dst = std::vector<unsigned char>(kBatch * kBytes);
  std::vector<Operation> batch;
  SmallCopies() {
    for (int i = 0; i < kBatch; ++i) {
      batch.push_back(Operation::Copy(dst.data() + i * kBytes, src.data() + i * kBytes, kBytes));
    }
  }
};

// The device model alone on prebuilt descriptors for the same work: one 64-byte copy, and a
// batch of 32.
class ModelAlone {
 public:
  ModelAlone(DsaDeviceModel& model, SmallCopies& work)
      : model_(model), list_(kBatch), recs_(kBatch) {
    auto* dst = work.dst.data();
    const auto* src = work.src.data();
    dsa::EncodeMemmove(one_.d, dst, src, kBytes, 0, &rec_);
    for (int i = 0; i < kBatch; ++i) {
      dsa::EncodeMemmove(list_[i].d, dst + i * kBytes, src + i * kBytes, kBytes, 0, &recs_[i]);
    }
    dsa::EncodeBatch(batch_.d, list_.data(), kBatch, 0, &rec_);
  }
  Status One() {
    dsa::ClearRecord(rec_);
    model_.Enqueue(0, &one_.d);
    return Check();
  }
  Status Batch() {
    dsa::ClearRecord(rec_);
    for (auto& r : recs_) dsa::ClearRecord(r);
    model_.Enqueue(0, &batch_.d);
    return Check();
  }

 private:
  static constexpr std::size_t kBytes = SmallCopies::kBytes;
  static constexpr int kBatch = SmallCopies::kBatch;
  Status Check() const {
    return dsa::LoadStatus(rec_.r) == DSA_COMP_SUCCESS
               ? Status::Ok()
               : Status(StatusCode::kInternal, "model failed");
  }
  DsaDeviceModel& model_;
  dsa::Record rec_;
  std::vector<dsa::Descriptor> list_;
  std::vector<dsa::Record> recs_;
  dsa::Descriptor one_, batch_;
};

// Engine totals and the model's share, per descriptor and per batch of 32.
struct ModelNumbers {
  Summary one, b32, m_one, m_b32;
  std::uint64_t allocs = 0, batches = 0;
};

Status ReportDsaModel(const SubmitBenchConfig& cfg, const ModelNumbers& n, std::ostream& out) {
  const double lib_one = n.one.median - n.m_one.median;
  const double lib_b32 = n.b32.median - n.m_b32.median;
  nlohmann::json doc;
  doc["engine"] = "dsa-model";
  doc["model"] = true;
  doc["model_mode"] = "instant completion, addresses trusted (no translation)";
  doc["transfer_bytes"] = SmallCopies::kBytes;
  doc["descriptor_ns_median"] = lib_one;  // the library's own cost (engine minus model)
  doc["batch32_ns_median"] = lib_b32;
  doc["descriptor_total_ns_median"] = n.one.median;
  doc["descriptor_model_ns_median"] = n.m_one.median;
  doc["batch32_total_ns_median"] = n.b32.median;
  doc["batch32_model_ns_median"] = n.m_b32.median;
  doc["batches_submitted"] = n.batches;
  doc["steady_state_allocations"] = n.allocs;
  doc["samples"] = cfg.samples;
  if (cfg.json) {
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  out << fmt::format(
      "tierflow bench submit  (engine dsa-model: the DSA DEVICE MODEL, instant completion; {} "
      "samples, medians)\n"
      "                                                library   (engine total - model alone)\n"
      "  one descriptor: build + submit + completion   {:8.1f} ns   ({:.1f} - {:.1f}; {} B copy)\n"
      "  batch of 32 descriptors, submit + wait         {:8.1f} ns   ({:.1f} - {:.1f})\n"
      "  heap allocations on these paths, warm          {:8}\n"
      "  (no DSA here: this measures tierflow's code on the model, not a device)\n",
      cfg.samples, lib_one, n.one.median, n.m_one.median, SmallCopies::kBytes, lib_b32,
      n.b32.median, n.m_b32.median, n.allocs);
  return Status::Ok();
}

// The DSA engine's own cost per descriptor, on the device model in instant-completion mode:
// the model executes each descriptor inside the hand-over. The model's own time (address
// translation, execution, record writing) is measured alone, by handing it prebuilt
// descriptors, and subtracted: what remains is building the descriptor, submitting it and
// processing its completion record, the library's own cost. Transfers are 64 bytes.
Status RunDsaModelSubmitBench(const SubmitBenchConfig& cfg, std::uint64_t (*allocations)(),
                              std::ostream& out) {
  DsaModelConfig mc;
  mc.instant = true;
  mc.translate_addresses = false;  // the model's msync calls would drown the library's cost
  Result<std::shared_ptr<DsaDeviceModel>> model = DsaDeviceModel::Create(mc);
  if (!model.ok()) return model.status();
  Result<std::unique_ptr<DsaEngine>> engine = DsaEngine::CreateOnModel(*model, 0);
  if (!engine.ok()) return engine.status();
  SmallCopies work;
  Status err;
  auto single = [&] { return Waited((*engine)->Submit(work.batch[0])); };
  auto batched = [&] { return Waited((*engine)->SubmitBatch(work.batch)); };
  PerCallNs(3, 2000, single, err, allocations, nullptr);
  PerCallNs(3, 200, batched, err, allocations, nullptr);
  if (!err.ok()) return err;
  ModelAlone alone(**model, work);
  auto model_one = [&] { return alone.One(); };
  auto model_batch = [&] { return alone.Batch(); };
  PerCallNs(3, 2000, model_one, err, allocations, nullptr);
  ModelNumbers n;
  n.one = PerCallNs(cfg.samples, 20000, single, err, allocations, &n.allocs);
  n.b32 = PerCallNs(cfg.samples, 2000, batched, err, allocations, &n.allocs);
  n.m_one = PerCallNs(cfg.samples, 20000, model_one, err, allocations, nullptr);
  n.m_b32 = PerCallNs(cfg.samples, 2000, model_batch, err, allocations, nullptr);
  if (!err.ok()) return err;
  n.batches = (*engine)->device_stats().batches;
  return ReportDsaModel(cfg, n, out);
}

// On a real DSA the device's own time cannot be taken out: what is measured is the round trip
// of one 64-byte copy and of a batch of 32, submit to completion seen by the waiting thread.
Status RunDsaHardwareSubmitBench(const SubmitBenchConfig& cfg, std::uint64_t (*allocations)(),
                                 std::ostream& out) {
  Result<DsaInventory> inv = DsaInventory::Discover();
  if (!inv.ok()) return inv.status();
  Result<std::unique_ptr<DsaEngine>> engine = DsaEngine::Create(*inv);
  if (!engine.ok()) {
    return Status(engine.status().code(),
                  engine.status().message() +
                      "\n`tierflow bench submit --engine dsa-model` measures the device model "
                      "instead (labelled so)");
  }
  constexpr std::size_t kBytes = SmallCopies::kBytes;
  SmallCopies work;
  Status err;
  auto single = [&] { return Waited((*engine)->Submit(work.batch[0]), WaitMode::kSpin); };
  auto batched = [&] { return Waited((*engine)->SubmitBatch(work.batch), WaitMode::kSpin); };
  PerCallNs(3, 2000, single, err, allocations, nullptr);
  PerCallNs(3, 200, batched, err, allocations, nullptr);
  std::uint64_t allocs = 0;
  Summary one = PerCallNs(cfg.samples, 20000, single, err, allocations, &allocs);
  Summary b32 = PerCallNs(cfg.samples, 2000, batched, err, allocations, &allocs);
  if (!err.ok()) return err;
  nlohmann::json doc;
  doc["engine"] = "dsa";
  doc["model"] = false;
  doc["device"] = (*engine)->description();
  doc["transfer_bytes"] = kBytes;
  doc["descriptor_roundtrip_ns_median"] = one.median;
  doc["batch32_roundtrip_ns_median"] = b32.median;
  doc["steady_state_allocations"] = allocs;
  doc["samples"] = cfg.samples;
  doc["note"] =
      "device time included: on hardware the library's own share cannot be separated; "
      "--engine dsa-model measures it alone";
  if (cfg.json) {
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  out << fmt::format(
      "tierflow bench submit  (engine dsa: {}; {} samples, medians)\n"
      "  one 64 B copy: submit -> completion seen      {:8.1f} ns\n"
      "  batch of 32 x 64 B: submit -> completion      {:8.1f} ns\n"
      "  heap allocations on these paths, warm         {:8}\n"
      "  (the device's time is included; --engine dsa-model isolates the library's cost)\n",
      (*engine)->description(), cfg.samples, one.median, b32.median, allocs);
  return Status::Ok();
}

// What reporting faults as errors costs a piece (see common/fault_guard.h): the same 4 KiB
// copy kernel run directly and through the guard, alternating, in this process.
struct GuardCost {
  Summary plain, guarded;
};
GuardCost MeasureFaultGuard(CpuIsa isa, int samples, const Buffer& src, const Buffer& dst) {
  const kernels::Kernels& k = kernels::KernelsFor(isa);
  kernels::PieceWork w;
  w.kind = OpKind::kCopy;
  w.dst = reinterpret_cast<char*>(dst.data());
  w.src = reinterpret_cast<const char*>(src.data());
  w.n = k4K;
  Status err;
  auto no_count = [] { return std::uint64_t{0}; };
  auto plain = [&] {
    kernels::PieceResult r = kernels::RunPiece(k, w);
    return r.difference == w.n ? Status::Ok() : Status(StatusCode::kInternal, "copy compared");
  };
  auto guarded = [&] {
    kernels::PieceResult r;
    Status fault;
    return kernels::RunPieceGuarded(k, w, &r, &fault) ? Status::Ok() : fault;
  };
  GuardCost c;
  std::vector<double> p, g;
  for (int s = 0; s < samples; ++s) {
    p.push_back(PerCallNs(1, 20000, plain, err, no_count, nullptr).median);
    g.push_back(PerCallNs(1, 20000, guarded, err, no_count, nullptr).median);
  }
  c.plain = Summarize(std::move(p));
  c.guarded = Summarize(std::move(g));
  return c;
}

// The CPU engine measurements: an engine that runs small copies inline, one that hands every
// copy to a worker, and 64 pages to copy.
struct CpuSubmitSetup {
  std::unique_ptr<CpuEngine> engine, handoff;
  Buffer src, dst;
  std::vector<Operation> batch;
  std::vector<int> cpus;  // the node's that this process may use
  static constexpr int kBatch = 64;
  // The split copy: the batch's whole range, 256 KiB (issue 17: on a 512 KiB-L2 machine its
  // halves fit in L2, so the copy lasts a few microseconds and fixed costs show).
  static constexpr std::size_t kSplitBytes = kBatch * k4K;
};

// The node's CPUs that this process may run on (where the floor's threads can be pinned).
std::vector<int> CpusAllowedOf(const NumaNode& node) {
  std::vector<int> cpus;
  for (int c : AllowedCpus()) {
    if (std::find(node.cpus.begin(), node.cpus.end(), c) != node.cpus.end()) cpus.push_back(c);
  }
  return cpus;
}

Result<CpuSubmitSetup> PrepareCpu() {
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  int node = -1;
  CpuSubmitSetup s;
  for (const NumaNode& n : topo->nodes()) {
    if (n.has_cpus()) {
      node = n.os_index;
      s.cpus = CpusAllowedOf(n);
      break;
    }
  }
  if (node < 0) return Status::NotFound("no NUMA node with CPUs");
  CpuEngineOptions opts;
  opts.node = node;
  Result<std::unique_ptr<CpuEngine>> engine = CpuEngine::Create(*topo, opts);
  if (!engine.ok()) return engine.status();
  s.engine = std::move(*engine);
  opts.inline_max_bytes = 0;                 // every operation goes to a worker
  opts.check_mappings = MappingCheck::kOff;  // time the hand-off itself
  opts.waiter_runs_pieces = false;           // ... and not the waiter doing the copy
  Result<std::unique_ptr<CpuEngine>> handoff = CpuEngine::Create(*topo, opts);
  if (!handoff.ok()) return handoff.status();
  s.handoff = std::move(*handoff);
  for (Buffer* b : {&s.src, &s.dst}) {
    Result<Buffer> buf = Buffer::OnNode(node, CpuSubmitSetup::kBatch * k4K);
    if (!buf.ok()) return buf.status();
    *b = std::move(*buf);
  }
  std::memset(s.src.data(), 1, s.src.size());
  for (int i = 0; i < CpuSubmitSetup::kBatch; ++i) {
    s.batch.push_back(Operation::Copy(s.dst.data() + i * k4K, s.src.data() + i * k4K, k4K));
  }
  return s;
}

struct CpuNumbers {
  Summary single, handoff, batch;
  GuardCost guard;
  std::uint64_t allocs = 0, measured_ops = 0;
  // The 256 KiB copy split over the workers and the waiting thread, and the bare hand-off
  // floor of the same split (parts < 2: one CPU, nothing split, not measured).
  int split_parts = 0;
  bool split_measured = false;
  Summary split, split_floor;
};

// The split copy's numbers; null where it was not measured (one CPU: nothing split).
void AddSplitJson(const CpuNumbers& n, nlohmann::json& doc) {
  const bool measured = n.split_measured;
  auto value = [&](double v) { return measured ? nlohmann::json(v) : nlohmann::json(nullptr); };
  doc["split_bytes"] = CpuSubmitSetup::kSplitBytes;
  doc["split_parts"] = n.split_parts;
  doc["split_ns_median"] = value(n.split.median);
  doc["split_floor_ns_median"] = value(n.split_floor.median);
  doc["split_fixed_ns_median"] = value(n.split.median - n.split_floor.median);
}

std::string SplitLines(const CpuNumbers& n) {
  if (!n.split_measured) {
    return "  256 KiB copy split over workers          not measured (one CPU to run on: nothing "
           "splits)\n";
  }
  return fmt::format(
      "  256 KiB copy split in {}, engine          {:8.1f} ns   (workers + the waiting thread; "
      "submit+wait)\n"
      "  the same split, bare hand-off            {:8.1f} ns   (pinned threads, memcpy, one "
      "store + spin)\n"
      "  engine's fixed cost per split operation  {:8.1f} ns   (engine less the bare hand-off)\n",
      n.split_parts, n.split.median, n.split_floor.median, n.split.median - n.split_floor.median);
}

Status ReportCpu(const SubmitBenchConfig& cfg, CpuIsa isa, const CpuNumbers& n, std::ostream& out) {
  const double gbps = CpuSubmitSetup::kBatch * k4K / n.batch.median;
  const double guard_ns = n.guard.guarded.median - n.guard.plain.median;
  // The engine's own cost per operation: submit to done, less the copy kernel's time alone.
  const double inline_fixed = n.single.median - n.guard.plain.median;
  const double handoff_fixed = n.handoff.median - n.guard.plain.median;
  nlohmann::json doc;
  doc["engine"] = "cpu";
  doc["model"] = false;
  doc["cpu_isa"] = CpuIsaName(isa);
  doc["single_4k_ns_median"] = n.single.median;
  doc["single_4k_ns_min"] = n.single.min;
  doc["batch64_4k_gbps_median"] = gbps;
  doc["batch64_4k_ns_median"] = n.batch.median;
  doc["handoff_4k_ns_median"] = n.handoff.median;
  doc["handoff_4k_ns_min"] = n.handoff.min;
  doc["inline_fixed_ns_median"] = inline_fixed;
  doc["handoff_fixed_ns_median"] = handoff_fixed;
  doc["fault_guard_ns_median"] = guard_ns;
  doc["piece_4k_plain_ns_median"] = n.guard.plain.median;
  doc["piece_4k_guarded_ns_median"] = n.guard.guarded.median;
  doc["steady_state_allocations"] = n.allocs;
  doc["measured_ops"] = n.measured_ops;
  doc["samples"] = cfg.samples;
  AddSplitJson(n, doc);
  if (cfg.json) {
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  out << fmt::format(
      "tierflow bench submit  (engine cpu, isa {}, {} samples, medians)\n"
      "  submit+wait one 4 KiB copy (inline)      {:8.1f} ns   (min {:.1f})\n"
      "  batch of 64 x 4 KiB, submit+wait         {:8.2f} GB/s ({:.0f} ns per batch)\n"
      "  4 KiB copy handed to a worker            {:8.1f} ns   (min {:.1f}; submit to done)\n"
      "  engine's fixed cost per operation, inline {:7.1f} ns   (submit+wait less the kernel)\n"
      "  engine's fixed cost per operation, worker {:7.1f} ns   (hand-off less the kernel)\n"
      "  fault guard per piece (faults as errors) {:8.1f} ns   (4 KiB copy kernel {:.1f} -> "
      "{:.1f})\n"
      "{}"
      "  heap allocations on these paths, warm    {:8} over {} submissions\n",
      CpuIsaName(isa), cfg.samples, n.single.median, n.single.min, gbps, n.batch.median,
      n.handoff.median, n.handoff.min, inline_fixed, handoff_fixed, guard_ns, n.guard.plain.median,
      n.guard.guarded.median, SplitLines(n), n.allocs, n.measured_ops);
  return Status::Ok();
}

// One sample of the bare hand-off floor (HandOffFloor) of the split copy, ns per copy; checks
// that the floor copied every byte (a floor that skipped a part would look fast).
Result<double> FloorSample(CpuSubmitSetup& s, int parts, int warm, int iters) {
  std::memset(s.dst.data(), 0, CpuSubmitSetup::kSplitBytes);
  cpu_set_t allowed;
  const bool restore = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  PinThisThreadTo(s.cpus.front());
  double ns;
  {
    HandOffFloor floor(reinterpret_cast<char*>(s.dst.data()),
                       reinterpret_cast<const char*>(s.src.data()), CpuSubmitSetup::kSplitBytes,
                       parts, s.cpus);
    for (int i = 0; i < warm; ++i) floor.Copy();
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) floor.Copy();
    ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / iters;
  }
  if (restore) sched_setaffinity(0, sizeof allowed, &allowed);
  if (std::memcmp(s.dst.data(), s.src.data(), CpuSubmitSetup::kSplitBytes) != 0) {
    return Status(StatusCode::kInternal, "bench submit: the bare hand-off floor lost bytes");
  }
  return ns;
}

// How many pieces the engine cuts a copy of `op`'s size into: counted on one copy, run once the
// engine is idle (pieces are counted before their operation completes).
Result<int> PiecesOf(Engine& engine, const Operation& op) {
  const std::uint64_t before = engine.stats().pieces_completed;
  if (Status s = Waited(engine.Submit(op)); !s.ok()) return s;
  return static_cast<int>(engine.stats().pieces_completed - before);
}

// The split copy through the engine and through the bare hand-off floor, sample by sample in
// turn so that the machine's drift (other tenants, frequency) affects both alike. The floor's
// threads live only during their sample (spinning helpers would take the engine's CPUs), and
// the calling thread runs on the node's first CPU while it measures the floor.
Status MeasureSplit(const SubmitBenchConfig& cfg, CpuSubmitSetup& s, std::uint64_t (*allocations)(),
                    CpuNumbers& n) {
  constexpr int kWarm = 200, kIters = 2000;
  const Operation op = Operation::Copy(s.dst.data(), s.src.data(), CpuSubmitSetup::kSplitBytes);
  Result<int> parts = PiecesOf(*s.engine, op);
  if (!parts.ok()) return parts.status();
  n.split_parts = *parts;
  // One CPU to run on: the engine does not split, or the floor's threads would take turns.
  if (n.split_parts < 2 || s.cpus.size() < 2) return Status::Ok();
  Status err;
  auto split = [&] { return Waited(s.engine->Submit(op)); };
  std::vector<double> engine_ns, floor_ns;
  for (int i = 0; i < cfg.samples && err.ok(); ++i) {
    Result<double> floor = FloorSample(s, n.split_parts, kWarm, kIters);
    if (!floor.ok()) return floor.status();
    floor_ns.push_back(*floor);
    PerCallNs(1, kWarm, split, err, allocations, nullptr);
    engine_ns.push_back(PerCallNs(1, kIters, split, err, allocations, &n.allocs).median);
  }
  if (!err.ok()) return err;
  n.split_measured = true;
  n.split = Summarize(std::move(engine_ns));
  n.split_floor = Summarize(std::move(floor_ns));
  n.measured_ops += static_cast<std::uint64_t>(cfg.samples) * kIters;
  return Status::Ok();
}

Status RunCpuSubmitBench(const SubmitBenchConfig& cfg, std::uint64_t (*allocations)(),
                         std::ostream& out) {
  Result<CpuSubmitSetup> s = PrepareCpu();
  if (!s.ok()) return s.status();
  const Operation one = Operation::Copy(s->dst.data(), s->src.data(), k4K);
  Status err;
  auto single = [&] { return Waited(s->engine->Submit(one)); };
  auto batched = [&] { return Waited(s->engine->SubmitBatch(s->batch)); };
  auto handed = [&] { return Waited(s->handoff->Submit(one), WaitMode::kSpin); };
  // Warm up every path (pools, caches, worker wake-up), then measure.
  PerCallNs(3, 2000, single, err, allocations, nullptr);
  PerCallNs(3, 200, batched, err, allocations, nullptr);
  PerCallNs(3, 2000, handed, err, allocations, nullptr);
  if (!err.ok()) return err;
  CpuNumbers n;
  n.single = PerCallNs(cfg.samples, 20000, single, err, allocations, &n.allocs);
  n.handoff = PerCallNs(cfg.samples, 5000, handed, err, allocations, &n.allocs);
  n.batch = PerCallNs(cfg.samples, 500, batched, err, allocations, &n.allocs);
  if (!err.ok()) return err;
  n.guard = MeasureFaultGuard(s->engine->isa(), cfg.samples, s->src, s->dst);
  n.measured_ops = static_cast<std::uint64_t>(cfg.samples) * (20000 + 5000 + 500);
  if (Status m = MeasureSplit(cfg, *s, allocations, n); !m.ok()) return m;
  return ReportCpu(cfg, s->engine->isa(), n, out);
}

}  // namespace

Status RunSubmitBench(const SubmitBenchConfig& cfg, std::uint64_t (*allocations)(),
                      std::ostream& out) {
  if (cfg.samples < 3 || cfg.samples > 1001)
    return Status::InvalidArgument("--samples must be 3..1001");
  if (cfg.engine == "dsa-model") return RunDsaModelSubmitBench(cfg, allocations, out);
  if (cfg.engine == "dsa") return RunDsaHardwareSubmitBench(cfg, allocations, out);
  if (cfg.engine == "cpu") return RunCpuSubmitBench(cfg, allocations, out);
  return Status::InvalidArgument(fmt::format(
      "unknown engine '{}': use cpu, dsa-model (the DSA device model) or dsa", cfg.engine));
}

}  // namespace tierflow::bench
