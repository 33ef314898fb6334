// SPDX-License-Identifier: Apache-2.0
#include "bench/pipes_bench.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/checkpoint_bench.h"
#include "bench/direct_io.h"
#include "bench/log_bench.h"
#include "tierflow/pipe_runtime.h"
#include "tierflow/size.h"

namespace tierflow::bench {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct FileResult {
  std::vector<double> pipe_gbps, direct_gbps;
};

Result<FileResult> FileToDram(PipeRuntime& rt, const PipesBenchConfig& c, const std::string& path,
                              Ticker& ticker) {
  Result<Locator> mem = rt.Memory(TierKind::kDram, -1, c.size);
  if (!mem.ok()) return mem.status();
  std::memset(mem->data(), 1, c.size);
  Result<Locator> out = rt.File(path, 0, c.size, FileMode::kCreate);
  if (!out.ok()) return out.status();
  PipeOptions po;
  po.queue_depth = c.queue_depth;
  po.chunk_bytes = c.chunk;
  Result<Pipe> down = rt.Connect(*mem, *out, po);
  if (!down.ok()) return down.status();
  if (Status s = down->Transfer(0, 0, c.size); !s.ok()) return s;
  Result<Locator> in = rt.File(path, 0, 0, FileMode::kRead);
  if (!in.ok()) return in.status();
  Result<Pipe> up = rt.Connect(*in, *mem, po);
  if (!up.ok()) return up.status();
  FileResult r;
  const double gb = static_cast<double>(c.size) / 1e9;
  for (int i = 0; i < c.reps; ++i) {
    ticker.Set(fmt::format("file to DRAM, alternation {} of {}", i + 1, c.reps));
    const auto t0 = Clock::now();
    if (Status s = up->Transfer(0, 0, c.size); !s.ok()) return s;
    r.pipe_gbps.push_back(gb / Seconds(t0));
    Result<double> d = DirectIo(path, mem->data(), c.size, c.queue_depth, c.chunk, false);
    if (!d.ok()) return d.status();
    r.direct_gbps.push_back(gb / *d);
  }
  return r;
}

struct FlavourResult {
  double future_us = 0, pollable_us = 0;
};

Status WaitReadable(int ep) {
  epoll_event ev{};
  for (;;) {
    const int n = epoll_wait(ep, &ev, 1, 10000);
    if (n == 1) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    return Status::IoError("the pipe's fd did not become readable within 10 s");
  }
}

Result<FlavourResult> Flavours(PipeRuntime& rt, const PipesBenchConfig& c) {
  Result<Locator> a = rt.Memory(TierKind::kDram, -1, 1 << 20);
  Result<Locator> b = rt.Memory(TierKind::kDram, -1, 1 << 20);
  if (!a.ok() || !b.ok()) return a.ok() ? b.status() : a.status();
  Result<Pipe> p = rt.Connect(*a, *b);
  if (!p.ok()) return p.status();
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_ADD, p->fd(), &ev);
  FlavourResult r;
  auto t0 = Clock::now();
  for (int i = 0; i < c.transfers; ++i) {
    Result<Handle> h = p->Submit(64 * (i % 1000), 0, 64);
    if (!h.ok()) return h.status();
    if (Status s = h->Wait(); !s.ok()) return s;
  }
  r.future_us = Seconds(t0) * 1e6 / c.transfers;
  t0 = Clock::now();
  PipeCompletion done[4];
  for (int i = 0; i < c.transfers; ++i) {
    if (Status s = p->Post(64 * (i % 1000), 0, 64, static_cast<std::uint64_t>(i)); !s.ok())
      return s;
    std::size_t got = 0;
    while (got == 0) {
      if (Status s = WaitReadable(ep); !s.ok()) return s;
      got = p->Reap(done);
    }
  }
  r.pollable_us = Seconds(t0) * 1e6 / c.transfers;
  close(ep);
  return r;
}

