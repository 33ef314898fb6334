// SPDX-License-Identifier: Apache-2.0
// The distributed sort's stages on one rank, each ended by an agreement of all ranks (Agree), so
// that a rank's error stops every rank at the same point with its message: checks and claims,
// the input (generated or opened), the floors, the sort (sample, exchange, merge), the checks
// across ranks, and the collective publication of the outputs.
#include "dsort/dsort.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "dsort/job.h"
#include "sort/plan.h"
#include "sort/temp_files.h"
#include "tierflow/size.h"

namespace tierflow::dsort {

using extsort::Context;

void Job::Say(const std::string& line) const {
  if (rank == 0 && config.progress) config.progress(line);
}

Status Agree(const Job& j, const Status& local) {
  const int mine = local.ok() ? j.ranks : j.rank;
  int first = j.ranks;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, j.comm);
  if (first == j.ranks) return Status::Ok();
  std::string message = local.message();
  int length = static_cast<int>(message.size());
  MPI_Bcast(&length, 1, MPI_INT, first, j.comm);
  message.resize(static_cast<std::size_t>(length));
  MPI_Bcast(message.data(), length, MPI_CHAR, first, j.comm);
  if (first == j.rank) return local;
  return Status::Failed(fmt::format("rank {}: {}", first, message));
}

namespace {

// The checks that need no I/O beyond looking at the files, and the names of this rank's files.
Status Prepare(Job& j) {
  const Config& cfg = j.config;
  std::error_code ec;
  if (cfg.threads < 1 || cfg.threads > 64) return Status::InvalidArgument("threads: use 1..64");
  if (j.ranks > kMaxRanks) {
    return Status::InvalidArgument(
        fmt::format("{} ranks: the sort takes at most {}; run fewer ranks, each with more data",
                    j.ranks, kMaxRanks));
  }
  if (cfg.dir.empty() || !std::filesystem::is_directory(cfg.dir, ec)) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a directory: give every rank a directory for its temporary "
                    "files (--dir)",
                    cfg.dir));
  }
  if (!cfg.output_dir.empty() && !std::filesystem::is_directory(cfg.output_dir, ec)) {
    return Status::InvalidArgument(fmt::format(
        "'{}' is not a directory: create it, or leave --output-dir out", cfg.output_dir));
  }
  if (cfg.input.empty() == (cfg.generate_bytes == 0)) {
    return Status::InvalidArgument("give each rank an input or a size to generate, not both");
  }
  if (cfg.compare_single && cfg.generate_bytes == 0) {
    return Status::InvalidArgument(
        "the single-node comparison sorts generated input: use --generate with it");
  }
  const std::string base = fmt::format("{}/tierflow-dsort-r{}", cfg.dir, j.rank);
  Context& c = j.c;
  c.config.format = cfg.format;
  c.config.input = cfg.input.empty() ? extsort::TempName(base, "input") : cfg.input;
  c.config.runs = extsort::TempName(base, "runs");
  c.config.memory_bytes = cfg.memory_bytes;
  c.config.threads = cfg.threads;
  c.config.seed = cfg.seed;
  c.config.keys = cfg.keys;
  c.record = extsort::RecordBytes(cfg.format);
  j.final_output =
      fmt::format("{}/part-{}", cfg.output_dir.empty() ? cfg.dir : cfg.output_dir, j.rank);
  c.partial = extsort::TempName(j.final_output, "partial");
  if (std::filesystem::exists(j.final_output, ec) && !cfg.overwrite) {
    return Status::InvalidArgument(fmt::format(
        "{} exists and is not overwritten: choose another --output-dir, or give --overwrite to "
        "replace it",
        j.final_output));
  }
  return Status::Ok();
}

// This rank's input: its size, a whole number of records.
Status SizeInput(Job& j) {
  Context& c = j.c;
  std::uint64_t bytes = j.config.generate_bytes / c.record * c.record;
  if (j.config.generate_bytes == 0) {
    std::error_code ec;
    bytes = std::filesystem::file_size(c.config.input, ec);
    if (ec) {
      return Status::NotFound(
          fmt::format("cannot read the input {}: {}", c.config.input, ec.message()));
    }
    if (bytes % c.record != 0) {
      return Status::InvalidArgument(fmt::format(
          "{} has {} bytes, not a whole number of {}-byte {} records: is the format right?",
          c.config.input, bytes, c.record, extsort::FormatName(c.config.format)));
    }
  }
  j.input_records = bytes / c.record;
  c.records = j.input_records;
  c.config.first_record = j.input_records * static_cast<std::uint64_t>(j.rank);
  return Status::Ok();
}

