// SPDX-License-Identifier: Apache-2.0
// FormRuns, the first pass: each thread takes the next run, reads it through a pipe, radix-sorts
// it and writes it through a pipe to the runs file (run i at offset i x run size). A thread holds
// four buffers: the run being sorted, the scratch of the sort, the next run being read ahead and
// the last sorted run being written behind, so the disk works while the CPU sorts.

#include <atomic>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sort/context.h"
#include "sort/plan.h"
#include "sort/radix.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

namespace {

struct RunPass {
  Context& c;
  RunPlan plan;
  Pipe in, out;
  std::atomic<std::uint64_t> next{0};

  std::uint64_t Bytes(std::uint64_t run) const {
    const std::uint64_t total = c.records * c.record;
    return std::min(plan.run_bytes, total - run * plan.run_bytes);
  }
  std::uint64_t Buffer(int t, int k) const {
    return (static_cast<std::uint64_t>(t) * 4 + static_cast<std::uint64_t>(k)) * plan.buffer_bytes;
  }
  Result<Handle> Read(std::uint64_t run, std::uint64_t at) {
    return in.Submit(run * plan.run_bytes, at, Bytes(run));
  }
  Result<Handle> Write(std::uint64_t run, std::uint64_t at) {
    return out.Submit(at, run * plan.run_bytes, Bytes(run),
                      [this, n = Bytes(run)](const Completion&) { c.done.fetch_add(n); });
  }
  Status Work(int t);
  void Sample(std::uint64_t run, const std::byte* sorted) {
    std::vector<Key>& keys = c.samples[run];
    const std::uint64_t n = Bytes(run) / c.record;
    for (std::uint64_t i = 0; i < n; i += Context::kSampleEvery) {
      keys.push_back(KeyOf(c.config.format, sorted + i * c.record));
    }
  }
};

// The two buffers of a thread that hold neither the run `d` nor the write `w` in flight.
std::pair<int, int> FreeBuffers(int d, int w) {
  int f[2], n = 0;
  for (int k = 0; k < 4 && n < 2; ++k) {
    if (k != d && k != w) f[n++] = k;
  }
  return {f[0], f[1]};
}

Status RunPass::Work(int t) {
  std::uint64_t run = next.fetch_add(1);
  if (run >= plan.runs) return Status::Ok();
  int d = 0, w = -1;
  Result<Handle> first = Read(run, Buffer(t, d));
  if (!first.ok()) return first.status();
  if (Status s = first->Wait(); !s.ok()) return s;
  Handle write;
  for (;;) {
    const std::uint64_t upcoming = next.fetch_add(1);
    auto [p, s] = FreeBuffers(d, w);
    Handle ahead;
    if (upcoming < plan.runs) {
      Result<Handle> h = Read(upcoming, Buffer(t, p));
      if (!h.ok()) return h.status();
      ahead = std::move(*h);
    }
    std::byte* data = c.arena.data() + Buffer(t, d);
    std::byte* sorted =
        SortRun(c.config.format, data, c.arena.data() + Buffer(t, s), Bytes(run) / c.record);
    const int r = sorted == data ? d : s;
    Sample(run, sorted);
    if (write.valid()) {
      if (Status st = write.Wait(); !st.ok()) return st;
    }
    Result<Handle> h = Write(run, Buffer(t, r));
    if (!h.ok()) return h.status();
    write = std::move(*h);
    w = r;
    if (upcoming >= plan.runs) return write.Wait();
    if (Status st = ahead.Wait(); !st.ok()) return st;
    d = p;
    run = upcoming;
  }
}

}  // namespace

Status FormRuns(Context& c) {
  const std::uint64_t bytes = c.records * c.record;
  c.Phase("runs", bytes);
  RunPass pass{c, PlanRuns(c.config.format, c.arena.capacity(), c.config.threads, bytes), {}, {}};
  c.run_bytes = pass.plan.run_bytes;
  c.runs = pass.plan.runs;
  c.report.runs = c.runs;
  c.report.run_bytes = c.run_bytes;
  c.samples.assign(c.runs, {});
  Result<Locator> runs = FileFor(c, "runs", c.config.runs, bytes, FileMode::kCreate);
  if (!runs.ok()) return runs.status();
  if (!c.planned) TrackTempFile(c.config.runs);
  c.runs_file = *runs;
  Result<Pipe> in = PipeFor(c, "read input", c.input, c.arena);
  Result<Pipe> out = PipeFor(c, "write runs", c.arena, *runs);
  if (!in.ok()) return in.status();
  if (!out.ok()) return out.status();
  pass.in = *in;
  pass.out = *out;
  std::vector<Status> results(static_cast<std::size_t>(c.config.threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < c.config.threads; ++t) {
    pool.emplace_back([&pass, &results, t] { results[t] = pass.Work(t); });
  }
  for (std::thread& t : pool) t.join();
  // Transfers still in flight end before the buffers are reused; their errors count too.
  results.push_back(pass.in.Drain());
  results.push_back(pass.out.Drain());
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  c.report.temp_peak_bytes = FileBytes(c.config.runs);
  return Status::Ok();
}

}  // namespace tierflow::extsort
