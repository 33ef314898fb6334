// SPDX-License-Identifier: Apache-2.0
// The pool shared by hosts without MPI: its refusals, its allocator, and what a process that
// dies holding allocations (or the allocator's lock) leaves to the others. Each Pool object
// stands for a process of its own (a lease of its own); forked children for processes that die.
#include "rma/pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"

namespace tierflow::rma {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

PoolOptions Small(std::uint64_t lease_ms = 10000) {
  PoolOptions o;
  o.create_size = 8 * kMiB;  // 6 MiB for allocations
  o.lease_ms = lease_ms;
  return o;
}

std::shared_ptr<Pool> MustOpen(const std::string& path, PoolOptions o = Small()) {
  Result<std::shared_ptr<Pool>> p = Pool::Open(path, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : nullptr;
}

std::string MessageOf(const std::string& path, PoolOptions o = Small()) {
  Result<std::shared_ptr<Pool>> p = Pool::Open(path, o);
  EXPECT_FALSE(p.ok());
  return p.ok() ? "" : p.status().message();
}

TEST(Pool, CreatesAFileOfItsUserWithMode0600) {
  testkit::TempDir dir("/dev/shm");
  auto pool = MustOpen(dir.File("pool"));
  ASSERT_NE(pool, nullptr);
  struct stat st {};
  ASSERT_EQ(stat(dir.File("pool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(pool->size(), 8 * kMiB);
  EXPECT_EQ(pool->FreeBytes(), 6 * kMiB);
  EXPECT_NE(pool->id(), 0u);
  // A second opener finds the same pool, formatted once.
  auto again = MustOpen(dir.File("pool"));
  EXPECT_EQ(again->id(), pool->id());
}

TEST(Pool, ProcessesCreatingItAtOnceAllOpenOnePool) {
  testkit::TempDir dir("/dev/shm");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> kids;
  for (int k = 0; k < 4; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      Result<std::shared_ptr<Pool>> p = Pool::Open(dir.File("pool"), Small());
      const std::uint64_t id = p.ok() ? (*p)->id() : 0;
      _exit(write(fds[1], &id, sizeof(id)) == sizeof(id) ? 0 : 1);
    }
    kids.push_back(pid);
  }
  close(fds[1]);
  std::vector<std::uint64_t> ids(4, 0);
  for (auto& id : ids) ASSERT_EQ(read(fds[0], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  close(fds[0]);
  for (pid_t pid : kids) waitpid(pid, nullptr, 0);
  for (std::uint64_t id : ids) {
    EXPECT_NE(id, 0u);
    EXPECT_EQ(id, ids[0]);
  }
}

TEST(Pool, AnAllocationLivesUntilItsLastHolderReleasesIt) {
  testkit::TempDir dir("/dev/shm");
  auto a = MustOpen(dir.File("pool")), b = MustOpen(dir.File("pool"));
  Result<PoolRegion> mine = a->Allocate(10000);
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_EQ(mine->size(), 12288u);  // whole pages
  std::memset(mine->data(), 0x5a, mine->size());
  Result<PoolRegion> theirs = b->Attach(mine->ref());
  ASSERT_TRUE(theirs.ok()) << theirs.status().message();
  EXPECT_EQ(theirs->data()[12287], std::byte{0x5a});
  const PoolRef ref = mine->ref();
  mine = PoolRegion();  // a's hold released; b still holds it
  EXPECT_EQ(a->FreeBytes(), 6 * kMiB - 12288);
  theirs = PoolRegion();
  EXPECT_EQ(a->FreeBytes(), 6 * kMiB);
  Result<PoolRegion> late = a->Attach(ref);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kNotFound);
}

TEST(Pool, AllocationsNeverOverlapAndExhaustionSaysHowMuchIsFree) {
  testkit::TempDir dir("/dev/shm");
  auto a = MustOpen(dir.File("pool")), b = MustOpen(dir.File("pool"));
  std::vector<PoolRegion> held;
  for (int i = 0;; ++i) {
    Result<PoolRegion> r = (i % 2 == 0 ? a : b)->Allocate(100000 + 4096 * i);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory);
      EXPECT_NE(r.status().message().find("bytes free"), std::string::npos) << r.status().message();
      break;
    }
    held.push_back(std::move(*r));
  }
  ASSERT_GT(held.size(), 10u);
  for (std::size_t i = 0; i < held.size(); ++i) {
    for (std::size_t j = i + 1; j < held.size(); ++j) {
      const auto& x = held[i].ref();
      const auto& y = held[j].ref();
      EXPECT_TRUE(x.offset + x.size <= y.offset || y.offset + y.size <= x.offset);
    }
    EXPECT_GE(held[i].ref().offset, Pool::kMetadataBytes);
    EXPECT_LE(held[i].ref().offset + held[i].ref().size, a->size());
  }
  // Freeing one in the middle makes its range the first fit again.
  const PoolRef middle = held[3].ref();
  held[3] = PoolRegion();
  Result<PoolRegion> again = a->Allocate(middle.size);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ref().offset, middle.offset);
  EXPECT_NE(again->ref().generation, middle.generation);
  EXPECT_FALSE(b->Attach(middle).ok());  // the old allocation is gone, not the new one
}

TEST(Pool, RefusesWhatIsNotAPoolOfThisUserWithTheFix) {
  testkit::TempDir dir("/dev/shm");
  auto pool = MustOpen(dir.File("pool"));
  ASSERT_EQ(symlink(dir.File("pool").c_str(), dir.File("link").c_str()), 0);
  EXPECT_NE(MessageOf(dir.File("link")).find("symbolic link"), std::string::npos);

  ASSERT_EQ(chmod(dir.File("pool").c_str(), 0644), 0);
  EXPECT_NE(MessageOf(dir.File("pool")).find("chmod 600"), std::string::npos);
  ASSERT_EQ(chmod(dir.File("pool").c_str(), 0600), 0);

  std::vector<char> data(8 * kMiB, 'x');
  const std::string other = dir.Write("other", data);
  chmod(other.c_str(), 0600);
  EXPECT_NE(MessageOf(other).find("holds other data"), std::string::npos);

  const std::string small = dir.Write("small", std::vector<char>(kMiB, 0));
  chmod(small.c_str(), 0600);
  EXPECT_NE(MessageOf(small).find("less than"), std::string::npos);

  ASSERT_EQ(mkfifo(dir.File("fifo").c_str(), 0600), 0);
  EXPECT_NE(MessageOf(dir.File("fifo")).find("neither a regular file"), std::string::npos);

  ASSERT_EQ(truncate(dir.File("pool").c_str(), 16 * kMiB), 0);
  EXPECT_NE(MessageOf(dir.File("pool")).find("resized"), std::string::npos);

  PoolOptions tiny = Small();
  tiny.create_size = kMiB;
  EXPECT_NE(MessageOf(dir.File("new"), tiny).find("at least"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.File("new")));  // refused before anything is made
}

TEST(Pool, RefusesThePoolOfAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  testkit::TempDir dir("/dev/shm");
  { MustOpen(dir.File("pool")); }
  ASSERT_EQ(chown(dir.File("pool").c_str(), 65534, 65534), 0);
  EXPECT_NE(MessageOf(dir.File("pool")).find("belongs to uid 65534"), std::string::npos);
}

TEST(Pool, AProbeWrittenByOneProcessIsReadByAnother) {
  testkit::TempDir dir("/dev/shm");
  auto a = MustOpen(dir.File("pool")), b = MustOpen(dir.File("pool"));
  a->WriteProbe(0x1234567890abcdefULL);
  EXPECT_EQ(b->ReadProbe(a->lease()), 0x1234567890abcdefULL);
  EXPECT_TRUE(b->Alive(a->lease()));
  EXPECT_FALSE(b->Alive(PoolLease{a->lease().slot, a->lease().token + 1}));
}

TEST(Pool, MapOverMovesTheProgramsMemoryIntoThePoolAndBack) {
  testkit::TempDir dir("/dev/shm");
  auto a = MustOpen(dir.File("pool")), b = MustOpen(dir.File("pool"));
  const std::size_t size = 2 * 4096;
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(mem);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  Result<PoolRegion> r = a->Allocate(size);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->MapOver(mem, size).ok());
  EXPECT_EQ(r->data(), static_cast<std::byte*>(mem));
  Result<PoolRegion> seen = b->Attach(r->ref());
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(std::to_integer<unsigned>(seen->data()[100]), (100u * 7) & 0xff);
  seen->data()[5] = std::byte{0xee};  // another process's store reaches the program's memory
  EXPECT_EQ(bytes[5], 0xee);
  EXPECT_FALSE(r->MapOver(mem, size).ok());
  r = PoolRegion();
  EXPECT_EQ(bytes[5], 0xee);  // private again, with the bytes it had
  seen->data()[5] = std::byte{0x11};
  EXPECT_EQ(bytes[5], 0xee);
  Result<PoolRegion> odd = a->Allocate(size);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->MapOver(bytes + 1, 4096).code(), StatusCode::kInvalidArgument);
  munmap(mem, size);
}

