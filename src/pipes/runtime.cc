// SPDX-License-Identifier: Apache-2.0
#include <filesystem>

#include <fmt/format.h>

#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "pipes/tiered.h"
#include "tierflow/dsa_inventory.h"

namespace tierflow {

namespace {

Result<Topology> LoadTopology(const std::string& xml) {
  if (xml.empty()) return Topology::Discover();
  return Topology::FromXmlFile(xml);
}

// The DSA engine: hardware when a usable work queue exists, the model when asked for.
Status MakeDsa(PipeRuntime::Impl& m) {
  if (!m.options.use_dsa) {
    m.dsa_note = "DSA not used (PipeRuntimeOptions::use_dsa is off)";
    return Status::Ok();
  }
  Result<DsaInventory> inv = DsaInventory::Discover();
  if (inv.ok() && !inv->UsableWqs().empty()) {
    Result<std::unique_ptr<DsaEngine>> e = DsaEngine::Create(*inv);
    if (e.ok()) {
      m.own_dsa = std::move(*e);
      m.dsa = m.own_dsa.get();
      return Status::Ok();
    }
    m.dsa_note = "a DSA work queue exists but could not be opened: " + e.status().message();
  } else {
    m.dsa_note = inv.ok() && !inv->note().empty() ? "no DSA device: " + inv->note()
                                                  : "no usable DSA work queue on this machine";
  }
  if (!m.options.dsa_model) return Status::Ok();
  DsaModelConfig mc;
  mc.instant = false;
  Result<std::shared_ptr<DsaDeviceModel>> model = DsaDeviceModel::Create(mc);
  if (!model.ok()) return model.status();
  Result<std::unique_ptr<DsaEngine>> e = DsaEngine::CreateOnModel(*model, 0);
  if (!e.ok()) return e.status();
  m.dsa_model = std::move(*model);
  m.own_dsa = std::move(*e);
  m.dsa = m.own_dsa.get();
  m.dsa_note = "the DSA engine is the software device model (copies by the CPU, labelled model)";
  return Status::Ok();
}

// The caller's memory engines, each serving the mechanism of its kind (at most one each).
Status TakeCallerEngines(PipeRuntime::Impl& m) {
  for (Engine* e : m.options.engines) {
    if (e == nullptr)
      return Status::InvalidArgument("PipeRuntimeOptions::engines holds a null engine");
    const EngineCapabilities& caps = e->capabilities();
    const bool memory = caps.copies_memory && (caps.ops & OpBit(OpKind::kCopy)) != 0;
    if (caps.kind == EngineKind::kStorage || !memory) {
      return Status::InvalidArgument(fmt::format(
          "engine '{}' cannot serve pipes: they take engines that copy memory (kind cpu or "
          "offload); files go through the runtime's own io_uring engine",
          caps.name));
    }
    Engine*& slot = caps.kind == EngineKind::kCpu ? m.cpu : m.dsa;
    if (slot != nullptr) {
      return Status::InvalidArgument(fmt::format(
          "engines '{}' and '{}' are both of kind {}: give a pipe runtime at most one of each",
          slot->capabilities().name, caps.name, EngineKindName(caps.kind)));
    }
    slot = e;
  }
  if (m.dsa != nullptr)
    m.dsa_note = "the offload engine is the caller's: " + m.dsa->capabilities().name;
  return Status::Ok();
}

Status MakeEngines(PipeRuntime::Impl& m) {
  if (Status s = TakeCallerEngines(m); !s.ok()) return s;
  Result<Topology> here =
      m.topology.is_this_system() ? Result<Topology>(m.topology) : Topology::Discover();
  if (!here.ok()) return here.status();
  CpuEngineOptions co;
  co.node = here->nodes().empty() ? 0 : here->nodes().front().os_index;
  co.workers = m.options.cpu_workers;
  if (m.cpu == nullptr) {
    Result<std::unique_ptr<CpuEngine>> cpu = CpuEngine::Create(*here, co);
    if (!cpu.ok()) return cpu.status();
    m.own_cpu = std::move(*cpu);
    m.cpu = m.own_cpu.get();
  }
  IoUringEngineOptions uo;
  uo.queue_depth = m.options.uring_queue_depth;
  Result<std::unique_ptr<IoUringEngine>> uring = IoUringEngine::Create(uo);
  if (!uring.ok()) return uring.status();
  m.uring = std::move(*uring);
  return m.dsa != nullptr ? Status::Ok() : MakeDsa(m);
}

Status LoadCalibration(PipeRuntime::Impl& m) {
  const bool cache = m.options.calibration_path.empty();
  const std::string path = cache ? Calibration::DefaultPath() : m.options.calibration_path;
  if (path.empty()) {
    m.calibration_note =
        "no calibration cache (no home directory: set HOME or XDG_CACHE_HOME): mechanisms are "
        "chosen by preference, not by measured figures";
    return Status::Ok();
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    m.calibration_note = fmt::format(
        "no calibration at {}: mechanisms are chosen by preference, not by measured figures "
        "(run `tierflow pipes calibrate`)",
        path);
    return Status::Ok();
  }
  if (cache) {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    if (Status s = Calibration::CheckCacheDirectory(dir); !s.ok()) {
      m.calibration_note = "warning: calibration cache not used: " + s.message();
      return Status::Ok();
    }
  }
  Result<Calibration> c = Calibration::Load(path, m.options.calibration_any_machine);
  if (c.status().code() == StatusCode::kUnsupported) {
    m.calibration_note = c.status().message();
    return Status::Ok();
  }
  if (!c.ok() && cache) {
    // A damaged cache costs the figures, never the run: the next calibration replaces it.
    m.calibration_note = "warning: calibration cache ignored: " + c.status().message();
    return Status::Ok();
  }
  if (!c.ok()) return c.status();
  m.calibration = std::move(*c);
  m.calibration_note = fmt::format("calibration read from {} (measured {} on {})", path,
                                   m.calibration.measured_at(), m.calibration.machine());
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PipeRuntime>> PipeRuntime::Create(const PipeRuntimeOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->modelled_usage = std::make_shared<detail::ModelledUsage>();
  Result<Topology> topo = LoadTopology(options.topology_xml);
  if (!topo.ok()) return topo.status();
  impl->topology = std::move(*topo);
  if (Status s = MakeEngines(*impl); !s.ok()) return s;
  if (Status s = LoadCalibration(*impl); !s.ok()) return s;
  return std::unique_ptr<PipeRuntime>(new PipeRuntime(std::move(impl)));
}

PipeRuntime::PipeRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PipeRuntime::~PipeRuntime() = default;

const Topology& PipeRuntime::topology() const { return impl_->topology; }
const Calibration& PipeRuntime::calibration() const { return impl_->calibration; }
void PipeRuntime::SetCalibration(Calibration calibration) {
  std::lock_guard lock(impl_->calibration_mu);
  impl_->calibration = std::move(calibration);
  impl_->calibration_note =
      "calibration set by the application (" + impl_->calibration.source() + ")";
}
const std::string& PipeRuntime::calibration_note() const { return impl_->calibration_note; }
bool PipeRuntime::models_placement() const {
  return impl_->options.model_placement && !impl_->topology.is_this_system();
}

IoUringEngine& PipeRuntime::storage_engine() const { return *impl_->uring; }

std::vector<Engine*> PipeRuntime::engines() const {
  std::vector<Engine*> out{impl_->cpu};
  if (impl_->dsa) out.push_back(impl_->dsa);
  out.push_back(impl_->uring.get());
  return out;
}

Result<Buffer> PipeRuntime::Impl::Allocate(int node, std::size_t size, bool* modelled) const {
  AllocOptions ao;
  ao.prefault = options.prefault;
  *modelled = false;
  if (topology.is_this_system()) return Buffer::OnNode(node, size, ao);
  if (!options.model_placement) {
    return Status::Unsupported(
        fmt::format("node {} belongs to the topology read from {}, not to this machine: set "
                    "PipeRuntimeOptions::model_placement to stand its memory in on this "
                    "machine, or only plan and explain",
                    node, topology.source()));
  }
  *modelled = true;
  std::vector<int> nodes = SystemMemoryNodes();
  return Buffer::OnNode(nodes.empty() ? 0 : nodes.front(), size, ao);
}

}  // namespace tierflow
