// SPDX-License-Identifier: Apache-2.0
#include "rma/window_sync.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>

#include <fmt/format.h>

#include "common/cpu_relax.h"
#include "tierflow/coherence.h"

namespace tierflow::rma {

// A futex word other processes can wake: a generation bumped by every signal and the number
// of sleepers, so that a signal costs no system call while nobody sleeps.
struct WindowSync::Wake {
  std::atomic<std::uint32_t> generation{0};
  std::atomic<std::uint32_t> sleepers{0};
};

// One rank's words. Each group that different ranks write sits on its own cache line.
struct alignas(64) WindowSync::Slot {
  alignas(64) std::atomic<std::uint32_t> cc{0};  // written by the origins of my post
  alignas(64) Wake notify;                       // "your match vector or counter changed"
  alignas(64) std::atomic<std::uint32_t> lock{0};
  Wake lock_wake;
  alignas(64) std::atomic<std::uint32_t> accumulate{0};
  Wake accumulate_wake;
  alignas(64) std::int32_t pid = 0;
};

struct alignas(64) WindowSync::Header {
  std::atomic<std::uint32_t> arrived{0};
  std::atomic<std::uint32_t> generation{0};
};

namespace {

constexpr std::uint32_t kExclusive = 1u << 31;
// How long (in wake-up timeouts) a word may be read stale in the simulation before that is an
// error: long enough for any update on its way, short for a test that leaves a hook out.
constexpr int kStaleMs = 2000;

std::size_t MatchBytes(int ranks) {
  const std::size_t bytes = (static_cast<std::size_t>(ranks) + 63) / 64 * 8;
  return (bytes + 63) / 64 * 64;
}

long FutexWaitShared(std::atomic<std::uint32_t>* word, std::uint32_t expected, int ms) {
  timespec timeout{ms / 1000, (ms % 1000) * 1000L * 1000L};
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &timeout,
                 nullptr, 0);
}

void FutexWakeShared(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
          0);
}

// A process that has exited, a zombie included (kill(pid, 0) still succeeds on one).
bool Gone(std::int32_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  return n > 0 && StatSaysGone(std::string_view(buf, static_cast<std::size_t>(n)));
}

}  // namespace

bool StatSaysGone(std::string_view stat) {
  // The command name may hold spaces and parentheses: the state follows the last ')'.
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size() || stat[close + 1] != ' ') {
    return false;
  }
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X';
}

std::size_t WindowSync::Bytes(int ranks) {
  const auto n = static_cast<std::size_t>(ranks);
  return sizeof(Header) + sizeof(Header) + n * sizeof(Slot) + n * MatchBytes(ranks);
}

WindowSync::WindowSync(std::byte* area, int ranks, int me, int spin, int yields,
                       WordCoherence words, WordHooks hooks)
    : area_(area), n_(ranks), me_(me), spin_(spin), yields_(yields), words_(words), hooks_(hooks) {
  if (words_ == WordCoherence::kSimulated) mine_.assign(area, area + Bytes(ranks));
}

Status WindowSync::CheckInstructions() const {
  if (words_ != WordCoherence::kNoncoherent) return Status::Ok();
  if (Status s = tierflow::WriteBack(area_, 64); !s.ok()) return s;
  return tierflow::Invalidate(area_, 64);
}

template <typename T>
T* WindowSync::Mine(const std::atomic<T>& word) const {
  const auto offset = static_cast<std::size_t>(reinterpret_cast<const std::byte*>(&word) - area_);
  return reinterpret_cast<T*>(mine_.data() + offset);
}

// The instructions cannot fail here: CheckInstructions tried them on this area, and every word
// lies inside it.
template <typename T>
T WindowSync::Read(const std::atomic<T>& word) const {
  if (words_ == WordCoherence::kCoherent) return word.load();
  if (words_ == WordCoherence::kNoncoherent) {
    if (hooks_.invalidate_before_read) (void)tierflow::Invalidate(&word, sizeof(T));
    return word.load();
  }
  T* mine = Mine(word);
  if (hooks_.invalidate_before_read) *mine = word.load();
  last_read_ = static_cast<std::size_t>(reinterpret_cast<const std::byte*>(&word) - area_);
  last_size_ = sizeof(T);
  return *mine;
}

