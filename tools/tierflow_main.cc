// SPDX-License-Identifier: Apache-2.0
// The tierflow command-line tool: `topology`, `bench copy|submit|cache|coherence`, `pipes
// explain|copy|calibrate`, `qdp`.
//
// Every value is checked while the command line is parsed (tools/cli_checks.h), before any
// command starts: a bad value ends the program at once with exit status 2 and a message that
// names the option, the value and what to give instead; a command that fails exits 1.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <algorithm>

#include <CLI/CLI.hpp>

#include "bench/bench_util.h"
#include "bench/cache_bench.h"
#include "bench/coherence_bench.h"
#include "bench/copy_bench.h"
#include "bench/dsa_copy_bench.h"
#include "bench/pipes_bench.h"
#include "bench/python.h"
#include "bench/rma_bench.h"
#include "bench/submit_bench.h"
#include "qdp/setup.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/size.h"
#include "tierflow/version.h"
#include "tools/alloc_counter.h"
#include "tools/cli_checks.h"
#include "tools/pipes_command.h"
#include "tools/qdp_command.h"
#include "tools/sort_command.h"
#include "tools/topology_command.h"

namespace {

using tierflow::Result;
using tierflow::Status;
namespace tools = tierflow::tools;
namespace bench = tierflow::bench;
using tools::SplitList;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kPiB = std::uint64_t{1} << 50;

std::vector<int> IntList(const std::string& text) {  // checked by IntegerListIn already
  std::vector<int> out;
  for (const std::string& item : SplitList(text)) out.push_back(std::stoi(item));
  return out;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "tierflow: error: %s\n", tools::Printable(s.ToString()).c_str());
  return 1;
}

// Exit status 2: the command line itself is wrong (an unknown option or word, a bad value, a
// missing command); a command that fails returns 1 (Fail), and one that succeeds 0.
constexpr int kUsageExit = 2;
int UsageError(const std::string& message) {
  std::fprintf(stderr, "tierflow: error: %s\n", tools::Printable(message).c_str());
  return kUsageExit;
}

// TIERFLOW_ISA chooses the CPU engine's kernels; a value that names no ISA is refused for
// every command rather than ignored (empty counts as unset).
Status CheckEnvironment() {
  Result<tierflow::CpuIsa> isa = tierflow::ChooseCpuIsa();  // names an ISA this CPU has
  return isa.ok() ? Status::Ok() : isa.status();
}

// --- topology ---------------------------------------------------------------------------------

struct TopologyCli {
  CLI::App* cmd = nullptr;
  tools::TopologyCommandOptions o;
};

void AddTopology(CLI::App& app, TopologyCli& c) {
  c.cmd = app.add_subcommand("topology", "List the NUMA nodes and their memory tiers");
  c.cmd->add_flag("--json", c.o.json, "Machine-readable output");
  c.cmd->add_option("--xml", c.o.xml, "Read an hwloc XML topology instead of this system")
      ->check(tools::ReadableFile("hwloc XML topology"));
  c.cmd->add_option("--tier-config", c.o.tier_config, "File of 'NODES KIND' overrides")
      ->check(tools::ReadableFile("tier config file"));
  c.cmd->add_option("--tiers", c.o.tiers, "Inline overrides, e.g. 8-15=hbm,16=cxl")
      ->check(tools::NotEmpty("overrides such as 8-15=hbm,16=cxl"));
  c.cmd
      ->add_option("--sysfs-root", c.o.sysfs_root,
                   "Read DSA devices from this sysfs tree (DIR/bus/dsa or DIR/sys/bus/dsa) "
                   "instead of /sys")
      ->check(tools::ExistingDirectory());
  c.cmd
      ->add_option("--dev-root", c.o.dev_root,
                   "Where the WQ character devices (dsa/wqN.M) are; default: the 'dev' beside "
                   "the sysfs tree, or /dev")
      ->check(tools::ExistingDirectory());
}

// --- bench copy -----------------------------------------------------------------------------

struct CopyCli {
  CLI::App* cmd = nullptr;
  bench::CopyBenchConfig cfg;
  bench::DsaCopyBenchConfig dsa;
  std::string sizes = "4KiB,64KiB,256KiB,512KiB,1MiB,16MiB,64MiB", modes = "single", batches = "16",
              threads = "0", submitters = "1", policies = "single", src_nodes = "0",
              dst_nodes = "0", experiments = "submission,threads,placement,cpu";
  bool json = false, csv = false, no_flush = false, no_progress = false;
};

