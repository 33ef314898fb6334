// SPDX-License-Identifier: Apache-2.0
// tierflow-dsort-MPI: the distributed sort (dsort.h) under mpirun. Every rank parses the same
// options; rank 0 prints progress, the result table or (--json) one JSON object. Exit status:
// 0 sorted (and verified with --verify), 1 an error (every rank ends with it), 2 bad usage.
#include <mpi.h>

#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "dsort/dsort.h"
#include "tierflow/size.h"

namespace {

using tierflow::dsort::Config;
using tierflow::dsort::Report;

struct Options {
  Config config;
  std::string generate, memory, format = "u64", keys = "uniform", exchange = "alltoallv";
  bool json = false, quiet = false;
};

// A size option's check: a size ParseSize takes, within [low, high].
CLI::Validator SizeIn(std::uint64_t low, std::uint64_t high) {
  return CLI::Validator(
      [low, high](std::string& v) -> std::string {
        tierflow::Result<std::uint64_t> n = tierflow::ParseSize(v);
        if (!n.ok()) return n.status().message();
        if (*n < low || *n > high) {
          return fmt::format("{} is outside {}..{}", v, tierflow::FormatSize(low),
                             tierflow::FormatSize(high));
        }
        return "";
      },
      "SIZE");
}

void AddOptions(CLI::App& app, Options& o) {
  app.add_option("--generate", o.generate,
                 "Generate this many bytes of seeded input on every rank (default: none; then "
                 "--input)")
      ->check(SizeIn(4096, std::uint64_t{1} << 44));
  app.add_option("--input", o.config.input,
                 "This rank's input file, never modified; {rank} in it stands for the rank");
  app.add_option("--dir", o.config.dir,
                 "Every rank's directory for its temporary files (ranks may share one; default "
                 "TMPDIR or /tmp)");
  app.add_option("--output-dir", o.config.output_dir,
                 "Keep each rank's partition there as part-RANK (default: not kept)");
  app.add_option("--format", o.format, "u64 (16-byte records) or gensort (100-byte)")
      ->check(CLI::IsMember({"u64", "gensort"}));
  app.add_option("--keys", o.keys, "Keys of --generate: uniform, equal, zipf or sorted")
      ->check(CLI::IsMember({"uniform", "equal", "zipf", "sorted"}));
  app.add_option("--memory", o.memory,
                 "Memory each rank may hold, page cache included (default 256MiB)")
      ->check(SizeIn(17u << 20, std::uint64_t{1} << 44));
  app.add_option("--threads", o.config.threads, "Threads per rank (default 2)")
      ->check(CLI::Range(1, 64));
  app.add_option("--seed", o.config.seed, "Seed of --generate");
  app.add_flag("--verify", o.config.verify,
               "Check order, boundaries and checksums of all outputs against all inputs");
  app.add_flag(
      "--no-floor", [&o](std::int64_t) { o.config.measure_floor = false; },
      "Skip measuring the I/O and exchange floors");
  app.add_flag("--overwrite", o.config.overwrite, "Replace existing part-RANK files");
  app.add_option("--exchange", o.exchange,
                 "How runs travel: alltoallv (MPI_Ialltoallv) or put (MPI_Put into windows)")
      ->check(CLI::IsMember({"alltoallv", "put"}));
  app.add_flag("--compare-single", o.config.compare_single,
               "Then sort the same records on rank 0 alone (tierflow sort), for comparison");
  app.add_flag("--json", o.json, "One JSON object on rank 0's standard output");
  app.add_flag("--quiet", o.quiet, "No progress lines");
}

// The options turned into the configuration of this rank; an error message, or "".
std::string Finish(Options& o, int rank) {
  if (!o.generate.empty()) o.config.generate_bytes = *tierflow::ParseSize(o.generate);
  if (!o.memory.empty()) o.config.memory_bytes = *tierflow::ParseSize(o.memory);
  if ((o.config.generate_bytes != 0) == !o.config.input.empty()) {
    return "give exactly one of --generate SIZE and --input FILE";
  }
  if (o.config.compare_single && o.config.generate_bytes == 0) {
    return "--compare-single sorts generated input on rank 0: use it with --generate";
  }
  if (o.config.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.config.dir = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
  }
  for (std::size_t at; (at = o.config.input.find("{rank}")) != std::string::npos;) {
    o.config.input.replace(at, 6, std::to_string(rank));
  }
  o.config.format = *tierflow::extsort::ParseFormat(o.format);
  o.config.keys = *tierflow::extsort::ParseKeys(o.keys);
  o.config.exchange =
      o.exchange == "put" ? tierflow::dsort::Exchange::kPut : tierflow::dsort::Exchange::kAlltoallv;
  return "";
}

const char* MpiName() {
#if defined(OPEN_MPI)
  return "openmpi";
#elif defined(MPICH_VERSION)
  return "mpich";
#else
  return "mpi";
#endif
}

// Hosts as the MPI sees them, and the most ranks on one.
std::pair<int, int> Hosts() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int here = 0, node_rank = 0;
  MPI_Comm_size(node, &here);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  int first = node_rank == 0 ? 1 : 0, hosts = 0, most = 0;
  MPI_Allreduce(&first, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&here, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return {hosts, most};
}

void PrintJson(const Options& o, const Report& r, std::pair<int, int> hosts) {
  nlohmann::json j;
  j["ranks"] = r.ranks;
  j["hosts"] = hosts.first;
  j["ranks_per_host"] = hosts.second;
  j["mpi"] = MpiName();
  j["format"] = o.format;
  j["keys"] = o.config.generate_bytes > 0 ? o.keys : "input";
  j["exchange"] = o.exchange;
  j["records"] = r.records;
  j["bytes"] = r.bytes;
  j["sort_ms"] = r.sort_ms;
  j["exchange_ms"] = r.exchange_ms;
  j["merge_ms"] = r.merge_ms;
  j["io_floor_ms"] = r.io_floor_ms;
  j["exchange_floor_ms"] = r.exchange_floor_ms;
  j["floor_ms"] = r.floor_ms;
  j["vs_floor"] = r.floor_ms > 0 ? nlohmann::json(r.sort_ms / r.floor_ms) : nlohmann::json();
  j["verified"] = r.verified;
  j["max_partition_vs_mean"] = r.max_partition_vs_mean;
  j["partition_records"] = r.partition_records;
  j["temp_peak_bytes"] = r.temp_peak_bytes;
  j["rss_peak_bytes"] = r.rss_peak_bytes;
  j["memory_bytes"] = r.memory_bytes;
  j["rounds"] = r.rounds;
  j["run_bytes"] = r.run_bytes;
  if (o.config.compare_single) {
    j["single_ms"] = r.single_ms;
    j["vs_single"] = r.single_ms > 0 ? r.sort_ms / r.single_ms : 0.0;
  }
  j["runs"] = r.runs;
  std::cout << j.dump() << "\n";
}

void PrintTable(const Options& o, const Report& r, std::pair<int, int> hosts) {
  using tierflow::FormatSize;
  std::cout << fmt::format(
      "sorted {} ({} {} records) on {} ranks ({} host(s), up to {} per host), {} per rank\n",
      FormatSize(r.bytes), r.records, o.format, r.ranks, hosts.first, hosts.second,
      FormatSize(r.memory_bytes));
  std::cout << fmt::format("{:<34}{:>12}\n", "", "ms");
  std::cout << fmt::format("{:<34}{:>12.1f}\n", "sort (sample, exchange, merge)", r.sort_ms);
  std::cout << fmt::format("{:<34}{:>12.1f}\n", "  exchange pass", r.exchange_ms);
  std::cout << fmt::format("{:<34}{:>12.1f}\n", "  merge pass", r.merge_ms);
  if (r.floor_ms > 0) {
    std::cout << fmt::format("{:<34}{:>12.1f}\n", "floor (I/O + exchange, worst rank)", r.floor_ms);
    std::cout << fmt::format("{:<34}{:>12.1f}\n", "  I/O floor (slowest rank)", r.io_floor_ms);
    std::cout << fmt::format("{:<34}{:>12.1f}\n", "  exchange floor (slowest rank)",
                             r.exchange_floor_ms);
    std::cout << fmt::format("sort / floor: {:.2f}x\n", r.sort_ms / r.floor_ms);
  }
  if (o.config.compare_single) {
    std::cout << fmt::format("{:<34}{:>12.1f}\n", "the same on rank 0 alone", r.single_ms);
    std::cout << fmt::format("sort / alone: {:.2f}x\n", r.sort_ms / r.single_ms);
  }
  std::cout << fmt::format(
      "largest partition / mean: {:.3f}; temporary space at most {} per rank; resident at most "
      "{}\n",
      r.max_partition_vs_mean, FormatSize(r.temp_peak_bytes), FormatSize(r.rss_peak_bytes));
  std::cout << (o.config.verify ? (r.verified ? "verified: order, boundaries and checksums\n"
                                              : "NOT verified\n")
                                : "not verified (--verify checks every record)\n");
}

int Main(int argc, char** argv, int rank) {
  CLI::App app{"tierflow-dsort: the distributed external sort over MPI"};
  Options o;
  AddOptions(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank != 0) return e.get_exit_code() == 0 ? 0 : 2;
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (std::string error = Finish(o, rank); !error.empty()) {
    if (rank == 0) std::fprintf(stderr, "tierflow-dsort: %s\n", error.c_str());
    return 2;
  }
  if (!o.quiet && rank == 0) {
    o.config.progress = [](const std::string& line) {
      std::fprintf(stderr, "tierflow-dsort: %s\n", line.c_str());
    };
  }
  const std::pair<int, int> hosts = Hosts();
  tierflow::Result<Report> r = tierflow::dsort::Run(o.config, MPI_COMM_WORLD);
  if (!r.ok()) {
    if (rank == 0) std::fprintf(stderr, "tierflow-dsort: %s\n", r.status().message().c_str());
    return 1;
  }
  if (rank == 0) o.json ? PrintJson(o, *r, hosts) : PrintTable(o, *r, hosts);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int code = Main(argc, argv, rank);
  MPI_Finalize();
  return code;
}
