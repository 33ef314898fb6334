// SPDX-License-Identifier: Apache-2.0
#include "tools/pipes_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "tierflow/calibration.h"
#include "tierflow/engine.h"
#include "tierflow/size.h"
#include "tierflow/uring_engine.h"
#include "tools/cli_checks.h"

namespace tierflow::tools {

namespace {

constexpr std::uint64_t kExplainSize = 64u << 20;  // memory named without a size, to explain

Result<std::unique_ptr<PipeRuntime>> MakeRuntime(const PipesCommandOptions& o, bool prefault) {
  PipeRuntimeOptions ro;
  ro.topology_xml = o.topology_xml;
  ro.model_placement = !o.topology_xml.empty();
  ro.calibration_path = o.calibration;
  ro.calibration_any_machine = o.any_machine;
  ro.dsa_model = o.dsa_model;
  ro.prefault = prefault;
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(ro);
  if (rt.ok() && (*rt)->calibration_note().starts_with("warning: ")) {
    std::cerr << Printable((*rt)->calibration_note()) << "\n";
  }
  if (!rt.ok() && !o.calibration.empty() &&
      rt.status().message().find(o.calibration) != std::string::npos) {
    return Status(rt.status().code(), "--calibration: " + rt.status().message());
  }
  return rt;
}

Result<PipeOptions> Knobs(const PipesCommandOptions& o) {
  PipeOptions p;
  p.queue_depth = o.queue_depth;
  p.chunk_bytes = o.chunk_bytes;
  p.bandwidth_cap = o.bandwidth_cap;
  p.force_staging = o.force_staging;
  p.sync_writes = o.sync;
  if (!o.mechanism.empty()) {
    Result<Mechanism> m = ParseMechanism(o.mechanism);
    if (!m.ok()) return m.status();
    p.mechanism = *m;
  }
  return p;
}

bool IsFile(const std::string& spec) { return spec.starts_with("file:"); }

// The path part of a file locator that exists already (explain must not create it).
bool ExistingFile(const std::string& spec) {
  if (!IsFile(spec)) return false;
  std::string path = spec.substr(5);
  std::error_code ec;
  while (!std::filesystem::exists(path, ec) && path.rfind(':') != std::string::npos) {
    path.resize(path.rfind(':'));
  }
  return std::filesystem::is_regular_file(path, ec);
}

struct Ends {
  Locator from, to;
};

// Names the option behind a planning error the library reports in its own words.
Status ForOption(const PipesCommandOptions& o, Status s) {
  if (s.ok() || o.mechanism.empty()) return s;
  return Status(s.code(), fmt::format("--mechanism {}: {}", o.mechanism, s.message()));
}

Result<Ends> Declare(PipeRuntime& rt, const PipesCommandOptions& o, FileMode dst_mode,
                     std::uint64_t default_size) {
  Ends e;
  Result<Locator> from = rt.Parse(o.from, FileMode::kRead, default_size);
  if (!from.ok()) return Status(from.status().code(), "--from: " + from.status().message());
  e.from = *from;
  const std::uint64_t length = o.length != 0 ? o.length : from->capacity();
  Result<Locator> to = rt.Parse(o.to, dst_mode, length);
  if (!to.ok()) return Status(to.status().code(), "--to: " + to.status().message());
  e.to = *to;
  const std::uint64_t cap = std::min(e.from.capacity(), e.to.capacity());
  if (o.length > cap) {
    return Status::InvalidArgument(
        fmt::format("--length {}: beyond {} ({} bytes): give at most {}", o.length,
                    e.from.capacity() < e.to.capacity() ? o.from : o.to, cap, FormatSize(cap)));
  }
  return e;
}

}  // namespace

Status RunPipesExplain(const PipesCommandOptions& o, std::ostream& out) {
  Result<std::unique_ptr<PipeRuntime>> rt = MakeRuntime(o, false);
  if (!rt.ok()) return rt.status();
  Result<PipeOptions> knobs = Knobs(o);
  if (!knobs.ok()) return knobs.status();
  const bool existed = ExistingFile(o.to);
  Result<Ends> ends =
      Declare(**rt, o, existed ? FileMode::kModify : FileMode::kCreate, kExplainSize);
  if (!ends.ok()) return ends.status();
  Result<PipePlan> plan = (*rt)->Plan(ends->from, ends->to, *knobs);
  if (!existed && ends->to.is_file()) {
    // Created empty for the explanation only: removed while it is still an empty file of ours.
    struct stat st {};
    if (lstat(ends->to.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
        st.st_uid == geteuid()) {
      unlink(ends->to.path().c_str());
    }
  }
  if (!plan.ok()) return ForOption(o, plan.status());
  out << (o.json ? plan->ToJson() + "\n" : plan->ToText());
  return Status::Ok();
}

Status RunPipesCopy(const PipesCommandOptions& o, std::ostream& out) {
  Result<std::unique_ptr<PipeRuntime>> rt = MakeRuntime(o, true);
  if (!rt.ok()) return rt.status();
  Result<PipeOptions> knobs = Knobs(o);
  if (!knobs.ok()) return knobs.status();
  const FileMode mode = o.modify      ? FileMode::kModify
                        : o.overwrite ? FileMode::kReplace
                                      : FileMode::kCreate;
  Result<Ends> ends = Declare(**rt, o, mode, 0);
  if (!ends.ok()) return ends.status();
  Result<Pipe> pipe = (*rt)->Connect(ends->from, ends->to, *knobs);
  if (!pipe.ok()) return ForOption(o, pipe.status());
  const std::uint64_t n =
      o.length != 0 ? o.length : std::min(ends->from.capacity(), ends->to.capacity());
  bench::Ticker ticker("tierflow pipes copy", o.progress && !o.json && bench::StderrIsTerminal());
  ticker.Set(fmt::format("moving {}", FormatSize(n)));
  ticker.Poll([&pipe] { return FormatSize(pipe->stats().bytes) + " done"; });
  const auto t0 = std::chrono::steady_clock::now();
  Status s = pipe->Transfer(0, 0, n);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) return s;
  PipeStats st = pipe->stats();
  if (o.json) {
    nlohmann::json j = nlohmann::json::parse(st.ToJson());
    j["plan"] = nlohmann::json::parse(pipe->plan().ToJson());
    j["seconds"] = secs;
    out << j.dump(2) << "\n";
    return Status::Ok();
  }
  out << pipe->plan().ToText();
  out << fmt::format("moved {} in {:.3f} s: {:.2f} GB/s (expected {}), {} chunks, {} fallbacks\n",
                     FormatSize(st.bytes), secs, static_cast<double>(st.bytes) / secs / 1e9,
                     st.expected_gbps > 0 ? fmt::format("{:.2f} GB/s", st.expected_gbps)
                                          : std::string("uncalibrated"),
                     st.chunks, st.fallbacks);
  for (const TieredStage& t : st.stages) {
    out << fmt::format("  stage {}: {} placed, {:.1f}% occupancy{}: {}\n", t.stage,
                       FormatSize(t.bytes), t.occupancy * 100, t.modelled ? " (modelled)" : "",
                       t.state);
  }
  for (const std::string& w : st.switches) out << "  placed " << w << "\n";
  return Status::Ok();
}

namespace {

// Calibration::Measure engine by engine, so that the status line can say which one runs.
Result<Calibration> MeasureEach(const PipeRuntime& rt, const CalibrationOptions& co,
                                bool progress) {
  bench::Ticker ticker("tierflow pipes calibrate", progress && bench::StderrIsTerminal());
  const std::vector<Engine*> engines = rt.engines();
  Result<Calibration> all = Status::InvalidArgument("no engine to calibrate");
  for (std::size_t i = 0; i < engines.size(); ++i) {
    ticker.Set(
        fmt::format("{} ({} of {})", engines[i]->capabilities().name, i + 1, engines.size()));
    const bool storage = engines[i] == &rt.storage_engine();
    Result<Calibration> one = storage ? Calibration::Measure({}, &rt.storage_engine(), co)
                                      : Calibration::Measure({engines[i]}, nullptr, co);
    if (!one.ok()) return one.status();
    if (!all.ok()) {
      all = std::move(*one);
      continue;
    }
    for (const CalibrationEntry& e : one->entries()) all->Set(e);
  }
  return all;
}

}  // namespace

Status RunPipesCalibrate(const PipesCommandOptions& o, std::ostream& out) {
  PipesCommandOptions plain = o;
  plain.calibration = "/nonexistent";  // measure afresh; do not read the old figures
  Result<std::unique_ptr<PipeRuntime>> rt = MakeRuntime(plain, true);
  if (!rt.ok()) return rt.status();
  CalibrationOptions co;
  co.bytes = o.bytes;
  co.file_dir = o.dir;
  Result<Calibration> c = MeasureEach(**rt, co, o.progress);
  if (!c.ok() && !o.dir.empty()) return Status(c.status().code(), "--dir: " + c.status().message());
  if (!c.ok()) return c.status();
  std::string path = !o.output.empty() ? o.output : o.calibration;
  if (path.empty()) {
    path = Calibration::DefaultPath();
    if (path.empty()) {
      return Status::InvalidArgument(
          "no calibration cache: you have no home directory; set XDG_CACHE_HOME to a directory "
          "of yours, or give --output");
    }
    if (Status s = Calibration::PrepareCacheDirectory(path); !s.ok()) return s;
  }
  if (Status s = c->Save(path); !s.ok()) return s;
  out << fmt::format("calibration of {} written to {}\n", c->machine(), path);
  for (const CalibrationEntry& e : c->entries()) {
    out << fmt::format("  {:<16} {:>8} -> {:<8} {:>7.2f} GB/s  {:>8.1f} us per 4 KiB\n",
                       MechanismName(e.mechanism), e.from, e.to, e.gbps, e.latency_us);
  }
  return Status::Ok();
}

}  // namespace tierflow::tools