void AddCopyEngineOptions(CopyCli& c) {
  CLI::App* cmd = c.cmd;
  cmd->add_option("--engine", c.cfg.engine,
                  "Engine: cpu, dsa (this machine's DSAs) or dsa-model (the DSA device model)")
      ->capture_default_str()
      ->check(tools::OneOf("engine", {"cpu", "dsa", "dsa-model"}));
  cmd->add_option("--experiments", c.experiments,
                  "dsa/dsa-model: thesis experiments submission (Fig. 3.4), threads (3.5), "
                  "placement (3.6/3.7), cpu (3.8)")
      ->capture_default_str()
      ->check(tools::ListOf("experiment", {"submission", "threads", "placement", "cpu"}));
  cmd->add_option("--sysfs-root", c.dsa.sysfs_root,
                  "dsa: read the DSA inventory here instead of /sys; dsa-model: lay the models "
                  "out like the devices found here (e.g. a fixture tree)")
      ->check(tools::ExistingDirectory());
  cmd->add_option("--dev-root", c.dsa.dev_root, "dsa: where the WQ character devices are")
      ->check(tools::ExistingDirectory());
  cmd->add_option(
         "--xml", c.dsa.xml,
         "dsa-model: place by this hwloc XML topology (e.g. a Xeon Max); buffers stay local")
      ->check(tools::ReadableFile("hwloc XML topology"));
}

void AddCopy(CLI::App& bench_cmd, CopyCli& c) {
  c.cmd = bench_cmd.add_subcommand("copy", "Copy throughput of an engine against glibc memcpy");
  AddCopyEngineOptions(c);
  CLI::App* cmd = c.cmd;
  cmd->add_option("--sizes", c.sizes, "Copy sizes, e.g. 4KiB,1MiB,1GiB")
      ->capture_default_str()
      ->check(tools::SizeListIn(1, kGiB));
  cmd->add_option("--mode", c.modes, "Submission modes: single,batch")
      ->capture_default_str()
      ->check(tools::ListOf("mode", {"single", "batch"}));
  cmd->add_option("--batch", c.batches, "Batch sizes for batch mode")
      ->capture_default_str()
      ->check(tools::IntegerListIn(1, 4096));
  cmd->add_option("--threads", c.threads,
                  "Engine worker threads (0 = all CPUs of the node); "
                  "memcpy is also split over this many")
      ->capture_default_str()
      ->check(tools::IntegerListIn(0, 4096));
  cmd->add_option("--submitters", c.submitters, "Submitting threads per engine")
      ->capture_default_str()
      ->check(tools::IntegerListIn(1, 256));
  cmd->add_option("--policy", c.policies, "Copy policies: single,push-pull,socket,brute-force,auto")
      ->capture_default_str()
      ->check(
          tools::ListOf("copy policy", {"single", "push-pull", "socket", "brute-force", "auto"}));
  cmd->add_option("--src-node", c.src_nodes, "Source NUMA nodes")
      ->capture_default_str()
      ->check(tools::IntegerListIn(0, 4095));
  cmd->add_option("--dst-node", c.dst_nodes, "Destination NUMA nodes")
      ->capture_default_str()
      ->check(tools::IntegerListIn(0, 4095));
  cmd->add_option("--reps", c.cfg.reps, "Timed repetitions")
      ->capture_default_str()
      ->check(tools::IntegerIn(1, 1000));
  cmd->add_option("--warmup", c.cfg.warmup, "Untimed warm-up rounds")
      ->capture_default_str()
      ->check(tools::IntegerIn(0, 100));
  cmd->add_option("--min-round-ms", c.cfg.min_round_ms,
                  "Repeat small copies so a round lasts this long")
      ->capture_default_str()
      ->check(tools::RealIn(0, 10000));
  cmd->add_flag("--no-flush", c.no_flush, "Do not flush caches before each round");
  cmd->add_flag("--no-progress", c.no_progress, "No progress bar");
  auto* j = cmd->add_flag("--json", c.json, "JSON output");
  cmd->add_flag("--csv", c.csv, "CSV output")->excludes(j);
  cmd->add_option("--plot", c.cfg.plot_path, "Also write a PNG plot (matplotlib)")
      ->check(tools::NewPng());
}

