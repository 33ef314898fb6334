// SPDX-License-Identifier: Apache-2.0
#include "bench/dsa_copy_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "tierflow/buffer.h"
#include "tierflow/coherence.h"
#include "tierflow/copy_policy.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_fleet.h"
#include "tierflow/topology.h"

namespace tierflow::bench {
namespace {

constexpr std::size_t kMaxBuffer = std::size_t{1} << 30;
constexpr std::size_t kFlushLimit = std::size_t{512} << 20;

struct Row {
  std::string experiment, figure, engine, method, policy;
  std::size_t size = 0;
  int batch = 1, threads = 1, src = 0, dst = 0, dsas = 1;
  Summary gbps;
};

nlohmann::json RowJson(const Row& r) {
  return {{"experiment", r.experiment}, {"figure", r.figure},    {"engine", r.engine},
          {"method", r.method},         {"policy", r.policy},    {"size_bytes", r.size},
          {"batch", r.batch},           {"threads", r.threads},  {"src_node", r.src},
          {"dst_node", r.dst},          {"dsas", r.dsas},        {"gbps_median", r.gbps.median},
          {"gbps_min", r.gbps.min},     {"gbps_max", r.gbps.max}};
}

// Times `threads` threads that each run `iteration(t)` over and over, as the thesis does:
// barrier start, slowest thread ends the round, inner repeat count grown until a round lasts
// min_round_ms, `reps` rounds after `warmup`. `bytes`: moved by one iteration of all threads.
class Meter {
 public:
  explicit Meter(const CopyBenchConfig& cfg) : cfg_(cfg) {}

  Result<Summary> Run(int threads, std::size_t bytes, const std::function<Status(int)>& iteration,
                      const std::function<void()>& flush) {
    std::vector<Status> errors(static_cast<std::size_t>(threads));
    long repeat = 1;
    auto body = [&](int t) {
      for (long i = 0; i < repeat && errors[t].ok(); ++i) errors[t] = iteration(t);
    };
    auto check = [&]() -> Status {
      for (const Status& e : errors) {
        if (!e.ok()) return e;
      }
      return Status::Ok();
    };
    for (int attempt = 0; attempt < 24; ++attempt) {
      double s = TimeRounds(threads, 0, 1, body, flush)[0];
      if (Status e = check(); !e.ok()) return e;
      if (s * 1e3 >= cfg_.min_round_ms || repeat >= (1l << 20)) break;
      repeat *= s <= 0 ? 64
                       : std::clamp<long>(
                             static_cast<long>(cfg_.min_round_ms / (s * 1e3) * 1.2) + 1, 2, 64);
    }
    std::vector<double> secs = TimeRounds(threads, cfg_.warmup, cfg_.reps, body, flush);
    if (Status e = check(); !e.ok()) return e;
    std::vector<double> gbps;
    for (double s : secs) gbps.push_back(static_cast<double>(bytes) * repeat / s / 1e9);
    return Summarize(gbps);
  }