// The logging rows' targets: group commit against fdatasync per record, and its p99 latency
// against the median time of one of its batches' write + fdatasync.
nlohmann::json LogJson(const std::vector<LogMethod>& rows) {
  nlohmann::json j = nlohmann::json::array(), targets = nlohmann::json::array();
  for (const LogMethod& m : rows) {
    j.push_back({{"method", m.method},
                 {"records", m.records},
                 {"records_per_s", m.records_per_s},
                 {"p50_us", m.p50_us},
                 {"p99_us", m.p99_us},
                 {"batch_records", m.batch_records},
                 {"sync_ms", m.sync_ms},
                 {"sync_p99_ms", m.sync_p99_ms},
                 {"verified", m.verified}});
  }
  if (rows.size() == 3) {
    const double rate = rows[2].records_per_s / rows[0].records_per_s;
    const double p99 = rows[2].p99_us / (rows[2].sync_p99_ms * 1e3);
    targets.push_back({{"what", "group commit records/s / fdatasync per record"},
                       {"value", rate},
                       {"limit", 10.0},
                       {"kind", "min"},
                       {"met", rate >= 10}});
    targets.push_back({{"what", "group commit p99 / p99 of one batch's write + sync"},
                       {"value", p99},
                       {"limit", 2.0},
                       {"kind", "max"},
                       {"met", p99 <= 2}});
  }
  return {{"rows", j}, {"targets", targets}};
}

nlohmann::json CheckpointJson(const CheckpointBenchConfig& c,
                              const std::vector<CheckpointMethod>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const CheckpointMethod& m : rows) {
    j.push_back({{"method", m.method},
                 {"gbps", m.gbps},
                 {"median_gbps", m.median_gbps},
                 {"verified", m.verified}});
  }
  const double ratio = rows[1].median_gbps / rows[0].median_gbps;
  return {{"bytes", c.bytes},
          {"regions", c.regions},
          {"rows", j},
          {"targets",
           {{{"what", "checkpoint through pipes / O_DIRECT write floor"},
             {"value", ratio},
             {"limit", 0.95},
             {"kind", "min"},
             {"met", ratio >= 0.95}}}}};
}

void PrintCheckpoint(const nlohmann::json& ck, std::ostream& out) {
  out << fmt::format("checkpoint of {} in {} files (durable, renamed into place), median:\n",
                     FormatSize(ck["bytes"].get<std::uint64_t>()), ck["regions"].get<int>());
  for (const auto& r : ck["rows"]) {
    out << fmt::format("  {:16} {:8.3f} GB/s{}\n", r["method"].get<std::string>(),
                       r["median_gbps"].get<double>(),
                       r["verified"].get<bool>() ? "" : "  NOT VERIFIED");
  }
  for (const auto& t : ck["targets"]) {
    out << fmt::format("  {}: {:.3f} (>= {}) {}\n", t["what"].get<std::string>(),
                       t["value"].get<double>(), t["limit"].get<double>(),
                       t["met"].get<bool>() ? "met" : "NOT met");
  }
}

void PrintLog(const nlohmann::json& log, std::ostream& out) {
  out << "logging (records acknowledged once durable):\n";
  for (const auto& r : log["rows"]) {
    out << fmt::format(
        "  {:22} {:>10.0f} records/s  p50 {:>10.1f} us  p99 {:>10.1f} us  "
        "{:>7.1f} records per write + sync: {:.3f} ms, p99 {:.3f} ms{}\n",
        r["method"].get<std::string>(), r["records_per_s"].get<double>(), r["p50_us"].get<double>(),
        r["p99_us"].get<double>(), r["batch_records"].get<double>(), r["sync_ms"].get<double>(),
        r["sync_p99_ms"].get<double>(), r["verified"].get<bool>() ? "" : "  NOT VERIFIED");
  }
  for (const auto& t : log["targets"]) {
    out << fmt::format("  {}: {:.2f} ({} {}) {}\n", t["what"].get<std::string>(),
                       t["value"].get<double>(),
                       t["kind"] == "min" ? ">=" : "<=", t["limit"].get<double>(),
                       t["met"].get<bool>() ? "met" : "NOT met");
  }
}

