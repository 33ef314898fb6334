// SPDX-License-Identifier: Apache-2.0
// The I/O floor of a two-pass sort, measured on the same files right before the sort: read the
// input, write a file of its size where the runs go, read it back, write one where the output
// goes; each a stream of large O_DIRECT transfers through pipes, one phase after the other.
// Planned (the sort's blueprint), the phases are its stages on its own files, whose blocks are
// given back afterwards so that the sort writes them afresh, as the floor did.
#include <filesystem>

#include "sort/context.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

namespace {

constexpr std::uint64_t kPiece = 64u << 20;

// Streams `bytes` between `file` and the arena (the arena reused piece by piece: only the
// disk's time counts). Returns the milliseconds taken.
Result<double> Stream(Context& c, const char* stage, const Locator& file, bool to_file,
                      std::uint64_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<Pipe> pipe = to_file ? PipeFor(c, stage, c.arena, file) : PipeFor(c, stage, file, c.arena);
  if (!pipe.ok()) return pipe.status();
  const std::uint64_t piece = std::min<std::uint64_t>(kPiece, c.arena.capacity() / 4096 * 4096);
  for (std::uint64_t off = 0; off < bytes; off += piece) {
    const std::uint64_t n = std::min(piece, bytes - off);
    const std::uint64_t at = (off / piece) % 2 == 0 || c.arena.capacity() < 2 * piece ? 0 : piece;
    Result<Handle> h = to_file ? pipe->Submit(at, off, n) : pipe->Submit(off, at, n);
    if (!h.ok()) return h.status();
    c.done.fetch_add(n);
  }
  if (Status s = pipe->Drain(); !s.ok()) return s;
  return MsSince(t0);
}

struct Step {
  const char* name;  // the phase, and the sort's stage that it times
  const char* role;
  const std::string* path;
  bool write;
};

Result<double> Phase(Context& c, const Step& step) {
  const std::uint64_t bytes = c.records * c.record;
  Result<Locator> file = FileFor(c, step.role, *step.path, step.write ? bytes : 0,
                                 step.write ? FileMode::kCreate : FileMode::kRead);
  if (!file.ok()) return file.status();
  Result<double> ms = Stream(c, step.name, *file, step.write, bytes);
  if (ms.ok()) c.report.floor_phases.push_back({step.name, *ms});
  return ms;
}

}  // namespace

Status MeasureFloor(Context& c) {
  c.Phase("floor", 4 * c.records * c.record);
  if (!c.planned) {
    TrackTempFile(c.config.runs);
    TrackTempFile(c.partial);
  }
  const Step steps[] = {{"read input", "input", &c.config.input, false},
                        {"write runs", "runs", &c.config.runs, true},
                        {"read runs", "runs", &c.config.runs, false},
                        {"write output", "output", &c.partial, true}};
  for (const Step& s : steps) {
    Result<double> ms = Phase(c, s);
    if (!ms.ok()) return ms.status();
    c.report.floor_ms += *ms;
  }
  if (!c.planned) {
    RemoveTempFile(c.config.runs);
    RemoveTempFile(c.partial);
    return Status::Ok();
  }
  for (const char* role : {"runs", "output"}) {
    Result<Locator> file = c.plan.locator(role);
    if (Status s = c.rt->Release(*file, 0, file->capacity()); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace tierflow::extsort
