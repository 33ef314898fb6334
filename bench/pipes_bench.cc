// SPDX-License-Identifier: Apache-2.0
#include "bench/pipes_bench.h"

#include <fcntl.h>
#include <liburing.h>
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
#include "bench/log_bench.h"
#include "tierflow/pipe_runtime.h"
#include "tierflow/size.h"

namespace tierflow::bench {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The referee: the same reads with liburing directly, at most `depth` in flight.
Result<double> DirectReads(const std::string& path, std::byte* dst, std::uint64_t size,
                           unsigned depth, std::uint64_t chunk) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  io_uring ring{};
  if (int rc = io_uring_queue_init(depth, &ring, 0); rc < 0) {
    close(fd);
    return Status::Unsupported(fmt::format("io_uring: {}", std::strerror(-rc)));
  }
  const auto t0 = Clock::now();
  std::uint64_t next = 0, done = 0;
  unsigned in_flight = 0;
  Status error;
  while (done < size && error.ok()) {
    while (in_flight < depth && next < size) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      const auto n = static_cast<unsigned>(std::min(chunk, size - next));
      io_uring_prep_read(sqe, fd, dst + next, n, next);
      next += n;
      ++in_flight;
    }
    io_uring_submit_and_wait(&ring, 1);
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&ring, &cqe) == 0) {
      if (cqe->res <= 0) error = Status::IoError(fmt::format("read {}: {}", path, cqe->res));
      done += cqe->res > 0 ? static_cast<std::uint64_t>(cqe->res) : 0;  // whole chunks here
      --in_flight;
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  const double s = Seconds(t0);
  io_uring_queue_exit(&ring);
  close(fd);
  if (!error.ok()) return error;
  return s;
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
    Result<double> d = DirectReads(path, mem->data(), c.size, c.queue_depth, c.chunk);
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
           const nlohmann::json& log, std::ostream& out) {
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
  Print(config, *f, *v, log, out);
  return Status::Ok();
}

}  // namespace tierflow::bench