 private:
  const CopyBenchConfig& cfg_;
};

Status Waited(Result<Handle> h) { return h.ok() ? h->Wait() : h.status(); }

struct Setup {
  std::unique_ptr<Topology> topo;
  std::unique_ptr<DsaFleet> fleet;
  bool model = false;
  bool buffers_local = false;  // the topology is not this machine's: every buffer is local
};

Result<Setup> Prepare(const CopyBenchConfig& cfg, const DsaCopyBenchConfig& dsa) {
  Setup s;
  s.model = cfg.engine == "dsa-model";
  if (!s.model && !dsa.xml.empty()) {
    return Status::InvalidArgument(
        "--xml describes the machine the DSA model imitates; with --engine dsa "
        "the topology is this machine's");
  }
  Result<Topology> topo = dsa.xml.empty() ? Topology::Discover() : Topology::FromXmlFile(dsa.xml);
  if (!topo.ok()) return topo.status();
  s.topo = std::make_unique<Topology>(std::move(*topo));
  s.buffers_local = !s.topo->is_this_system();
  DsaDiscoveryOptions dopts;
  if (!dsa.sysfs_root.empty()) dopts.sysfs_root = dsa.sysfs_root;
  if (!dsa.dev_root.empty()) dopts.dev_root = dsa.dev_root;
  if (!s.model) {
    Result<DsaInventory> inv = DsaInventory::Discover(dopts);
    if (!inv.ok()) return inv.status();
    Result<DsaFleet> fleet = DsaFleet::Open(*inv);
    if (!fleet.ok()) {
      return Status(fleet.status().code(),
                    fleet.status().message() +
                        "\nThis machine has no DSA to measure; `tierflow bench copy --engine "
                        "dsa-model` runs the same experiments on the device model (labelled so).");
    }
    s.fleet = std::make_unique<DsaFleet>(std::move(*fleet));
    return s;
  }
  std::vector<int> nodes;
  if (!dsa.sysfs_root.empty()) {
    Result<DsaInventory> inv = DsaInventory::Discover(dopts);
    if (!inv.ok()) return inv.status();
    nodes = DsaFleet::NodesOf(*inv);
    if (nodes.empty()) {
      return Status::NotFound(fmt::format("no DSA devices under {} to lay the models out by: {}",
                                          dsa.sysfs_root, inv->note()));
    }
  } else {
    for (const NumaNode& n : s.topo->nodes()) {
      if (n.has_cpus()) nodes.push_back(n.os_index);
    }
  }
  for (int n : nodes) {
    if (s.topo->node(n) == nullptr) {
      return Status::InvalidArgument(
          fmt::format("a DSA of the layout sits on node {}, which the topology "
                      "lacks: pass the matching --xml",
                      n));
    }
  }
  DsaModelConfig mc;
  mc.instant = false;  // engine threads: completion is asynchronous, as on hardware
  Result<DsaFleet> fleet = DsaFleet::OnModel(nodes, mc);
  if (!fleet.ok()) return fleet.status();
  s.fleet = std::make_unique<DsaFleet>(std::move(*fleet));
  return s;
}

class Experiments {
 public:
  Experiments(const CopyBenchConfig& cfg, const DsaCopyBenchConfig& dsa, Setup& setup)
      : cfg_(cfg), dsa_(dsa), s_(setup), meter_(cfg), engines_(setup.fleet->engines()) {}

  Result<Buffer> Alloc(int node, std::size_t size) {
    Result<Buffer> b = Buffer::OnNode(s_.buffers_local ? 0 : node, size);
    if (b.ok()) std::memset(b->data(), 0x5a, size);
    return b;
  }
  std::function<void()> Flusher(Buffer& a, Buffer& b, std::size_t n) {
    return [this, &a, &b, n] {
      if (cfg_.flush && n <= kFlushLimit) {
        (void)WriteBackInvalidate(a.data(), n);
        (void)WriteBackInvalidate(b.data(), n);  // out of every cache level
      }
    };
  }
  Result<Engine*> DsaOf(int node) {
    CopyPolicy single;
    Result<std::vector<CopyPart>> plan = PlanCopy(single, *s_.topo, engines_, node, node, 4096);
    if (!plan.ok()) return plan.status();
    return plan->front().engine;
  }
  std::string EngineName() const { return s_.model ? "dsa-model" : "dsa"; }

