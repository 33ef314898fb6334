// SPDX-License-Identifier: Apache-2.0
#include "sort/plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "sort/radix.h"
#include "tierflow/size.h"

namespace tierflow::extsort {

namespace {
constexpr std::uint64_t kMiB = 1u << 20;
// Smallest useful read-ahead buffer of a run in the merge: below this O_DIRECT reads of many
// runs stop keeping the disk busy.
constexpr std::uint64_t kMinRead = 256 * 1024;
}  // namespace

std::uint64_t ArenaBytes(std::uint64_t memory) {
  const std::uint64_t reserve = std::max<std::uint64_t>(16 * kMiB, memory / 32);
  return memory > reserve ? memory - reserve : 0;
}

std::uint64_t BlockBytes(Format f) { return f == Format::kU64 ? 4096 : 100 * 4096; }

RunPlan PlanRuns(Format f, std::uint64_t arena, int threads, std::uint64_t input) {
  const std::uint64_t block = BlockBytes(f);
  const std::uint64_t records_per_block = block / RecordBytes(f);
  // A buffer must hold the scratch of its run (gensort sorts an index beside the records).
  const double scratch_per_byte =
      static_cast<double>(SortScratchBytes(f, records_per_block)) / static_cast<double>(block);
  RunPlan p;
  const auto per_buffer = static_cast<std::uint64_t>(static_cast<double>(arena) / (4.0 * threads) /
                                                     std::max(1.0, scratch_per_byte));
  p.run_bytes = per_buffer / block * block;
  // No run larger than its share of the input: all threads get work.
  const std::uint64_t share = (input / threads + block - 1) / block * block;
  p.run_bytes = std::max<std::uint64_t>(block, std::min(p.run_bytes, share));
  p.buffer_bytes = std::max<std::uint64_t>(
      p.run_bytes, (SortScratchBytes(f, p.run_bytes / RecordBytes(f)) + 4095) / 4096 * 4096);
  p.runs = (input + p.run_bytes - 1) / p.run_bytes;
  return p;
}

MergePlan PlanMerge(Format f, std::uint64_t arena, std::uint64_t runs) {
  const std::uint64_t block = BlockBytes(f);
  MergePlan m;
  m.write_bytes = std::max(block, std::min<std::uint64_t>(64 * kMiB, arena / 8) / block * block);
  const std::uint64_t left = arena > 2 * m.write_bytes ? arena - 2 * m.write_bytes : 0;
  m.read_bytes = left / (2 * std::max<std::uint64_t>(runs, 1)) / block * block;
  m.read_bytes = std::min<std::uint64_t>(m.read_bytes, 16 * kMiB / block * block + block);
  return m;
}

std::uint64_t MergePartBytes(std::uint64_t arena, int threads) {
  // Each part keeps 8 KiB aside to shift its output buffers to its output's alignment.
  const std::uint64_t part = arena / static_cast<std::uint64_t>(threads) / 4096 * 4096;
  return part > 8192 ? part - 8192 : 0;
}

namespace {
bool Fits(Format f, std::uint64_t memory, int threads, std::uint64_t input) {
  const std::uint64_t arena = ArenaBytes(memory);
  if (arena == 0) return false;
  const RunPlan r = PlanRuns(f, arena, threads, input);
  if (4ull * threads * r.buffer_bytes > arena) return false;
  return PlanMerge(f, MergePartBytes(arena, threads), r.runs).read_bytes >=
         std::max(kMinRead, BlockBytes(f));
}
}  // namespace

std::uint64_t LeastMemory(const std::function<bool(std::uint64_t)>& fits) {
  // Doubling to a size that fits, then halving the gap.
  std::uint64_t low = 16 * kMiB, high = 32 * kMiB;
  while (!fits(high) && high < (std::uint64_t{1} << 50)) {
    low = high;
    high *= 2;
  }
  while (high - low > kMiB) {
    const std::uint64_t mid = (low + high) / 2 / kMiB * kMiB;
    (fits(mid) ? high : low) = mid;
  }
  return high;
}

Status CheckMemory(const Config& c, std::uint64_t input) {
  if (Fits(c.format, c.memory_bytes, c.threads, input)) return Status::Ok();
  const std::uint64_t need =
      LeastMemory([&](std::uint64_t m) { return Fits(c.format, m, c.threads, input); });
  return Status::InvalidArgument(fmt::format(
      "memory {} is too small to sort {} of {} records with {} threads in two passes: give at "
      "least {} (or fewer threads)",
      FormatSize(c.memory_bytes), FormatSize(input), FormatName(c.format), c.threads,
      FormatSize((need + kMiB - 1) / kMiB * kMiB)));
}

}  // namespace tierflow::extsort
