// SPDX-License-Identifier: Apache-2.0
#include "bench/checkpoint_bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/direct_io.h"

namespace tierflow::bench {

namespace {

using Clock = std::chrono::steady_clock;

Status Errno(const std::string& what) {
  return Status::IoError(fmt::format("{}: {}", what, std::strerror(errno)));
}

Status SyncDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(path);
  const bool ok = fsync(fd) == 0;
  close(fd);
  return ok ? Status::Ok() : Errno("fsync " + path);
}

// One checkpoint: region files written into `partial`, which becomes `final` only once they
// and it are durable, so that `final` names a complete checkpoint or nothing.
struct Checkpoint {
  std::string parent, partial, final;
  int regions = 0;
  std::string Region(const std::string& dir, int i) const {
    return fmt::format("{}/region-{}", dir, i);
  }
  Status Begin() const {
    return mkdir(partial.c_str(), 0700) == 0 ? Status::Ok() : Errno("mkdir " + partial);
  }
  Status Publish() const {
    if (Status s = SyncDirectory(partial); !s.ok()) return s;
    if (rename(partial.c_str(), final.c_str()) != 0) return Errno("rename to " + final);
    return SyncDirectory(parent);
  }
  void Remove() const {  // only the files it made
    for (const std::string& d : {partial, final}) {
      for (int i = 0; i < regions; ++i) unlink(Region(d, i).c_str());
      rmdir(d.c_str());
    }
  }
};

Status ViaPipes(PipeRuntime& rt, const Locator& mem, const Checkpoint& ck,
                const CheckpointBenchConfig& c) {
  const std::uint64_t size = c.bytes / c.regions;
  PipeOptions o;
  o.sync_writes = true;
  o.chunk_bytes = c.chunk;
  o.queue_depth = std::max(1u, c.queue_depth / static_cast<unsigned>(c.regions));
  std::vector<Pipe> pipes;
  std::vector<Handle> handles;
  for (int i = 0; i < c.regions; ++i) {
    Result<Locator> file = rt.File(ck.Region(ck.partial, i), 0, size, FileMode::kCreate);
    if (!file.ok()) return file.status();
    Result<Pipe> p = rt.Connect(mem, *file, o);
    if (!p.ok()) return p.status();
    Result<Handle> h = p->Submit(i * size, 0, size);
    if (!h.ok()) return h.status();
    pipes.push_back(std::move(*p));
    handles.push_back(std::move(*h));
  }
  Status first;
  for (Handle& h : handles) {
    if (Status s = h.Wait(); first.ok()) first = s;
  }
  return first;
}

Status WriteRegion(const std::string& path, const std::byte* data, std::uint64_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(path);
  constexpr std::uint64_t kCall = 8 << 20;
  for (std::uint64_t at = 0; at < size;) {
    const ssize_t n = pwrite(fd, data + at, std::min(kCall, size - at), static_cast<off_t>(at));
    if (n <= 0) {
      const Status s = Errno("pwrite " + path);
      close(fd);
      return s;
    }
    at += static_cast<std::uint64_t>(n);
  }
  const bool synced = fdatasync(fd) == 0;
  close(fd);
  return synced ? Status::Ok() : Errno("fdatasync " + path);
}

Status ViaPwrite(const std::byte* base, const Checkpoint& ck, const CheckpointBenchConfig& c,
                 int threads) {
  const std::uint64_t size = c.bytes / c.regions;
  std::vector<Status> errors(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = t; i < c.regions && errors[t].ok(); i += threads) {
        errors[t] = WriteRegion(ck.Region(ck.partial, i), base + i * size, size);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  for (const Status& s : errors) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// Whether `path` holds, from `offset`, the `size` bytes at `expected`.
bool Holds(const std::string& path, std::uint64_t offset, const std::byte* expected,
           std::uint64_t size, std::vector<std::byte>& scratch) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  scratch.resize(size);
  const bool same =
      pread(fd, scratch.data(), size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size) &&
      std::memcmp(scratch.data(), expected, size) == 0;
  close(fd);
  return same;
}

// The checkpoint under its final name (or the floor's single file) holds the regions.
bool Verify(const std::byte* base, const Checkpoint& ck, std::uint64_t size,
            const std::string& single_file) {
  std::vector<std::byte> scratch;
  for (int i = 0; i < ck.regions; ++i) {
    const bool same = single_file.empty()
                          ? Holds(ck.Region(ck.final, i), 0, base + i * size, size, scratch)
                          : Holds(single_file, i * size, base + i * size, size, scratch);
    if (!same) return false;
  }
  return true;
}

// The disk's O_DIRECT write floor: the better of two request shapes (the pipes' chunk and queue
// depth, and 1 MiB x 8), since on some disks the larger requests are the slower ones; the
// file written last is the one verified.
Result<double> WriteFloor(const std::string& path, const std::byte* base,
                          const CheckpointBenchConfig& c) {
  const std::pair<std::uint64_t, unsigned> shapes[] = {{c.chunk, c.queue_depth}, {1 << 20, 8}};
  double best = 1e30;
  auto* buf = const_cast<std::byte*>(base);  // DirectIo writes from it, never into it
  for (auto [chunk, depth] : shapes) {
    unlink(path.c_str());
    Result<double> s = DirectIo(path, buf, c.bytes, depth, chunk, true);
    if (!s.ok()) return s.status();
    best = std::min(best, *s);
  }
  return best;
}

// Seconds of method m (0: the floor) writing the checkpoint `ck`.
Result<double> RunMethod(int m, PipeRuntime& rt, const Locator& mem, const Checkpoint& ck,
                         const std::string& floor_path, const CheckpointBenchConfig& c) {
  if (m == 0) return WriteFloor(floor_path, mem.data(), c);
  const auto t0 = Clock::now();
  Status s = ck.Begin();
  if (s.ok()) s = m == 1 ? ViaPipes(rt, mem, ck, c) : ViaPwrite(mem.data(), ck, c, m - 1);
  if (s.ok()) s = ck.Publish();
  if (!s.ok()) return s;
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

Result<std::vector<CheckpointMethod>> RunCheckpointBench(PipeRuntime& rt,
                                                         const CheckpointBenchConfig& c) {
  if (c.regions < 1 || c.bytes % (static_cast<std::uint64_t>(c.regions) * 4096) != 0) {
    return Status::InvalidArgument("checkpoint: the size must divide into regions of whole pages");
  }
  std::string dir = c.dir + "/tierflow-checkpoint-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return Errno("mkdtemp in " + c.dir);
  Result<Locator> mem = rt.Memory(TierKind::kDram, -1, c.bytes);
  if (!mem.ok()) {
    rmdir(dir.c_str());
    return mem.status();
  }
  std::byte* base = mem->data();
  for (std::uint64_t i = 0; i < c.bytes; i += 8) std::memcpy(base + i, &i, 8);
  const std::uint64_t size = c.bytes / c.regions;
  const std::string floor_path = dir + "/floor";
  std::vector<CheckpointMethod> out(4);
  const char* names[] = {"O_DIRECT floor", "pipes", "pwrite x1", "pwrite x2"};
  Status error;
  for (int rep = 0; rep < c.reps && error.ok(); ++rep) {
    for (int m = 0; m < 4 && error.ok(); ++m) {
      out[m].method = names[m];
      const Checkpoint ck{dir, fmt::format("{}/partial-{}", dir, m),
                          fmt::format("{}/checkpoint-{}", dir, m), c.regions};
      Result<double> secs = RunMethod(m, rt, *mem, ck, floor_path, c);
      error = secs.status();
      if (error.ok()) out[m].gbps.push_back(static_cast<double>(c.bytes) / *secs / 1e9);
      if (rep == 0) {
        out[m].verified = error.ok() && Verify(base, ck, size, m == 0 ? floor_path : "");
      }
      ck.Remove();
      unlink(floor_path.c_str());
    }
  }
  rmdir(dir.c_str());
  if (!error.ok()) return error;
  for (CheckpointMethod& m : out) m.median_gbps = Summarize(m.gbps).median;
  return out;
}

}  // namespace tierflow::bench