  // Fig. 3.4: single submissions, batches and asynchronous queues of copies, by size.
  Status Submission() {
    const int src = cfg_.src_nodes.front();
    Result<Engine*> e = DsaOf(src);
    if (!e.ok()) return e.status();
    const std::vector<std::size_t> sizes =
        dsa_.sizes_given ? cfg_.sizes
                         : std::vector<std::size_t>{4096, 16384, 65536, 262144, 1 << 20, 16 << 20};
    const int b = cfg_.batch_sizes.front();
    std::size_t need = 0;
    for (std::size_t size : sizes) need = std::max(need, std::min(kMaxBuffer, size * b));
    Result<Buffer> from = Alloc(src, need), to = Alloc(src, need);
    if (!from.ok()) return from.status();
    if (!to.ok()) return to.status();
    for (std::size_t size : sizes) {
      if (size * static_cast<std::size_t>(b) > kMaxBuffer) {
        std::fprintf(stderr, "skipped: submission of %d x %s exceeds 1 GiB per buffer\n", b,
                     FormatSize(size).c_str());
        continue;
      }
      std::vector<Operation> ops;
      for (int m = 0; m < b; ++m) {
        ops.push_back(Operation::Copy(to->data() + m * size, from->data() + m * size, size));
      }
      std::vector<Handle> handles(ops.size());
      for (const char* method : {"single", "batch", "async"}) {
        std::function<Status(int)> it;
        std::size_t bytes = size;
        if (std::strcmp(method, "single") == 0) {
          it = [&](int) { return Waited((*e)->Submit(ops[0])); };
        } else if (std::strcmp(method, "batch") == 0) {
          bytes = size * b;
          it = [&](int) { return Waited((*e)->SubmitBatch(ops)); };
        } else {
          bytes = size * b;
          it = [&](int) {
            for (std::size_t i = 0; i < ops.size(); ++i) {
              Result<Handle> h = (*e)->Submit(ops[i]);
              if (!h.ok()) return h.status();
              handles[i] = std::move(*h);
            }
            for (Handle& h : handles) {
              if (Status st = h.Wait(); !st.ok()) return st;
            }
            return Status::Ok();
          };
        }
        Result<Summary> r = meter_.Run(1, bytes, it, Flusher(*from, *to, bytes));
        if (!r.ok()) return r.status();
        rows_.push_back({"submission", "3.4", EngineName(), method, "single", size,
                         std::strcmp(method, "single") == 0 ? 1 : b, 1, src, src, 1, *r});
      }
    }
    return Status::Ok();
  }

  // Fig. 3.5: 1, 2, 12 threads submitting copies to one shared WQ.
  Status Threads() {
    const int src = cfg_.src_nodes.front();
    Result<Engine*> e = DsaOf(src);
    if (!e.ok()) return e.status();
    // The thesis used 1 MiB and 1 GiB; each thread here copies its own region, so the larger
    // default is 64 MiB (12 threads x 64 MiB stays within one 1 GiB buffer).
    const std::vector<std::size_t> sizes =
        dsa_.sizes_given ? cfg_.sizes
                         : std::vector<std::size_t>{1 << 20, s_.model ? 16u << 20 : 64u << 20};
    const std::vector<int> counts =
        dsa_.submitters_given ? cfg_.submitters : std::vector<int>{1, 2, 12};
    for (std::size_t size : sizes) {
      const int most = *std::max_element(counts.begin(), counts.end());
      if (size * static_cast<std::size_t>(most) > kMaxBuffer) {
        std::fprintf(stderr, "skipped: %d threads x %s exceeds 1 GiB per buffer\n", most,
                     FormatSize(size).c_str());
        continue;
      }
      Result<Buffer> from = Alloc(src, size * most), to = Alloc(src, size * most);
      if (!from.ok()) return from.status();
      if (!to.ok()) return to.status();
      for (int t : counts) {
        auto it = [&](int k) {
          return Waited(
              (*e)->Submit(Operation::Copy(to->data() + k * size, from->data() + k * size, size)));
        };
        Result<Summary> r = meter_.Run(t, size * t, it, Flusher(*from, *to, size * t));
        if (!r.ok()) return r.status();
        rows_.push_back(
            {"threads", "3.5", EngineName(), "single", "single", size, 1, t, src, src, 1, *r});
      }
    }
    return Status::Ok();
  }

  std::size_t PlacementSize() const {
    if (dsa_.sizes_given) return *std::max_element(cfg_.sizes.begin(), cfg_.sizes.end());
    return s_.model ? std::size_t{16} << 20 : std::size_t{256} << 20;
  }
  std::vector<int> PlacementDestinations() const {
    if (dsa_.nodes_given) return cfg_.dst_nodes;
    std::vector<int> out;
    for (const NumaNode& n : s_.topo->nodes()) out.push_back(n.os_index);
    return out;
  }

