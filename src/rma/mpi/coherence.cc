// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/coherence.h"

#include <cstdlib>
#include <cstring>

#include "tierflow/coherence.h"

namespace tierflow::rma {

namespace {

// Bytes of the private copy that differ from its twin go to the public copy, and the twin
// follows: the next write-back sends only what changed since.
void SimulatedWriteBack(Window& w, int r) {
  std::byte* mine = w.base[r];
  std::byte* twin = w.twin[r].data();
  std::byte* pub = w.pub[r];
  for (std::size_t i = 0, n = w.size[r]; i < n; ++i) {
    if (mine[i] != twin[i]) {
      pub[i] = mine[i];
      twin[i] = mine[i];
    }
  }
}

void SimulatedInvalidate(Window& w, int r) {
  SimulatedWriteBack(w, r);
  // One read of the public copy for both: other ranks' accumulates change it meanwhile, and a
  // twin newer than its copy would send the copy's older bytes back as if written here.
  std::memcpy(w.base[r], w.pub[r], w.size[r]);
  std::memcpy(w.twin[r].data(), w.base[r], w.size[r]);
}

}  // namespace

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

void WriteBack(Window& w, int r) {
  if (w.size[r] == 0 || w.base[r] == nullptr) return;
  if (w.coherence == Coherence::kSimulated) {
    SimulatedWriteBack(w, r);
  } else if (w.coherence == Coherence::kNoncoherent) {
    (void)tierflow::WriteBack(w.base[r], w.size[r]);
  }
}

void Invalidate(Window& w, int r) {
  if (w.size[r] == 0 || w.base[r] == nullptr) return;
  if (w.coherence == Coherence::kSimulated) {
    SimulatedInvalidate(w, r);
  } else if (w.coherence == Coherence::kNoncoherent) {
    (void)tierflow::Invalidate(w.base[r], w.size[r]);
  }
}

void WriteBackAll(Window& w) {
  if (w.coherence == Coherence::kCoherent) return;
  for (int r = 0; r < w.ranks; ++r) WriteBack(w, r);
}

void InvalidateAll(Window& w) {
  if (w.coherence == Coherence::kCoherent) return;
  for (int r = 0; r < w.ranks; ++r) Invalidate(w, r);
}

void StartSimulation(Window& w, const std::vector<std::byte*>& pub) {
  w.pub = pub;
  w.cache.assign(w.ranks, {});
  w.twin.assign(w.ranks, {});
  for (int r = 0; r < w.ranks; ++r) {
    const std::byte* p = pub[r];
    w.twin[r].assign(p, p + w.size[r]);
    if (r != w.me) {
      w.cache[r] = w.twin[r];
      w.base[r] = w.cache[r].data();
    }
  }
}

}  // namespace tierflow::rma
