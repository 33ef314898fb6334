// SPDX-License-Identifier: Apache-2.0
#include "tools/sort_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "sort/report.h"
#include "sort/sort.h"
#include "sort/temp_files.h"
#include "tierflow/size.h"

namespace tierflow::tools {

namespace {

// The working directory: the user's, or a new one under TMPDIR removed afterwards (and on
// SIGINT, SIGTERM, SIGHUP), claimed so that a later run removes it if this one is killed.
struct WorkDir {
  std::string path;
  bool remove = false;
  extsort::Claim claim;
  std::vector<std::string> stale_removed;  // work directories of killed runs
  ~WorkDir() {
    if (!remove) return;
    extsort::ForgetTempDirectory();
    claim = extsort::Claim();
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

Status MakeWorkDir(const SortCommandOptions& o, WorkDir& w) {
  if (!o.dir.empty()) {
    w.path = o.dir;
    return Status::Ok();
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  w.stale_removed = extsort::RemoveStaleWorkDirectories(parent);
  std::string pattern = parent + "/tierflow-sort-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return Status::IoError(
        fmt::format("cannot make a directory under {}: {} (set TMPDIR or give "
                    "--dir)",
                    parent, std::strerror(errno)));
  }
  w.path = pattern;
  w.remove = !o.keep;
  Result<extsort::Claim> claim = extsort::Claim::Make(w.path, {});
  if (!claim.ok()) return claim.status();
  w.claim = std::move(*claim);
  if (w.remove) extsort::TrackTempDirectory(w.path);
  return Status::Ok();
}

void Progress(const std::string& phase, std::uint64_t done, std::uint64_t total) {
  const double f = total == 0 ? 0 : std::min(1.0, static_cast<double>(done) / total);
  const int width = 30, filled = static_cast<int>(f * width);
  std::fprintf(stderr, "\r%-8s [%s%s] %5.1f%%  %s / %s   ", phase.c_str(),
               std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(), f * 100,
               FormatSize(done / (1 << 20) << 20).c_str(),
               FormatSize(total / (1 << 20) << 20).c_str());
}

Result<extsort::Config> MakeConfig(const SortCommandOptions& o, const std::string& dir) {
  extsort::Config c;
  Result<extsort::Format> f = extsort::ParseFormat(o.format);
  if (!f.ok()) return Status(f.status().code(), "--format: " + f.status().message());
  c.format = *f;
  if (o.generate == 0 && o.input.empty()) {
    return Status::InvalidArgument("nothing to sort: give --generate SIZE or --input FILE");
  }
  const std::string ext = o.format == "u64" ? ".u64" : ".gensort";
  c.generate_bytes = o.generate;
  c.input = !o.input.empty() ? o.input : dir + "/input" + ext;
  c.output = !o.output.empty() ? o.output : dir + "/sorted" + ext;
  c.runs =
      extsort::TempName(dir + "/" + std::filesystem::path(c.output).filename().string(), "runs");
  c.memory_bytes = o.memory;
  c.threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  c.seed = o.seed;
  c.verify = o.verify;
  c.measure_floor = !o.no_floor;
  c.overwrite = o.overwrite;
  if (o.progress && !o.json && isatty(STDERR_FILENO)) c.progress = Progress;
  return c;
}

Status CompareDuckDb(const extsort::Config& c, const std::string& dir, nlohmann::json& j) {
  Result<std::string> out =
      bench::RunPythonScript("sort_duckdb.py",
                             {c.input, c.output, std::string(extsort::FormatName(c.format)),
                              std::to_string(c.memory_bytes), std::to_string(c.threads), dir},
                             "duckdb and numpy");
  if (!out.ok()) return out.status();
  nlohmann::json d = nlohmann::json::parse(*out, nullptr, false);
  if (d.is_discarded()) return Status::IoError("sort_duckdb.py printed no JSON: " + *out);
  j["duckdb_sort_ms"] = d["sort_ms"];
  j["duckdb_load_ms"] = d["load_ms"];
  j["duckdb_agrees"] = d["agrees"];
  j["duckdb_temp_peak_bytes"] = d["temp_peak_bytes"];
  j["duckdb_version"] = d["version"];
  j["duckdb_vs_tierflow"] = d["sort_ms"].get<double>() / j["sort_ms"].get<double>();
  if (!d["agrees"].get<bool>()) {
    return Status::IoError("DuckDB's sorted order differs from tierflow's output");
  }
  return Status::Ok();
}

void Table(const nlohmann::json& j, std::ostream& out) {
  for (const auto& w : j.value("warnings", nlohmann::json::array())) {
    out << "warning: " << w.get<std::string>() << "\n";
  }
  out << fmt::format("sorted {} records ({}) in {:.0f} ms with {} of memory\n",
                     j["records"].get<std::uint64_t>(), FormatSize(j["bytes"].get<std::uint64_t>()),
                     j["sort_ms"].get<double>(),
                     FormatSize(j["memory_bytes"].get<std::uint64_t>()));
  for (const auto& p : j["sort_phases"])
    out << fmt::format("  {:<13} {:>9.0f} ms\n", p["name"].get<std::string>(),
                       p["ms"].get<double>());
  if (j["floor_ms"].get<double>() > 0) {
    out << fmt::format(
        "I/O floor (two passes, same files, measured first): {:.0f} ms; sort / "
        "floor = {:.2f}\n",
        j["floor_ms"].get<double>(), j["vs_floor"].get<double>());
    for (const auto& p : j["floor_phases"])
      out << fmt::format("  {:<13} {:>9.0f} ms\n", p["name"].get<std::string>(),
                         p["ms"].get<double>());
  }
  out << fmt::format(
      "runs: {} of {}; temporary space at its peak: {}; peak resident memory: {} "
      "({:.2f}x --memory)\n",
      j["runs"].get<std::uint64_t>(), FormatSize(j["run_bytes"].get<std::uint64_t>()),
      FormatSize(j["temp_peak_bytes"].get<std::uint64_t>()),
      FormatSize(j["rss_peak_bytes"].get<std::uint64_t>() >> 20 << 20),
      j["rss_peak_bytes"].get<double>() / j["memory_bytes"].get<double>());
  out << (j["verified"].get<bool>() ? "verified: key order, record count and checksum\n"
                                    : "verified: key order and record count (--verify adds the "
                                      "checksum of every record)\n");
  if (j["output_kept"].get<bool>()) {
    out << "output: " << j["output"].get<std::string>() << "\n";
  } else {
    out << fmt::format(
        "output: not kept: it was in the temporary directory {}, removed now; give --output "
        "FILE to keep the sorted file, or --keep to keep the directory\n",
        j["work_dir"].get<std::string>());
  }
  for (const auto& line : j["stale_removed"]) {
    out << "removed what a killed run left: " << line.get<std::string>() << "\n";
  }
  if (j.contains("duckdb_sort_ms")) {
    out << fmt::format(
        "DuckDB {} sorted the same records in {:.0f} ms (load {:.0f} ms apart): "
        "{:.2f}x tierflow's time; agrees: {}\n",
        j["duckdb_version"].get<std::string>(), j["duckdb_sort_ms"].get<double>(),
        j["duckdb_load_ms"].get<double>(), j["duckdb_vs_tierflow"].get<double>(),
        j["duckdb_agrees"].get<bool>() ? "yes" : "NO");
  }
}

// The sort of `c`'s input `reps` more times each way, alternating, into a directory of its
// own: the blueprint's (the default) against files and pipes declared phase by phase.
Status CompareDeclared(const extsort::Config& c, const std::string& dir, int reps,
                       nlohmann::json& j) {
  std::string own = dir + "/compare-XXXXXX";
  if (mkdtemp(own.data()) == nullptr) {
    return Status::IoError(
        fmt::format("cannot make a directory in {}: {}", dir, std::strerror(errno)));
  }
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{own};
  std::vector<double> planned, declared, ratios;
  for (int r = 0; r < reps; ++r) {
    double ms[2] = {0, 0};
    for (int declare_each = 0; declare_each < 2; ++declare_each) {
      extsort::Config e = c;
      e.generate_bytes = 0;
      e.output = own + "/sorted";
      e.runs = extsort::TempName(e.output, "runs");
      e.measure_floor = e.verify = false;
      e.progress = nullptr;
      e.declare_each = declare_each == 1;
      Result<extsort::Report> rep = extsort::Run(e);
      if (!rep.ok()) return rep.status();
      ms[declare_each] = rep->sort_ms;
      std::filesystem::remove(e.output);  // in a directory only this process made
    }
    planned.push_back(ms[0]);
    declared.push_back(ms[1]);
    ratios.push_back(ms[0] / ms[1]);
  }
  j["compare_declared"] = {{"pairs", reps},
                           {"blueprint_sort_ms", bench::Summarize(planned).median},
                           {"declared_sort_ms", bench::Summarize(declared).median},
                           {"blueprint_vs_declared", bench::Summarize(ratios).median},
                           {"ratio_min", bench::Summarize(ratios).min},
                           {"ratio_max", bench::Summarize(ratios).max}};
  return Status::Ok();
}

void CompareText(const nlohmann::json& j, std::ostream& out) {
  if (!j.contains("compare_declared")) return;
  const nlohmann::json& k = j["compare_declared"];
  out << fmt::format(
      "blueprint vs pipes declared one by one, {} pairs alternating: {:.0f} ms vs {:.0f} ms "
      "(medians), ratio {:.3f} (median of pairs; {:.3f} to {:.3f})\n",
      k["pairs"].get<int>(), k["blueprint_sort_ms"].get<double>(),
      k["declared_sort_ms"].get<double>(), k["blueprint_vs_declared"].get<double>(),
      k["ratio_min"].get<double>(), k["ratio_max"].get<double>());
}

}  // namespace

Status RunSortCommand(const SortCommandOptions& o, std::ostream& out) {
  WorkDir dir;
  if (Status s = MakeWorkDir(o, dir); !s.ok()) return s;
  Result<extsort::Config> c = MakeConfig(o, dir.path);
  if (!c.ok()) return c.status();
  Result<extsort::Report> r = extsort::Run(*c);
  if (c->progress) std::fprintf(stderr, "\r%80s\r", "");
  if (!r.ok()) return r.status();
  nlohmann::json j = extsort::ReportJson(*r);
  for (const std::string& line : dir.stale_removed) j["stale_removed"].push_back(line);
  // With the default directory and no --output or --keep, the output goes with the directory.
  const bool kept = !dir.remove || !o.output.empty();
  j["output"] = kept ? nlohmann::json(c->output) : nlohmann::json(nullptr);
  j["output_kept"] = kept;
  j["work_dir"] = dir.path;
  j["work_dir_kept"] = !dir.remove;
  if (o.compare_duckdb) {
    if (Status s = CompareDuckDb(*c, dir.path, j); !s.ok()) return s;
  }
  if (o.compare_declared > 0) {
    if (Status s = CompareDeclared(*c, dir.path, o.compare_declared, j); !s.ok()) return s;
  }
  if (!o.plot.empty()) {
    if (Status s = bench::Plot("plot_sort.py", j, o.plot); !s.ok()) return s;
  }
  if (o.json) {
    out << j.dump(2) << "\n";
  } else {
    if (o.explain) out << r->plan.ToText();
    Table(j, out);
    CompareText(j, out);
  }
  return Status::Ok();
}

}  // namespace tierflow::tools