  // Fig. 3.6/3.7: every policy to every destination node, then each policy's average and its
  // scaling over the single-DSA policy.
  Status Placement() {
    const int src = cfg_.src_nodes.front();
    const std::size_t size = PlacementSize();
    Result<Buffer> from = Alloc(src, size);
    if (!from.ok()) return from.status();
    std::vector<PolicyKind> policies = cfg_.policies;
    if (!dsa_.policies_given) {
      policies = {PolicyKind::kSingle, PolicyKind::kPushPull, PolicyKind::kSocket,
                  PolicyKind::kBruteForce, PolicyKind::kAuto};
    }
    for (int dst : PlacementDestinations()) {
      Result<Buffer> to = Alloc(dst, size);
      if (!to.ok()) return to.status();
      for (PolicyKind kind : policies) {
        CopyPolicy p;
        p.kind = kind;
        Result<std::vector<CopyPart>> plan = PlanCopy(p, *s_.topo, engines_, src, dst, size);
        if (!plan.ok()) return plan.status();
        const Operation op = Operation::Copy(to->data(), from->data(), size);
        auto it = [&](int) { return Waited(SubmitParts(op, *plan)); };
        Result<Summary> r = meter_.Run(1, size, it, Flusher(*from, *to, size));
        if (!r.ok()) return r.status();
        rows_.push_back({"placement", "3.6", EngineName(), "parts",
                         std::string(PolicyKindName(kind)), size, 1, 1, src, dst,
                         static_cast<int>(plan->size()), *r});
      }
    }
    // Fig. 3.7: average over destinations, scaling factor against single.
    std::map<std::string, std::pair<double, double>> sums;  // policy -> (gbps, dsas)
    std::map<std::string, int> counts;
    for (const Row& r : rows_) {
      if (r.experiment != "placement") continue;
      sums[r.policy].first += r.gbps.median;
      sums[r.policy].second += r.dsas;
      ++counts[r.policy];
    }
    const double single = counts["single"] > 0 ? sums["single"].first / counts["single"] : 0;
    for (PolicyKind kind : policies) {
      const std::string name(PolicyKindName(kind));
      if (counts[name] == 0) continue;
      const double avg = sums[name].first / counts[name];
      const double dsas = sums[name].second / counts[name];
      scaling_.push_back({{"policy", name},
                          {"dsas_avg", dsas},
                          {"gbps_avg", avg},
                          {"scaling", single > 0 ? avg / single : 0},
                          {"scaling_per_dsa", single > 0 && dsas > 0 ? avg / single / dsas : 0}});
    }
    return Status::Ok();
  }

  // Fig. 3.8: the CPU engine and one-thread memcpy on the same copies.
  Status Cpu() {
    const int src = cfg_.src_nodes.front();
    const std::size_t size = PlacementSize();
    Result<Topology> here = Topology::Discover();
    if (!here.ok()) return here.status();
    CpuEngineOptions o;
    o.node = s_.buffers_local ? 0 : src;
    Result<std::unique_ptr<CpuEngine>> cpu = CpuEngine::Create(*here, o);
    if (!cpu.ok()) return cpu.status();
    Result<Buffer> from = Alloc(src, size);
    if (!from.ok()) return from.status();
    std::vector<int> dsts = s_.buffers_local ? std::vector<int>{0} : PlacementDestinations();
    for (int dst : dsts) {
      Result<Buffer> to = Alloc(dst, size);
      if (!to.ok()) return to.status();
      const Operation op = Operation::Copy(to->data(), from->data(), size);
      auto engine_it = [&](int) { return Waited((*cpu)->Submit(op)); };
      Result<Summary> r = meter_.Run(1, size, engine_it, Flusher(*from, *to, size));
      if (!r.ok()) return r.status();
      rows_.push_back(
          {"cpu", "3.8", "cpu", "single", "-", size, 1, (*cpu)->workers(), src, dst, 0, *r});
      auto memcpy_it = [&](int) {
        std::memcpy(to->data(), from->data(), size);
        return Status::Ok();
      };
      Result<Summary> m = meter_.Run(1, size, memcpy_it, Flusher(*from, *to, size));
      if (!m.ok()) return m.status();
      rows_.push_back({"cpu", "3.8", "memcpy", "single", "-", size, 1, 1, src, dst, 0, *m});
    }
    return Status::Ok();
  }

