// SPDX-License-Identifier: Apache-2.0
// The synchronisation words of one RMA window in memory its ranks share, and the protocols on
// them: trigger-only general active target synchronisation (Christgau's match vector and
// completion counter), a barrier for fences, reader-writer locks for passive target, and a
// lock per target that makes accumulates atomic. No MPI here: the interposition layer calls it.
//
// GATS, per window:
//   start(G)     nothing: the origin remembers G and never blocks
//   post(G)      target t: cc[t] = |G|, then for each origin o in G set bit t of match[o]
//   RMA to t     origin o, first access to t in the epoch: wait for bit t of match[o]
//   complete()   origin: for each t in G wait for bit t and clear it; then cc[t] -= 1 for each
//   wait()       target: until cc[t] == 0
// A post of the next epoch cannot be taken for this one: t posts again only after its wait
// returned, which needs every origin's decrement, which each origin does after clearing t's bit.
// Each origin owns its match vector and each target its counter; words written by different
// ranks sit on different cache lines.
//
// Waiting spins (`spin` rounds; short when the node runs more ranks than it has CPUs), then
// yields the CPU (`yields` times: with more ranks than CPUs, the rank waited for may need this
// CPU, and a yield hands it over without a futex round trip), then sleeps on a futex, waking every
// 100 ms (SetWakeInterval) to check that the ranks it waits for are alive: a dead rank ends the
// wait with an error instead of a hang.
//
// Memory that is not coherent (WordCoherence): the words get the maintenance a non-coherent
// agent needs (seed 002 §3.4.7-3.4.9, where they were uncached): every read of a word another
// rank updates (match vector, counter, barrier generation) is preceded by an invalidation of
// its line, every plain store (the counter's initialisation at a post, the barrier's reset) and
// every read-modify-write is followed by a write-back. Read-modify-writes (setting and clearing
// match bits, decrements, locks) act at the point of coherence, as the thesis' locked uncached
// updates did. In the simulated mode each process reads and writes a private copy of the words,
// which those two hooks move to and from the shared one: leaving one out shows as a word read
// stale for two seconds, or a counter that underflows, both reported as errors (kFailed) rather
// than as a hang. The futex words that put waiters to sleep are a doorbell, outside the model.
//
// Thread-safety: the words are shared by processes; one WindowSync per process and window,
// used by one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "tierflow/status.h"

namespace tierflow::rma {

enum class WordCoherence : std::uint8_t { kCoherent, kNoncoherent, kSimulated };

// Which maintenance of the words is done (all of it, but for a test that leaves one out).
struct WordHooks {
  bool invalidate_before_read = true;
  bool write_back_after_update = true;
};

class WindowSync {
 public:
  // Bytes of shared, zero-filled memory a window of `ranks` ranks needs.
  static std::size_t Bytes(int ranks);
  // `area` holds Bytes(ranks) bytes that every rank maps (any address). `spin`: rounds of
  // busy waiting, then `yields` sched_yield rounds, before sleeping.
  WindowSync(std::byte* area, int ranks, int me, int spin, int yields = 0,
             WordCoherence words = WordCoherence::kCoherent, WordHooks hooks = {});
  // kNoncoherent: the write-back and invalidate instructions work on this CPU and on `area`
  // (kUnsupported naming what is missing, else Ok); the calls that use them assume it.
  Status CheckInstructions() const;

  int ranks() const { return n_; }
  int me() const { return me_; }
  // Each rank records its process once, before the window is used, so that a waiter can tell
  // that the rank it waits for has died.
  void SetPid(int rank, std::int32_t pid);
  // For ranks whose process IDs mean nothing here (other hosts): `gone(rank)` says whether the
  // rank has died, asked at each wake-up of a wait for it, in addition to the PID check.
  void SetPeerCheck(std::function<bool(int rank)> gone);
  // How often a sleeping waiter wakes to look at the words itself (default 100 ms): a waker on
  // another host cannot reach this host's futex, so there only the timeout wakes a sleeper.
  void SetWakeInterval(int ms);
  // Called while waiting (every 64 yields, and at each wake-up): where the ranks also talk
  // through an MPI that moves data into a rank only while that rank calls it (a transport
  // over TCP), a waiter drives it from here, or the rank it waits for may wait on it in turn.
  void SetProgress(std::function<void()> progress);

  // GATS. Post/Complete take window ranks (0 <= r < ranks()), each at most once.
  void Post(std::span<const int> origins);
  bool Posted(int target) const;   // origin: has `target` posted to me?
  Status AwaitPosted(int target);  // origin: waits until it has
  Status Complete(std::span<const int> targets);
  Status AwaitCompletion();  // target: every origin of my post has completed
  bool Completed() const;    // target: as AwaitCompletion, without waiting

  // Every rank calls it; returns when all have.
  Status Barrier();

  // Passive target on `target`'s window. Unlock must match the lock held.
  Status LockShared(int target);
  Status LockExclusive(int target);
  void UnlockShared(int target);
  void UnlockExclusive(int target);
  // Makes an accumulate on `target`'s window atomic with every other one there.
  Status LockAccumulate(int target);
  void UnlockAccumulate(int target);

 private:
  struct Wake;
  struct alignas(64) Slot;
  struct alignas(64) Header;
  Header& header() const;
  Wake& barrier_wake() const;
  Slot& slot(int rank) const;
  template <typename Ready>
  Status Await(Wake& wake, Ready ready, int peer);
  void Signal(Wake& wake);
  // An exclusive word: from 0 to `held` (waiting on `wake` while another holds it), back to 0.
  Status Take(std::atomic<std::uint32_t>& word, Wake& wake, std::uint32_t held);
  void Give(std::atomic<std::uint32_t>& word, Wake& wake);
  std::atomic<std::uint64_t>* Match(int origin) const;
  Status DeadPeer(int peer) const;

  // The words as this process sees them (see above).
  template <typename T>
  T Read(const std::atomic<T>& word) const;
  template <typename T>
  void Write(std::atomic<T>& word, T value);
  void Updated(const void* word) const;  // after a read-modify-write
  template <typename T>
  T* Mine(const std::atomic<T>& word) const;
  Status Stale() const;  // kSimulated: the last word read is stale for too long

  std::byte* area_;
  int n_, me_, spin_, yields_;
  WordCoherence words_;
  WordHooks hooks_;
  mutable std::vector<std::byte> mine_;  // kSimulated: this process's copy of the words
  mutable std::size_t last_read_ = 0;    // ... the offset and size of the last word read,
  mutable std::size_t last_size_ = 0;    // and how many wake-up timeouts it has differed
  mutable int stale_ticks_ = 0;          // since
  std::function<bool(int)> gone_;
  std::function<void()> progress_;
  int wake_ms_ = 100;
};

// Whether a /proc/PID/stat line says the process is a zombie or dead ('Z', 'X'): the state
// after the command name, which may itself hold spaces, parentheses and such letters.
bool StatSaysGone(std::string_view stat);

}  // namespace tierflow::rma
