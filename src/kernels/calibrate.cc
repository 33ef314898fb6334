// The copy kernel per kind of copy, measured on this CPU (kernels.h: MeasuredKernels).
//
// Why measure: the widest vectors are not always the fastest copy. On AMD Zen 5 the AVX-512
// kernels streamed large copies slower than the AVX2 ones (0.94-0.98x against 1.08x of glibc
// memcpy at 1 GiB; issue 17), and which ISA wins depends on the core and its
// memory, not on the instruction set alone.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/kernels.h"

namespace tierflow::kernels {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kCachedBytes = 128 * 1024;  // fits any L2 this runs on, with its source
constexpr std::size_t kStreamingBytes = 4 * 1024 * 1024;  // past L2; NT stores skip the caches
constexpr int kCachedReps = 16, kCachedRounds = 9;
constexpr int kStreamingRounds = 5;
// A narrower kernel replaces a wider one only when it is this much faster: below that the
// difference is within the noise of a shared machine.
constexpr double kMargin = 0.95;

// Seconds of `reps` copies of n bytes.
double Seconds(const Kernels& k, char* dst, const char* src, std::size_t n, bool nt, int reps) {
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) k.copy(dst, src, n, nt);
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

// The candidate whose copy of n bytes is fastest (the best of `rounds`, the candidates taking
// turns so that a drifting machine affects them alike), preferring wider ones within kMargin.
CpuIsa Fastest(const std::vector<CpuIsa>& isas, char* dst, const char* src, std::size_t n, bool nt,
               int reps, int rounds) {
  std::vector<double> best(isas.size(), 1e30);
  for (CpuIsa isa : isas) KernelsFor(isa).copy(dst, src, n, nt);  // warm caches and TLB
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < isas.size(); ++i) {
      best[i] = std::min(best[i], Seconds(KernelsFor(isas[i]), dst, src, n, nt, reps));
    }
  }
  std::size_t pick = 0;
  for (std::size_t i = 1; i < isas.size(); ++i) {
    if (best[i] < best[pick] * kMargin) pick = i;
  }
  return isas[pick];
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
  c.cached = Fastest(isas, dst, src, kCachedBytes, false, kCachedReps, kCachedRounds);
  c.streaming = Fastest(isas, dst, src, kStreamingBytes, true, 1, kStreamingRounds);
  return c;
}

}  // namespace

MeasuredKernelChoice MeasuredKernels() {
  static const MeasuredKernelChoice choice = Measure();
  return choice;
}

}  // namespace tierflow::kernels