  const std::vector<Row>& rows() const { return rows_; }
  const nlohmann::json& scaling() const { return scaling_; }

 private:
  const CopyBenchConfig& cfg_;
  const DsaCopyBenchConfig& dsa_;
  Setup& s_;
  Meter meter_;
  std::vector<Engine*> engines_;
  std::vector<Row> rows_;
  nlohmann::json scaling_ = nlohmann::json::array();
};

Status Validate(const CopyBenchConfig& cfg, const DsaCopyBenchConfig& dsa) {
  for (const std::string& x : dsa.experiments) {
    if (x != "submission" && x != "threads" && x != "placement" && x != "cpu") {
      return Status::InvalidArgument(fmt::format(
          "experiment '{}': use submission, threads, placement or cpu (thesis Fig. 3.4-3.8)", x));
    }
  }
  if (cfg.batch_sizes.empty() || cfg.src_nodes.empty()) {
    return Status::InvalidArgument("give at least one --batch size and one --src-node");
  }
  return Status::Ok();
}

// The experiments asked for, in the thesis' order.
Status RunExperiments(const DsaCopyBenchConfig& dsa, Experiments& ex) {
  auto wants = [&](const char* x) {
    return std::find(dsa.experiments.begin(), dsa.experiments.end(), x) != dsa.experiments.end();
  };
  if (wants("submission")) {
    if (Status s = ex.Submission(); !s.ok()) return s;
  }
  if (wants("threads")) {
    if (Status s = ex.Threads(); !s.ok()) return s;
  }
  if (wants("placement")) {
    if (Status s = ex.Placement(); !s.ok()) return s;
  }
  if (wants("cpu")) {
    if (Status s = ex.Cpu(); !s.ok()) return s;
  }
  return Status::Ok();
}

std::string Label(const Setup& setup) {
  if (!setup.model) return "DSA hardware";
  return fmt::format(
      "DSA DEVICE MODEL ({} model device(s)): these are software copies, not a DSA's "
      "throughput{}",
      setup.fleet->members().size(),
      setup.buffers_local ? "; nodes from the given topology are simulated, every buffer is in "
                            "local memory"
                          : "");
}

nlohmann::json DevicesJson(const DsaFleet& fleet) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DsaFleet::DeviceStats& d : fleet.stats()) {
    std::vector<std::uint64_t> hist(d.stats.size_histogram.begin(), d.stats.size_histogram.end());
    devices.push_back({{"device", d.device},
                       {"node", d.node},
                       {"wq", d.wq},
                       {"ops", d.stats.ops},
                       {"bytes", d.stats.bytes},
                       {"descriptors", d.stats.descriptors},
                       {"batches", d.stats.batches},
                       {"submit_retries", d.stats.submit_retries},
                       {"faults_resumed", d.stats.faults_resumed},
                       {"faults_on_cpu", d.stats.faults_on_cpu},
                       {"cpu_fallbacks", d.stats.cpu_fallbacks},
                       {"size_histogram_log2", hist}});
  }
  return devices;
}

nlohmann::json ReportJson(const CopyBenchConfig& cfg, const Setup& setup, const Experiments& ex) {
  nlohmann::json doc;
  doc["engine"] = setup.model ? "dsa-model" : "dsa";
  doc["model"] = setup.model;
  doc["label"] = Label(setup);
  doc["convention"] = "gbps = bytes copied / seconds / 1e9";
  doc["reps"] = cfg.reps;
  doc["auto_thresholds"] = DescribeAutoThresholds(AutoThresholds{});
  doc["devices"] = DevicesJson(*setup.fleet);
  doc["rows"] = nlohmann::json::array();
  for (const Row& r : ex.rows()) doc["rows"].push_back(RowJson(r));
  doc["scaling"] = ex.scaling();
  return doc;
}

