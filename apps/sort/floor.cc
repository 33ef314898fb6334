// SPDX-License-Identifier: Apache-2.0
// The I/O floor of a two-pass sort, measured on the same files right before the sort: read the
// input, write a file of its size where the runs go, read it back, write one where the output
// goes; each a stream of large O_DIRECT transfers through pipes, one phase after the other.
#include <filesystem>

#include "sort/context.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

namespace {

constexpr std::uint64_t kPiece = 64u << 20;

// Streams `bytes` between `file` and the arena (the arena reused piece by piece: only the
// disk's time counts). Returns the milliseconds taken.
Result<double> Stream(Context& c, const Locator& file, bool to_file, std::uint64_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<Pipe> pipe = to_file ? c.rt->Connect(c.arena, file, FilePipeOptions())
                              : c.rt->Connect(file, c.arena, FilePipeOptions());
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

Result<double> Phase(Context& c, const char* name, const std::string& path, bool write) {
  const std::uint64_t bytes = c.records * c.record;
  Result<Locator> file = write ? c.rt->File(path, 0, bytes, FileMode::kCreate)
                               : c.rt->File(path, 0, 0, FileMode::kRead);
  if (!file.ok()) return file.status();
  Result<double> ms = Stream(c, *file, write, bytes);
  if (ms.ok()) c.report.floor_phases.push_back({name, *ms});
  return ms;
}

}  // namespace

Status MeasureFloor(Context& c) {
  c.Phase("floor", 4 * c.records * c.record);
  TrackTempFile(c.config.runs);
  TrackTempFile(c.partial);
  struct Step {
    const char* name;
    const std::string* path;
    bool write;
  };
  const Step steps[] = {{"read input", &c.config.input, false},
                        {"write runs", &c.config.runs, true},
                        {"read runs", &c.config.runs, false},
                        {"write output", &c.partial, true}};
  for (const Step& s : steps) {
    Result<double> ms = Phase(c, s.name, *s.path, s.write);
    if (!ms.ok()) return ms.status();
    c.report.floor_ms += *ms;
  }
  RemoveTempFile(c.config.runs);
  RemoveTempFile(c.partial);
  return Status::Ok();
}

}  // namespace tierflow::extsort
