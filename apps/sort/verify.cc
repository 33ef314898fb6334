// SPDX-License-Identifier: Apache-2.0
// Verify: the output holds the input's records (the sums of per-record CRC-32 agree) in key
// order. Both files are read through a pipe into two halves of the arena, one half checked by
// the threads while the other is read.
#include <atomic>
#include <filesystem>

#include <fmt/format.h>

#include "sort/context.h"
#include "sort/plan.h"

namespace tierflow::extsort {

namespace {

void Check(Context& c, const std::byte* p, std::uint64_t n, bool order, Scan& out) {
  std::atomic<std::uint64_t> sum{0};
  ParallelFor(c.config.threads, n, [&](std::uint64_t b, std::uint64_t e) {
    sum.fetch_add(ChecksumRecords(c.config.format, p + b * c.record, e - b));
  });
  out.checksum += sum.load();
  if (!order) return;
  for (std::uint64_t i = 0; i < n; ++i) {
    const Key k = KeyOf(c.config.format, p + i * c.record);
    if (!out.any) out.first = k;
    if (out.any && k < out.last) ++out.disorder;
    out.last = k;
    out.any = true;
  }
}

}  // namespace

Result<Scan> ScanFile(Context& c, const std::string& path, bool order) {
  // An empty file holds no records, and a file locator needs bytes to name.
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) == 0 && !ec) return Scan{};
  Result<Locator> file = c.rt->File(path, 0, 0, FileMode::kRead);
  if (!file.ok()) return file.status();
  Result<Pipe> pipe = c.rt->Connect(*file, c.arena, FilePipeOptions());
  if (!pipe.ok()) return pipe.status();
  const std::uint64_t bytes = file->capacity();
  const std::uint64_t block = BlockBytes(c.config.format);
  const std::uint64_t half = c.arena.capacity() / 2 / block * block;
  Scan scan;
  Result<Handle> h = pipe->Submit(0, 0, std::min(half, bytes));
  for (std::uint64_t off = 0, k = 0; off < bytes; off += half, ++k) {
    if (!h.ok()) return h.status();
    if (Status s = h->Wait(); !s.ok()) return s;
    const std::uint64_t n = std::min(half, bytes - off);
    if (off + n < bytes)
      h = pipe->Submit(off + n, ((k + 1) % 2) * half, std::min(half, bytes - off - n));
    Check(c, c.arena.data() + (k % 2) * half, n / c.record, order, scan);
    c.done.fetch_add(n);
  }
  return scan;
}

Status Verify(Context& c) {
  const auto t0 = std::chrono::steady_clock::now();
  c.Phase("verify", 2 * c.records * c.record);
  Result<Scan> in = ScanFile(c, c.config.input, false);
  if (!in.ok()) return in.status();
  Result<Scan> out = ScanFile(c, c.partial, true);
  if (!out.ok()) return out.status();
  c.report.input_checksum = in->checksum;
  c.report.output_checksum = out->checksum;
  c.report.verify_ms = MsSince(t0);
  if (in->checksum != out->checksum || out->disorder != 0) {
    return Status::IoError(fmt::format(
        "the sorted output failed verification (checksum {:#x} of the input, {:#x} of the "
        "output, {} records out of order): it was not published",
        in->checksum, out->checksum, out->disorder));
  }
  c.report.verified = true;
  return Status::Ok();
}

}  // namespace tierflow::extsort