// A child that opens the pool, allocates and reports the allocation, then waits to be killed.
pid_t HoldInChild(const std::string& path, std::uint64_t bytes, std::uint64_t lease_ms,
                  PoolRef& ref) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Result<std::shared_ptr<Pool>> p = Pool::Open(path, Small(lease_ms));
    if (!p.ok()) _exit(1);
    Result<PoolRegion> r = (*p)->Allocate(bytes);
    if (!r.ok()) _exit(2);
    const PoolRef sent = r->ref();
    if (write(fds[1], &sent, sizeof(sent)) != sizeof(sent)) _exit(3);
    pause();
    _exit(0);
  }
  close(fds[1]);
  const bool got = read(fds[0], &ref, sizeof(ref)) == sizeof(ref);
  close(fds[0]);
  return got ? pid : -1;
}

TEST(Pool, ADeadProcessAllocationsAreReclaimedOnceItsLeaseRunsOut) {
  testkit::TempDir dir("/dev/shm");
  constexpr std::uint64_t kLease = 1500;
  auto pool = MustOpen(dir.File("pool"), Small(kLease));
  PoolRef ref;
  const pid_t child = HoldInChild(dir.File("pool"), 5 * kMiB, kLease, ref);
  ASSERT_GT(child, 0);
  // Alive: its allocation is its own, and shared with whoever attaches.
  EXPECT_EQ(pool->Allocate(5 * kMiB).status().code(), StatusCode::kOutOfMemory);
  {
    Result<PoolRegion> shared = pool->Attach(ref);
    ASSERT_TRUE(shared.ok());
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kLease));
    // Dead, but this process still holds it: never handed out again.
    EXPECT_EQ(pool->Allocate(5 * kMiB).status().code(), StatusCode::kOutOfMemory);
  }
  EXPECT_TRUE(pool->Allocate(5 * kMiB).ok());
  EXPECT_FALSE(pool->Attach(ref).ok());
}

