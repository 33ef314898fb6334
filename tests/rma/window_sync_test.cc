// SPDX-License-Identifier: Apache-2.0
// The RMA core without MPI: shared segments between processes and the synchronisation
// protocols on them, with the ranks as forked processes.
#include "rma/window_sync.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "rma/shared_segment.h"

namespace tierflow::rma {
namespace {

// Runs body(rank) in `ranks` processes (rank 0 is this one); returns the failures the
// children reported through their exit status.
int RunRanks(int ranks, const std::function<bool(int)>& body) {
  std::vector<pid_t> kids;
  for (int r = 1; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(body(r) ? 0 : 1);
    kids.push_back(pid);
  }
  int failures = body(0) ? 0 : 1;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures;
}

struct Shared {
  SharedSegment segment;
  std::byte* sync_area;
  std::atomic<std::uint64_t>* data;  // after the sync words
  explicit Shared(int ranks, bool named = false) {
    Result<SharedSegment> s = SharedSegment::Create(WindowSync::Bytes(ranks) + 4096, named);
    segment = std::move(s.value());
    sync_area = segment.data();
    data = reinterpret_cast<std::atomic<std::uint64_t>*>(segment.data() + WindowSync::Bytes(ranks));
  }
};

TEST(SharedSegment, AnotherProcessMapsTheMemfdThroughProc) {
  Result<SharedSegment> s = SharedSegment::Create(100);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size() % 4096, 0u);
  EXPECT_GE(s->name().fd, 0);
  EXPECT_EQ(s->name().shm_name[0], '\0') << "a memfd has no name anyone could open";
  const SegmentName name = s->name();
  EXPECT_EQ(RunRanks(2,
                     [&](int rank) {
                       if (rank == 0) return true;
                       Result<SharedSegment> o = SharedSegment::Open(name);
                       if (!o.ok()) return false;
                       std::memcpy(o->data() + 10, "hello", 5);
                       return true;
                     }),
            0);
  EXPECT_EQ(std::memcmp(s->data() + 10, "hello", 5), 0);
}

TEST(SharedSegment, TheNamedFallbackIsPrivateAndGoneOnceMapped) {
  Result<SharedSegment> s = SharedSegment::Create(4096, true);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::string path = std::string("/dev/shm") + s->name().shm_name;
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(std::filesystem::status(path).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(std::strlen(s->name().shm_name), std::strlen("/tierflow-rma-") + 32);
  Result<SharedSegment> o = SharedSegment::Open(s->name());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  s->MarkMapped();
  EXPECT_FALSE(std::filesystem::exists(path));
  o->data()[0] = std::byte{7};
  EXPECT_EQ(s->data()[0], std::byte{7});
}

TEST(SharedSegment, OpeningWhatIsGoneNamesIt) {
  SegmentName gone;
  gone.pid = 99999999;  // above pid_max
  gone.fd = 3;
  gone.size = 4096;
  Result<SharedSegment> o = SharedSegment::Open(gone);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kNotFound);
  EXPECT_NE(o.status().message().find("/proc/99999999/fd/3"), std::string::npos);
}

TEST(SharedSegment, PrivatePagesAreSharedInPlaceAndPrivateAgainAfter) {
  const std::size_t size = 2 * 4096;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* bytes = static_cast<std::byte*>(p);
  bytes[5] = std::byte{42};
  {
    Result<SharedSegment> s = SharedSegment::ShareInPlace(p, size);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->data(), bytes);
    EXPECT_EQ(bytes[5], std::byte{42}) << "the bytes move with the range";
    Result<SharedSegment> o = SharedSegment::Open(s->name());
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    o->data()[6] = std::byte{43};
    EXPECT_EQ(bytes[6], std::byte{43});
  }
  EXPECT_EQ(bytes[6], std::byte{43}) << "private again, with the same bytes";
  munmap(p, size);
}

// Memory someone else already shares (an MPI's shared window, a file) must stay theirs: put
// in place, a memfd of its own would cut it off from the others.
TEST(SharedSegment, MemoryAlreadySharedIsNotTakenOver) {
  const std::size_t size = 4096;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  Result<SharedSegment> s = SharedSegment::ShareInPlace(p, size);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(s.status().message().find("shared mapping"), std::string::npos) << s.status().message();
  EXPECT_EQ(RunRanks(2,
                     [&](int rank) {
                       if (rank == 1) static_cast<std::byte*>(p)[0] = std::byte{9};
                       return true;
                     }),
            0);
  EXPECT_EQ(static_cast<std::byte*>(p)[0], std::byte{9}) << "still shared with the child";
  munmap(p, size);
  Result<SharedSegment> gone = SharedSegment::ShareInPlace(p, size);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("not all mapped"), std::string::npos)
      << gone.status().message();
}