template <typename T>
void WindowSync::Write(std::atomic<T>& word, T value) {
  if (words_ == WordCoherence::kSimulated) {
    *Mine(word) = value;
    if (hooks_.write_back_after_update) word.store(value);
    return;
  }
  word.store(value);
  if (words_ == WordCoherence::kNoncoherent) Updated(&word);
}

void WindowSync::Updated(const void* word) const {
  if (words_ == WordCoherence::kNoncoherent && hooks_.write_back_after_update) {
    (void)tierflow::WriteBack(word, 8);
  }
}

Status WindowSync::Stale() const {
  if (words_ != WordCoherence::kSimulated || last_size_ == 0) return Status::Ok();
  const bool differs = std::memcmp(mine_.data() + last_read_, area_ + last_read_, last_size_) != 0;
  stale_ticks_ = differs ? stale_ticks_ + 1 : 0;
  if (stale_ticks_ * wake_ms_ < kStaleMs) return Status::Ok();
  return Status(StatusCode::kFailed,
                fmt::format("the synchronisation word at byte {} of the window's control segment "
                            "was read stale for {} s in the simulated non-coherent memory: the "
                            "invalidation before reading it is missing",
                            last_read_, kStaleMs / 1000));
}

// Layout: the barrier's header, its wake word, the slots, the match vectors.
WindowSync::Header& WindowSync::header() const { return *reinterpret_cast<Header*>(area_); }

WindowSync::Wake& WindowSync::barrier_wake() const {
  return *reinterpret_cast<Wake*>(area_ + sizeof(Header));
}

WindowSync::Slot& WindowSync::slot(int r) const {
  return reinterpret_cast<Slot*>(area_ + 2 * sizeof(Header))[r];
}

void WindowSync::SetPid(int rank, std::int32_t pid) { slot(rank).pid = pid; }

void WindowSync::SetPeerCheck(std::function<bool(int)> gone) { gone_ = std::move(gone); }

void WindowSync::SetWakeInterval(int ms) { wake_ms_ = std::clamp(ms, 1, 1000); }

void WindowSync::SetProgress(std::function<void()> progress) { progress_ = std::move(progress); }

std::atomic<std::uint64_t>* WindowSync::Match(int origin) const {
  std::byte* base = area_ + 2 * sizeof(Header) + static_cast<std::size_t>(n_) * sizeof(Slot);
  return reinterpret_cast<std::atomic<std::uint64_t>*>(base + origin * MatchBytes(n_));
}

Status WindowSync::DeadPeer(int peer) const {
  for (int r = peer < 0 ? 0 : peer; r < (peer < 0 ? n_ : peer + 1); ++r) {
    if (r != me_ && Gone(slot(r).pid)) {
      return Status::IoError(
          fmt::format("rank {} of the window (process {}) has exited while this rank waited for it",
                      r, slot(r).pid));
    }
    if (r != me_ && gone_ && gone_(r)) {
      return Status::IoError(fmt::format(
          "rank {} of the window has died while this rank waited for it (on another host: it "
          "stopped renewing its lease on the pool)",
          r));
    }
  }
  return Status::Ok();
}

template <typename Ready>
Status WindowSync::Await(Wake& wake, Ready ready, int peer) {
  for (int i = 0; i < spin_; ++i) {
    if (ready()) return Status::Ok();
    CpuRelax();
  }
  for (int i = 0; i < yields_; ++i) {
    if (ready()) return Status::Ok();
    if (progress_ && i % 64 == 63) progress_();
    sched_yield();
  }
  for (;;) {
    if (progress_) progress_();
    const std::uint32_t g = wake.generation.load();
    wake.sleepers.fetch_add(1);
    if (ready()) {
      wake.sleepers.fetch_sub(1);
      return Status::Ok();
    }
    const long r = FutexWaitShared(&wake.generation, g, wake_ms_);
    wake.sleepers.fetch_sub(1);
    if (ready()) return Status::Ok();
    if (r != 0 && errno == ETIMEDOUT) {
      if (Status s = DeadPeer(peer); !s.ok()) return s;
      if (Status s = Stale(); !s.ok()) return s;
    }
  }
}

void WindowSync::Signal(Wake& wake) {
  wake.generation.fetch_add(1);
  if (wake.sleepers.load() != 0) FutexWakeShared(&wake.generation);
}

