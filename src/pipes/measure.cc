// SPDX-License-Identifier: Apache-2.0
// Calibration::Measure: every figure is the best of a few timed transfers of the real engines.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/own_file.h"
#include "tierflow/buffer.h"
#include "tierflow/calibration.h"
#include "tierflow/engine.h"
#include "tierflow/uring_engine.h"

namespace tierflow {

namespace {

using Clock = std::chrono::steady_clock;

// Seconds of the fastest of `repeats` runs of `run`; an error ends the measurement.
Result<double> Best(int repeats, const std::function<Status()>& run) {
  double best = 1e30;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto t0 = Clock::now();
    if (Status s = run(); !s.ok()) return s;
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

Status CopyOnce(Engine& e, void* dst, const void* src, std::size_t n) {
  Result<Handle> h = e.Submit(Operation::Copy(dst, src, n));
  if (!h.ok()) return h.status();
  return h->Wait();
}

// Bandwidth of `n` bytes and the mean latency of 4 KiB transfers, as an entry.
Result<CalibrationEntry> Figure(Engine& e, Mechanism m, std::string from, std::string to, void* dst,
                                const void* src, std::size_t n, int repeats) {
  Result<double> big = Best(repeats, [&] { return CopyOnce(e, dst, src, n); });
  if (!big.ok()) return big.status();
  constexpr int kSmall = 64;
  Result<double> small = Best(1, [&]() -> Status {
    for (int i = 0; i < kSmall; ++i) {
      if (Status s = CopyOnce(e, dst, src, 4096); !s.ok()) return s;
    }
    return Status::Ok();
  });
  if (!small.ok()) return small.status();
  return CalibrationEntry{m, std::move(from), std::move(to), static_cast<double>(n) / *big / 1e9,
                          *small / kSmall * 1e6};
}

Status MeasureMemory(Engine& e, Mechanism m, const CalibrationOptions& o, Calibration& c) {
  const std::vector<int> nodes = o.nodes.empty() ? SystemMemoryNodes() : o.nodes;
  for (int a : nodes) {
    for (int b : nodes) {
      Result<Buffer> src = Buffer::OnNode(a, o.bytes);
      Result<Buffer> dst = Buffer::OnNode(b, o.bytes);
      if (!src.ok()) return src.status();
      if (!dst.ok()) return dst.status();
      std::memset(src->data(), 1, o.bytes);
      Result<CalibrationEntry> f = Figure(e, m, CalibrationEndpoint(TierKind::kDram, a),
                                          CalibrationEndpoint(TierKind::kDram, b), dst->data(),
                                          src->data(), o.bytes, o.repeats);
      if (!f.ok()) return f.status();
      c.Set(*f);
    }
  }
  return Status::Ok();
}

Result<FileWindow> NewFile(IoUringEngine& e, const std::string& dir, std::size_t n) {
  Result<int> fd = UnnamedFile(dir, "calibration");
  if (!fd.ok()) return fd.status();
  Result<FileWindow> w =
      e.OpenDescriptor(*fd, dir + "/(calibration scratch file)", {FileAccess::kReadWrite, n});
  close(*fd);
  return w;
}

// io_uring writes and reads, and copy_file_range, in `dir`, on files without names.
Status MeasureFiles(IoUringEngine& e, const std::string& dir, const CalibrationOptions& o,
                    Calibration& c) {
  const int node = SystemMemoryNodes().empty() ? 0 : SystemMemoryNodes().front();
  const std::string mem = CalibrationEndpoint(TierKind::kDram, node);
  Result<Buffer> buf = Buffer::OnNode(node, o.bytes);
  if (!buf.ok()) return buf.status();
  std::memset(buf->data(), 7, o.bytes);
  Result<FileWindow> fa = NewFile(e, dir, o.bytes);
  if (!fa.ok()) return fa.status();
  Result<FileWindow> fb = NewFile(e, dir, o.bytes);
  if (!fb.ok()) return fb.status();
  struct Case {
    Mechanism m;
    std::string from, to;
    void* dst;
    const void* src;
  };
  const Case cases[] = {{Mechanism::kUringWrite, mem, "file", fa->base(), buf->data()},
                        {Mechanism::kUringRead, "file", mem, buf->data(), fa->base()},
                        {Mechanism::kCopyFileRange, "file", "file", fb->base(), fa->base()}};
  for (const Case& k : cases) {
    Result<CalibrationEntry> f = Figure(e, k.m, k.from, k.to, k.dst, k.src, o.bytes, o.repeats);
    if (!f.ok()) return f.status();
    c.Set(*f);
  }
  return Status::Ok();
}

// The memory figures of one engine, by its kind.
Status MeasureEngine(Engine& e, const CalibrationOptions& o, Calibration& c) {
  const EngineCapabilities& caps = e.capabilities();
  switch (caps.kind) {
    case EngineKind::kCpu:
      return MeasureMemory(e, Mechanism::kCpu, o, c);
    case EngineKind::kOffload:
      return MeasureMemory(e, Mechanism::kDsa, o, c);
    case EngineKind::kStorage:
      break;
  }
  return Status::InvalidArgument(fmt::format(
      "engine '{}' is a storage engine: give it to Calibration::Measure as `storage`, not among "
      "the memory engines",
      caps.name));
}

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Result<Calibration> Calibration::Measure(const std::vector<Engine*>& engines,
                                         IoUringEngine* storage,
                                         const CalibrationOptions& options) {
  if (options.bytes < (1u << 20) || options.bytes % 4096 != 0) {
    return Status::InvalidArgument(
        "calibration needs at least 1 MiB per figure, a multiple of 4 KiB");
  }
  const std::vector<int> system = SystemMemoryNodes();
  for (int n : options.nodes) {
    if (std::find(system.begin(), system.end(), n) == system.end()) {
      return Status::InvalidArgument(
          fmt::format("calibration of node {}: not a memory node of this system (it has {})", n,
                      fmt::join(system, ", ")));
    }
  }
  Calibration c;
  c.machine_ = ThisMachine();
  c.measured_at_ = NowIso();
  c.source_ = "measured " + c.measured_at_;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = !options.file_dir.empty()        ? options.file_dir
                          : tmp != nullptr && *tmp != '\0' ? tmp
                                                           : "/tmp";
  for (Engine* e : engines) {
    if (e == nullptr) return Status::InvalidArgument("Calibration::Measure given a null engine");
    if (Status s = MeasureEngine(*e, options, c); !s.ok()) return s;
  }
  if (storage != nullptr) {
    if (Status s = MeasureFiles(*storage, dir, options, c); !s.ok()) return s;
  }
  return c;
}

}  // namespace tierflow