int RunCopy(CopyCli& c) {
  c.cfg.sizes = *bench::ParseSizeList(c.sizes);
  c.cfg.modes = SplitList(c.modes);
  c.cfg.policies.clear();
  for (const std::string& p : SplitList(c.policies))
    c.cfg.policies.push_back(*tierflow::ParsePolicyKind(p));
  c.cfg.batch_sizes = IntList(c.batches);
  c.cfg.threads = IntList(c.threads);
  c.cfg.submitters = IntList(c.submitters);
  c.cfg.src_nodes = IntList(c.src_nodes);
  c.cfg.dst_nodes = IntList(c.dst_nodes);
  c.cfg.flush = !c.no_flush;
  c.cfg.progress = !c.no_progress;
  c.cfg.format = c.json ? "json" : c.csv ? "csv" : "table";
  if (c.cfg.engine == "cpu") {
    for (const char* o : {"--experiments", "--sysfs-root", "--dev-root", "--xml"}) {
      if (c.cmd->count(o) > 0) {
        return UsageError(fmt::format("{} applies to --engine dsa or dsa-model, not cpu", o));
      }
    }
    Status s = bench::RunCopyBench(c.cfg, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  c.dsa.experiments = SplitList(c.experiments);
  c.dsa.sizes_given = c.cmd->count("--sizes") > 0;
  c.dsa.nodes_given = c.cmd->count("--dst-node") > 0;
  c.dsa.policies_given = c.cmd->count("--policy") > 0;
  c.dsa.submitters_given = c.cmd->count("--submitters") > 0;
  Status s = bench::RunDsaCopyBench(c.cfg, c.dsa, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- bench submit, bench cache -----------------------------------------------------------

struct SubmitCli {
  CLI::App* cmd = nullptr;
  bench::SubmitBenchConfig cfg;
};

void AddSubmit(CLI::App& bench_cmd, SubmitCli& c) {
  c.cmd = bench_cmd.add_subcommand("submit", "Per-operation cost of the library itself");
  c.cmd
      ->add_option("--engine", c.cfg.engine, "Engine: cpu, dsa-model (the DSA device model) or dsa")
      ->capture_default_str()
      ->check(tools::OneOf("engine", {"cpu", "dsa-model", "dsa"}));
  c.cmd->add_option("--samples", c.cfg.samples, "Samples (median reported)")
      ->capture_default_str()
      ->check(tools::IntegerIn(3, 1001));
  c.cmd->add_flag("--json", c.cfg.json, "JSON output");
}

struct CacheCli {
  CLI::App* cmd = nullptr;
  bench::CacheBenchConfig cfg;
  std::string entry_size = "4KiB";
};

void AddCache(CLI::App& bench_cmd, CacheCli& c) {
  c.cmd = bench_cmd.add_subcommand(
      "cache",
      "The offloading cache's hit and miss costs against a shared_mutex + unordered_map cache");
  c.cmd->add_option("--entries", c.cfg.entries, "Entries in the shared set")
      ->capture_default_str()
      ->check(tools::UnsignedIn(2, 1 << 20));
  c.cmd->add_option("--entry-size", c.entry_size, "Bytes per entry")
      ->capture_default_str()
      ->check(tools::SizeIn(64, 16 << 20));
  c.cmd->add_option("--samples", c.cfg.samples, "Samples (median reported)")
      ->capture_default_str()
      ->check(tools::IntegerIn(3, 1001));
  c.cmd->add_flag("--json", c.cfg.json, "JSON output");
}

struct CoherenceCli {
  CLI::App* cmd = nullptr;
  bench::CoherenceBenchConfig cfg;
  std::string orders = "0,1,2,3,4,5,6,7,8,9,10";
};

void AddCoherence(CLI::App& bench_cmd, CoherenceCli& c) {
  c.cmd = bench_cmd.add_subcommand(
      "coherence",
      "Cost of cache-line write-back and invalidate (each instruction) against pmem_persist");
  c.cmd->add_option("--orders", c.orders, "Sizes as orders: 4 KiB x 2^order, 0..10")
      ->capture_default_str()
      ->check(tools::IntegerListIn(0, 10));
  c.cmd->add_option("--samples", c.cfg.samples, "Samples per row and method")
      ->capture_default_str()
      ->check(tools::IntegerIn(5, 100000));
  c.cmd->add_option("--runs", c.cfg.runs, "Repeat the study; per-line slopes compared across runs")
      ->capture_default_str()
      ->check(tools::IntegerIn(1, 10));
  c.cmd->add_flag("--json", c.cfg.json, "JSON output");
  c.cmd->add_option("--plot", c.cfg.plot_path, "Also write a PNG plot (matplotlib)")
      ->check(tools::NewPng());
}

int RunCoherence(CoherenceCli& c) {
  c.cfg.orders.clear();
  for (const std::string& o : tools::SplitList(c.orders)) c.cfg.orders.push_back(std::stoi(o));
  std::sort(c.cfg.orders.begin(), c.cfg.orders.end());
  c.cfg.orders.erase(std::unique(c.cfg.orders.begin(), c.cfg.orders.end()), c.cfg.orders.end());
  Status s = bench::RunCoherenceBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- qdp ------------------------------------------------------------------------------------

struct QdpCli {
  CLI::App* cmd = nullptr;
  tierflow::qdp::Config cfg;
  tools::QdpCommandOptions opts;
  std::string configs = "baseline,upper_limit,prefetch,prefetch_distributed,all_dram";
  std::string capacity, read_size;
};

void AddQdpData(QdpCli& c) {
  CLI::App* q = c.cmd;
  q->add_option("--rows", c.cfg.rows, "Rows of each column")
      ->capture_default_str()
      ->check(tools::UnsignedIn(1, std::uint64_t{1} << 32));
  q->add_option("--chunk-rows", c.cfg.chunk_rows, "Rows per chunk (a multiple of 512)")
      ->capture_default_str()
      ->check(tools::UnsignedIn(512, std::uint64_t{1} << 32));
  q->add_option("--selectivity", c.cfg.selectivity, "Fraction of rows passing a < x")
      ->capture_default_str()
      ->check(tools::RealIn(0, 1));
  q->add_option("--seed", c.cfg.seed, "Data seed")
      ->capture_default_str()
      ->check(tools::UnsignedIn(0, UINT64_MAX));
  q->add_option("--data-dir", c.cfg.data_dir,
                "Existing directory for the column files, kept (default: new in /tmp, removed)")
      ->check(tools::ExistingDirectory());
  q->add_flag("--reuse-data", c.cfg.reuse_data,
              "Read the columns from --data-dir instead of generating them");
}

void AddQdpThreads(QdpCli& c) {
  CLI::App* q = c.cmd;
  const CLI::Validator threads = tools::IntegerIn(1, 1024);
  q->add_option("--groups", c.cfg.groups, "Thread groups, each running every pipeline")
      ->capture_default_str()
      ->check(threads);
  q->add_option("--threads-scan-a", c.cfg.threads_scan_a, "SCAN_a threads per group")
      ->capture_default_str()
      ->check(threads);
  q->add_option("--threads-scan-b", c.cfg.threads_scan_b, "SCAN_b (prefetch) threads per group")
      ->capture_default_str()
      ->check(threads);
  q->add_option("--threads-aggregate", c.cfg.threads_aggregate, "AGGREGATE threads per group")
      ->capture_default_str()
      ->check(threads);
  q->add_flag("!--no-pin", c.cfg.pin, "Do not pin threads");
  q->add_flag("--oversubscribe", c.cfg.oversubscribe,
              "Allow more computing threads than CPUs (exact sums, meaningless times)");
}

void AddQdpTiers(QdpCli& c) {
  CLI::App* q = c.cmd;
  const CLI::Validator tier = tools::NotEmpty("a tier: storage, node:N, dram, hbm, cxl or nvm");
  // 0 and other sizes below one chunk pass here: the query names the chunk size it needs.
  q->add_option("--cache-capacity", c.capacity,
                "Fast-tier bytes for the cache, at least one chunk (default: b's size)")
      ->check(tools::SizeIn(0, kPiB));
  q->add_option("--b-tier", c.cfg.b_tier, "Slow tier: storage, node:N, or dram|hbm|cxl|nvm")
      ->capture_default_str()
      ->check(tier);
  q->add_option("--cache-tier", c.cfg.cache_tier,
                "Fast tier the cache fills (default: DRAM of the CPUs)")
      ->check(tier);
  q->add_option("--a-tier", c.cfg.a_tier,
                "Tier of a in prefetch_distributed (default: DRAM of the CPUs)")
      ->check(tier);
  q->add_option("--engine", c.cfg.engine, "Fills from memory tiers: cpu, dsa or dsa-model")
      ->capture_default_str()
      ->check(tools::OneOf("engine", {"cpu", "dsa", "dsa-model"}));
  q->add_option("--queue-depth", c.cfg.storage_queue_depth, "io_uring reads in flight")
      ->capture_default_str()
      ->check(tools::UnsignedIn(1, 4096));
  q->add_option("--read-size", c.read_size,
                "Largest io_uring read, a multiple of 4KiB (default 1MiB)")
      ->check(tools::SizeIn(0, kGiB));  // the query says why 0 or 1000 will not do
  q->add_flag("!--no-huge-pages", c.cfg.huge_pages,
              "Columns, mask and cache memory in 4 KiB pages (default: transparent huge pages)");
}

void AddQdp(CLI::App& app, QdpCli& c) {
  c.cmd = app.add_subcommand(
      "qdp",
      "Query-driven prefetching: SELECT SUM(b) FROM t WHERE a < x from a slow tier (thesis ch. 6)");
  AddQdpData(c);
  AddQdpThreads(c);
  AddQdpTiers(c);
  CLI::App* q = c.cmd;
  q->add_option("--iterations", c.cfg.iterations, "Timed iterations")
      ->capture_default_str()
      ->check(tools::IntegerIn(1, 100));
  q->add_option("--warmup", c.cfg.warmup, "Untimed iterations first")
      ->capture_default_str()
      ->check(tools::IntegerIn(0, 10));
  q->add_option("--configs", c.configs, "Configurations to run")
      ->capture_default_str()
      ->check(tools::ListOf("configuration", {"baseline", "upper_limit", "prefetch",
                                              "prefetch_distributed", "all_dram"}));
  q->add_flag("--json", c.opts.json, "JSON output");
  q->add_flag("--compare-duckdb", c.opts.compare_duckdb,
              "Time the same query in DuckDB (project venv) and check its sum");
  q->add_option("--plot", c.opts.plot_path, "Write the per-pipeline times as a PNG")
      ->check(tools::NewPng());
}

int RunQdp(QdpCli& c) {
  c.cfg.configs = SplitList(c.configs);
  if (!c.capacity.empty()) c.cfg.cache_capacity = *bench::ParseSize(c.capacity);
  if (!c.read_size.empty()) c.cfg.storage_read_bytes = *bench::ParseSize(c.read_size);
  if (c.cfg.reuse_data && c.cfg.data_dir.empty()) {
    return UsageError("--reuse-data reads the columns from --data-dir: give the directory");
  }
  if (!c.cfg.data_dir.empty() && !c.cfg.reuse_data) {
    if (std::string p = tools::WritableDirectoryProblem(c.cfg.data_dir); !p.empty()) {
      return UsageError("--data-dir: " + p);
    }
  }
  // The values among themselves (sizes, chunks, capacity, configurations) are the command
  // line's; thread counts are checked against the CPUs of the node the run uses, when it runs.
  if (Status s = tierflow::qdp::Validate(c.cfg, INT_MAX); !s.ok()) return UsageError(s.message());
  Status s = tools::RunQdpCommand(c.cfg, c.opts, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- bench pipes -------------------------------------------------------------------------

struct PipesBenchCli {
  CLI::App* cmd = nullptr;
  bench::PipesBenchConfig cfg;
  std::string size, chunk;
};

void AddPipesBench(CLI::App& bench_cmd, PipesBenchCli& c) {
  c.cmd = bench_cmd.add_subcommand(
      "pipes", "A pipe against the same reads with liburing; pollable against future flavour");
  c.cmd->add_option("--size", c.size, "File size (default 1GiB)")
      ->check(tools::SizeIn(1 << 20, 64 * kGiB));
  c.cmd->add_option("--dir", c.cfg.dir, "Directory of the file (default: TMPDIR)")
      ->check(tools::WritableDirectory());
  c.cmd->add_option("--reps", c.cfg.reps, "Alternations (default 5)")
      ->check(tools::IntegerIn(1, 100));
  c.cmd->add_option("--transfers", c.cfg.transfers, "Small transfers per flavour (default 20000)")
      ->check(tools::IntegerIn(10, 10000000));
  c.cmd->add_option("--queue-depth", c.cfg.queue_depth, "Reads in flight (default 16)")
      ->check(tools::UnsignedIn(1, 4096));
  c.cmd->add_option("--chunk", c.chunk, "Read size (default 2MiB)")
      ->check(tools::SizeIn(4096, kGiB));
  c.cmd->add_flag("--json", c.cfg.json, "Machine-readable output");
}

int RunPipesBenchCli(PipesBenchCli& c) {
  if (!c.size.empty()) c.cfg.size = *tierflow::ParseSize(c.size);
  if (!c.chunk.empty()) c.cfg.chunk = *tierflow::ParseSize(c.chunk);
  if (c.cfg.chunk % 4096 != 0 || c.cfg.size % 4096 != 0) {
    return UsageError("--chunk and --size: give multiples of 4KiB (O_DIRECT)");
  }
  Status s = bench::RunPipesBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- bench rma ---------------------------------------------------------------------------

struct RmaBenchCli {
  CLI::App* cmd = nullptr;
  bench::RmaBenchConfig cfg;
  std::string sizes;
};

void AddRmaBench(CLI::App& bench_cmd, RmaBenchCli& c) {
  c.cmd = bench_cmd.add_subcommand(
      "rma", "libtierflow_rma against the MPI alone: put latency and GATS, same run");
  c.cmd->add_option("--reps", c.cfg.reps, "Alternations of without/with (default 3)")
      ->check(tools::IntegerIn(1, 50));
  c.cmd->add_option("--iters", c.cfg.iters, "Timed iterations per row (default 1000)")
      ->check(tools::IntegerIn(10, 1000000));
  c.cmd->add_option("--sizes", c.sizes,
                    "Put sizes, comma-separated, 1 byte to 64MiB (default 1,8,64,512,4KiB,32KiB,"
                    "256KiB,1MiB)");
  c.cmd
      ->add_option("--gats-ranks", c.cfg.gats_ranks,
                   "Ranks of the GATS benchmark: 1 origin, the rest targets (default 4)")
      ->check(tools::IntegerIn(2, 64));
  std::vector<std::string> built = bench::RmaBenchMpis();
  c.cmd->add_option("--mpi", c.cfg.mpis, "Only these MPIs (default: all built)")
      ->check(CLI::IsMember(built));
  c.cmd->add_flag("--json", c.cfg.json, "Machine-readable output");
  c.cmd->add_option("--plot", c.cfg.plot, "Also write a PNG plot (matplotlib)")
      ->check(tools::NewPng());
}

int RunRmaBenchCli(RmaBenchCli& c) {
  if (c.cmd->count("--sizes") > 0) {
    Result<std::vector<std::size_t>> sizes = bench::ParseSizeList(c.sizes);
    if (!sizes.ok()) return UsageError("--sizes: " + sizes.status().message());
    std::string list;
    for (std::size_t n : *sizes) {
      if (n == 0 || n > (std::size_t{64} << 20)) {
        return UsageError(fmt::format("--sizes: {} is not between 1 byte and 64MiB", n));
      }
      list += (list.empty() ? "" : ",") + std::to_string(n);
    }
    c.cfg.sizes = list;
  }
  Status s = bench::RunRmaBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- pipes -------------------------------------------------------------------------------

struct PipesCli {
  CLI::App* cmd = nullptr;
  CLI::App* explain = nullptr;
  CLI::App* copy = nullptr;
  CLI::App* calibrate = nullptr;
  tools::PipesCommandOptions o;
  std::string chunk, cap, length, bytes;
};

const char* kLocatorHelp =
    "dram[:NODE[:SIZE]], hbm[:NEAR_NODE[:SIZE]], cxl[:NODE[:SIZE]], node:N[:SIZE], "
    "file:PATH[:OFFSET[:LENGTH]], spill:A,B,...";

void AddPipeMachine(CLI::App* c, PipesCli& p) {
  c->add_option("--topology-xml", p.o.topology_xml,
                "Plan for the machine in this hwloc XML (its memory stands in here, modelled)")
      ->check(tools::ReadableFile("hwloc XML topology"));
  c->add_option("--calibration", p.o.calibration, "Calibration file (default: the cache path)")
      ->check(tools::WritableFile());
  c->add_flag("--any-machine", p.o.any_machine, "Use a calibration measured on another machine");
  c->add_flag("--dsa-model", p.o.dsa_model, "Without DSA hardware, plan with the DSA model");
}

void AddPipeEnds(CLI::App* c, PipesCli& p) {
  c->add_option("--from", p.o.from, std::string("Source locator: ") + kLocatorHelp)
      ->required()
      ->check(tools::NotEmpty("a locator"));
  c->add_option("--to", p.o.to, "Destination locator (same spelling)")
      ->required()
      ->check(tools::NotEmpty("a locator"));
  c->add_option("--queue-depth", p.o.queue_depth, "Chunks in flight (default: planner's)")
      ->check(tools::UnsignedIn(1, 4096));
  c->add_option("--chunk", p.chunk, "Chunk size (default: planner's)")
      ->check(tools::SizeIn(4096, kGiB));
  c->add_option("--mechanism", p.o.mechanism, "Override the mechanism")
      ->check(tools::OneOf("mechanism",
                           {"cpu", "dsa", "io_uring-read", "io_uring-write", "copy_file_range"}));
  c->add_option("--bandwidth-cap", p.cap, "Bytes per second at most, e.g. 500MiB")
      ->check(tools::SizeIn(1 << 20, kPiB));
  c->add_flag("--force-staging", p.o.force_staging, "Stage through DRAM even where direct");
  c->add_option("--length", p.length, "Bytes to move (default: the smaller capacity)")
      ->check(tools::SizeIn(1, kPiB));
  c->add_flag("--json", p.o.json, "Machine-readable output");
}

void AddPipes(CLI::App& app, PipesCli& p) {
  p.cmd = app.add_subcommand("pipes", "Data pipes: plans, transfers, calibration");
  p.explain = p.cmd->add_subcommand("explain", "The plan for a pipe, and why");
  p.copy = p.cmd->add_subcommand("copy", "Move data through a pipe and show its state");
  p.calibrate = p.cmd->add_subcommand("calibrate", "Measure the mechanisms the planner uses");
  for (CLI::App* c : {p.explain, p.copy}) {
    AddPipeMachine(c, p);
    AddPipeEnds(c, p);
  }
  CLI::Option* overwrite = p.copy->add_flag(
      "--overwrite", p.o.overwrite,
      "Replace a destination file that exists (truncated: only with a range at offset 0)");
  p.copy
      ->add_flag("--modify", p.o.modify,
                 "Write only the destination's range of an existing file; the rest stays")
      ->excludes(overwrite);
  p.copy->add_flag("--sync", p.o.sync, "fdatasync a destination file before finishing");
  p.calibrate->add_option("--dir", p.o.dir, "Directory for the file figures (default: TMPDIR)")
      ->check(tools::WritableDirectory());
  p.calibrate->add_option("--bytes", p.bytes, "Bytes per figure (default 64MiB)")
      ->check(tools::SizeIn(1 << 20, 16 * kGiB));
  p.calibrate->add_option("--output", p.o.output, "Where to write (default: the cache path)")
      ->check(tools::WritableFile());
  p.calibrate->add_flag("--dsa-model", p.o.dsa_model, "Also measure the DSA model");
}

int RunPipes(PipesCli& p) {
  if (!p.chunk.empty()) p.o.chunk_bytes = *tierflow::ParseSize(p.chunk);
  if (!p.cap.empty()) p.o.bandwidth_cap = *tierflow::ParseSize(p.cap);
  if (!p.length.empty()) p.o.length = *tierflow::ParseSize(p.length);
  if (!p.bytes.empty()) p.o.bytes = *tierflow::ParseSize(p.bytes);
  Status s = p.explain->parsed() ? tools::RunPipesExplain(p.o, std::cout)
             : p.copy->parsed()  ? tools::RunPipesCopy(p.o, std::cout)
                                 : tools::RunPipesCalibrate(p.o, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- sort --------------------------------------------------------------------------------

struct SortCli {
  CLI::App* cmd = nullptr;
  tools::SortCommandOptions o;
  std::string generate, memory;
  bool no_progress = false;
};

void AddSort(CLI::App& app, SortCli& s) {
  s.cmd = app.add_subcommand("sort", "External merge sort on data pipes, against the I/O floor");
  s.cmd->add_option("--generate", s.generate, "Generate this many bytes of seeded input first")
      ->check(tools::SizeIn(4096, std::uint64_t{1} << 44));
  s.cmd->add_option("--input", s.o.input, "Sort this file (never modified)")
      ->check(tools::ReadableFile("input file"));
  s.cmd->add_option("--output", s.o.output, "The sorted file (default: DIR/sorted.FORMAT)")
      ->check(tools::WritableFile());
  s.cmd
      ->add_option("--dir", s.o.dir,
                   "Directory of input, runs and output (default: a new one under TMPDIR, "
                   "removed afterwards unless --keep)")
      ->check(tools::WritableDirectory());
  s.cmd->add_option("--format", s.o.format, "u64 (16-byte records) or gensort (100-byte)")
      ->check(tools::OneOf("format", {"u64", "gensort"}));
  s.cmd
      ->add_option("--memory", s.memory,
                   "Memory the sort may hold, page cache included (default 256MiB). Above a "
                   "16MiB reserve it holds 4 run buffers per thread and, in the merge, a 256KiB "
                   "read-ahead per run: the least that works grows with the input and --threads "
                   "(17MiB sorts a few MiB on one thread, 64MiB of u64 needs 43MiB with 2 "
                   "threads); too little is refused before anything runs, with that least amount")
      ->check(tools::SizeIn(17u << 20, std::uint64_t{1} << 44));
  s.cmd->add_option("--threads", s.o.threads, "Threads (default: the CPUs)")
      ->check(tools::IntegerIn(1, 64));
  s.cmd->add_option("--seed", s.o.seed, "Seed of --generate")
      ->check(tools::UnsignedIn(0, ~std::uint64_t{0}));
  s.cmd->add_flag("--verify", s.o.verify, "Checksum every record of input and output");
  s.cmd->add_flag("--no-floor", s.o.no_floor, "Skip measuring the I/O floor");
  s.cmd->add_flag("--overwrite", s.o.overwrite, "Replace an existing output");
  s.cmd->add_flag("--keep", s.o.keep, "Keep the temporary directory");
  s.cmd->add_flag("--compare-duckdb", s.o.compare_duckdb, "Sort the same records in DuckDB");
  s.cmd->add_flag("--json", s.o.json, "Machine-readable output");
  s.cmd->add_flag("--no-progress", s.no_progress, "No progress bar");
  s.cmd->add_option("--plot", s.o.plot, "Write a PNG of the phases")->check(tools::NewPng());
}

int RunSort(SortCli& s) {
  if (!s.generate.empty()) s.o.generate = *tierflow::ParseSize(s.generate);
  if (!s.memory.empty()) s.o.memory = *tierflow::ParseSize(s.memory);
  s.o.progress = !s.no_progress;
  if (s.o.generate != 0 && !s.o.input.empty()) {
    return UsageError(
        "--generate and --input exclude each other: generate into --dir, or sort "
        "an existing file");
  }
  Status st = tools::RunSortCommand(s.o, std::cout);
  return st.ok() ? 0 : Fail(st);
}

// --- the command words ------------------------------------------------------------------

// CLI11 reports an unknown command word as "a subcommand is required"; name it instead.
Status CheckCommandWords(CLI::App& app, CLI::App& bench_cmd, const PipesCli& pipes) {
  if (app.get_subcommands().empty()) {
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty()) {
      return Status::InvalidArgument(
          fmt::format("unknown command '{}': use topology, bench, pipes, sort or qdp "
                      "(tierflow --help)",
                      rest.front()));
    }
    return Status::InvalidArgument(
        "no command given: use topology, bench, pipes, sort or qdp (tierflow --help)");
  }
  if (bench_cmd.parsed() && bench_cmd.get_subcommands().empty()) {
    std::vector<std::string> rest = bench_cmd.remaining();
    if (!rest.empty()) {
      return Status::InvalidArgument(
          fmt::format("unknown benchmark '{}': use bench copy, bench submit, "
                      "bench cache, bench coherence, bench pipes or bench rma (tierflow bench "
                      "--help)",
                      rest.front()));
    }
    return Status::InvalidArgument(
        "bench needs a benchmark: copy, submit, cache, coherence, pipes or rma (tierflow "
        "bench --help)");
  }
  if (pipes.cmd->parsed() && pipes.cmd->get_subcommands().empty()) {
    return Status::InvalidArgument(
        "pipes needs a command: explain, copy or calibrate (tierflow pipes --help)");
  }
  // Words left over after a command (`topology -- x`, `sort extra`): no command takes any.
  std::vector<std::string> rest = app.remaining();
  for (const std::string& word : bench_cmd.remaining()) rest.push_back(word);
  if (!rest.empty()) {
    return Status::InvalidArgument(fmt::format(
        "unexpected argument '{}': commands take options only, no other words (--help lists "
        "them)",
        rest.front()));
  }
  return Status::Ok();
}

// --plot needs Python with matplotlib, --compare-duckdb with DuckDB and numpy: checked before
// the command runs, not after it.
Status CheckPythonNeeds(CLI::App& app) {
  for (CLI::App* cmd = &app; cmd != nullptr;) {
    for (const auto& [flag, modules] :
         {std::pair{"--plot", "matplotlib"}, std::pair{"--compare-duckdb", "duckdb, numpy"}}) {
      const CLI::Option* o = cmd->get_option_no_throw(flag);
      if (o == nullptr || o->count() == 0) continue;
      if (Status s = bench::CheckPythonModules(modules); !s.ok()) {
        return Status(s.code(), fmt::format("{}: {}", flag, s.message()));
      }
    }
    const std::vector<CLI::App*> subs = cmd->get_subcommands();
    cmd = subs.empty() ? nullptr : subs.front();
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (Status s = CheckEnvironment(); !s.ok()) return UsageError(s.message());
  CLI::App app{"tierflow: move data between memory tiers with copy engines, and measure it"};
  app.set_version_flag("--version,-V", std::string("tierflow ") + tierflow::Version(),
                       "Print the version and exit");
  app.footer(
      "Exit status: 0 when the command did its work, 1 when it failed (the message says why), 2 "
      "when the command line is wrong (an unknown option or word, a bad value).");
  TopologyCli topology;
  AddTopology(app, topology);
  CLI::App* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  CopyCli copy;
  SubmitCli submit;
  CacheCli cache;
  AddCopy(*bench_cmd, copy);
  AddSubmit(*bench_cmd, submit);
  AddCache(*bench_cmd, cache);
  CoherenceCli coherence;
  AddCoherence(*bench_cmd, coherence);
  PipesBenchCli pipes_bench;
  AddPipesBench(*bench_cmd, pipes_bench);
  RmaBenchCli rma_bench;
  AddRmaBench(*bench_cmd, rma_bench);
  QdpCli qdp;
  AddQdp(app, qdp);
  PipesCli pipes;
  AddPipes(app, pipes);
  SortCli sort;
  AddSort(app, sort);
  app.allow_extras();  // unknown command words: named by CheckCommandWords
  bench_cmd->allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageError(fmt::format("{} (see --help)", e.what()));
  }
  if (Status s = CheckCommandWords(app, *bench_cmd, pipes); !s.ok()) {
    return UsageError(s.message());
  }
  if (Status s = CheckPythonNeeds(app); !s.ok()) return Fail(s);
  if (topology.cmd->parsed()) {
    Status s = tools::RunTopologyCommand(topology.o, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (copy.cmd->parsed()) return RunCopy(copy);
  if (submit.cmd->parsed()) {
    Status s = bench::RunSubmitBench(submit.cfg, &tools::AllocationCount, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (cache.cmd->parsed()) {
    cache.cfg.entry_bytes = *bench::ParseSize(cache.entry_size);
    Status s = bench::RunCacheBench(cache.cfg, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (coherence.cmd->parsed()) return RunCoherence(coherence);
  if (pipes_bench.cmd->parsed()) return RunPipesBenchCli(pipes_bench);
  if (rma_bench.cmd->parsed()) return RunRmaBenchCli(rma_bench);
  if (pipes.cmd->parsed()) return RunPipes(pipes);
  if (sort.cmd->parsed()) return RunSort(sort);
  return RunQdp(qdp);
}
