// SPDX-License-Identifier: Apache-2.0
#include "bench/log_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "bench/bench_util.h"

namespace tierflow::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Room for this many records per method: a run stops early when they are all written.
constexpr std::size_t kCapacityRecords = std::size_t{1} << 21;

// Records made by a thread of its own into `buf` (record i at i * record_bytes, stamped with its
// creation time), never more than `window` ahead of the acknowledged ones. Each side sleeps on
// a condition variable that the other notifies only when it says it waits: a record costs no
// system call while both are busy.
class Producer {
 public:
  Producer(std::byte* buf, std::size_t record_bytes, std::size_t window)
      : buf_(buf), rb_(record_bytes), window_(window), created_(kCapacityRecords) {}
  ~Producer() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_.store(true);
    }
    room_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  std::size_t produced() const { return produced_.load(); }
  // Blocks until more than `seen` records exist or the producer has finished.
  void WaitBeyond(std::size_t seen) {
    std::unique_lock lock(mu_);
    committer_waits_.store(true);
    more_.wait(lock, [&] { return produced_.load() != seen || finished_; });
    committer_waits_.store(false);
  }
  // Records [from, upto) are durable: their latencies, and room for the producer.
  void Acknowledge(std::size_t from, std::size_t upto, std::vector<double>& latency_us) {
    const Clock::time_point now = Clock::now();
    for (std::size_t i = from; i < upto; ++i) {
      latency_us.push_back(std::chrono::duration<double, std::micro>(now - created_[i]).count());
    }
    acked_.store(upto);
    if (producer_waits_.load()) {
      std::lock_guard lock(mu_);
      room_.notify_one();
    }
  }

 private:
  bool WaitForRoom(std::size_t i) {
    std::unique_lock lock(mu_);
    producer_waits_.store(true);
    room_.wait(lock, [&] { return i - acked_.load() < window_ || stop_.load(); });
    producer_waits_.store(false);
    return !stop_.load();
  }
  void Produce(std::size_t i) {
    std::byte* r = buf_ + i * rb_;
    std::memset(r, static_cast<int>(i % 251), rb_);
    std::memcpy(r, &i, sizeof i);  // each record names itself
    created_[i] = Clock::now();
    produced_.store(i + 1);
    if (committer_waits_.load()) {
      std::lock_guard lock(mu_);
      more_.notify_one();
    }
  }
  void Run() {
    for (std::size_t i = 0; i < kCapacityRecords; ++i) {
      if (i - acked_.load() >= window_ && !WaitForRoom(i)) break;
      if (stop_.load(std::memory_order_relaxed)) break;
      Produce(i);
    }
    std::lock_guard lock(mu_);
    finished_ = true;
    more_.notify_one();
  }

  std::byte* buf_;
  std::size_t rb_, window_;
  std::vector<Clock::time_point> created_;
  std::atomic<std::size_t> produced_{0}, acked_{0};
  std::atomic<bool> committer_waits_{false}, producer_waits_{false};
  std::mutex mu_;
  std::condition_variable more_, room_;
  std::atomic<bool> stop_{false};  // set under mu_, so that a waiter cannot miss it
  bool finished_ = false;          // under mu_
  std::thread thread_;
};

struct Tally {
  std::vector<double> latency_us, sync_ms;
  std::size_t batches = 0, acked = 0;
};

// One method's run: `commit` makes records durable and acknowledges them until the producer
// has stopped (at the deadline) and everything it made is acknowledged.
LogMethod Measure(const std::string& name, std::byte* buf, const LogBenchConfig& c,
                  const std::function<Status(Producer&, Tally&)>& commit, Status& error) {
  Producer producer(buf, c.record_bytes, c.window);
  Tally tally;
  tally.latency_us.reserve(kCapacityRecords);
  const auto t0 = Clock::now();
  producer.Start();
  // The deadline stops the producer; so does its running out of room first (kCapacityRecords),
  // and then the time is the commit's, not the deadline's.
  std::mutex mu;
  std::condition_variable cv;
  bool committed = false;
  std::thread stopper([&] {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::duration<double>(c.seconds), [&] { return committed; });
    lock.unlock();
    producer.Stop();
  });
  error = commit(producer, tally);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  {
    std::lock_guard lock(mu);
    committed = true;
  }
  cv.notify_one();
  stopper.join();
  LogMethod m;
  m.method = name;
  m.records = tally.acked;
  m.records_per_s = static_cast<double>(tally.acked) / secs;
  if (!tally.latency_us.empty()) {
    std::sort(tally.latency_us.begin(), tally.latency_us.end());
    m.p50_us = Percentile(tally.latency_us, 0.50);
    m.p99_us = Percentile(tally.latency_us, 0.99);
  }
  m.batch_records = tally.batches ? static_cast<double>(tally.acked) / tally.batches : 0;
  if (!tally.sync_ms.empty()) {
    std::sort(tally.sync_ms.begin(), tally.sync_ms.end());
    m.sync_ms = Percentile(tally.sync_ms, 0.50);
    m.sync_p99_ms = Percentile(tally.sync_ms, 0.99);
  }
  return m;
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// pwrite + fdatasync of one record at a time (per_record) or of every record waiting.
Status CommitByHand(int fd, const std::byte* buf, std::size_t rb, bool per_record, Producer& p,
                    Tally& t) {
  for (std::size_t done = 0;;) {
    p.WaitBeyond(done);
    const std::size_t have = p.produced();
    if (have == done) return Status::Ok();  // stopped, everything acknowledged
    const std::size_t end = per_record ? done + 1 : have;
    const auto t0 = Clock::now();
    const std::size_t len = (end - done) * rb;
    if (pwrite(fd, buf + done * rb, len, static_cast<off_t>(done * rb)) !=
            static_cast<ssize_t>(len) ||
        fdatasync(fd) != 0) {
      return Status::IoError(fmt::format("log write: {}", std::strerror(errno)));
    }
    t.sync_ms.push_back(MsSince(t0));
    p.Acknowledge(done, end, t.latency_us);
    ++t.batches;
    t.acked = done = end;
  }
}

