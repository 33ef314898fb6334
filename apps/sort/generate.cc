// SPDX-License-Identifier: Apache-2.0
// Generate: the seeded input, filled by the threads into two halves of the arena, each half
// written through a pipe while the other is filled.
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sort/context.h"
#include "sort/plan.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

void ParallelFor(int threads, std::uint64_t n,
                 const std::function<void(std::uint64_t, std::uint64_t)>& fn) {
  std::vector<std::thread> pool;
  const std::uint64_t each = (n + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    const std::uint64_t b = std::min(n, each * t), e = std::min(n, b + each);
    if (b < e) pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(0, std::min(n, each));
  for (std::thread& t : pool) t.join();
}

namespace {

Status WriteInput(Context& c, const Locator& file, std::uint64_t bytes) {
  Result<Pipe> pipe = PipeFor(c, "generate", c.arena, file);
  if (!pipe.ok()) return pipe.status();
  const std::uint64_t half =
      c.arena.capacity() / 2 / BlockBytes(c.config.format) * BlockBytes(c.config.format);
  Handle pending[2];
  for (std::uint64_t off = 0, k = 0; off < bytes; off += half, ++k) {
    const std::uint64_t n = std::min(half, bytes - off);
    const std::uint64_t at = (k % 2) * half;
    if (pending[k % 2].valid()) {
      if (Status s = pending[k % 2].Wait(); !s.ok()) return s;
    }
    std::byte* p = c.arena.data() + at;
    ParallelFor(c.config.threads, n / c.record, [&](std::uint64_t b, std::uint64_t e) {
      GenerateRecords(c.config.format, c.config.seed, c.config.first_record + off / c.record + b,
                      e - b, p + b * c.record, c.config.keys);
    });
    Result<Handle> h = pipe->Submit(at, off, n);
    if (!h.ok()) return h.status();
    pending[k % 2] = std::move(*h);
    c.done.store(off + n);
  }
  return pipe->Drain();
}

}  // namespace

Status Generate(Context& c) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t bytes = c.records * c.record;
  c.Phase("generate", bytes);
  Result<Locator> file = FileFor(c, "input", c.config.input, bytes, FileMode::kCreate);
  if (!file.ok()) return file.status();
  if (!c.planned) TrackTempFile(c.config.input);  // until it is complete (planned: already)
  Status s = WriteInput(c, *file, bytes);
  if (!s.ok()) {
    RemoveTempFile(c.config.input);
    return s;
  }
  ForgetTempFile(c.config.input);
  c.report.generate_ms = MsSince(t0);
  return Status::Ok();
}

}  // namespace tierflow::extsort
