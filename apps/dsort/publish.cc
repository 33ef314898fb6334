// SPDX-License-Identifier: Apache-2.0
// The end of a distributed sort: the checks across ranks (as valsort checks partitioned output:
// each partition in order, the boundary between consecutive ranks, the record count and the
// sum of per-record CRC-32 of all outputs against all inputs), the publication of every rank's
// partition under its name only once all are complete and checked, and the report on rank 0.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "dsort/job.h"
#include "sort/temp_files.h"

namespace tierflow::dsort {

namespace {

// What one rank tells the others about its partition.
struct Edge {
  std::uint64_t any = 0;  // 1: first and last hold keys
  Key first, last;
};

// The boundary between consecutive non-empty partitions: the first rank whose last key is
// above the next partition's first, or -1.
int BadBoundary(const std::vector<Edge>& edges) {
  const Edge* before = nullptr;
  for (std::size_t r = 0; r < edges.size(); ++r) {
    if (edges[r].any == 0) continue;
    if (before != nullptr && edges[r].first < before->last) return static_cast<int>(r);
    before = &edges[r];
  }
  return -1;
}

Result<Edge> ScanOutput(Job& j, std::uint64_t& in_sum, std::uint64_t& out_sum,
                        std::uint64_t& disorder) {
  extsort::Context& c = j.c;
  c.Phase("verify", (j.input_records + c.records) * c.record);
  Result<extsort::Scan> in = extsort::ScanFile(c, c.config.input, false);
  if (!in.ok()) return in.status();
  Result<extsort::Scan> out = extsort::ScanFile(c, c.partial, true);
  if (!out.ok()) return out.status();
  in_sum = in->checksum;
  out_sum = out->checksum;
  disorder = out->disorder;
  return Edge{out->any ? 1u : 0u, out->first, out->last};
}

}  // namespace

Status VerifyAcrossRanks(Job& j) {
  std::uint64_t mine[2] = {j.input_records, j.c.records}, all[2] = {};
  MPI_Allreduce(mine, all, 2, MPI_UINT64_T, MPI_SUM, j.comm);
  if (all[0] != all[1]) {
    return Status::Failed(
        fmt::format("the ranks' outputs hold {} records, their inputs {}: nothing was published",
                    all[1], all[0]));
  }
  if (!j.config.verify) return Status::Ok();
  j.Say("verify: order, boundaries and checksums of every rank's output");
  std::uint64_t sums[3] = {};  // input checksum, output checksum, records out of order
  Result<Edge> edge = ScanOutput(j, sums[0], sums[1], sums[2]);
  if (Status s = Agree(j, edge.status()); !s.ok()) return s;
  std::uint64_t total[3] = {};
  MPI_Allreduce(sums, total, 3, MPI_UINT64_T, MPI_SUM, j.comm);
  std::vector<Edge> edges(static_cast<std::size_t>(j.ranks));
  MPI_Allgather(&*edge, sizeof(Edge), MPI_BYTE, edges.data(), sizeof(Edge), MPI_BYTE, j.comm);
  j.report.input_checksum = total[0];
  j.report.output_checksum = total[1];
  const int bad = BadBoundary(edges);
  if (total[0] != total[1] || total[2] != 0 || bad >= 0) {
    return Status::Failed(fmt::format(
        "the outputs failed verification (checksum {:#x} of the inputs, {:#x} of the outputs, {} "
        "records out of order{}): nothing was published",
        total[0], total[1], total[2],
        bad >= 0 ? fmt::format(", rank {}'s first key below the last of the rank before", bad)
                 : ""));
  }
  j.report.verified = true;
  return Status::Ok();
}

Status Publish(Job& j) {
  Status s = Status::Ok();
  bool renamed = false;
  if (j.config.output_dir.empty()) {
    extsort::RemoveTempFile(j.c.partial);  // a measurement: nothing is kept
  } else {
    const unsigned flags = j.config.overwrite ? 0 : RENAME_NOREPLACE;
    if (renameat2(AT_FDCWD, j.c.partial.c_str(), AT_FDCWD, j.final_output.c_str(), flags) != 0) {
      s = Status::IoError(fmt::format("cannot rename {} to {}: {}", j.c.partial, j.final_output,
                                      std::strerror(errno)));
    } else {
      extsort::ForgetTempFile(j.c.partial);
      renamed = true;
    }
  }
  Status all = Agree(j, s);
  // Another rank could not publish: no partition stays that looks like a finished output.
  if (!all.ok() && renamed) unlink(j.final_output.c_str());
  return all;
}

namespace {

template <typename T>
std::vector<T> Gathered(const Job& j, T mine, MPI_Datatype type) {
  std::vector<T> all(static_cast<std::size_t>(j.ranks));
  MPI_Gather(&mine, 1, type, all.data(), 1, type, 0, j.comm);
  return all;
}

}  // namespace

void Summarise(Job& j) {
  Report& r = j.report;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const auto rss = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  const std::vector<std::uint64_t> parts = Gathered(j, j.c.records, MPI_UINT64_T);
  const std::vector<std::uint64_t> temps = Gathered(j, r.temp_peak_bytes, MPI_UINT64_T);
  const std::vector<std::uint64_t> rsss = Gathered(j, rss, MPI_UINT64_T);
  const std::vector<std::uint64_t> runs = Gathered(j, j.c.runs, MPI_UINT64_T);
  const std::vector<double> io = Gathered(j, j.io_floor_ms, MPI_DOUBLE);
  const std::vector<double> ex = Gathered(j, j.exchange_floor_ms, MPI_DOUBLE);
  if (j.rank != 0) return;
  r.ranks = j.ranks;
  r.bytes = j.total_bytes;
  r.records = j.total_bytes / j.c.record;
  r.memory_bytes = j.config.memory_bytes;
  r.exchange_ms = j.exchange_ms;
  r.merge_ms = j.merge_ms;
  r.rounds = j.rounds;
  r.partition_records = parts;
  r.temp_peak_bytes = *std::max_element(temps.begin(), temps.end());
  r.rss_peak_bytes = *std::max_element(rsss.begin(), rsss.end());
  r.runs = *std::max_element(runs.begin(), runs.end());
  r.io_floor_ms = *std::max_element(io.begin(), io.end());
  r.exchange_floor_ms = *std::max_element(ex.begin(), ex.end());
  for (int k = 0; k < j.ranks; ++k) r.floor_ms = std::max(r.floor_ms, io[k] + ex[k]);
  const double mean = static_cast<double>(r.records) / j.ranks;
  r.max_partition_vs_mean =
      mean > 0 ? static_cast<double>(*std::max_element(parts.begin(), parts.end())) / mean : 0;
}

}  // namespace tierflow::dsort