// Whether `memory` holds the exchange's buffers and the merge of what a rank receives: at most
// the runs of twice its share of the input (the splitters keep partitions near the mean),
// plus a run per rank for the steps that end rounds.
bool Fits(const Job& j, std::uint64_t memory) {
  const extsort::Format f = j.config.format;
  const std::uint64_t arena = extsort::ArenaBytes(memory);
  const ExchangePlan plan = PlanExchange(f, arena, j.ranks);
  if (plan.run_bytes == 0) return false;
  const std::uint64_t share = 2 * j.total_bytes / static_cast<std::uint64_t>(j.ranks);
  const std::uint64_t runs = share / plan.run_bytes + static_cast<std::uint64_t>(j.ranks) + 1;
  return extsort::PlanMerge(f, extsort::MergePartBytes(arena, j.config.threads), runs).read_bytes >=
         std::max<std::uint64_t>(256 * 1024, extsort::BlockBytes(f));
}

Status CheckMemory(const Job& j) {
  if (Fits(j, j.config.memory_bytes)) return Status::Ok();
  const std::uint64_t need = extsort::LeastMemory([&](std::uint64_t m) { return Fits(j, m); });
  return Status::InvalidArgument(fmt::format(
      "--memory {} is too small for {} ranks sorting {} of {} records with {} threads each: "
      "give every rank at least {} (or fewer threads)",
      FormatSize(j.config.memory_bytes), j.ranks, FormatSize(j.total_bytes),
      extsort::FormatName(j.config.format), j.config.threads, FormatSize(need)));
}

// Removes what dead runs left in this rank's directories, then claims this run's files there.
Status ClaimFiles(Job& j, std::vector<extsort::Claim>& claims) {
  auto name = [](const std::string& p) { return std::filesystem::path(p).filename().string(); };
  const std::string out_dir = std::filesystem::path(j.final_output).parent_path().string();
  std::vector<std::string> in_dir{name(j.c.config.runs)};
  if (j.config.generate_bytes > 0) in_dir.push_back(name(j.c.config.input));
  std::vector<std::string> beside_output{name(j.c.partial)};
  if (out_dir == j.config.dir) {
    in_dir.insert(in_dir.end(), beside_output.begin(), beside_output.end());
    beside_output.clear();
  }
  extsort::RemoveStale(j.config.dir);
  Result<extsort::Claim> mine = extsort::Claim::Make(j.config.dir, in_dir);
  if (!mine.ok()) return mine.status();
  claims.push_back(std::move(*mine));
  if (beside_output.empty()) return Status::Ok();
  extsort::RemoveStale(out_dir);
  Result<extsort::Claim> out = extsort::Claim::Make(out_dir, beside_output);
  if (!out.ok()) return out.status();
  claims.push_back(std::move(*out));
  return Status::Ok();
}

Status OpenInput(Job& j) {
  Context& c = j.c;
  if (j.config.generate_bytes > 0) {
    if (Status s = extsort::Generate(c); !s.ok()) return s;
    extsort::TrackTempFile(c.config.input);  // a rank's generated input is not kept
  }
  if (j.input_records == 0) return Status::Ok();
  Result<Locator> input =
      c.rt->File(c.config.input, 0, j.input_records * c.record, FileMode::kRead);
  if (!input.ok()) return input.status();
  c.input = *input;
  return Status::Ok();
}

Status Floors(Job& j) {
  if (!j.config.measure_floor) return Status::Ok();
  j.Say("floor: the two-pass I/O floor of every rank's files, then the exchange alone");
  Status s = j.input_records == 0 ? Status::Ok() : extsort::MeasureFloor(j.c);
  j.io_floor_ms = j.c.report.floor_ms;
  if (Status a = Agree(j, s); !a.ok()) return a;
  return MeasureExchangeFloor(j);
}

// An empty partition is an empty file.
Status CreateEmpty(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  extsort::TrackTempFile(path);
  close(fd);
  return Status::Ok();
}

