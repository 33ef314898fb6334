// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/coherence.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "rma/mpi/offload.h"
#include "tierflow/coherence.h"

namespace tierflow::rma {

namespace {

constexpr std::uint64_t kLine = 64;

std::uint64_t Down(std::uint64_t v, std::uint64_t unit) { return v / unit * unit; }
std::uint64_t Up(std::uint64_t v, std::uint64_t unit, std::uint64_t limit) {
  return std::min(limit, (v + unit - 1) / unit * unit);
}

// --- the simulation ------------------------------------------------------------------------

// Bytes of the private copy that differ from its twin go to the public copy, and the twin
// follows: the next write-back sends only what changed since.
void WriteBackBytes(Window& w, int r, std::uint64_t b, std::uint64_t e) {
  std::byte* mine = w.base[r];
  std::byte* twin = w.twin[r].data();
  std::byte* pub = w.pub[r];
  for (std::uint64_t i = b; i < e; ++i) {
    if (mine[i] != twin[i]) {
      pub[i] = mine[i];
      twin[i] = mine[i];
    }
  }
}

// The same for the lines of [b, e) the copy holds: a line that is not present was never
// written here (the own window is always present: it is the program's memory).
void SimulatedWriteBack(Window& w, int r, std::uint64_t b, std::uint64_t e) {
  if (r == w.me) {
    WriteBackBytes(w, r, b, e);
    return;
  }
  for (std::uint64_t line = b / kLine; line * kLine < e; ++line) {
    if (!w.present[r][line]) continue;
    WriteBackBytes(w, r, std::max(b, line * kLine), std::min(e, (line + 1) * kLine));
  }
}

// The own window: written back, then refilled (copy and twin from one read of the public
// copy: other ranks' accumulates change it meanwhile, and a twin newer than its copy would send
// the copy's older bytes back as if written here).
void SimulatedRefresh(Window& w, int r, std::uint64_t b, std::uint64_t e) {
  SimulatedWriteBack(w, r, b, e);
  std::memcpy(w.base[r] + b, w.pub[r] + b, e - b);
  std::memcpy(w.twin[r].data() + b, w.base[r] + b, e - b);
}

// Another rank's copy: the lines of [b, e) that are not present are filled.
void SimulatedFill(Window& w, int r, std::uint64_t b, std::uint64_t e) {
  std::vector<std::uint8_t>& present = w.present[r];
  for (std::uint64_t line = b / kLine; line * kLine < e; ++line) {
    if (present[line]) continue;
    const std::uint64_t lb = line * kLine, le = std::min(lb + kLine, w.size[r]);
    std::memcpy(w.base[r] + lb, w.pub[r] + lb, le - lb);
    std::memcpy(w.twin[r].data() + lb, w.pub[r] + lb, le - lb);
    present[line] = 1;
  }
}

// Invalidation of another rank's copy: its stores in [b, e) written back, the lines dropped.
void SimulatedDrop(Window& w, int r, std::uint64_t b, std::uint64_t e) {
  SimulatedWriteBack(w, r, b, e);
  for (std::uint64_t line = b / kLine; line * kLine < e; ++line) w.present[r][line] = 0;
}

// --- the real instructions -----------------------------------------------------------------

// The ranges of rank r's window as this process maps them, in whole lines.
std::vector<MemorySpan> Spans(const Window& w, int r, const RangeSet& ranges) {
  std::vector<MemorySpan> spans;
  spans.reserve(ranges.size());
  for (const auto& [b, e] : ranges.ranges()) {
    const std::uint64_t lo = Down(b, kLine), hi = Up(e, kLine, w.size[r]);
    spans.push_back({w.base[r] + lo, static_cast<std::size_t>(hi - lo)});
  }
  return spans;
}

int Failed(Window& w, const char* what, int r, const Status& s) {
  if (s.ok()) return MPI_SUCCESS;
  Say(w.me, fmt::format("{} of rank {}'s window failed: {}", what, r, s.message()));
  return Fail(w, Misuse::kCoherence, s.message());
}

bool Maintained(const Window& w, int r) {
  return w.coherence != Coherence::kCoherent && w.size[r] != 0 && w.base[r] != nullptr;
}

}  // namespace

#ifdef TIERFLOW_RMA_MUTANTS
// The test build's library: one hook left out by name, for every call of the process.
bool Kept(HookPoint h) {
  static const int left_out = [] {
    constexpr const char* kNames[] = {"post_writeback",  "access_invalidate", "complete_writeback",
                                      "wait_invalidate", "fence_writeback",   "fence_invalidate",
                                      "lock_invalidate", "unlock_writeback",  "flush_writeback",
                                      "sync_invalidate", "sync_write_back"};
    static_assert(std::size(kNames) == static_cast<std::size_t>(HookPoint::kCount));
    const char* v = std::getenv("TIERFLOW_RMA_LEAVE_OUT");
    if (v == nullptr) return -1;
    for (std::size_t i = 0; i < std::size(kNames); ++i) {
      if (std::strcmp(v, kNames[i]) == 0) return static_cast<int>(i);
    }
    std::fprintf(stderr, "tierflow-rma: TIERFLOW_RMA_LEAVE_OUT=%s names no hook\n", v);
    std::abort();
  }();
  return static_cast<int>(h) != left_out;
}
#endif

WordCoherence WordsIn(Coherence mode) {
  switch (mode) {
    case Coherence::kCoherent:
      return WordCoherence::kCoherent;
    case Coherence::kNoncoherent:
      return WordCoherence::kNoncoherent;
    case Coherence::kSimulated:
      return WordCoherence::kSimulated;
  }
  return WordCoherence::kCoherent;
}

WordHooks KeptWordHooks() {
  return {Kept(HookPoint::kSyncInvalidate), Kept(HookPoint::kSyncWriteBack)};
}

const char* CoherenceName(Coherence mode) {
  switch (mode) {
    case Coherence::kCoherent:
      return "coherent";
    case Coherence::kNoncoherent:
      return "noncoherent";
    case Coherence::kSimulated:
      return "simulated";
  }
  return "coherent";
}

bool CoherenceFromEnvironment(Coherence& out, std::string& error) {
  const char* v = std::getenv("TIERFLOW_RMA_COHERENCE");
  const std::string s = v == nullptr ? "" : v;
  if (s.empty() || s == "coherent") {
    out = Coherence::kCoherent;
  } else if (s == "noncoherent") {
    out = Coherence::kNoncoherent;
  } else if (s == "simulated") {
    out = Coherence::kSimulated;
  } else {
    error = "TIERFLOW_RMA_COHERENCE=" + s +
            " is not a coherence mode: use coherent (the default), noncoherent or simulated";
    return false;
  }
  return true;
}

// The cache lines (the hardware's: by address) that bytes [offset, end) of a window of `size`
// bytes at `base` cover only in part: none, one or two, each cut to the window, the only
// memory of the target's that this process has mapped (a line reaching past the window's
// first or last byte may reach an unmapped page).
std::vector<MemorySpan> PartialLines(std::byte* base, std::uint64_t size, std::uint64_t offset,
                                     std::uint64_t end) {
  const auto at = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t first = at + offset, last = at + end;
  std::vector<MemorySpan> out;
  auto add = [&](std::uintptr_t line) {
    const std::uintptr_t from = std::max<std::uintptr_t>(line, at);
    const std::uintptr_t to = std::min<std::uintptr_t>(line + kLine, at + size);
    out.push_back({base + (from - at), to - from});
  };
  if (first % kLine != 0) add(Down(first, kLine));
  if (last % kLine != 0 && (first % kLine == 0 || Down(last, kLine) != Down(first, kLine))) {
    add(Down(last, kLine));
  }
  return out;
}

int Touch(Window& w, int r, std::uint64_t offset, std::uint64_t len, bool store) {
  if (!Maintained(w, r) || len == 0) return MPI_SUCCESS;
  const std::uint64_t end = offset + len;
  if (store) w.dirty[r].Add(offset, end);
  // One's own window is the program's memory, kept current by the synchronisation calls.
  if (r == w.me || !Kept(HookPoint::kAccessInvalidate)) return MPI_SUCCESS;
  const std::uint64_t lo = Down(offset, kLine), hi = Up(end, kLine, w.size[r]);
  if (int rc = DrainOverlapping(w, r, lo, hi); rc != MPI_SUCCESS) return rc;
  if (w.coherence == Coherence::kSimulated) {
    SimulatedDrop(w, r, lo, hi);  // what this process stored there is written back first
    SimulatedFill(w, r, lo, hi);
    return MPI_SUCCESS;
  }
  if (!store) return Failed(w, "invalidating", r, tierflow::Invalidate(w.base[r] + lo, hi - lo));
  // A put overwrites its whole lines; a partial line at either end merges with what the cache
  // holds of it, which must be what memory holds.
  const std::vector<MemorySpan> edges = PartialLines(w.base[r], w.size[r], offset, end);
  if (edges.empty()) return MPI_SUCCESS;
  return Failed(w, "invalidating", r, tierflow::Invalidate(edges));
}

int BeforeAccumulate(Window& w, int r, std::uint64_t offset, std::uint64_t len) {
  if (!Maintained(w, r) || len == 0 || w.coherence != Coherence::kNoncoherent) return MPI_SUCCESS;
  if (int rc = DrainOverlapping(w, r, offset, offset + len); rc != MPI_SUCCESS) return rc;
  return Failed(w, "invalidating", r, tierflow::Invalidate(w.base[r] + offset, len));
}

int AfterAccumulate(Window& w, int r, std::uint64_t offset, std::uint64_t len) {
  if (!Maintained(w, r) || len == 0) return MPI_SUCCESS;
  const std::uint64_t lo = Down(offset, kLine), hi = Up(offset + len, kLine, w.size[r]);
  if (int rc = DrainOverlapping(w, r, lo, hi); rc != MPI_SUCCESS) return rc;
  // Noted as stored, so that the target learns of it from the ledger; written back as such,
  // it sends nothing more (the copy did not change).
  w.dirty[r].Add(lo, hi);
  if (w.coherence == Coherence::kSimulated) {
    if (r != w.me) SimulatedDrop(w, r, lo, hi);
    return MPI_SUCCESS;
  }
  return Failed(w, "writing back", r, tierflow::WriteBackInvalidate(w.base[r] + lo, hi - lo));
}

int WriteBackCopy(Window& w, int r) {
  if (!Maintained(w, r) || w.dirty[r].empty()) return MPI_SUCCESS;
  int rc = MPI_SUCCESS;
  if (w.coherence == Coherence::kSimulated) {
    for (const auto& [b, e] : w.dirty[r].ranges()) SimulatedWriteBack(w, r, b, e);
  } else {
    rc = Failed(w, "writing back", r, tierflow::WriteBack(Spans(w, r, w.dirty[r])));
  }
  w.dirty[r].Clear();
  return rc;
}

int WriteBackOwn(Window& w) {
  const int me = w.me;
  if (!Maintained(w, me)) return MPI_SUCCESS;
  w.dirty[me].Clear();  // contained in the whole
  if (w.coherence == Coherence::kSimulated) {
    SimulatedWriteBack(w, me, 0, w.size[me]);
    return MPI_SUCCESS;
  }
  return Failed(w, "writing back", me, tierflow::WriteBack(w.base[me], w.size[me]));
}

int InvalidateOwn(Window& w) {
  const int me = w.me;
  if (!Maintained(w, me)) return MPI_SUCCESS;
  w.dirty[me].Clear();
  if (w.coherence == Coherence::kSimulated) {
    SimulatedRefresh(w, me, 0, w.size[me]);
    return MPI_SUCCESS;
  }
  return Failed(w, "invalidating", me, tierflow::Invalidate(w.base[me], w.size[me]));
}

int InvalidateOwnWritten(Window& w, int slot) {
  const int me = w.me;
  if (!Maintained(w, me)) return MPI_SUCCESS;
  RangeSet written;
  const bool complete = w.ledger.Collect(me, slot, written);
  w.ledger.Reset(me, slot);
  if (!complete) return InvalidateOwn(w);
  if (written.empty()) return MPI_SUCCESS;
  if (w.coherence == Coherence::kSimulated) {
    for (const auto& [b, e] : written.ranges()) {
      SimulatedRefresh(w, me, Down(b, kLine), Up(e, kLine, w.size[me]));
    }
    return MPI_SUCCESS;
  }
  return Failed(w, "invalidating", me, tierflow::Invalidate(Spans(w, me, written)));
}

void Publish(Window& w, int target, int slot) {
  if (w.coherence == Coherence::kCoherent || !w.ledger.attached()) return;
  w.ledger.Record(target, slot, w.dirty[target]);
}

void ResetLedger(Window& w, int slot) {
  if (w.coherence == Coherence::kCoherent || !w.ledger.attached()) return;
  w.ledger.Reset(w.me, slot);
}

void StartSimulation(Window& w, const std::vector<std::byte*>& pub) {
  w.pub = pub;
  w.cache.assign(w.ranks, {});
  w.twin.assign(w.ranks, {});
  w.present.assign(w.ranks, {});
  for (int r = 0; r < w.ranks; ++r) {
    const std::byte* p = pub[r];
    w.twin[r].assign(p, p + w.size[r]);
    if (r != w.me) {  // a cache with nothing in it yet: lines fill on first touch
      w.cache[r].assign(w.size[r], std::byte{0});
      w.present[r].assign((w.size[r] + kLine - 1) / kLine, 0);
      w.base[r] = w.cache[r].data();
    }
  }
}

}  // namespace tierflow::rma
