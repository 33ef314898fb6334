// SPDX-License-Identifier: Apache-2.0
// The io_uring engine's write path: files opened as address ranges (FileWindow), writes direct
// where aligned and buffered at the edges, files extended, fdatasync through kWriteBack,
// file-to-file copies, and the errors of each (read-only destinations, a full disk).
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/random_bytes.h"
#include "testing/temp_dir.h"
#include "testing/uring.h"
#include "tierflow/uring_engine.h"

namespace tierflow {
namespace {

using testkit::MakeUringEngine;
using testkit::PageAligned;
using testkit::RandomBytes;
using testkit::SmallFileSystem;
using testkit::TempDir;

std::unique_ptr<IoUringEngine> Make(IoUringEngineOptions o = {}) { return MakeUringEngine(o); }

std::string NewFile(const TempDir& dir, const std::string& name) {
  return dir.Write(name, std::vector<unsigned char>{});
}

Status RunOp(Engine& e, const Operation& op) {
  Result<Handle> h = e.Submit(op);
  if (!h.ok()) return h.status();
  return h->Wait();
}

TEST(IoUringWrite, WritesAnyRangeDirectWhereAlignedAndExtendsTheFile) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::size_t n = (3 << 20) + 777;
  auto data = RandomBytes(n, 7);
  testkit::AlignedBytes src = PageAligned(n);
  std::memcpy(src.get(), data.data(), n);
  IoUringEngineOptions o;
  o.max_read_bytes = 256 << 10;
  o.queue_depth = 3;
  auto e = Make(o);
  const std::string path = NewFile(dir, "out");
  Result<FileWindow> w = e->OpenFile(path, {FileAccess::kReadWrite, n + 4096});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(e->CoversWritable(w->base(), n));
  // Out of order: the middle first (memory and file offset share their misalignment, so all but
  // its first 3996 bytes go direct), then the tail that extends the file, then the head.
  ASSERT_TRUE(RunOp(*e, Operation::Copy(w->at(100), src.get() + 100, n - 600)).ok());
  ASSERT_TRUE(RunOp(*e, Operation::Copy(w->at(n - 500), src.get() + n - 500, 500)).ok());
  ASSERT_TRUE(RunOp(*e, Operation::Copy(w->at(0), src.get(), 100)).ok());
  std::vector<unsigned char> back = dir.Read(path);
  ASSERT_EQ(back.size(), n) << "writes past the end extend the file to the last byte written";
  EXPECT_EQ(std::memcmp(back.data(), data.data(), n), 0);
  IoUringEngineStats s = e->ring_stats();
  EXPECT_GE(s.writes, 12u) << "split at max_read_bytes";
  EXPECT_EQ(s.errors, 0u);
  if (e->DirectAlignment(w->base()) != 0) {
    EXPECT_GT(s.direct_writes, 0u);
    EXPECT_LT(s.direct_writes, s.writes) << "the unaligned head and tail are buffered";
  }
  // The same engine reads it back through the window.
  testkit::AlignedBytes again = PageAligned(n);
  ASSERT_TRUE(RunOp(*e, Operation::Copy(again.get(), w->at(0), n)).ok());
  EXPECT_EQ(std::memcmp(again.get(), data.data(), n), 0);
}

TEST(IoUringWrite, SyncIsAWriteBackOfTheFile) {
  TempDir dir;
  auto e = Make();
  Result<FileWindow> w = e->OpenFile(NewFile(dir, "durable"), {FileAccess::kReadWrite, 1 << 20});
  ASSERT_TRUE(w.ok());
  testkit::AlignedBytes src = PageAligned(1 << 20);
  std::memset(src.get(), 0x5a, 1 << 20);
  ASSERT_TRUE(RunOp(*e, Operation::Copy(w->base(), src.get(), 1 << 20)).ok());
  ASSERT_TRUE(RunOp(*e, Operation::WriteBack(w->base(), 1 << 20)).ok());
  EXPECT_EQ(e->ring_stats().syncs, 1u);
  // Write-back of memory, or of a file opened read-only, is refused at submission.
  Status mem = e->Submit(Operation::WriteBack(src.get(), 4096)).status();
  EXPECT_EQ(mem.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mem.message().find("not inside a file opened for writing"), std::string::npos);
}

TEST(IoUringWrite, CopiesFileToFile) {
  TempDir dir;
  const std::size_t n = (2 << 20) + 5;
  auto data = RandomBytes(n, 3);
  const std::string in = dir.Write("in", data);
  IoUringEngineOptions o;
  o.max_read_bytes = 512 << 10;
  auto e = Make(o);
  Result<FileWindow> src = e->OpenFile(in);
  Result<FileWindow> dst = e->OpenFile(NewFile(dir, "copy"), {FileAccess::kReadWrite, n});
  ASSERT_TRUE(src.ok() && dst.ok());
  EXPECT_EQ(src->length(), n) << "length 0 with kRead: the whole file";
  ASSERT_TRUE(RunOp(*e, Operation::Copy(dst->at(10), src->at(10), n - 10)).ok());
  ASSERT_TRUE(RunOp(*e, Operation::Copy(dst->at(0), src->at(0), 10)).ok());
  EXPECT_EQ(dir.Read(dst->path()), data);
  EXPECT_GE(e->ring_stats().file_copies, 5u);
}

TEST(IoUringWrite, BadFilesAreRefusedWithTheReason) {
  TempDir dir;
  auto e = Make();
  const std::string small = dir.Write("small", std::vector<unsigned char>(100, 1));
  Result<FileWindow> missing = e->OpenFile(dir.File("nope"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.File("nope")), std::string::npos);
  Result<FileWindow> beyond = e->OpenFile(small, {FileAccess::kRead, 200});
  EXPECT_NE(beyond.status().message().find("beyond the end"), std::string::npos);
  Result<FileWindow> no_length = e->OpenFile(small, {FileAccess::kReadWrite, 0});
  EXPECT_NE(no_length.status().message().find("length"), std::string::npos);
  Result<FileWindow> dirw = e->OpenFile(dir.path(), {FileAccess::kReadWrite, 4096});
  EXPECT_FALSE(dirw.ok());
  // A file that cannot be written: on a read-only file system (root may write any file mode).
  SmallFileSystem fs(1 << 20);
  if (fs.mounted()) {
    { std::ofstream touch(fs.File("ro")); }
    ASSERT_TRUE(fs.MakeReadOnly());
    Result<FileWindow> ro = e->OpenFile(fs.File("ro"), {FileAccess::kReadWrite, 4096});
    ASSERT_FALSE(ro.ok());
    EXPECT_NE(ro.status().message().find("cannot be written"), std::string::npos)
        << ro.status().ToString();
  }
  // A window opened for reading is no destination.
  Result<FileWindow> rw = e->OpenFile(small);
  ASSERT_TRUE(rw.ok());
  std::vector<unsigned char> buf(100);
  Status s = e->Submit(Operation::Copy(rw->base(), buf.data(), 100)).status();
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.ToString();
  // Closed windows are no longer files to the engine.
  void* base = rw->base();
  rw->Close();
  EXPECT_FALSE(e->Covers(base, 1));
}

TEST(IoUringWrite, AFullDiskFailsNamingTheFileAndOffset) {
  SmallFileSystem fs(1 << 20);
  if (!fs.mounted()) GTEST_SKIP() << "mounting a small tmpfs needs root (CAP_SYS_ADMIN)";
  auto e = Make();
  const std::string path = fs.File("full");
  { std::ofstream touch(path); }
  const std::size_t n = 2 << 20;
  Result<FileWindow> w = e->OpenFile(path, {FileAccess::kReadWrite, n});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<unsigned char> src(n, 9);
  Result<Handle> h = e->Submit(Operation::Copy(w->base(), src.data(), n));
  ASSERT_TRUE(h.ok());
  Status s = h->Wait();
  ASSERT_FALSE(s.ok()) << "2 MiB do not fit in a 1 MiB file system";
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset"), std::string::npos) << s.ToString();
  EXPECT_LT(h->bytes_completed(), n);
  EXPECT_GE(e->ring_stats().errors, 1u);
}

TEST(IoUringWrite, ManyThreadsWriteDisjointRanges) {
  TempDir dir;
  constexpr int kThreads = 4, kEach = 32;
  constexpr std::size_t kPiece = 64 << 10;
  const std::size_t n = kThreads * kEach * kPiece;
  auto data = RandomBytes(n, 11);
  IoUringEngineOptions o;
  o.queue_depth = 8;
  auto e = Make(o);
  Result<FileWindow> w = e->OpenFile(NewFile(dir, "par"), {FileAccess::kReadWrite, n});
  ASSERT_TRUE(w.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::size_t off = (static_cast<std::size_t>(i) * kThreads + t) * kPiece;
        EXPECT_TRUE(RunOp(*e, Operation::Copy(w->at(off), data.data() + off, kPiece)).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(dir.Read(w->path()), data);
  EngineStats st = e->stats();
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.bytes_completed, n);
}

}  // namespace
}  // namespace tierflow
