// SPDX-License-Identifier: Apache-2.0
#include "sort/sort.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "sort/context.h"
#include "sort/plan.h"
#include "sort/temp_files.h"
#include "tierflow/size.h"

namespace tierflow::extsort {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t FileBytes(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

PipeOptions FilePipeOptions() {
  PipeOptions o;
  o.queue_depth = 16;
  o.chunk_bytes = 2u << 20;
  return o;
}

Status CreateRuntime(Context& c) {
  PipeRuntimeOptions ro;
  ro.cpu_workers = 1;
  ro.use_dsa = false;
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(ro);
  if (!rt.ok()) return rt.status();
  c.rt = std::move(*rt);
  if (c.rt->calibration_note().starts_with("warning: ")) {
    c.report.warnings.push_back(c.rt->calibration_note().substr(9));
  }
  return Status::Ok();
}

Status MakeRuntime(Context& c) {
  if (Status s = CreateRuntime(c); !s.ok()) return s;
  Result<Locator> arena = c.rt->Memory(TierKind::kDram, -1, ArenaBytes(c.config.memory_bytes));
  if (!arena.ok()) return arena.status();
  c.arena = *arena;
  return Status::Ok();
}

namespace {

std::string DirOf(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path).parent_path();
  return p.string();
}

// The checks that need no I/O beyond looking at the files.
Status CheckConfig(const Config& c, std::uint64_t input_bytes) {
  std::error_code ec;
  if (c.threads < 1 || c.threads > 64) return Status::InvalidArgument("threads: use 1..64");
  if (c.input.empty() || c.output.empty() || c.runs.empty()) {
    return Status::InvalidArgument("the sort needs an input, an output and a runs file");
  }
  if (std::filesystem::exists(c.output, ec) && !c.overwrite) {
    return Status::InvalidArgument(
        fmt::format("{} exists and is not overwritten: choose another output, or set "
                    "extsort::Config::overwrite to replace it",
                    c.output));
  }
  const std::size_t rec = RecordBytes(c.format);
  if (input_bytes == 0 || input_bytes % rec != 0) {
    return Status::InvalidArgument(fmt::format(
        "{} has {} bytes, not a whole number of {}-byte {} records above 0: is the format "
        "right?",
        c.input, input_bytes, rec, FormatName(c.format)));
  }
  return Status::Ok();
}

Result<std::uint64_t> InputBytes(const Config& c) {
  std::error_code ec;
  if (c.generate_bytes > 0) {
    if (std::filesystem::exists(c.input, ec)) {
      return Status::InvalidArgument(fmt::format(
          "{} exists: generating would overwrite it; sort it as it is, or choose another path",
          c.input));
    }
    return c.generate_bytes / RecordBytes(c.format) * RecordBytes(c.format);
  }
  const std::uintmax_t n = std::filesystem::file_size(c.input, ec);
  if (ec)
    return Status::NotFound(fmt::format("cannot read the input {}: {}", c.input, ec.message()));
  return static_cast<std::uint64_t>(n);
}

// Reports progress about ten times a second while `running`.
std::thread ProgressThread(Context& c, std::atomic<bool>& running) {
  if (!c.config.progress) return {};
  return std::thread([&c, &running] {
    while (running.load()) {
      c.config.progress(c.phase.load(), c.done.load(), c.total.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

Status Sort(Context& c) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = FormRuns(c); !s.ok()) return s;
  c.report.sort_phases.push_back({"runs", MsSince(t0)});
  const auto t1 = std::chrono::steady_clock::now();
  if (Status s = Merge(c); !s.ok()) return s;
  RemoveTempFile(c.config.runs);
  c.report.sort_phases.push_back({"merge", MsSince(t1)});
  c.report.sort_ms = MsSince(t0);
  return Status::Ok();
}

// The output becomes visible under its name only now, complete and checked.
Status Publish(Context& c) {
  const int fd = open(c.partial.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fdatasync(fd) != 0) {
    if (fd >= 0) close(fd);
    return Status::IoError(fmt::format("cannot sync {}", c.partial));
  }
  close(fd);
  const unsigned flags = c.config.overwrite ? 0 : RENAME_NOREPLACE;
  if (renameat2(AT_FDCWD, c.partial.c_str(), AT_FDCWD, c.config.output.c_str(), flags) != 0) {
    return Status::IoError(fmt::format("cannot rename {} to {}: {}", c.partial, c.config.output,
                                       std::strerror(errno)));
  }
  ForgetTempFile(c.partial);
  return Status::Ok();
}

std::string BaseName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// Removes what dead runs left beside the output and the runs, then claims this run's own
// temporary files there before any is made.
Status ClaimTempFiles(Context& c, std::vector<Claim>& claims) {
  const std::string out_dir = DirOf(c.config.output), runs_dir = DirOf(c.config.runs);
  c.report.stale_removed = RemoveStale(out_dir);
  std::vector<std::string> beside_output{BaseName(c.partial)};
  if (runs_dir == out_dir) {
    beside_output.push_back(BaseName(c.config.runs));
  } else {
    for (std::string& line : RemoveStale(runs_dir)) c.report.stale_removed.push_back(line);
    Result<Claim> runs = Claim::Make(runs_dir, {BaseName(c.config.runs)});
    if (!runs.ok()) return runs.status();
    claims.push_back(std::move(*runs));
  }
  Result<Claim> out = Claim::Make(out_dir, beside_output);
  if (!out.ok()) return out.status();
  claims.push_back(std::move(*out));
  return Status::Ok();
}

Status Stages(Context& c) {
  if (c.config.generate_bytes > 0) {
    if (Status s = Generate(c); !s.ok()) return s;
  }
  Result<Locator> input =
      FileFor(c, "input", c.config.input, c.records * c.record, FileMode::kRead);
  if (!input.ok()) return input.status();
  c.input = *input;
  if (c.config.measure_floor) {
    if (Status s = MeasureFloor(c); !s.ok()) return s;
  }
  if (Status s = Sort(c); !s.ok()) return s;
  if (c.config.verify) {
    if (Status s = Verify(c); !s.ok()) return s;
  }
  return Publish(c);
}

}  // namespace

Result<Report> Run(const Config& config) {
  Context c;
  c.config = config;
  c.record = RecordBytes(config.format);
  Result<std::uint64_t> bytes = InputBytes(config);
  if (!bytes.ok()) return bytes.status();
  if (Status s = CheckConfig(config, *bytes); !s.ok()) return s;
  c.records = *bytes / c.record;
  c.report.records = c.records;
  c.report.bytes = *bytes;
  c.report.memory_bytes = config.memory_bytes;
  if (Status s = CheckMemory(config, *bytes); !s.ok()) return s;
  c.partial = TempName(config.output, "partial");
  std::vector<Claim> claims;
  if (Status s = ClaimTempFiles(c, claims); !s.ok()) return s;
  if (Status s = config.declare_each ? MakeRuntime(c) : PlanSort(c); !s.ok()) return s;
  std::atomic<bool> running{true};
  std::thread progress = ProgressThread(c, running);
  Status s = Stages(c);
  running.store(false);
  if (progress.joinable()) progress.join();
  RemoveTempFile(config.runs);
  RemoveTempFile(c.partial);
  if (!s.ok()) return s;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.report.rss_peak_bytes = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  return c.report;
}

}  // namespace tierflow::extsort
