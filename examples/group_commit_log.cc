// SPDX-License-Identifier: Apache-2.0
// A log with group commit on a data pipe (the paper's logging workload): an application appends
// small records to a log buffer in DRAM; records made while one batch is written and synced
// wait, and go together as the next batch, one transfer of a DRAM -> file pipe with
// PipeOptions::sync_writes. A record is acknowledged, durable, when its batch's transfer
// completes: one fdatasync for many records. The log is read back and checked at the end.
// Usage: group_commit_log [DIRECTORY] (default /tmp; the log goes in a new directory there,
// removed at the end).
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <tierflow/pipe_runtime.h>

using namespace tierflow;

namespace {

constexpr std::size_t kRecord = 128;  // bytes per record
constexpr std::size_t kRecords = 100000;

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "group_commit_log: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

// Record i: its number, then its number's low byte repeated.
void MakeRecord(std::byte* at, std::uint64_t i) {
  std::memset(at, static_cast<int>(i & 0xff), kRecord);
  std::memcpy(at, &i, sizeof i);
}

// The batch being written and synced: records [begin, end).
struct Batch {
  std::size_t begin = 0, end = 0;
  Handle handle;
};

// Appends every record, a few at a time as an application would, committing in groups.
// Returns the number of batches (fdatasyncs) it took.
Result<std::size_t> AppendAll(Pipe& log, std::byte* buffer) {
  std::size_t made = 0, durable = 0, batches = 0;
  Batch inflight;
  bool busy = false;
  while (durable < kRecords) {
    // The application: a burst of 1 to 16 records every 10 microseconds or so.
    for (std::size_t burst = 1 + made % 16; burst > 0 && made < kRecords; --burst) {
      MakeRecord(buffer + made * kRecord, made);
      ++made;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(10));
    if (busy && inflight.handle.done()) {  // acknowledged: records before `end` are durable
      if (Status s = inflight.handle.Wait(); !s.ok()) return s;
      durable = inflight.end;
      busy = false;
    }
    if (!busy && made > durable) {  // everything waiting goes as one batch
      Result<Handle> h =
          log.Submit(durable * kRecord, durable * kRecord, (made - durable) * kRecord);
      if (!h.ok()) return h.status();
      inflight = Batch{durable, made, std::move(*h)};
      busy = true;
      ++batches;
    }
  }
  return batches;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string parent = argc > 1 ? argv[1] : "/tmp";
  std::string dir = parent + "/group-commit-log-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return Fail("log directory", Status::IoError(parent + ": " + std::strerror(errno)));
  }
  const std::string path = dir + "/log";
  int rc = 1;
  {
    Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create();
    if (!rt.ok()) return Fail("runtime", rt.status());
    Result<Locator> buffer = (*rt)->Memory(TierKind::kDram, -1, kRecords * kRecord);
    Result<Locator> file = (*rt)->File(path, 0, kRecords * kRecord, FileMode::kCreate);
    if (!buffer.ok() || !file.ok())
      return Fail("locators", buffer.ok() ? file.status() : buffer.status());
    PipeOptions o;
    o.sync_writes = true;  // each transfer ends with fdatasync: durable when it completes
    Result<Pipe> log = (*rt)->Connect(*buffer, *file, o);
    if (!log.ok()) return Fail("pipe", log.status());
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::size_t> batches = AppendAll(*log, buffer->data());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!batches.ok()) return Fail("append", batches.status());
    // Read the log back through a pipe of its own and compare.
    Result<Locator> back = (*rt)->Memory(TierKind::kDram, -1, kRecords * kRecord);
    Result<Locator> again = (*rt)->File(path, 0, 0, FileMode::kRead);
    Result<Pipe> read = back.ok() && again.ok() ? (*rt)->Connect(*again, *back)
                                                : Result<Pipe>(Status::Internal("no locators"));
    Status s = read.ok() ? read->Transfer(0, 0, kRecords * kRecord) : read.status();
    if (!s.ok()) return Fail("read back", s);
    const bool same = std::memcmp(back->data(), buffer->data(), kRecords * kRecord) == 0;
    std::printf(
        "%zu records of %zu bytes durable in %zu batches (%.0f records per fdatasync), "
        "%.0f records/s; read back: %s\n",
        kRecords, kRecord, *batches, static_cast<double>(kRecords) / *batches, kRecords / secs,
        same ? "identical" : "DIFFERENT");
    rc = same ? 0 : 1;
  }
  unlink(path.c_str());
  rmdir(dir.c_str());
  return rc;
}