// Every record waiting as one transfer with sync_writes; two in flight, acknowledged in order.
Status CommitThroughPipe(Pipe& pipe, std::size_t rb, Producer& p, Tally& t) {
  struct Batch {
    std::size_t begin, end;
    Clock::time_point start;
    Handle handle;
  };
  std::deque<Batch> inflight;
  for (std::size_t next = 0;;) {
    while (inflight.size() < 2 && p.produced() > next) {
      const std::size_t end = p.produced();
      Result<Handle> h = pipe.Submit(next * rb, next * rb, (end - next) * rb);
      if (!h.ok()) return h.status();
      inflight.push_back({next, end, Clock::now(), std::move(*h)});
      next = end;
    }
    if (inflight.empty()) {
      p.WaitBeyond(next);
      if (p.produced() == next) return Status::Ok();
      continue;
    }
    Batch& b = inflight.front();
    if (Status s = b.handle.Wait(); !s.ok()) return s;
    t.sync_ms.push_back(MsSince(b.start));
    p.Acknowledge(b.begin, b.end, t.latency_us);
    ++t.batches;
    t.acked = b.end;
    inflight.pop_front();
  }
}

bool SameBytes(const std::string& path, const std::byte* buf, std::size_t n) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  std::vector<std::byte> back(n);
  const bool ok = pread(fd, back.data(), n, 0) == static_cast<ssize_t>(n) &&
                  std::memcmp(back.data(), buf, n) == 0;
  close(fd);
  return ok;
}

Result<LogMethod> ByHand(const std::string& dir, std::byte* buf, const LogBenchConfig& c,
                         bool per_record) {
  const std::string path = dir + (per_record ? "/per-record.log" : "/per-batch.log");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError(fmt::format("{}: {}", path, std::strerror(errno)));
  Status error;
  LogMethod m = Measure(
      per_record ? "fdatasync per record" : "fdatasync per batch", buf, c,
      [&](Producer& p, Tally& t) {
        return CommitByHand(fd, buf, c.record_bytes, per_record, p, t);
      },
      error);
  close(fd);
  if (error.ok()) m.verified = SameBytes(path, buf, m.records * c.record_bytes);
  unlink(path.c_str());
  if (!error.ok()) return error;
  return m;
}

Result<LogMethod> ThroughPipe(PipeRuntime& rt, const std::string& dir, const LogBenchConfig& c) {
  const std::string path = dir + "/pipe.log";
  const std::size_t bytes = kCapacityRecords * c.record_bytes;
  Result<Locator> mem = rt.Memory(TierKind::kDram, -1, bytes);
  Result<Locator> file = rt.File(path, 0, bytes, FileMode::kCreate);
  if (!mem.ok() || !file.ok()) return mem.ok() ? file.status() : mem.status();
  PipeOptions o;
  o.sync_writes = true;
  Result<Pipe> pipe = rt.Connect(*mem, *file, o);
  if (!pipe.ok()) return pipe.status();
  Status error;
  LogMethod m = Measure(
      "pipe group commit", mem->data(), c,
      [&](Producer& p, Tally& t) { return CommitThroughPipe(*pipe, c.record_bytes, p, t); }, error);
  if (error.ok()) m.verified = SameBytes(path, mem->data(), m.records * c.record_bytes);
  unlink(path.c_str());
  if (!error.ok()) return error;
  return m;
}

}  // namespace

Result<std::vector<LogMethod>> RunLogBench(PipeRuntime& rt, const LogBenchConfig& c) {
  std::string templ = c.dir + "/tierflow-log-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return Status::IoError(
        fmt::format("cannot make a directory in {}: {}", c.dir, std::strerror(errno)));
  }
  std::vector<std::byte> buf(kCapacityRecords * c.record_bytes);
  std::vector<LogMethod> out;
  Status error;
  for (int which = 0; which < 3 && error.ok(); ++which) {
    Result<LogMethod> m =
        which == 2 ? ThroughPipe(rt, templ, c) : ByHand(templ, buf.data(), c, which == 0);
    if (m.ok()) out.push_back(*m);
    error = m.status();
  }
  rmdir(templ.c_str());
  if (!error.ok()) return error;
  return out;
}

}  // namespace tierflow::bench
