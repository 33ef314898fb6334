// SPDX-License-Identifier: Apache-2.0
// The pollable flavour's readiness (pipe.h): fd() is writable exactly while the pipe has room
// and readable while completions wait, TryPost answers "full" instead of queueing, and a
// user's epoll loop drives a pipe to the end while sleeping in epoll_wait, not spinning.
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "testing/random_bytes.h"
#include "testing/temp_dir.h"
#include "tierflow/pipe_runtime.h"

namespace tierflow {
namespace {

std::unique_ptr<PipeRuntime> Runtime() {
  PipeRuntimeOptions o;
  o.calibration_path = "/nonexistent/calibration.json";
  o.cpu_workers = 2;
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(*rt) : nullptr;
}

// POLLIN / POLLOUT of fd now, without waiting (timeout_ms 0) or until one is set.
short Ready(int fd, int timeout_ms = 0, short events = POLLIN | POLLOUT) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 ? p.revents : 0;
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

TEST(PipeReadiness, WritableWhileThereIsRoomReadableWhileCompletionsWait) {
  auto rt = Runtime();
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, 1 << 20);
  Result<Locator> b = rt->Memory(TierKind::kDram, 0, 1 << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  PipeOptions o;
  o.queue_depth = 1;
  o.chunk_bytes = 64 << 10;
  o.bandwidth_cap = 16 << 20;  // 16 chunks of 64 KiB take about 60 ms: most of them wait
  Result<Pipe> p = rt->Connect(*a, *b, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Ready(p->fd()), POLLOUT) << "fresh: room, nothing to reap";
  Result<bool> first = p->TryPost(0, 0, 1 << 20, 1);
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ(Ready(p->fd()), 0) << "chunks wait for the slot: full, nothing to reap yet";
  Result<bool> second = p->TryPost(0, 0, 4096, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second) << "full: refused, as a non-blocking write answers EAGAIN";
  EXPECT_EQ(p->stats().transfers, 1u) << "nothing started by the refused TryPost";
  EXPECT_NE(Ready(p->fd(), 10000, POLLIN) & POLLIN, 0) << "the completion makes it readable";
  EXPECT_EQ(Ready(p->fd()), POLLIN | POLLOUT) << "done: room again, and a completion waits";
  PipeCompletion out[2];
  ASSERT_EQ(p->Reap(out), 1u);
  EXPECT_EQ(out[0].tag, 1u);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_EQ(Ready(p->fd()), POLLOUT) << "reaped: writable only";
  EXPECT_EQ(std::memcmp(a->data(), b->data(), 1 << 20), 0);
}

TEST(PipeReadiness, TryPostRefusesBadRangesAsPostDoes) {
  auto rt = Runtime();
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, 1 << 20);
  Result<Pipe> p = rt->Connect(*a, *a);
  ASSERT_TRUE(p.ok());
  Result<bool> beyond = p->TryPost(0, 0, (1 << 20) + 1, 0);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(p->TryPost(0, 0, 0, 0).ok()) << "length 0";
  EXPECT_FALSE(Pipe().TryPost(0, 0, 1, 0).ok()) << "a pipe that refers to no pipe";
  EXPECT_EQ(Pipe().fd(), -1);
}

// A loop as a user writes one: post while epoll says writable, reap while it says readable.
// It must finish, move every byte, and spend its time asleep in epoll_wait: a loop woken for
// a writability that TryPost then refuses would spin at 100% of a CPU.
TEST(PipeReadiness, EpollLoopDrivesAPipeWithoutBusyWaiting) {
  testkit::TempDir dir;
  const std::size_t piece = 1 << 20, pieces = 32;
  auto data = testkit::RandomBytes(piece * pieces, 9);
  auto rt = Runtime();
  Result<Locator> in = rt->File(dir.Write("in", data), 0, 0, FileMode::kRead);
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, data.size());
  ASSERT_TRUE(in.ok() && mem.ok());
  PipeOptions o;
  o.queue_depth = 4;
  o.chunk_bytes = 256 << 10;
  o.bandwidth_cap = 128 << 20;  // 32 MiB in about 250 ms: the loop mostly waits
  Result<Pipe> p = rt->Connect(*in, *mem, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p->fd(), &ev), 0);
  std::size_t posted = 0, reaped = 0, wakeups = 0, refused = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ThreadCpuSeconds();
  while (reaped < pieces) {
    const int n = epoll_wait(ep, &ev, 1, 10000);
    if (n < 0 && errno == EINTR) continue;  // io_uring's task work interrupts the submitter
    ASSERT_EQ(n, 1) << "nothing became ready in 10 s";
    ++wakeups;
    while ((ev.events & EPOLLOUT) != 0 && posted < pieces) {
      Result<bool> started = p->TryPost(posted * piece, posted * piece, piece, posted);
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      if (!*started) {
        ++refused;
        break;
      }
      if (++posted == pieces) {
        epoll_event only_in{};
        only_in.events = EPOLLIN;
        ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_MOD, p->fd(), &only_in), 0);
      }
    }
    PipeCompletion out[8];
    for (std::size_t k; (k = p->Reap(out)) != 0; reaped += k) {
      for (std::size_t i = 0; i < k; ++i) ASSERT_TRUE(out[i].status.ok());
    }
  }
  const double cpu = ThreadCpuSeconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(ep);
  EXPECT_EQ(std::memcmp(mem->data(), data.data(), data.size()), 0);
  EXPECT_LT(cpu, 0.5 * wall) << "the loop's thread used " << cpu << " s of CPU in " << wall
                             << " s: it spun instead of sleeping in epoll_wait";
  EXPECT_LT(wakeups, 20 * pieces) << wakeups << " wakeups, " << refused << " refused posts";
}

}  // namespace
}  // namespace tierflow
