#include "bench/submit_bench.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
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
  constexpr std::size_t kBytes = SmallCopies::kBytes;
  constexpr int kBatch = SmallCopies::kBatch;
  SmallCopies work;
  auto& src = work.src;
  auto& dst = work.dst;
  Status err;
  auto single = [&] { return Waited((*engine)->Submit(work.batch[0])); };
  auto batched = [&] { return Waited((*engine)->SubmitBatch(work.batch)); };
  PerCallNs(3, 2000, single, err, allocations, nullptr);
  PerCallNs(3, 200, batched, err, allocations, nullptr);
  if (!err.ok()) return err;
  // The model alone, on the same work.
  dsa::Record rec;
  std::vector<dsa::Descriptor> list(kBatch);
  std::vector<dsa::Record> recs(kBatch);
  dsa::Descriptor one_desc, batch_desc;
  dsa::EncodeMemmove(one_desc.d, dst.data(), src.data(), kBytes, 0, &rec);
  for (int i = 0; i < kBatch; ++i) {
    dsa::EncodeMemmove(list[i].d, dst.data() + i * kBytes, src.data() + i * kBytes, kBytes, 0,
                       &recs[i]);
  }
  dsa::EncodeBatch(batch_desc.d, list.data(), kBatch, 0, &rec);
  auto model_one = [&]() -> Status {
    dsa::ClearRecord(rec);
    (*model)->Enqueue(0, &one_desc.d);
    return dsa::LoadStatus(rec.r) == DSA_COMP_SUCCESS
               ? Status::Ok()
               : Status(StatusCode::kInternal, "model failed");
  };
  auto model_batch = [&]() -> Status {
    dsa::ClearRecord(rec);
    for (auto& r : recs) dsa::ClearRecord(r);
    (*model)->Enqueue(0, &batch_desc.d);
    return dsa::LoadStatus(rec.r) == DSA_COMP_SUCCESS
               ? Status::Ok()
               : Status(StatusCode::kInternal, "model failed");
  };
  PerCallNs(3, 2000, model_one, err, allocations, nullptr);

  std::uint64_t allocs = 0;
  Summary one = PerCallNs(cfg.samples, 20000, single, err, allocations, &allocs);
  Summary b32 = PerCallNs(cfg.samples, 2000, batched, err, allocations, &allocs);
  Summary m_one = PerCallNs(cfg.samples, 20000, model_one, err, allocations, nullptr);
  Summary m_b32 = PerCallNs(cfg.samples, 2000, model_batch, err, allocations, nullptr);
  if (!err.ok()) return err;
  const double lib_one = one.median - m_one.median;
  const double lib_b32 = b32.median - m_b32.median;
  DsaEngineStats st = (*engine)->stats();
  nlohmann::json doc;
  doc["engine"] = "dsa-model";
  doc["model"] = true;
  doc["model_mode"] = "instant completion, addresses trusted (no translation)";
  doc["transfer_bytes"] = kBytes;
  doc["descriptor_ns_median"] = lib_one;  // the library's own cost (engine minus model)
  doc["batch32_ns_median"] = lib_b32;
  doc["descriptor_total_ns_median"] = one.median;
  doc["descriptor_model_ns_median"] = m_one.median;
  doc["batch32_total_ns_median"] = b32.median;
  doc["batch32_model_ns_median"] = m_b32.median;
  doc["batches_submitted"] = st.batches;
  doc["steady_state_allocations"] = allocs;
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
      cfg.samples, lib_one, one.median, m_one.median, kBytes, lib_b32, b32.median, m_b32.median,
      allocs);
  return Status::Ok();
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

}  // namespace