void Print(const PipesBenchConfig& c, const FileResult& f, const FlavourResult& v,
           const nlohmann::json& log, const nlohmann::json& ck, std::ostream& out) {
  const double pipe = Summarize(f.pipe_gbps).median, direct = Summarize(f.direct_gbps).median;
  if (c.json) {
    nlohmann::json j{{"size_bytes", c.size},
                     {"queue_depth", c.queue_depth},
                     {"chunk_bytes", c.chunk},
                     {"pipe_gbps", f.pipe_gbps},
                     {"direct_gbps", f.direct_gbps},
                     {"pipe_median_gbps", pipe},
                     {"direct_median_gbps", direct},
                     {"pipe_vs_direct", pipe / direct},
                     {"future_us", v.future_us},
                     {"pollable_us", v.pollable_us},
                     {"pollable_over_future_us", v.pollable_us - v.future_us}};
    if (!log.is_null()) j["logging"] = log;
    if (!ck.is_null()) j["checkpoint"] = ck;
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("file -> DRAM, {} (O_DIRECT, chunk {}, queue depth {}), median of {}:\n",
                     FormatSize(c.size), FormatSize(c.chunk), c.queue_depth, c.reps);
  out << fmt::format("  pipe {:.3f} GB/s, liburing directly {:.3f} GB/s: pipe/direct = {:.3f}\n",
                     pipe, direct, pipe / direct);
  out << fmt::format("one 64-byte transfer at a time, {} of them:\n", c.transfers);
  out << fmt::format(
      "  future (Submit+Wait) {:.2f} us, pollable (Post+epoll_wait+Reap) {:.2f} "
      "us: +{:.2f} us per transfer\n",
      v.future_us, v.pollable_us, v.pollable_us - v.future_us);
  if (!log.is_null()) PrintLog(log, out);
  if (!ck.is_null()) PrintCheckpoint(ck, out);
}

}  // namespace

Status RunPipesBench(const PipesBenchConfig& config, std::ostream& out) {
  PipeRuntimeOptions ro;
  ro.calibration_path = "/nonexistent";  // the bench measures; the plan needs no figures
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(ro);
  if (!rt.ok()) return rt.status();
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = !config.dir.empty() ? config.dir : tmp != nullptr && *tmp ? tmp : "/tmp";
  const std::string path = fmt::format("{}/tierflow-bench-pipes-{}", dir, getpid());
  Ticker ticker("tierflow bench pipes", config.progress && !config.json && StderrIsTerminal());
  ticker.Set("writing the file");
  Result<FileResult> f = FileToDram(**rt, config, path, ticker);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (!f.ok()) return f.status();
  ticker.Set("small transfers in each flavour");
  Result<FlavourResult> v = Flavours(**rt, config);
  if (!v.ok()) return v.status();
  nlohmann::json log;
  if (config.log_seconds > 0) {
    ticker.Set("logging: fdatasync per record, per batch, and pipe group commit");
    LogBenchConfig lc;
    lc.dir = dir;
    lc.record_bytes = config.record_bytes;
    lc.seconds = config.log_seconds;
    Result<std::vector<LogMethod>> rows = RunLogBench(**rt, lc);
    if (!rows.ok()) return rows.status();
    log = LogJson(*rows);
  }
  nlohmann::json ck;
  if (config.checkpoint_bytes > 0) {
    ticker.Set("checkpoint: the O_DIRECT floor, pipes, pwrite from one and two threads");
    CheckpointBenchConfig cc;
    cc.dir = dir;
    cc.bytes = config.checkpoint_bytes;
    cc.regions = config.checkpoint_regions;
    cc.reps = config.reps;
    cc.queue_depth = config.queue_depth;
    cc.chunk = config.chunk;
    Result<std::vector<CheckpointMethod>> rows = RunCheckpointBench(**rt, cc);
    if (!rows.ok()) return rows.status();
    ck = CheckpointJson(cc, *rows);
  }
  Print(config, *f, *v, log, ck, out);
  return Status::Ok();
}

}  // namespace tierflow::bench