void PrintCsv(const Experiments& ex, bool model, std::ostream& out) {
  out << "experiment,figure,engine,method,policy,size_bytes,batch,threads,src_node,dst_node,dsas,"
         "gbps_min,gbps_median,gbps_max,model\n";
  for (const Row& r : ex.rows()) {
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{}\n", r.experiment,
                       r.figure, r.engine, r.method, r.policy, r.size, r.batch, r.threads, r.src,
                       r.dst, r.dsas, r.gbps.min, r.gbps.median, r.gbps.max, model ? 1 : 0);
  }
}

void PrintRows(const Experiments& ex, std::ostream& out) {
  std::string last;
  for (const Row& r : ex.rows()) {
    if (r.experiment != last) {
      last = r.experiment;
      out << fmt::format(
          "\n{} (thesis Fig. {})\n  {:<10} {:<8} {:<11} {:>9} {:>5} {:>7} {:>4} {:>4} {:>4} "
          "{:>9} {:>9} {:>9}\n",
          r.experiment, r.figure, "engine", "method", "policy", "size", "batch", "threads", "src",
          "dst", "dsas", "GB/s min", "median", "max");
    }
    out << fmt::format(
        "  {:<10} {:<8} {:<11} {:>9} {:>5} {:>7} {:>4} {:>4} {:>4} {:>9.2f} {:>9.2f} "
        "{:>9.2f}\n",
        r.engine, r.method, r.policy, FormatSize(r.size), r.batch, r.threads, r.src, r.dst, r.dsas,
        r.gbps.min, r.gbps.median, r.gbps.max);
  }
  if (!ex.scaling().empty()) {
    out << "\nscaling over destinations (thesis Fig. 3.7)\n  policy       DSAs  GB/s avg  x single "
           " per DSA\n";
    for (const auto& s : ex.scaling()) {
      out << fmt::format("  {:<12} {:>4.1f} {:>9.2f} {:>9.2f} {:>8.2f}\n",
                         s["policy"].get<std::string>(), s["dsas_avg"].get<double>(),
                         s["gbps_avg"].get<double>(), s["scaling"].get<double>(),
                         s["scaling_per_dsa"].get<double>());
    }
  }
}

void PrintText(const nlohmann::json& doc, const Experiments& ex, std::ostream& out) {
  const std::string label = doc["label"].get<std::string>();
  out << fmt::format("tierflow bench copy --engine {}  [{}]\n", doc["engine"].get<std::string>(),
                     label);
  PrintRows(ex, out);
  out << "\nper device\n";
  for (const auto& d : doc["devices"]) {
    out << fmt::format(
        "  {:<12} node {:>2}  {:>10} ops {:>14} bytes {:>9} batches {:>6} retries  {}\n",
        d["device"].get<std::string>(), d["node"].get<int>(), d["ops"].get<std::uint64_t>(),
        d["bytes"].get<std::uint64_t>(), d["batches"].get<std::uint64_t>(),
        d["submit_retries"].get<std::uint64_t>(), d["wq"].get<std::string>());
  }
  out << "auto policy: " << doc["auto_thresholds"].get<std::string>() << "\n";
  if (doc["model"].get<bool>()) out << "(" << label << ")\n";
}

}  // namespace

Status RunDsaCopyBench(const CopyBenchConfig& cfg, const DsaCopyBenchConfig& dsa,
                       std::ostream& out) {
  if (Status s = Validate(cfg, dsa); !s.ok()) return s;
  Result<Setup> setup = Prepare(cfg, dsa);
  if (!setup.ok()) return setup.status();
  Experiments ex(cfg, dsa, *setup);
  if (Status s = RunExperiments(dsa, ex); !s.ok()) return s;
  const nlohmann::json doc = ReportJson(cfg, *setup, ex);
  if (cfg.format == "json") {
    out << doc.dump(2) << "\n";
  } else if (cfg.format == "csv") {
    PrintCsv(ex, setup->model, out);
  } else {
    PrintText(doc, ex, out);
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
