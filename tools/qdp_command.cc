// SPDX-License-Identifier: Apache-2.0
#include "tools/qdp_command.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "qdp/columns.h"

namespace tierflow::tools {
namespace {

struct DuckDbResult {
  std::uint64_t sum = 0;
  double ms_median = 0;
  double load_ms = 0;
  std::vector<double> times_ms;
  std::string version;
};

Result<DuckDbResult> RunDuckDb(const qdp::Report& rep, int iterations, int warmup) {
  Result<std::string> out = bench::RunPythonScript(
      "qdp_duckdb.py",
      {rep.data_dir + "/a.u64", rep.data_dir + "/b.u64", std::to_string(rep.rows),
       std::to_string(rep.x), std::to_string(rep.compute_threads), std::to_string(iterations),
       std::to_string(warmup)},
      "duckdb and numpy");
  if (!out.ok()) return Status(out.status().code(), "--compare-duckdb: " + out.status().message());
  DuckDbResult r;
  try {
    const nlohmann::json doc = nlohmann::json::parse(*out);
    r.sum = doc.at("sum").get<std::uint64_t>();
    r.ms_median = doc.at("ms_median").get<double>();
    r.load_ms = doc.at("load_ms").get<double>();
    r.times_ms = doc.at("times_ms").get<std::vector<double>>();
    r.version = doc.at("duckdb_version").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kInternal,
                  fmt::format("--compare-duckdb: the referee printed what is not its JSON ({}): {}",
                              e.what(), out->substr(0, 200)));
  }
  return r;
}

const qdp::ConfigResult* Find(const qdp::Report& rep, std::string_view name) {
  for (const qdp::ConfigResult& c : rep.configs) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// A directory of our own for the column files when DuckDB reads them after the run; removed
// at the end unless kept as evidence.
struct OwnDataDir {
  std::string dir;
  OwnDataDir() = default;
  OwnDataDir(const OwnDataDir&) = delete;
  OwnDataDir& operator=(const OwnDataDir&) = delete;
  ~OwnDataDir() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  Status Create() {
    Result<std::string> made = qdp::MakeDataDirectory();
    if (!made.ok()) return made.status();
    dir = *made;
    return Status::Ok();
  }
};

// The referee's run, whose sum must equal ours.
Result<DuckDbResult> Referee(const qdp::Config& config, const QdpCommandOptions& options,
                             const qdp::Report& rep, OwnDataDir& own_dir) {
  const int iterations =
      options.duckdb_iterations > 0 ? options.duckdb_iterations : config.iterations;
  Result<DuckDbResult> duck = RunDuckDb(rep, iterations, config.warmup);
  if (!duck.ok()) return duck.status();
  if (duck->sum != rep.expected_sum) {
    own_dir.dir.clear();  // the evidence stays
    return Status(StatusCode::kInternal,
                  fmt::format("DuckDB's SUM(b) is {} but tierflow's is {} for the same columns "
                              "(kept in {}): one of them is wrong; please report this with the "
                              "files",
                              duck->sum, rep.expected_sum, rep.data_dir));
  }
  return duck;
}

nlohmann::json ConfigJson(const qdp::ConfigResult& c) {
  return {{"name", c.name},
          {"time_ms_median", c.time_ms_median},
          {"times_ms", c.times_ms},
          {"floor_ms", c.floor_ms},
          {"vs_floor", c.vs_floor},
          {"speedup", c.speedup > 0 ? nlohmann::json(c.speedup) : nlohmann::json()},
          {"hit_rate", c.hit_rate},
          {"hits", c.hits},
          {"late_hits", c.late_hits},
          {"misses", c.misses},
          {"failed_fills", c.failed_fills},
          {"sum", c.sum},
          {"scan_a_ms", c.pipelines.scan_a_ms},
          {"scan_b_ms", c.pipelines.scan_b_ms},
          {"aggregate_ms", c.pipelines.aggregate_ms},
          {"bytes_from_slow_tier", c.bytes_from_slow_tier},
          {"bytes_to_fast_tier", c.bytes_to_fast_tier},
          {"cache_peak_bytes", c.cache_peak_bytes},
          {"resident_pages_at_start", c.resident_pages_at_start}};
}

void AddDuckDbJson(const qdp::Report& rep, const DuckDbResult& duck, nlohmann::json& doc) {
  doc["duckdb_ms_median"] = duck.ms_median;
  doc["duckdb_times_ms"] = duck.times_ms;
  doc["duckdb_sum"] = duck.sum;
  doc["duckdb_load_ms"] = duck.load_ms;
  doc["duckdb_threads"] = rep.compute_threads;
  doc["duckdb_version"] = duck.version;
  if (const qdp::ConfigResult* all_dram = Find(rep, "all_dram"); all_dram != nullptr)
    doc["all_dram_vs_duckdb"] = all_dram->time_ms_median / duck.ms_median;
}

nlohmann::json ReportJson(const qdp::Config& config, const qdp::Report& rep,
                          const DuckDbResult* duck) {
  nlohmann::json doc;
  doc["configs"] = nlohmann::json::array();
  for (const qdp::ConfigResult& c : rep.configs) doc["configs"].push_back(ConfigJson(c));
  doc["expected_sum"] = rep.expected_sum;
  doc["x"] = rep.x;
  doc["rows"] = rep.rows;
  doc["chunk_rows"] = rep.chunk_rows;
  doc["threads"] = rep.threads;
  doc["compute_threads"] = rep.compute_threads;
  doc["storage_gbps"] = rep.storage_gbps;
  doc["storage_floor_ms"] = rep.storage_floor_ms;
  doc["floor_samples_ms"] = rep.floor_samples_ms;
  doc["fast_tier_peak_bytes"] = rep.fast_tier_peak_bytes;
  doc["cache_capacity_bytes"] = rep.cache_capacity_bytes;
  doc["slow_tier"] = rep.slow_tier;
  doc["fast_tier"] = rep.fast_tier;
  doc["distributed_a_tier"] = rep.distributed_a_tier;
  doc["fill_engine"] = rep.fill_engine;
  doc["fills_on_model"] = rep.fills_on_model;
  doc["huge_pages"] = config.huge_pages;
  const qdp::ConfigResult* distributed = Find(rep, "prefetch_distributed");
  if (distributed != nullptr && rep.storage_floor_ms > 0) {
    doc["prefetch_distributed_vs_floor"] = distributed->vs_floor;
    doc["prefetch_distributed_vs_best_floor"] = distributed->time_ms_median / rep.storage_floor_ms;
  }
  if (duck != nullptr) AddDuckDbJson(rep, *duck, doc);
  return doc;
}

void PrintTable(const qdp::Config& config, const qdp::Report& rep, std::ostream& out) {
  out << fmt::format(
      "tierflow qdp  SELECT SUM(b) FROM t WHERE a < {}   {} rows, chunks of {} rows, {} threads, "
      "median of {} after {} warm-up\n"
      "slow tier: {}{}; fast tier: {}; cache {} MiB; a of prefetch_distributed on {}; fills from "
      "{}{}\n\n"
      "  {:<22} {:>10} {:>8} {:>8} {:>9} {:>16} {:>9} {:>9} {:>9} {:>15} {:>13}\n",
      rep.x, rep.rows, rep.chunk_rows, rep.threads, config.iterations, config.warmup, rep.slow_tier,
      rep.slow_tier == "storage" ? " (column files, cold every iteration)" : "", rep.fast_tier,
      rep.cache_capacity_bytes >> 20, rep.distributed_a_tier,
      rep.slow_tier == "storage" ? "storage: io_uring" : "memory: " + rep.fill_engine,
      rep.fills_on_model ? " (DSA DEVICE MODEL: software copies, not hardware)" : "",
      "configuration", "time ms", "speedup", "x floor", "hit rate", "hit/late/miss", "SCAN_a",
      "SCAN_b", "AGGREG.", "from slow tier", "to fast tier");
  for (const qdp::ConfigResult& c : rep.configs) {
    out << fmt::format(
        "  {:<22} {:>10.1f} {:>8} {:>7.2f}x {:>8.0f}% {:>16} {:>9.1f} {:>9.1f} {:>9.1f} {:>11} MiB "
        "{:>9} MiB\n",
        c.name, c.time_ms_median,
        c.speedup > 0 ? fmt::format("{:.2f}x", c.speedup) : std::string("-"), c.vs_floor,
        c.hit_rate * 100, fmt::format("{}/{}/{}", c.hits, c.late_hits, c.misses),
        c.pipelines.scan_a_ms, c.pipelines.scan_b_ms, c.pipelines.aggregate_ms,
        c.bytes_from_slow_tier >> 20, c.bytes_to_fast_tier >> 20);
  }
}

void PrintSummary(const qdp::Report& rep, const DuckDbResult* duck, std::ostream& out) {
  out << fmt::format(
      "\nx floor: the median time / the median of the floors measured right before each "
      "iteration\n"
      "sum {} (every configuration; checked)   slow tier {:.2f} GB/s for b ({}, best of {}): "
      "floor {:.1f} ms   fast-tier peak {} MiB of {} MiB\n",
      rep.expected_sum, rep.storage_gbps,
      rep.slow_tier == "storage" ? "large direct reads" : "copies by the fill engine",
      rep.floor_samples_ms.size(), rep.storage_floor_ms, rep.fast_tier_peak_bytes >> 20,
      rep.cache_capacity_bytes >> 20);
  const bool storage = rep.slow_tier == "storage";
  if (!storage && rep.slow_tier == rep.fast_tier) {
    out << "b and the cache are on the same node: prefetching can only add copies here (the "
           "memory-tier path runs; its speed means nothing)\n";
  }
  if (const qdp::ConfigResult* distributed = Find(rep, "prefetch_distributed")) {
    out << fmt::format(
        "prefetch_distributed: {:.2f}x the floor{} ({:.2f}x the best floor of the run)",
        distributed->vs_floor, storage ? " (target <= 1.25)" : "",
        distributed->time_ms_median / rep.storage_floor_ms);
    if (Find(rep, "baseline") != nullptr) {
      out << fmt::format(", {:.2f}x baseline's speed{}", distributed->speedup,
                         storage ? " (target > 1)" : "");
    }
    out << "\n";
  }
  if (duck != nullptr) {
    out << fmt::format(
        "DuckDB {} ({} threads, data in its memory): {:.1f} ms median, sum {} (equal)",
        duck->version, rep.compute_threads, duck->ms_median, duck->sum);
    if (const qdp::ConfigResult* all_dram = Find(rep, "all_dram")) {
      out << fmt::format("; all_dram takes {:.2f}x DuckDB's time (target <= 0.6)",
                         all_dram->time_ms_median / duck->ms_median);
    }
    out << "\n";
  }
}

}  // namespace

Status RunQdpCommand(qdp::Config config, const QdpCommandOptions& options, std::ostream& out) {
  OwnDataDir own_dir;  // DuckDB reads the column files after the run
  if (options.compare_duckdb && config.data_dir.empty()) {
    if (Status s = own_dir.Create(); !s.ok()) return s;
    config.data_dir = own_dir.dir;
  }
  // The status line goes before the results are printed.
  auto ticker = std::make_unique<bench::Ticker>(
      "tierflow qdp", options.progress && !options.json && bench::StderrIsTerminal());
  config.progress = [t = ticker.get()](const std::string& what) { t->Set(what); };
  Result<qdp::Report> rep = qdp::Run(config);
  config.progress = nullptr;
  if (!rep.ok()) return rep.status();
  std::optional<DuckDbResult> duck;
  if (options.compare_duckdb) {
    ticker->Set("the same query in DuckDB");
    Result<DuckDbResult> d = Referee(config, options, *rep, own_dir);
    if (!d.ok()) return d.status();
    duck = std::move(*d);
  }
  ticker.reset();
  const DuckDbResult* referee = duck ? &*duck : nullptr;
  const nlohmann::json doc = ReportJson(config, *rep, referee);
  if (!options.plot_path.empty()) {
    if (Status s = bench::Plot("plot_qdp.py", doc, options.plot_path); !s.ok()) return s;
  }
  if (options.json) {
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  PrintTable(config, *rep, out);
  PrintSummary(*rep, referee, out);
  if (!options.plot_path.empty()) out << fmt::format("plot: {}\n", options.plot_path);
  return Status::Ok();
}

}  // namespace tierflow::tools
