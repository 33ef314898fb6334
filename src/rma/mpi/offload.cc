// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/offload.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "tierflow/calibration.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/dsa_fleet.h"
#include "tierflow/dsa_inventory.h"
#include "tierflow/size.h"
#include "tierflow/topology.h"

namespace tierflow::rma {

namespace {

enum class Mode { kAuto, kOff, kCpu, kDsa, kDsaModel };

struct Setting {
  Mode mode = Mode::kAuto;
  std::optional<std::size_t> min;  // TIERFLOW_RMA_OFFLOAD_MIN
};

Result<Setting> FromEnvironment() {
  Setting s;
  const char* v = std::getenv("TIERFLOW_RMA_OFFLOAD");
  const std::string_view mode = v == nullptr ? "" : v;
  if (mode.empty() || mode == "auto") {
    s.mode = Mode::kAuto;
  } else if (mode == "off") {
    s.mode = Mode::kOff;
  } else if (mode == "cpu") {
    s.mode = Mode::kCpu;
  } else if (mode == "dsa") {
    s.mode = Mode::kDsa;
  } else if (mode == "dsa-model") {
    s.mode = Mode::kDsaModel;
  } else {
    return Status::InvalidArgument(fmt::format(
        "TIERFLOW_RMA_OFFLOAD={} is not an offload mode: use auto (the default), off, cpu, dsa "
        "or dsa-model",
        mode));
  }
  if (const char* m = std::getenv("TIERFLOW_RMA_OFFLOAD_MIN"); m != nullptr) {
    Result<std::uint64_t> n = ParseSize(m);
    if (!n.ok() || *n == 0) {
      return Status::InvalidArgument(fmt::format(
          "TIERFLOW_RMA_OFFLOAD_MIN={} is not a size: give bytes above 0, such as 256KiB", m));
    }
    s.min = static_cast<std::size_t>(*n);
  }
  return s;
}

// The process's engine, made once and kept to the end of the process (its workers park when
// idle; a window may be freed after MPI_Finalize's last chance to stop them).
struct Offloader {
  std::unique_ptr<CpuEngine> cpu;
  std::optional<DsaFleet> fleet;
  Engine* engine = nullptr;
  std::size_t threshold = 0;
};
Offloader* g_offloader = nullptr;
std::once_flag g_prepare_once;

// The NUMA node of the CPU this thread runs on (0 when the topology does not say).
int NodeHere(const Topology& t) {
  const int cpu = sched_getcpu();
  for (const NumaNode& n : t.nodes()) {
    if (std::find(n.cpus.begin(), n.cpus.end(), cpu) != n.cpus.end()) return n.os_index;
  }
  return 0;
}

// Threads inherit the creator's CPU mask, and MPI launchers bind each rank to its core: the
// engine's threads are made while this thread may run anywhere, so they use the free CPUs.
template <typename Make>
auto WithAnyCpu(Make make) {
  cpu_set_t bound, any;
  const bool saved = sched_getaffinity(0, sizeof(bound), &bound) == 0;
  CPU_ZERO(&any);
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(c, &any);
  if (saved) (void)sched_setaffinity(0, sizeof(any), &any);
  auto made = make();
  if (saved) (void)sched_setaffinity(0, sizeof(bound), &bound);
  return made;
}

// Workers on the CPUs the ranks leave free, shared among the ranks (at least one each).
Result<Engine*> MakeCpu(Offloader& o, const Topology& t, int free_cpus, int ranks) {
  CpuEngineOptions opt;
  opt.node = NodeHere(t);
  opt.workers = std::max(1, free_cpus / std::max(1, ranks));
  opt.pin = false;
  opt.inline_max_bytes = 0;        // what reaches the engine is offloaded: never this thread
  opt.waiter_runs_pieces = false;  // nor pieces of it when the epoch ends
  Result<std::unique_ptr<CpuEngine>> e = WithAnyCpu([&] { return CpuEngine::Create(t, opt); });
  if (!e.ok()) return e.status();
  o.cpu = std::move(*e);
  return static_cast<Engine*>(o.cpu.get());
}

Result<Engine*> MakeDsa(Offloader& o, const Topology& t, bool model) {
  Result<DsaFleet> fleet = Status::NotFound("no DSA");
  if (model) {
    fleet = WithAnyCpu([&] { return DsaFleet::OnModel({NodeHere(t)}); });
  } else {
    Result<DsaInventory> inventory = DsaInventory::Discover();
    if (!inventory.ok()) return inventory.status();
    fleet = WithAnyCpu([&] { return DsaFleet::Open(*inventory); });
  }
  if (!fleet.ok()) return fleet.status();
  o.fleet.emplace(std::move(*fleet));
  const int here = NodeHere(t);
  Engine* pick = o.fleet->members().front().engine.get();
  for (const DsaFleet::Member& m : o.fleet->members()) {
    if (m.node == here) pick = m.engine.get();
  }
  return pick;
}

// The engine `mode` asks for; auto: a DSA device, else CPU workers on CPUs left free.
Result<Engine*> MakeEngine(Offloader& o, Mode mode, int ranks, std::string& why) {
  Result<Topology> t = Topology::Discover();
  if (!t.ok()) return t.status();
  const int free_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - ranks;
  if (mode == Mode::kDsa || mode == Mode::kDsaModel) {
    return MakeDsa(o, *t, mode == Mode::kDsaModel);
  }
  if (mode == Mode::kAuto) {
    if (Result<Engine*> dsa = MakeDsa(o, *t, false); dsa.ok()) return dsa;
    if (free_cpus < 1) {
      why = fmt::format(
          "no DSA device, and the {} ranks leave none of the {} CPUs free for the "
          "CPU engine's workers (TIERFLOW_RMA_OFFLOAD=cpu uses them anyway)",
          ranks, ranks + free_cpus);
      return static_cast<Engine*>(nullptr);
    }
  }
  return MakeCpu(o, *t, free_cpus, ranks);
}

// The engine's figure for its own node's memory: from the calibration cache of this machine,
// else measured now (not saved: `tierflow pipes calibrate` keeps figures).
Result<CalibrationEntry> Figure(Engine& e, std::string& source) {
  const Mechanism m = e.capabilities().kind == EngineKind::kCpu ? Mechanism::kCpu : Mechanism::kDsa;
  const int node = std::max(0, e.capabilities().node);
  const std::string here = CalibrationEndpoint(TierKind::kDram, node);
  if (const std::string path = Calibration::DefaultPath(); !path.empty()) {
    if (Result<Calibration> c = Calibration::Load(path); c.ok()) {
      if (auto f = c->Find(m, here, here); f.has_value()) {
        source = "the calibration cache " + path;
        return *f;
      }
    }
  }
  CalibrationOptions opt;
  opt.bytes = std::size_t{4} << 20;
  opt.nodes = {node};  // its own figure only: every rank of the node measures
  Result<Calibration> c = Calibration::Measure({&e}, nullptr, opt);
  if (!c.ok()) return c.status();
  auto f = c->Find(m, here, here);
  if (!f.has_value()) return Status::NotFound("the calibration gave no figure for " + here);
  source = "a calibration measured now";
  return *f;
}

// 8x the bytes the engine moves in its fixed cost: that cost is an eighth of the copy. Rounded
// to the nearest power of two: figures measured while the other ranks of the node measure too
// scatter by tens of percent, and a threshold that followed them would offload a size in one
// run and not in the next. Never below 64 KiB, where the calling thread's copy is as quick as
// the hand-off.
std::size_t ThresholdOf(const CalibrationEntry& f) {
  const double bytes = 8.0 * f.latency_us * 1e-6 * f.gbps * 1e9;
  constexpr int kFloorLog = 16;
  const int log =
      std::max(kFloorLog, static_cast<int>(std::lround(std::log2(std::max(bytes, 1.0)))));
  return std::size_t{1} << std::min(log, 40);
}

std::string Prepare(Offloader& o, const Setting& s, int ranks) {
  if (s.mode == Mode::kOff) return "offload off (TIERFLOW_RMA_OFFLOAD=off)";
  std::string why;
  Result<Engine*> e = MakeEngine(o, s.mode, ranks, why);
  if (!e.ok()) return "no offload: " + e.status().message();
  if (*e == nullptr) return "no offload: " + why;
  std::string source = "TIERFLOW_RMA_OFFLOAD_MIN";
  std::string figure;
  if (s.min.has_value()) {
    o.threshold = *s.min;
  } else {
    Result<CalibrationEntry> f = Figure(**e, source);
    if (!f.ok()) return "no offload: calibrating the engine failed: " + f.status().message();
    o.threshold = ThresholdOf(*f);
    figure = fmt::format(" ({:.1f} GB/s, {:.1f} us per 4 KiB)", f->gbps, f->latency_us);
  }
  o.engine = *e;
  const EngineCapabilities& caps = (*e)->capabilities();
  return fmt::format(
      "puts and gets of {} bytes and more offloaded to the {} engine{}; threshold "
      "from {}{}",
      o.threshold, caps.name, caps.is_model ? " (a model of the device)" : "", source, figure);
}

// The processes of this job on this node, as the launcher says (Open MPI, MPICH's Hydra); else
// the ranks of the first window.
int LocalRanks(int ranks) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  }
  return ranks;
}

}  // namespace

