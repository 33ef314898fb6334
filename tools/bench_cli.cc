// SPDX-License-Identifier: Apache-2.0
// `tierflow bench ...`: the benchmarks' command lines. Each value is checked while the line is
// parsed (cli_checks.h); a benchmark runs only once all are good.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/cache_bench.h"
#include "bench/coherence_bench.h"
#include "bench/copy_bench.h"
#include "bench/dsa_copy_bench.h"
#include "bench/dsort_bench.h"
#include "bench/pipes_bench.h"
#include "bench/rma_bench.h"
#include "bench/submit_bench.h"
#include "tierflow/copy_policy.h"
#include "tierflow/size.h"
#include "tools/alloc_counter.h"
#include "tools/cli.h"
#include "tools/cli_checks.h"

namespace tierflow::tools {
namespace {

// --- bench copy -----------------------------------------------------------------------------

struct CopyCli final : Command {
  int Run() override;
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
                  "dsa: read the DSA inventory here; dsa-model: lay the models out like the "
                  "devices found here, e.g. a fixture tree (default: /sys)")
      ->check(tools::ExistingDirectory());
  cmd->add_option("--dev-root", c.dsa.dev_root,
                  "dsa: where the WQ character devices are (default: /dev)")
      ->check(tools::ExistingDirectory());
  cmd->add_option(
         "--xml", c.dsa.xml,
         "dsa-model: place by this hwloc XML topology, buffers local (default: this system)")
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
  AddQuiet(cmd, c.no_progress);
  auto* j = cmd->add_flag("--json", c.json, "JSON output");
  cmd->add_flag("--csv", c.csv, "CSV output")->excludes(j);
  cmd->add_option("--plot", c.cfg.plot_path,
                  "Also write a PNG plot with matplotlib (default: no plot)")
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

struct SubmitCli final : Command {
  int Run() override;
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

struct CacheCli final : Command {
  int Run() override;
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

struct CoherenceCli final : Command {
  int Run() override;
  bool quiet = false;
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
  c.cmd
      ->add_option("--plot", c.cfg.plot_path,
                   "Also write a PNG plot with matplotlib (default: no plot)")
      ->check(tools::NewPng());
  AddQuiet(c.cmd, c.quiet);
}

int RunCoherence(CoherenceCli& c) {
  c.cfg.orders.clear();
  for (const std::string& o : tools::SplitList(c.orders)) c.cfg.orders.push_back(std::stoi(o));
  std::sort(c.cfg.orders.begin(), c.cfg.orders.end());
  c.cfg.orders.erase(std::unique(c.cfg.orders.begin(), c.cfg.orders.end()), c.cfg.orders.end());
  c.cfg.progress = !c.quiet;
  Status s = bench::RunCoherenceBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

int CopyCli::Run() { return RunCopy(*this); }

int SubmitCli::Run() {
  return ExitFor(bench::RunSubmitBench(cfg, &tools::AllocationCount, std::cout));
}

int CacheCli::Run() {
  cfg.entry_bytes = *bench::ParseSize(entry_size);
  return ExitFor(bench::RunCacheBench(cfg, std::cout));
}

int CoherenceCli::Run() { return RunCoherence(*this); }

// --- bench pipes -------------------------------------------------------------------------

struct PipesBenchCli final : Command {
  int Run() override;
  bool quiet = false;
  bench::PipesBenchConfig cfg;
  std::string size, chunk, checkpoint_size;
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
  c.cmd
      ->add_option("--log-seconds", c.cfg.log_seconds,
                   "Seconds per logging method; 0: no logging rows (default 1)")
      ->check(tools::RealIn(0, 600));
  c.cmd->add_option("--record-bytes", c.cfg.record_bytes, "Logging: bytes per record (default 128)")
      ->check(tools::UnsignedIn(16, 65536));
  c.cmd
      ->add_option("--checkpoint-size", c.checkpoint_size,
                   "Checkpoint: bytes of all regions together; 0: no checkpoint rows "
                   "(default 1GiB)")
      ->check(tools::SizeIn(0, 64 * kGiB));
  c.cmd
      ->add_option("--checkpoint-regions", c.cfg.checkpoint_regions,
                   "Checkpoint: regions, one file each (default 4)")
      ->check(tools::IntegerIn(1, 64));
  c.cmd->add_flag("--json", c.cfg.json, "Machine-readable output");
  AddQuiet(c.cmd, c.quiet);
}

int RunPipesBenchCli(PipesBenchCli& c) {
  if (!c.size.empty()) c.cfg.size = *tierflow::ParseSize(c.size);
  if (!c.chunk.empty()) c.cfg.chunk = *tierflow::ParseSize(c.chunk);
  if (c.cfg.chunk % 4096 != 0 || c.cfg.size % 4096 != 0) {
    return UsageError("--chunk and --size: give multiples of 4KiB (O_DIRECT)");
  }
  if (!c.checkpoint_size.empty()) c.cfg.checkpoint_bytes = *tierflow::ParseSize(c.checkpoint_size);
  if (c.cfg.checkpoint_bytes % (4096ull * c.cfg.checkpoint_regions) != 0) {
    return UsageError(fmt::format(
        "--checkpoint-size {}: give a multiple of 4KiB x --checkpoint-regions ({}), so that "
        "every region is whole pages (O_DIRECT)",
        c.checkpoint_size, c.cfg.checkpoint_regions));
  }
  c.cfg.progress = !c.quiet;
  Status s = bench::RunPipesBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- bench rma ---------------------------------------------------------------------------

struct RmaBenchCli final : Command {
  int Run() override;
  bool quiet = false;
  bench::RmaBenchConfig cfg;
  std::string sizes;
};

// The options of --apps: which applications, their sizes, rank counts and coherence modes.
void AddRmaAppOptions(CLI::App* cmd, bench::RmaBenchConfig& cfg) {
  cmd->add_option("--apps", cfg.apps,
                  "Run the thesis' applications instead of the microbenchmarks: ft (NAS FT), "
                  "ca (the cellular automaton), comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"ft", "ca"}));
  cmd->add_option("--ft-class", cfg.ft_class, "NAS FT problem class with --apps ft (default A)")
      ->check(CLI::IsMember({"S", "W", "A", "B"}));
  cmd->add_option("--ft-ranks", cfg.ft_ranks, "Rank counts of FT (default 1,2,4)")
      ->delimiter(',')
      ->check(tools::IntegerIn(1, 64));
  cmd->add_option("--ca-ranks", cfg.ca_ranks, "Rank counts of the automaton (default 1,2,3,4)")
      ->delimiter(',')
      ->check(tools::IntegerIn(1, 64));
  cmd->add_option("--ca-rows", cfg.ca_rows, "Lines of the automaton's grid (default 2400)")
      ->check(tools::IntegerIn(1, 1 << 20));
  cmd->add_option("--ca-cells", cfg.ca_cells, "Cells per line of the automaton (default 8190)")
      ->check(tools::IntegerIn(1, 1 << 20));
  cmd->add_option("--ca-iterations", cfg.ca_iterations, "Steps of the automaton (default 100)")
      ->check(tools::IntegerIn(1, 1 << 20));
  cmd->add_option("--coherence", cfg.coherence,
                  "Coherence modes of the runs with the library with --apps (default coherent; "
                  "also noncoherent, simulated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"coherent", "noncoherent", "simulated"}));
  cmd->add_option("--offload", cfg.offload,
                  "Also run with the library's large puts and gets offloaded to an engine: "
                  "auto, cpu, dsa or dsa-model (TIERFLOW_RMA_OFFLOAD), comma-separated "
                  "(default: none)")
      ->delimiter(',')
      ->check(CLI::IsMember({"auto", "cpu", "dsa", "dsa-model"}));
}

void AddRmaBench(CLI::App& bench_cmd, RmaBenchCli& c) {
  c.cmd = bench_cmd.add_subcommand(
      "rma", "libtierflow_rma against the MPI alone: put latency and GATS, same run");
  c.cmd->add_option("--reps", c.cfg.reps, "Alternations of without/with (default 3)")
      ->check(tools::IntegerIn(1, 50));
  c.cmd->add_option("--iters", c.cfg.iters, "Timed iterations per row (default 1000)")
      ->check(tools::IntegerIn(10, 1000000));
  c.cmd->add_option("--sizes", c.sizes,
                    "Put sizes, comma-separated, 1 byte to 64MiB (default 1,8,64,512,4KiB,32KiB,"
                    "256KiB,1MiB,4MiB)");
  c.cmd
      ->add_option("--gats-ranks", c.cfg.gats_ranks,
                   "Ranks of the GATS benchmark: 1 origin, the rest targets (default 4)")
      ->check(tools::IntegerIn(2, 64));
  c.cmd
      ->add_option("--hosts", c.cfg.hosts,
                   "Run the microbenchmarks as one job across this many hosts of a test bed of "
                   "namespaces on this machine (scripts/hosts.sh, root only; default: one "
                   "machine)")
      ->check(tools::IntegerIn(2, 8));
  c.cmd
      ->add_option("--ranks-per-host", c.cfg.ranks_per_host,
                   "Ranks on each host with --hosts (default 1: origin and target on different "
                   "hosts; 2 or more: on the same host)")
      ->check(tools::IntegerIn(1, 8));
  c.cmd->add_flag("--pool", c.cfg.pool,
                  "With --hosts: the runs with the library keep windows in a pool the hosts "
                  "share (a file in this machine's /dev/shm standing for a CXL memory device; "
                  "noncoherent maintenance)");
  std::vector<std::string> built = bench::RmaBenchMpis();
  c.cmd->add_option("--mpi", c.cfg.mpis, "Only these MPIs (default: all built)")
      ->check(CLI::IsMember(built));
  AddRmaAppOptions(c.cmd, c.cfg);
  c.cmd->add_flag("--json", c.cfg.json, "Machine-readable output");
  c.cmd
      ->add_option("--plot", c.cfg.plot, "Also write a PNG plot with matplotlib (default: no plot)")
      ->check(tools::NewPng());
  AddQuiet(c.cmd, c.quiet);
}

// Options of one mode given to the other: refused, not ignored.
int CheckRmaModeOptions(const RmaBenchCli& c) {
  const bool apps = !c.cfg.apps.empty();
  for (const char* o :
       {"--sizes", "--iters", "--gats-ranks", "--hosts", "--ranks-per-host", "--pool"}) {
    if (apps && c.cmd->count(o) > 0) {
      return UsageError(fmt::format("{} applies to the microbenchmarks, not to --apps", o));
    }
  }
  for (const char* o : {"--ft-class", "--ft-ranks", "--ca-ranks", "--ca-rows", "--ca-cells",
                        "--ca-iterations", "--coherence"}) {
    if (!apps && c.cmd->count(o) > 0) {
      return UsageError(fmt::format("{} applies to --apps: add --apps ft,ca", o));
    }
  }
  const bool hosts = c.cmd->count("--hosts") > 0;
  if (!hosts && c.cmd->count("--ranks-per-host") > 0) {
    return UsageError("--ranks-per-host applies to --hosts: add --hosts 2");
  }
  if (!hosts && c.cmd->count("--pool") > 0) {
    return UsageError("--pool applies to --hosts: add --hosts 2 (one machine needs no pool)");
  }
  if (hosts && c.cmd->count("--gats-ranks") > 0) {
    return UsageError(
        "--gats-ranks: across hosts GATS runs with every rank of the job "
        "(--hosts x --ranks-per-host)");
  }
  return 0;
}

int RunRmaBenchCli(RmaBenchCli& c) {
  if (int rc = CheckRmaModeOptions(c); rc != 0) return rc;
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
  c.cfg.progress = !c.quiet;
  Status s = bench::RunRmaBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// --- bench dsort -------------------------------------------------------------------------

struct DsortBenchCli final : Command {
  int Run() override;
  bool quiet = false;
  bench::DsortBenchConfig cfg;
  std::string size, memory, keys, mpis;
};

void AddDsortBench(CLI::App& bench_cmd, DsortBenchCli& c) {
  c.cmd = bench_cmd.add_subcommand(
      "dsort", "The distributed sort across a test bed of hosts, per key distribution");
  c.cmd
      ->add_option("--hosts", c.cfg.hosts,
                   "Hosts of a test bed of namespaces on this machine (scripts/hosts.sh, root "
                   "only); 1: every rank on this machine (default 2)")
      ->check(tools::IntegerIn(1, 8));
  c.cmd->add_option("--ranks-per-host", c.cfg.ranks_per_host, "Ranks on each host (default 2)")
      ->check(tools::IntegerIn(1, 16));
  c.cmd->add_option("--size", c.size, "Input of the whole job, shared evenly (default 4GiB)")
      ->check(tools::SizeIn(4096, std::uint64_t{1} << 44));
  c.cmd->add_option("--memory", c.memory, "What each rank may hold (default 256MiB)")
      ->check(tools::SizeIn(17u << 20, std::uint64_t{1} << 40));
  c.cmd
      ->add_option("--keys", c.keys,
                   "Key distributions, comma-separated (default uniform,equal,zipf,sorted)")
      ->check(tools::ListOf("key distribution", {"uniform", "equal", "zipf", "sorted"}));
  c.cmd->add_option("--format", c.cfg.format, "Records: u64 or gensort (default u64)")
      ->check(CLI::IsMember({"u64", "gensort"}));
  c.cmd->add_option("--exchange", c.cfg.exchange, "alltoallv or put (default alltoallv)")
      ->check(CLI::IsMember({"alltoallv", "put"}));
  c.cmd->add_option("--threads", c.cfg.threads, "Threads per rank (default 1)")
      ->check(tools::IntegerIn(1, 256));
  c.cmd->add_option("--reps", c.cfg.reps, "Alternations of the distributions (default 1)")
      ->check(tools::IntegerIn(1, 50));
  c.cmd->add_option("--dir", c.cfg.dir, "Where the ranks' files go (default: TMPDIR or /tmp)")
      ->check(tools::WritableDirectory());
  std::vector<std::string> built = bench::RmaBenchMpis();
  c.cmd->add_option("--mpi", c.mpis, "Only these MPIs, comma-separated (default: all built)")
      ->check(tools::ListOf("MPI", built));
  c.cmd->add_flag("--json", c.cfg.json, "Machine-readable output");
  c.cmd
      ->add_option("--plot", c.cfg.plot, "Also write a PNG plot with matplotlib (default: no plot)")
      ->check(tools::NewPng());
  AddQuiet(c.cmd, c.quiet);
}

// `text`'s words, each once: a word given twice is refused (it would run twice).
int Words(const std::string& text, const char* option, std::vector<std::string>& out) {
  out.clear();
  for (const std::string& w : SplitList(text)) {
    if (std::find(out.begin(), out.end(), w) != out.end()) {
      return UsageError(fmt::format("{}: {} is given twice; give each once", option, w));
    }
    out.push_back(w);
  }
  return 0;
}

int RunDsortBenchCli(DsortBenchCli& c) {
  if (!c.keys.empty()) {
    if (int rc = Words(c.keys, "--keys", c.cfg.keys); rc != 0) return rc;
  }
  if (!c.mpis.empty()) {
    if (int rc = Words(c.mpis, "--mpi", c.cfg.mpis); rc != 0) return rc;
  }
  if (!c.size.empty()) c.cfg.total_bytes = *tierflow::ParseSize(c.size);
  if (!c.memory.empty()) c.cfg.memory_bytes = *tierflow::ParseSize(c.memory);
  c.cfg.progress = !c.quiet;
  Status s = bench::RunDsortBench(c.cfg, std::cout);
  return s.ok() ? 0 : Fail(s);
}

int PipesBenchCli::Run() { return RunPipesBenchCli(*this); }
int RmaBenchCli::Run() { return RunRmaBenchCli(*this); }
int DsortBenchCli::Run() { return RunDsortBenchCli(*this); }

}  // namespace

void AddBenchCommands(CLI::App& bench_cmd, Commands& out) {
  auto copy = std::make_unique<CopyCli>();
  AddCopy(bench_cmd, *copy);
  auto submit = std::make_unique<SubmitCli>();
  AddSubmit(bench_cmd, *submit);
  auto cache = std::make_unique<CacheCli>();
  AddCache(bench_cmd, *cache);
  auto coherence = std::make_unique<CoherenceCli>();
  AddCoherence(bench_cmd, *coherence);
  auto pipes = std::make_unique<PipesBenchCli>();
  AddPipesBench(bench_cmd, *pipes);
  auto rma = std::make_unique<RmaBenchCli>();
  AddRmaBench(bench_cmd, *rma);
  auto dsort = std::make_unique<DsortBenchCli>();
  AddDsortBench(bench_cmd, *dsort);
  out.push_back(std::move(copy));
  out.push_back(std::move(submit));
  out.push_back(std::move(cache));
  out.push_back(std::move(coherence));
  out.push_back(std::move(pipes));
  out.push_back(std::move(rma));
  out.push_back(std::move(dsort));
}

}  // namespace tierflow::tools
