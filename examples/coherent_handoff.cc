// SPDX-License-Identifier: Apache-2.0
// Handing a buffer from one thread to another through memory that caches do not keep coherent
// (CXL memory shared between hosts, a non-coherent DMA buffer), twice:
//   1. on tierflow's non-coherent memory simulator, with and without the consumer's
//      invalidate: without it the consumer reads its stale cached copy;
//   2. on this machine's memory with the real instructions (WriteBack before the release,
//      Invalidate after the acquire), which is what the same protocol looks like in a program.
//
//   build/examples/coherent_handoff
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tierflow/coherence.h"
#include "tierflow/noncoherent_memory.h"

namespace {

int Fail(const tierflow::Status& s) {
  std::fprintf(stderr, "coherent_handoff: %s\n", s.ToString().c_str());
  return 1;
}

constexpr std::size_t kData = 0, kFlag = 256;  // the buffer (4 lines) and the flag's line
constexpr std::uint64_t kRounds = 500;

// Producer (cpu 0) writes round r into the buffer and raises the flag to r; consumer (cpu 1)
// waits for the flag, reads the buffer and counts stale words. Returns that count.
std::uint64_t Simulate(bool consumer_invalidates) {
  tierflow::NoncoherentMemory::Options o;
  o.size = 512;
  o.seed = 7;
  auto mem = std::move(tierflow::NoncoherentMemory::Create(o)).value();
  std::uint64_t stale = 0;
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    for (std::size_t w = 0; w < 32; ++w) (void)mem->Store(0, kData + 8 * w, r);
    (void)mem->WriteBack(0, kData, 256);
    (void)mem->Fence(0);
    (void)mem->Store(0, kFlag, r);
    (void)mem->WriteBack(0, kFlag, 8);
    (void)mem->Complete(0);
    do {
      (void)mem->Invalidate(1, kFlag, 8);
    } while (mem->Load(1, kFlag).value() != r);
    if (consumer_invalidates) (void)mem->Invalidate(1, kData, 256);
    for (std::size_t w = 0; w < 32; ++w) stale += mem->Load(1, kData + 8 * w).value() != r;
  }
  return stale;
}

// The same protocol with threads on real memory. On a coherent machine the instructions cost
// what `tierflow bench coherence` shows and change nothing; on a non-coherent one they are
// what makes each side see the other's data. A side reads a flag only after invalidating it.
constexpr std::uint64_t kStop = ~std::uint64_t{0};  // the other side failed

std::uint64_t WaitFor(std::atomic<std::uint64_t>& flag, std::uint64_t value, tierflow::Status* s) {
  for (;;) {
    *s = tierflow::Invalidate(&flag, sizeof flag);
    const std::uint64_t v = flag.load(std::memory_order_acquire);
    if (v == value || v == kStop || !s->ok()) return v;
  }
}

tierflow::Status Release(std::atomic<std::uint64_t>& flag, std::uint64_t value) {
  flag.store(value, std::memory_order_release);
  return tierflow::WriteBack(&flag, sizeof flag);
}

tierflow::Status RunForReal(std::uint64_t* wrong) {
  std::vector<std::uint64_t> data(32);
  std::atomic<std::uint64_t> ready{0}, taken{0};
  tierflow::Status ps;  // the producer's
  std::thread producer([&] {
    for (std::uint64_t r = 1; r <= kRounds && ps.ok(); ++r) {
      if (WaitFor(taken, r - 1, &ps) != r - 1) break;
      for (auto& w : data) w = r;
      if (ps.ok()) ps = tierflow::WriteBack(data.data(), data.size() * 8);  // then Complete
      if (ps.ok()) ps = Release(ready, r);
    }
    if (!ps.ok()) ready.store(kStop, std::memory_order_release);
  });
  tierflow::Status cs;  // the consumer's
  for (std::uint64_t r = 1; r <= kRounds && cs.ok(); ++r) {
    if (WaitFor(ready, r, &cs) != r) break;
    if (cs.ok()) cs = tierflow::Invalidate(data.data(), data.size() * 8);
    for (std::uint64_t w : data) *wrong += w != r;
    if (cs.ok()) cs = Release(taken, r);
  }
  if (!cs.ok()) taken.store(kStop, std::memory_order_release);
  producer.join();
  return ps.ok() ? cs : ps;
}

}  // namespace

int main() {
  const std::uint64_t with = Simulate(true), without = Simulate(false);
  std::printf("simulated non-coherent memory, %llu hand-offs of 32 words:\n",
              static_cast<unsigned long long>(kRounds));
  std::printf("  consumer invalidates before reading: %llu stale words\n",
              static_cast<unsigned long long>(with));
  std::printf("  consumer skips the invalidate:       %llu stale words\n",
              static_cast<unsigned long long>(without));
  std::uint64_t wrong = 0;
  if (tierflow::Status s = RunForReal(&wrong); !s.ok()) return Fail(s);
  const tierflow::CoherenceSupport& cpu = tierflow::GetCoherenceSupport();
  std::printf("this machine (%s, %zu-byte lines, write-back by %s): %llu wrong words\n",
              std::string(cpu.architecture).c_str(), cpu.line_size,
              std::string(tierflow::LineInstructionName(cpu.write_back)).c_str(),
              static_cast<unsigned long long>(wrong));
  return with == 0 && without > 0 && wrong == 0 ? 0 : 1;
}
