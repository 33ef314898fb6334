// SPDX-License-Identifier: Apache-2.0
// The command lines of `tierflow topology`, `qdp`, `pipes explain|copy|calibrate` and `sort`.
// Each value is checked while the line is parsed (cli_checks.h); a command runs only once all
// are good.
#include <climits>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "qdp/setup.h"
#include "tierflow/size.h"
#include "tools/cli.h"
#include "tools/cli_checks.h"
#include "tools/pipes_command.h"
#include "tools/qdp_command.h"
#include "tools/sort_command.h"
#include "tools/topology_command.h"

namespace tierflow::tools {
namespace {

// --- topology ---------------------------------------------------------------------------------

struct TopologyCli final : Command {
  int Run() override { return ExitFor(RunTopologyCommand(o, std::cout)); }
  tools::TopologyCommandOptions o;
};

void AddTopology(CLI::App& app, TopologyCli& c) {
  c.cmd = app.add_subcommand("topology", "List the NUMA nodes and their memory tiers");
  c.cmd->add_flag("--json", c.o.json, "Machine-readable output");
  c.cmd->add_option("--xml", c.o.xml, "Read an hwloc XML topology (default: this system)")
      ->check(tools::ReadableFile("hwloc XML topology"));
  c.cmd
      ->add_option("--tier-config", c.o.tier_config,
                   "File of 'NODES KIND' overrides (default: TIERFLOW_TIER_CONFIG, else none)")
      ->check(tools::ReadableFile("tier config file"));
  c.cmd
      ->add_option("--tiers", c.o.tiers,
                   "Inline overrides, e.g. 8-15=hbm,16=cxl (default: TIERFLOW_TIERS, else none)")
      ->check(tools::NotEmpty("overrides such as 8-15=hbm,16=cxl"));
  c.cmd
      ->add_option("--sysfs-root", c.o.sysfs_root,
                   "Read DSA devices from this sysfs tree, DIR/bus/dsa or DIR/sys/bus/dsa "
                   "(default: /sys)")
      ->check(tools::ExistingDirectory());
  c.cmd
      ->add_option("--dev-root", c.o.dev_root,
                   "Where the WQ character devices (dsa/wqN.M) are; default: the 'dev' beside "
                   "the sysfs tree, or /dev")
      ->check(tools::ExistingDirectory());
}

// --- qdp ------------------------------------------------------------------------------------

struct QdpCli final : Command {
  int Run() override;
  bool quiet = false;
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
  q->add_option("--plot", c.opts.plot_path,
                "Write the per-pipeline times as a PNG (default: no plot)")
      ->check(tools::NewPng());
  AddQuiet(q, c.quiet);
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
  c.opts.progress = !c.quiet;
  Status s = tools::RunQdpCommand(c.cfg, c.opts, std::cout);
  return s.ok() ? 0 : Fail(s);
}

int QdpCli::Run() { return RunQdp(*this); }

// --- pipes -------------------------------------------------------------------------------

struct PipesCli final : Command {
  int Run() override;
  bool quiet = false;
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
  c->add_option(
       "--topology-xml", p.o.topology_xml,
       "Plan for the machine in this hwloc XML, its memory modelled here (default: this machine)")
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
  AddQuiet(p.copy, p.quiet);
  AddQuiet(p.calibrate, p.quiet);
}

int RunPipes(PipesCli& p) {
  if (!p.chunk.empty()) p.o.chunk_bytes = *tierflow::ParseSize(p.chunk);
  if (!p.cap.empty()) p.o.bandwidth_cap = *tierflow::ParseSize(p.cap);
  if (!p.length.empty()) p.o.length = *tierflow::ParseSize(p.length);
  if (!p.bytes.empty()) p.o.bytes = *tierflow::ParseSize(p.bytes);
  p.o.progress = !p.quiet;
  Status s = p.explain->parsed() ? tools::RunPipesExplain(p.o, std::cout)
             : p.copy->parsed()  ? tools::RunPipesCopy(p.o, std::cout)
                                 : tools::RunPipesCalibrate(p.o, std::cout);
  return s.ok() ? 0 : Fail(s);
}

int PipesCli::Run() { return RunPipes(*this); }

// --- sort --------------------------------------------------------------------------------

struct SortCli final : Command {
  int Run() override;
  tools::SortCommandOptions o;
  std::string generate, memory;
  bool no_progress = false;
};

void AddSort(CLI::App& app, SortCli& s) {
  s.cmd = app.add_subcommand("sort", "External merge sort on data pipes, against the I/O floor");
  s.cmd
      ->add_option("--generate", s.generate,
                   "Generate this many bytes of seeded input first (default: none; then --input)")
      ->check(tools::SizeIn(4096, std::uint64_t{1} << 44));
  s.cmd
      ->add_option("--input", s.o.input,
                   "Sort this file, never modified (default: none; then --generate)")
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
  s.cmd
      ->add_option("--compare-declared", s.o.compare_declared,
                   "Then sort the same input N more times each way, alternating: planned by the "
                   "sort's blueprint, and with its files and pipes declared one by one; report "
                   "the medians and their ratio (default 0: not)")
      ->check(tools::IntegerIn(1, 100));
  s.cmd->add_flag("--explain", s.o.explain,
                  "Print the sort's blueprint as instantiated: every role's binding and why, "
                  "every stage's plan");
  s.cmd->add_flag("--json", s.o.json, "Machine-readable output");
  AddQuiet(s.cmd, s.no_progress);
  s.cmd->add_option("--plot", s.o.plot, "Write a PNG of the phases (default: no plot)")
      ->check(tools::NewPng());
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

int SortCli::Run() { return RunSort(*this); }

}  // namespace

void AddCommands(CLI::App& app, Commands& out) {
  auto topology = std::make_unique<TopologyCli>();
  AddTopology(app, *topology);
  auto qdp = std::make_unique<QdpCli>();
  AddQdp(app, *qdp);
  auto pipes = std::make_unique<PipesCli>();
  AddPipes(app, *pipes);
  auto sort = std::make_unique<SortCli>();
  AddSort(app, *sort);
  out.push_back(std::move(topology));
  out.push_back(std::move(qdp));
  out.push_back(std::move(pipes));
  out.push_back(std::move(sort));
}

}  // namespace tierflow::tools