Status RunSubmitBench(const SubmitBenchConfig& cfg, std::uint64_t (*allocations)(),
                      std::ostream& out) {
  if (cfg.samples < 3 || cfg.samples > 1001) return Status::Invalid("--samples must be 3..1001");
  if (cfg.engine == "dsa-model") return RunDsaModelSubmitBench(cfg, allocations, out);
  if (cfg.engine == "dsa") return RunDsaHardwareSubmitBench(cfg, allocations, out);
  if (cfg.engine != "cpu") {
    return Status::Invalid(fmt::format(
        "unknown engine '{}': use cpu, dsa-model (the DSA device model) or dsa", cfg.engine));
  }
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  int node = -1;
  for (const NumaNode& n : topo->nodes()) {
    if (n.has_cpus()) {
      node = n.os_index;
      break;
    }
  }
  if (node < 0) return Status::NotFound("no NUMA node with CPUs");

  CpuEngineOptions opts;
  opts.node = node;
  Result<std::unique_ptr<CpuEngine>> engine = CpuEngine::Create(*topo, opts);
  if (!engine.ok()) return engine.status();
  CpuEngineOptions handoff_opts = opts;
  handoff_opts.inline_max_bytes = 0;                 // every operation goes to a worker
  handoff_opts.check_mappings = MappingCheck::kOff;  // time the hand-off itself
  handoff_opts.waiter_runs_pieces = false;           // ... and not the waiter doing the copy
  Result<std::unique_ptr<CpuEngine>> handoff = CpuEngine::Create(*topo, handoff_opts);
  if (!handoff.ok()) return handoff.status();

  constexpr int kBatch = 64;
  Result<Buffer> src = Buffer::OnNode(node, kBatch * k4K);
  if (!src.ok()) return src.status();
  Result<Buffer> dst = Buffer::OnNode(node, kBatch * k4K);
  if (!dst.ok()) return dst.status();
  std::memset(src->data(), 1, src->size());
  std::vector<Operation> batch;
  for (int i = 0; i < kBatch; ++i) {
    batch.push_back(Operation::Copy(dst->data() + i * k4K, src->data() + i * k4K, k4K));
  }
  const Operation one = Operation::Copy(dst->data(), src->data(), k4K);

  Status err;
  auto single = [&] { return Waited((*engine)->Submit(one)); };
  auto batched = [&] { return Waited((*engine)->SubmitBatch(batch)); };
  auto handed = [&] { return Waited((*handoff)->Submit(one), WaitMode::kSpin); };
  // Warm up every path (pools, caches, worker wake-up), then measure.
  PerCallNs(3, 2000, single, err, allocations, nullptr);
  PerCallNs(3, 200, batched, err, allocations, nullptr);
  PerCallNs(3, 2000, handed, err, allocations, nullptr);
  if (!err.ok()) return err;

  std::uint64_t allocs = 0;
  Summary single_ns = PerCallNs(cfg.samples, 20000, single, err, allocations, &allocs);
  Summary handoff_ns = PerCallNs(cfg.samples, 5000, handed, err, allocations, &allocs);
  Summary batch_ns = PerCallNs(cfg.samples, 500, batched, err, allocations, &allocs);
  if (!err.ok()) return err;
  const GuardCost guard = MeasureFaultGuard((*engine)->isa(), cfg.samples, *src, *dst);
  const std::uint64_t measured_ops = static_cast<std::uint64_t>(cfg.samples) * (20000 + 5000 + 500);
  std::vector<double> gbps = {kBatch * k4K / batch_ns.max, kBatch * k4K / batch_ns.median,
                              kBatch * k4K / batch_ns.min};

  nlohmann::json doc;
  doc["engine"] = "cpu";
  doc["model"] = false;
  doc["cpu_isa"] = CpuIsaName((*engine)->isa());
  doc["single_4k_ns_median"] = single_ns.median;
  doc["single_4k_ns_min"] = single_ns.min;
  doc["batch64_4k_gbps_median"] = gbps[1];
  doc["batch64_4k_ns_median"] = batch_ns.median;
  doc["handoff_4k_ns_median"] = handoff_ns.median;
  doc["handoff_4k_ns_min"] = handoff_ns.min;
  doc["fault_guard_ns_median"] = guard.guarded.median - guard.plain.median;
  doc["piece_4k_plain_ns_median"] = guard.plain.median;
  doc["piece_4k_guarded_ns_median"] = guard.guarded.median;
  doc["steady_state_allocations"] = allocs;
  doc["measured_ops"] = measured_ops;
  doc["samples"] = cfg.samples;
  if (cfg.json) {
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  out << fmt::format(
      "tierflow bench submit  (engine cpu, isa {}, {} samples, medians)\n"
      "  submit+wait one 4 KiB copy (inline)      {:8.1f} ns   (min {:.1f})\n"
      "  batch of 64 x 4 KiB, submit+wait         {:8.2f} GB/s ({:.0f} ns per batch)\n"
      "  4 KiB copy handed to a worker            {:8.1f} ns   (min {:.1f}; submit to done)\n"
      "  fault guard per piece (faults as errors) {:8.1f} ns   (4 KiB copy kernel {:.1f} -> "
      "{:.1f})\n"
      "  heap allocations on these paths, warm    {:8} over {} submissions\n",
      CpuIsaName((*engine)->isa()), cfg.samples, single_ns.median, single_ns.min, gbps[1],
      batch_ns.median, handoff_ns.median, handoff_ns.min, guard.guarded.median - guard.plain.median,
      guard.plain.median, guard.guarded.median, allocs, measured_ops);
  return Status::Ok();
}

}  // namespace tierflow::bench