TEST(WindowSync, GatsEpochsInQuickSuccessionNeverMix) {
  constexpr int kRanks = 3, kEpochs = 2000;
  Shared m(kRanks);
  // Rank 0 is the target of origins 1 and 2; each origin writes its epoch number in its slot
  // and the target checks both after every wait: a post taken for the wrong epoch shows.
  const int failures = RunRanks(kRanks, [&](int rank) {
    WindowSync sync(m.sync_area, kRanks, rank, 64);
    sync.SetPid(rank, getpid());
    const int origins[] = {1, 2}, target[] = {0};
    for (int e = 1; e <= kEpochs; ++e) {
      if (rank == 0) {
        sync.Post(origins);
        if (!sync.AwaitCompletion().ok()) return false;
        if (m.data[1].load() != static_cast<std::uint64_t>(e) ||
            m.data[2].load() != static_cast<std::uint64_t>(e)) {
          return false;
        }
      } else {
        if (!sync.AwaitPosted(0).ok()) return false;
        m.data[rank].store(e);
        if (!sync.Complete(target).ok()) return false;
      }
    }
    return true;
  });
  EXPECT_EQ(failures, 0);
}

// GATS epochs and barriers with the words in memory that is not coherent: real write-backs and
// invalidations, and the simulation of private copies.
TEST(WindowSync, WordsOnNonCoherentMemoryCarryTheProtocols) {
  constexpr int kRanks = 3, kEpochs = 200;
  for (WordCoherence words : {WordCoherence::kNoncoherent, WordCoherence::kSimulated}) {
    Shared m(kRanks);
    const int failures = RunRanks(kRanks, [&](int rank) {
      WindowSync sync(m.sync_area, kRanks, rank, 64, 0, words);
      if (!sync.CheckInstructions().ok()) return false;
      sync.SetPid(rank, getpid());
      const int origins[] = {1, 2}, target[] = {0};
      for (int e = 1; e <= kEpochs; ++e) {
        if (rank == 0) {
          sync.Post(origins);
          if (!sync.AwaitCompletion().ok()) return false;
        } else if (!sync.AwaitPosted(0).ok() || !sync.Complete(target).ok()) {
          return false;
        }
        if (e % 10 == 0 && !sync.Barrier().ok()) return false;
      }
      return true;
    });
    EXPECT_EQ(failures, 0) << "word coherence " << static_cast<int>(words);
  }
}

// Each maintenance of the words left out in the simulation: an error, not a hang.
TEST(WindowSync, SimulatedWordsWithoutTheirMaintenanceFail) {
  for (bool invalidate : {false, true}) {
    Shared m(2);
    std::atomic<int>* code = reinterpret_cast<std::atomic<int>*>(m.data + 8);
    std::atomic<int>* made = reinterpret_cast<std::atomic<int>*>(m.data + 9);
    const WordHooks hooks{invalidate, !invalidate};
    RunRanks(2, [&](int rank) {
      WindowSync sync(m.sync_area, 2, rank, 64, 0, WordCoherence::kSimulated, hooks);
      sync.SetPid(rank, getpid());
      const int origin[] = {1}, target[] = {0};
      if (rank == 0) {
        // As window creation is collective: the origin took its copy before the post.
        while (made->load() == 0) std::this_thread::yield();
        sync.Post(origin);
        return !sync.AwaitCompletion().ok();  // ends when the origin has exited
      }
      made->store(1);
      Status s = sync.AwaitPosted(0);
      if (s.ok()) s = sync.Complete(target);
      code->store(static_cast<int>(s.code()));
      return true;
    });
    EXPECT_EQ(code->load(), static_cast<int>(StatusCode::kFailed))
        << (invalidate ? "without the write-back" : "without the invalidation");
  }
}

TEST(WindowSync, CompleteNotifiesTargetsItSentNothingTo) {
  constexpr int kRanks = 3;
  Shared m(kRanks);
  EXPECT_EQ(RunRanks(kRanks,
                     [&](int rank) {
                       WindowSync sync(m.sync_area, kRanks, rank, 64);
                       const int origin[] = {0}, targets[] = {1, 2};
                       if (rank == 0) return sync.Complete(targets).ok();
                       sync.Post(origin);
                       return sync.AwaitCompletion().ok();
                     }),
            0);
}

TEST(WindowSync, BarrierSeparatesPhases) {
  constexpr int kRanks = 4, kPhases = 500;
  Shared m(kRanks);
  EXPECT_EQ(RunRanks(kRanks,
                     [&](int rank) {
                       WindowSync sync(m.sync_area, kRanks, rank, 64);
                       for (int p = 0; p < kPhases; ++p) {
                         m.data[0].fetch_add(1);
                         if (!sync.Barrier().ok()) return false;
                         if (m.data[0].load() != static_cast<std::uint64_t>(kRanks) * (p + 1)) {
                           return false;
                         }
                         if (!sync.Barrier().ok()) return false;
                       }
                       return true;
                     }),
            0);
}