void WindowSync::Post(std::span<const int> origins) {
  Write(slot(me_).cc, static_cast<std::uint32_t>(origins.size()));
  const std::uint64_t bit = 1ull << (me_ % 64);
  for (int o : origins) {
    std::atomic<std::uint64_t>& word = Match(o)[me_ / 64];
    word.fetch_or(bit);
    Updated(&word);
    Signal(slot(o).notify);
  }
}

bool WindowSync::Posted(int target) const {
  return (Read(Match(me_)[target / 64]) >> (target % 64)) & 1;
}

Status WindowSync::AwaitPosted(int target) {
  if (Posted(target)) return Status::Ok();
  return Await(
      slot(me_).notify, [&] { return Posted(target); }, target);
}

Status WindowSync::Complete(std::span<const int> targets) {
  for (int t : targets) {
    if (Status s = AwaitPosted(t); !s.ok()) return s;
    std::atomic<std::uint64_t>& word = Match(me_)[t / 64];
    word.fetch_and(~(1ull << (t % 64)));
    Updated(&word);
  }
  for (int t : targets) {
    const std::uint32_t before = slot(t).cc.fetch_sub(1);
    Updated(&slot(t).cc);
    if (before == 0) {
      return Status(StatusCode::kFailed,
                    fmt::format("rank {}'s completion counter was 0 when this origin completed: "
                                "the counter its post set never reached the shared memory (a "
                                "write-back after the store is missing)",
                                t));
    }
    if (before == 1) Signal(slot(t).notify);
  }
  return Status::Ok();
}

bool WindowSync::Completed() const { return Read(slot(me_).cc) == 0; }

Status WindowSync::AwaitCompletion() {
  return Await(
      slot(me_).notify, [&] { return Completed(); }, -1);
}

Status WindowSync::Barrier() {
  Header& h = header();
  const std::uint32_t g = Read(h.generation);
  const std::uint32_t arrived = h.arrived.fetch_add(1);
  Updated(&h.arrived);
  if (arrived >= static_cast<std::uint32_t>(n_)) {
    return Status(StatusCode::kFailed,
                  fmt::format("the fence's barrier counted {} arrivals of {} ranks: its reset "
                              "never reached the shared memory (a write-back after the store is "
                              "missing)",
                              arrived + 1, n_));
  }
  if (arrived + 1 == static_cast<std::uint32_t>(n_)) {
    Write(h.arrived, std::uint32_t{0});
    h.generation.fetch_add(1);
    Updated(&h.generation);
    Signal(barrier_wake());
    return Status::Ok();
  }
  return Await(
      barrier_wake(), [&] { return Read(h.generation) != g; }, -1);
}

Status WindowSync::LockShared(int target) {
  Slot& s = slot(target);
  return Await(
      s.lock_wake,
      [&] {
        std::uint32_t v = Read(s.lock);
        if ((v & kExclusive) != 0 || !s.lock.compare_exchange_strong(v, v + 1)) return false;
        Updated(&s.lock);
        return true;
      },
      target);
}

Status WindowSync::LockExclusive(int target) {
  Slot& s = slot(target);
  return Take(s.lock, s.lock_wake, kExclusive);
}

void WindowSync::UnlockShared(int target) {
  Slot& s = slot(target);
  const std::uint32_t before = s.lock.fetch_sub(1);
  Updated(&s.lock);
  if (before == 1) Signal(s.lock_wake);
}

void WindowSync::UnlockExclusive(int target) {
  Slot& s = slot(target);
  Give(s.lock, s.lock_wake);
}

Status WindowSync::LockAccumulate(int target) {
  Slot& s = slot(target);
  return Take(s.accumulate, s.accumulate_wake, 1);
}

void WindowSync::UnlockAccumulate(int target) {
  Slot& s = slot(target);
  Give(s.accumulate, s.accumulate_wake);
}

// Lock words change only by read-modify-writes, at the point of coherence.
Status WindowSync::Take(std::atomic<std::uint32_t>& word, Wake& wake, std::uint32_t held) {
  return Await(
      wake,
      [&] {
        std::uint32_t v = 0;
        if (!word.compare_exchange_strong(v, held)) return false;
        Updated(&word);
        return true;
      },
      -1);
}

void WindowSync::Give(std::atomic<std::uint32_t>& word, Wake& wake) {
  word.exchange(0);
  Updated(&word);
  Signal(wake);
}

}  // namespace tierflow::rma