TEST(Pool, AProcessKilledInTheMiddleOfAllocatingLeavesThePoolUsable) {
  testkit::TempDir dir("/dev/shm");
  constexpr std::uint64_t kLease = 500;
  { MustOpen(dir.File("pool"), Small(kLease)); }
  for (int round = 0; round < 4; ++round) {
    const pid_t pid = fork();
    if (pid == 0) {
      Result<std::shared_ptr<Pool>> p = Pool::Open(dir.File("pool"), Small(kLease));
      if (!p.ok()) _exit(1);
      std::vector<PoolRegion> keep;
      for (int i = 0;; ++i) {
        Result<PoolRegion> r = (*p)->Allocate(4096 * (1 + i % 7));
        if (r.ok() && i % 3 != 0) keep.push_back(std::move(*r));
        if (keep.size() > 50) keep.clear();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 13 * round));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  // The lock may have died with its holder: broken once the lease ran out, never a hang.
  auto pool = MustOpen(dir.File("pool"), Small(kLease));
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kLease));
  EXPECT_EQ(pool->FreeBytes(), 6 * kMiB);
  EXPECT_TRUE(pool->Allocate(6 * kMiB).ok());
}

// Allocates 40 regions, fills them with its own byte, and checks after a while that nobody else
// wrote into them; releases everything before it returns (0, or which step failed).
int AllocateAndCheck(const std::string& path, int k) {
  Result<std::shared_ptr<Pool>> p = Pool::Open(path, Small());
  if (!p.ok()) return 1;
  std::vector<PoolRegion> mine;
  for (int i = 0; i < 40; ++i) {
    Result<PoolRegion> r = (*p)->Allocate(4096 * (1 + (i + k) % 4));
    if (!r.ok()) return 2;
    std::memset(r->data(), 'a' + k, r->size());
    mine.push_back(std::move(*r));
  }
  usleep(200000);  // the others write theirs meanwhile
  for (const PoolRegion& r : mine) {
    for (std::size_t b = 0; b < r.size(); ++b) {
      if (r.data()[b] != static_cast<std::byte>('a' + k)) return 3;
    }
  }
  return 0;
}

TEST(Pool, ProcessesAllocatingAtOnceGetDisjointMemory) {
  testkit::TempDir dir("/dev/shm");
  { MustOpen(dir.File("pool")); }
  std::vector<pid_t> kids;
  for (int k = 0; k < 3; ++k) {
    const pid_t pid = fork();
    if (pid == 0) _exit(AllocateAndCheck(dir.File("pool"), k));
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  auto pool = MustOpen(dir.File("pool"));
  EXPECT_EQ(pool->FreeBytes(), 6 * kMiB);  // every child released what it held
}

}  // namespace
}  // namespace tierflow::rma