Status CheckOffloadEnvironment() { return FromEnvironment().status(); }

void PrepareOffload(int me, int ranks) {
  std::call_once(g_prepare_once, [&] {
    Result<Setting> s = FromEnvironment();
    if (!s.ok()) return;  // refused at window creation before this is reached
    auto o = std::make_unique<Offloader>();
    const std::string said = Prepare(*o, *s, LocalRanks(ranks));
    if (Verbose()) Say(me, said);
    g_offloader = o.release();
  });
}

std::uint64_t OffloadThreshold() {
  const Offloader* o = g_offloader;
  return o == nullptr || o->engine == nullptr ? 0 : o->threshold;
}

bool Offloaded(Window& w, int rank, std::uint64_t offset, void* to, const void* from,
               std::size_t n) {
  const Offloader* o = g_offloader;
  if (o == nullptr || o->engine == nullptr || w.offload_min == 0 || n < w.offload_min) {
    return false;
  }
  Result<Handle> h = o->engine->Submit(Operation::Copy(to, from, n));
  if (!h.ok()) return false;  // refused (a full queue, a range it cannot take): copied here
  w.offloaded.push_back({std::move(*h), rank, offset, offset + n});
  ++w.offloaded_copies;
  w.offloaded_bytes += n;
  return true;
}

int DrainOffloaded(Window& w, const char* call) {
  if (w.offloaded.empty()) return MPI_SUCCESS;
  Status first = Status::Ok();
  for (const Window::PendingCopy& c : w.offloaded) {
    if (Status s = c.handle.Wait(); !s.ok() && first.ok()) first = s;
  }
  w.offloaded.clear();
  if (first.ok()) return MPI_SUCCESS;
  const std::string detail =
      fmt::format("{}: an offloaded put or get failed: {}", call, first.message());
  if (!Verbose()) Say(w.me, detail);  // Fail says it itself when verbose
  return Fail(w, Misuse::kTransfer, detail);
}

int DrainOverlapping(Window& w, int rank, std::uint64_t begin, std::uint64_t end) {
  constexpr std::uint64_t kLine = 256;  // the largest line a window is maintained in
  for (const Window::PendingCopy& c : w.offloaded) {
    if (c.rank == rank && c.begin / kLine * kLine < end && c.end > begin / kLine * kLine) {
      return DrainOffloaded(w, "a transfer beside an offloaded one");
    }
  }
  return MPI_SUCCESS;
}

}  // namespace tierflow::rma