TEST(WindowSync, ExclusiveLocksSerialiseAndSharedOnesCoexist) {
  constexpr int kRanks = 4, kIters = 2000;
  Shared m(kRanks);
  EXPECT_EQ(RunRanks(kRanks,
                     [&](int rank) {
                       WindowSync sync(m.sync_area, kRanks, rank, 64);
                       for (int i = 0; i < kIters; ++i) {
                         if (!sync.LockExclusive(0).ok()) return false;
                         // Not atomic on purpose: only the lock keeps increments whole.
                         const std::uint64_t v = m.data[3].load(std::memory_order_relaxed);
                         m.data[3].store(v + 1, std::memory_order_relaxed);
                         sync.UnlockExclusive(0);
                         if (!sync.LockShared(0).ok()) return false;
                         sync.UnlockShared(0);
                       }
                       return true;
                     }),
            0);
  EXPECT_EQ(m.data[3].load(), static_cast<std::uint64_t>(kRanks) * kIters);
}

TEST(WindowSync, AWaitForARankThatExitedEndsWithAnError) {
  constexpr int kRanks = 2;
  Shared m(kRanks);
  const pid_t kid = fork();
  if (kid == 0) _exit(0);  // rank 1 dies without completing
  WindowSync sync(m.sync_area, kRanks, 0, 64);
  sync.SetPid(0, getpid());
  sync.SetPid(1, kid);
  const int origin[] = {1};
  sync.Post(origin);
  Status s = sync.AwaitCompletion();  // the kid is a zombie until waited for: that counts
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  waitpid(kid, nullptr, 0);
}

// Security review, item 15: a command name with spaces, parentheses and a 'Z' is not a state.
TEST(WindowSync, AProcessWhoseNameLooksLikeAStateIsAlive) {
  EXPECT_FALSE(StatSaysGone("1234 (a Z b) S 1 1234 1234 0 -1"));
  EXPECT_FALSE(StatSaysGone("1234 (x) Z) R 1 1234"));
  EXPECT_TRUE(StatSaysGone("1234 (x) Z) Z 1 1234"));
  EXPECT_TRUE(StatSaysGone("77 (sort) X 1"));
  EXPECT_FALSE(StatSaysGone("77 (sort"));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t kid = fork();
  if (kid == 0) {
    prctl(PR_SET_NAME, "a Z b");
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  constexpr int kRanks = 2;
  Shared m(kRanks);
  WindowSync sync(m.sync_area, kRanks, 0, 64);
  sync.SetPid(0, getpid());
  sync.SetPid(1, kid);
  const int origin[] = {1};
  sync.Post(origin);
  std::atomic<bool> returned{false};
  Status result;
  std::thread waiter([&] {
    result = sync.AwaitCompletion();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load()) << "a live rank named 'a Z b' was taken for dead: "
                                << result.message();
  kill(kid, SIGKILL);
  waitpid(kid, nullptr, 0);
  waiter.join();  // now it is gone: the wait ends with an error
  EXPECT_FALSE(result.ok());
  close(ready[0]);
  close(ready[1]);
}

// Item 12: a fallback name that some rank never opened is unlinked with the segment.
TEST(SharedSegment, TheNamedFallbackIsUnlinkedWhenNotEveryRankMappedIt) {
  std::string path;
  {
    Result<SharedSegment> s = SharedSegment::Create(4096, true);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    path = std::string("/dev/shm") + s->name().shm_name;
    ASSERT_TRUE(std::filesystem::exists(path));
  }  // dropped without MarkMapped, as MakeShared drops it when a rank fails to open it
  EXPECT_FALSE(std::filesystem::exists(path)) << path << " left behind";
}

// Item 13: /proc/PID/fd/FD of another file (another PID namespace, a recycled PID) is refused.
TEST(SharedSegment, AnotherFileBehindTheNameIsNotMapped) {
  Result<SharedSegment> s = SharedSegment::Create(4096);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Result<SharedSegment> other = SharedSegment::Create(4096);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  SegmentName forged = s->name();
  forged.fd = other->name().fd;  // same size, same kind of file, another inode
  const pid_t kid = fork();
  if (kid == 0) {
    Result<SharedSegment> o = SharedSegment::Open(forged);
    const bool refused = !o.ok() && o.status().code() == StatusCode::kUnsupported &&
                         o.status().message().find("not the shared memory") != std::string::npos;
    Result<SharedSegment> real = SharedSegment::Open(s->name());
    _exit(refused && real.ok() ? 0 : 1);
  }
  int status = 0;
  waitpid(kid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "a segment name whose fd is another file was mapped";
}

}  // namespace
}  // namespace tierflow::rma