Status MergeReceived(Job& j) {
  Context& c = j.c;
  const auto t0 = std::chrono::steady_clock::now();
  j.Say("merge: every rank merges the runs it received");
  Status s = c.records == 0 ? CreateEmpty(c.partial) : extsort::Merge(c);
  extsort::RemoveTempFile(c.config.runs);
  const int fd = s.ok() ? open(c.partial.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  if (s.ok() && (fd < 0 || fdatasync(fd) != 0)) {
    s = Status::IoError(fmt::format("cannot sync {}", c.partial));
  }
  if (fd >= 0) close(fd);
  j.merge_ms = extsort::MsSince(t0);
  return Agree(j, s);
}

Status SortStages(Job& j) {
  MPI_Barrier(j.comm);
  const auto t0 = std::chrono::steady_clock::now();
  j.Say("sample: splitters from every rank's keys");
  if (Status s = SampleSplitters(j); !s.ok()) return s;
  const auto t1 = std::chrono::steady_clock::now();
  if (Status s = ExchangeRuns(j); !s.ok()) return s;
  j.exchange_ms = extsort::MsSince(t1);
  j.report.temp_peak_bytes = extsort::FileBytes(j.c.config.runs);
  if (Status s = MergeReceived(j); !s.ok()) return s;
  MPI_Barrier(j.comm);
  j.report.sort_ms = extsort::MsSince(t0);
  return Status::Ok();
}

}  // namespace

// verify.cc
Status VerifyAcrossRanks(Job& j);
// publish.cc
Status Publish(Job& j);
void Summarise(Job& j);

namespace {

Status Stages(Job& j) {
  if (Status s = Agree(j, OpenInput(j)); !s.ok()) return s;
  if (Status s = Floors(j); !s.ok()) return s;
  if (Status s = SortStages(j); !s.ok()) return s;
  if (Status s = VerifyAcrossRanks(j); !s.ok()) return s;
  return Publish(j);
}

// Rank 0 sorts every rank's generated records alone (the single-node sort, same memory and
// threads), while the others wait.
Status SortAlone(Job& j) {
  j.Say("single: rank 0 sorts the same records alone");
  extsort::Config single;
  single.format = j.config.format;
  single.keys = j.config.keys;
  single.seed = j.config.seed;
  single.generate_bytes = j.total_bytes;
  single.memory_bytes = j.config.memory_bytes;
  single.threads = j.config.threads;
  single.measure_floor = false;
  const std::string base = fmt::format("{}/tierflow-dsort-single", j.config.dir);
  single.input = extsort::TempName(base, "input");
  single.output = extsort::TempName(base, "output");
  single.runs = extsort::TempName(base, "runs");
  std::error_code ec;
  for (const std::string* p : {&single.input, &single.output}) {
    // Not this run's file: left alone (unlinked below only as the sort's own).
    if (std::filesystem::exists(*p, ec)) {
      return Status::InvalidArgument(fmt::format("{} exists: remove it or use another --dir", *p));
    }
  }
  Result<extsort::Report> r = extsort::Run(single);
  // The generated input and the output were kept by the sort: they were only for this.
  unlink(single.input.c_str());
  unlink(single.output.c_str());
  if (!r.ok()) return r.status();
  j.report.single_ms = r->sort_ms;
  return Status::Ok();
}

Status Begin(Job& j, std::vector<extsort::Claim>& claims) {
  Status s = Prepare(j);
  if (s.ok()) s = SizeInput(j);
  if (Status a = Agree(j, s); !a.ok()) return a;
  const std::uint64_t mine = j.input_records * j.c.record;
  MPI_Allreduce(&mine, &j.total_bytes, 1, MPI_UINT64_T, MPI_SUM, j.comm);
  s = CheckMemory(j);
  if (s.ok()) s = ClaimFiles(j, claims);
  if (s.ok()) s = extsort::MakeRuntime(j.c);
  return Agree(j, s);
}

}  // namespace

Result<Report> Run(const Config& config, MPI_Comm comm) {
  Job j;
  j.config = config;
  j.comm = comm;
  MPI_Comm_rank(comm, &j.rank);
  MPI_Comm_size(comm, &j.ranks);
  std::vector<extsort::Claim> claims;
  Status s = Begin(j, claims);
  if (s.ok()) s = Stages(j);
  extsort::RemoveTempFile(j.c.config.runs);
  extsort::RemoveTempFile(j.c.partial);
  if (config.generate_bytes > 0) extsort::RemoveTempFile(j.c.config.input);
  if (!s.ok()) return s;
  Summarise(j);
  if (config.compare_single) {
    if (Status c = Agree(j, j.rank == 0 ? SortAlone(j) : Status::Ok()); !c.ok()) return c;
  }
  return j.report;
}

}  // namespace tierflow::dsort
