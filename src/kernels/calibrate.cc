// SPDX-License-Identifier: Apache-2.0
// The copy kernel per kind of copy, measured on this CPU (kernels.h: MeasuredKernels).
//
// Why measure: the widest vectors are not always the fastest copy. On AMD Zen 5 the AVX-512
// kernels streamed large copies slower than the AVX2 ones (0.94-0.98x against 1.08x of glibc
// memcpy at 1 GiB; issue 17), and which ISA wins depends on the core and its
// memory, not on the instruction set alone.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/kernels.h"

namespace tierflow::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// Copies that stay in the cache are timed at two sizes: one whose source and destination fit
// in L1 (the inline copies) and one that fits in any L2 this runs on. A kernel can win one and
// lose the other: on Zen 3 the SSE2 loop matches AVX2 at 128 KiB (L2-bound) but takes 1.8x as
// long at 4 KiB.
struct Probe {
  std::size_t bytes;
  int reps;
};
constexpr Probe kCachedProbes[] = {{4 * 1024, 512}, {128 * 1024, 16}};
constexpr int kCachedRounds = 9;
constexpr Probe kStreamingProbes[] = {{4 * 1024 * 1024, 1}};  // past L2; NT stores skip caches
constexpr std::size_t kStreamingBytes = kStreamingProbes[0].bytes;
constexpr int kStreamingRounds = 5;
// A narrower kernel replaces a wider one only when it is this much faster at every probed
// size: below that the difference is within the noise of a shared machine.
constexpr double kMargin = 0.95;

// Seconds of `reps` copies of n bytes, with the kernel that runs such copies (the one that
// recovers from its own faults, where the ISA has it, for temporal ones).
double Seconds(const Kernels& k, char* dst, const char* src, std::size_t n, bool nt, int reps) {
  const auto t0 = Clock::now();
  if (!nt && k.copy_recoverable != nullptr) {
    for (int i = 0; i < reps; ++i) k.copy_recoverable(dst, src, n);
  } else {
    for (int i = 0; i < reps; ++i) k.copy(dst, src, n, nt);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The supported ISAs, widest first.
std::vector<CpuIsa> Candidates() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kBaseline}) {
    if (IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

// The candidate whose copies of the probes' sizes are fastest (the best of `rounds` per size,
// the candidates taking turns so that a drifting machine affects them alike): the widest,
// unless a narrower one is faster by kMargin at every size.
template <std::size_t kProbes>
CpuIsa Fastest(const std::vector<CpuIsa>& isas, char* dst, const char* src,
               const Probe (&probes)[kProbes], bool nt, int rounds) {
  std::vector<std::array<double, kProbes>> best(isas.size());
  for (auto& b : best) b.fill(1e30);
  for (CpuIsa isa : isas) Seconds(KernelsFor(isa), dst, src, probes[0].bytes, nt, 1);  // warm up
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < isas.size(); ++i) {
      for (std::size_t p = 0; p < kProbes; ++p) {
        const double t =
            Seconds(KernelsFor(isas[i]), dst, src, probes[p].bytes, nt, probes[p].reps);
        best[i][p] = std::min(best[i][p], t);
      }
    }
  }
  std::size_t pick = 0;
  for (std::size_t i = 1; i < isas.size(); ++i) {
    bool faster_everywhere = true;
    for (std::size_t p = 0; p < kProbes; ++p) {
      faster_everywhere = faster_everywhere && best[i][p] < best[pick][p] * kMargin;
    }
    if (faster_everywhere) pick = i;
  }
  return isas[pick];
}

// Software prefetches ahead of the streaming loads (the default), unless leaving the source to
// the hardware prefetchers is faster by kMargin (the best of kStreamingRounds, taking turns).
// On Intel Xeon the prefetches cost 0.7x; on AMD Zen they bring the copy to glibc's pace.
StreamPrefetch FastestPrefetch(CpuIsa isa, char* dst, const char* src) {
  const Kernels* k[2] = {&KernelsFor(isa, StreamPrefetch::kSoftware),
                         &KernelsFor(isa, StreamPrefetch::kHardware)};
  double best[2] = {1e30, 1e30};
  for (const Kernels* x : k) Seconds(*x, dst, src, kStreamingBytes, true, 1);  // warm up
  for (int r = 0; r < kStreamingRounds; ++r) {
    for (int i = 0; i < 2; ++i) {
      best[i] = std::min(best[i], Seconds(*k[i], dst, src, kStreamingBytes, true, 1));
    }
  }
  return best[1] < best[0] * kMargin ? StreamPrefetch::kHardware : StreamPrefetch::kSoftware;
}

MeasuredKernelChoice Measure() {
  const std::vector<CpuIsa> isas = Candidates();
  MeasuredKernelChoice c{isas.front(), isas.front()};
  if (isas.size() == 1) return c;
  const std::size_t bytes = 2 * kStreamingBytes;
  std::unique_ptr<char, decltype(&std::free)> mem(
      static_cast<char*>(std::aligned_alloc(4096, bytes)), &std::free);
  if (mem == nullptr) return c;  // no memory to measure with: the widest
  std::fill_n(mem.get(), bytes, 1);
  char* src = mem.get();
  char* dst = mem.get() + kStreamingBytes;
  c.cached = Fastest(isas, dst, src, kCachedProbes, false, kCachedRounds);
  c.streaming = Fastest(isas, dst, src, kStreamingProbes, true, kStreamingRounds);
  c.streaming_prefetch = FastestPrefetch(c.streaming, dst, src);
  return c;
}

}  // namespace

MeasuredKernelChoice MeasuredKernels() {
  static const MeasuredKernelChoice choice = Measure();
  return choice;
}

}  // namespace tierflow::kernels
