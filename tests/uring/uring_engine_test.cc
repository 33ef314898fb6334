// SPDX-License-Identifier: Apache-2.0
// The io_uring engine: reads out of registered file mappings, direct where aligned, buffered
// at the edges, split and queued, with short reads continued and errors named.
#include "tierflow/uring_engine.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/random_bytes.h"
#include "testing/uring.h"

namespace tierflow {
namespace {

using testkit::RandomBytes;

class TempFile {
 public:
  explicit TempFile(const std::vector<unsigned char>& data) {
    char name[] = "/tmp/tierflow-uring-XXXXXX";  // a disk file system here (ext4), not tmpfs
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path_ = name;
    EXPECT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    close(fd);
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool DirectIoWorks(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return false;
  close(fd);
  return true;
}

std::unique_ptr<IoUringEngine> Make(IoUringEngineOptions o = {}) {
  return testkit::MakeUringEngine(o);
}
using testkit::FreeDeleter;

TEST(IoUringEngine, CopiesAnyRangeOutOfAMappedFile) {
  const std::size_t n = (5 << 20) + 123;
  auto data = RandomBytes(n, 1);
  TempFile file(data);
  Result<MappedFile> map = MappedFile::Open(file.path());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  IoUringEngineOptions o;
  o.max_read_bytes = 256 << 10;
  o.queue_depth = 4;
  auto e = Make(o);
  ASSERT_TRUE(e->RegisterFile(*map).ok());
  EXPECT_TRUE(e->Covers(map->data() + 100, 1000));
  EXPECT_FALSE(e->Covers(map->data() + n - 10, 20));
  std::unique_ptr<unsigned char, FreeDeleter> dst(
      static_cast<unsigned char*>(std::aligned_alloc(4096, (n + 8192 + 4095) / 4096 * 4096)));
  struct Case {
    std::size_t off, len, dst_shift;
  };
  for (Case c : {Case{0, n, 0}, Case{4096, 3 << 20, 0}, Case{100, 2 << 20, 100},
                 Case{100, 1 << 20, 7}, Case{n - 50, 50, 0}, Case{12345, 1, 3}}) {
    std::memset(dst.get(), 0, n + 8192);
    Result<Handle> h =
        e->Submit(Operation::Copy(dst.get() + c.dst_shift, map->data() + c.off, c.len));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
    EXPECT_EQ(h->bytes_completed(), c.len);
    EXPECT_EQ(std::memcmp(dst.get() + c.dst_shift, data.data() + c.off, c.len), 0)
        << "offset " << c.off << " length " << c.len << " dst +" << c.dst_shift;
  }
  IoUringEngineStats s = e->ring_stats();
  EXPECT_GE(s.reads, 6u + 20u) << "large copies are split at max_read_bytes";
  if (DirectIoWorks(file.path())) {
    EXPECT_GT(s.direct_reads, 0u);
    EXPECT_LT(s.direct_reads, s.reads) << "unaligned heads and tails go through the page cache";
  }
  EXPECT_EQ(s.errors, 0u);
}

TEST(IoUringEngine, ManyThreadsSmallQueueBatches) {
  const std::size_t n = 4 << 20;
  auto data = RandomBytes(n, 2);
  TempFile file(data);
  Result<MappedFile> map = MappedFile::Open(file.path());
  ASSERT_TRUE(map.ok());
  IoUringEngineOptions o;
  o.queue_depth = 2;
  o.max_read_bytes = 64 << 10;
  auto e = Make(o);
  ASSERT_TRUE(e->RegisterFile(*map).ok());
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<unsigned char> dst(300000);
      for (int i = 0; i < 30; ++i) {
        std::vector<Operation> ops;
        std::vector<std::size_t> offs;
        for (int k = 0; k < 3; ++k) {
          std::size_t off = rng() % (n - 100000);
          offs.push_back(off);
          ops.push_back(Operation::Copy(dst.data() + k * 100000, map->data() + off, 100000));
        }
        Result<Handle> h = e->SubmitBatch(ops);
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
        for (int k = 0; k < 3; ++k) {
          ASSERT_EQ(std::memcmp(dst.data() + k * 100000, data.data() + offs[k], 100000), 0);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(e->ring_stats().ops, 4u * 30u * 3u);
}

TEST(IoUringEngine, ErrorsNameTheCauseAndLoseNothing) {
  auto data = RandomBytes(1 << 20, 3);
  TempFile file(data);
  Result<MappedFile> map = MappedFile::Open(file.path());
  ASSERT_TRUE(map.ok());
  auto e = Make();
  std::vector<unsigned char> dst(1 << 20);
  // Not registered: refused before anything is read.
  Result<Handle> unregistered = e->Submit(Operation::Copy(dst.data(), map->data(), 4096));
  ASSERT_FALSE(unregistered.ok());
  EXPECT_NE(unregistered.status().message().find("RegisterFile"), std::string::npos);
  std::vector<unsigned char> memory(4096);
  EXPECT_NE(e->Submit(Operation::Copy(dst.data(), memory.data(), 4096))
                .status()
                .message()
                .find("CPU or DSA"),
            std::string::npos);
  // Registration errors.
  EXPECT_NE(e->RegisterFile(file.path(), map->data(), map->size() + 1).message().find("fewer than"),
            std::string::npos);
  EXPECT_NE(
      e->RegisterFile("/nonexistent/column.bin", map->data(), 10).message().find("cannot open"),
      std::string::npos);
  ASSERT_TRUE(e->RegisterFile(*map).ok());
  EXPECT_NE(e->RegisterFile(file.path(), map->data() + 10, 100).message().find("overlaps"),
            std::string::npos);
  EXPECT_FALSE(MappedFile::Open("/nonexistent/column.bin").ok());
  // A read the kernel fails (here: into a read-only destination, EFAULT) fails that copy with
  // the OS's words; the next one succeeds. (Other faults come from FaultInjectingEngine.)
  void* ro = mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  Result<Handle> failed = e->Submit(Operation::Copy(ro, map->data(), 8192));
  ASSERT_TRUE(failed.ok());
  Status s = failed->Wait();
  munmap(ro, 8192);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("Bad address"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(file.path()), std::string::npos);
  ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), map->data(), 8192))->Wait().ok());
  EXPECT_EQ(std::memcmp(dst.data(), data.data(), 8192), 0);
  EXPECT_GE(e->ring_stats().errors, 1u);
  // A file truncated after registration: the read that meets its end says so.
  ASSERT_EQ(truncate(file.path().c_str(), 4096), 0);
  Result<Handle> past = e->Submit(Operation::Copy(dst.data(), map->data() + 8192, 8192));
  ASSERT_TRUE(past.ok());
  Status t = past->Wait();
  EXPECT_EQ(t.code(), StatusCode::kIoError);
  EXPECT_NE(t.message().find("truncated"), std::string::npos) << t.message();
  // Unregistered again: refused.
  e->UnregisterFile(map->data());
  EXPECT_FALSE(e->Covers(map->data(), 10));
  // Options.
  IoUringEngineOptions bad;
  bad.queue_depth = 0;
  EXPECT_FALSE(IoUringEngine::Create(bad).ok());
  bad = {};
  bad.max_read_bytes = 1000;
  EXPECT_NE(IoUringEngine::Create(bad).status().message().find("multiple of 4 KiB"),
            std::string::npos);
}

TEST(IoUringEngine, DestroyedWithReadsQueued) {
  auto data = RandomBytes(8 << 20, 4);
  TempFile file(data);
  Result<MappedFile> map = MappedFile::Open(file.path());
  ASSERT_TRUE(map.ok());
  std::vector<unsigned char> dst(8 << 20);
  Handle h;
  {
    IoUringEngineOptions o;
    o.queue_depth = 1;
    o.max_read_bytes = 4096;
    auto e = Make(o);
    ASSERT_TRUE(e->RegisterFile(*map).ok());
    h = std::move(e->Submit(Operation::Copy(dst.data(), map->data(), dst.size()))).value();
  }
  ASSERT_TRUE(h.done()) << "the engine finished or cancelled every read before it went";
  Status s = h.status();
  EXPECT_TRUE(s.ok() || s.code() == StatusCode::kCancelled) << s.ToString();
  if (s.ok()) {
    EXPECT_EQ(dst, data);
  }
}

}  // namespace
}  // namespace tierflow
