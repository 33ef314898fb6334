// The tierflow command-line tool: `topology`, `bench copy`, `bench submit`.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/bench_util.h"
#include "bench/cache_bench.h"
#include "bench/copy_bench.h"
#include "bench/dsa_copy_bench.h"
#include "bench/submit_bench.h"
#include "tools/qdp_command.h"
#include "tools/alloc_counter.h"
#include "tools/topology_command.h"

namespace {

using tierflow::Result;
using tierflow::Status;

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Result<std::vector<int>> ParseIntList(const std::string& what, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : SplitList(text)) {
    try {
      std::size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return Status::Invalid(fmt::format("{}: '{}' is not an integer (expected e.g. 1,2,4)", what, item));
    }
  }
  return out;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "tierflow: error: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tierflow: move data between memory tiers with copy engines, and measure it"};
  app.require_subcommand(1);

  tierflow::tools::TopologyCommandOptions topo_opts;
  CLI::App* topo = app.add_subcommand("topology", "List the NUMA nodes and their memory tiers");
  topo->add_flag("--json", topo_opts.json, "Machine-readable output");
  topo->add_option("--xml", topo_opts.xml, "Read an hwloc XML topology instead of this system");
  topo->add_option("--tier-config", topo_opts.tier_config, "File of 'NODES KIND' overrides");
  topo->add_option("--tiers", topo_opts.tiers, "Inline overrides, e.g. 8-15=hbm,16=cxl");
  topo->add_option("--sysfs-root", topo_opts.sysfs_root,
                   "Read DSA devices from this sysfs tree (DIR/bus/dsa or DIR/sys/bus/dsa) "
                   "instead of /sys");
  topo->add_option("--dev-root", topo_opts.dev_root,
                   "Where the WQ character devices (dsa/wqN.M) are; default: the 'dev' beside "
                   "the sysfs tree, or /dev");

  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);

  tierflow::bench::CopyBenchConfig copy_cfg;
  std::string sizes = "4KiB,64KiB,1MiB,16MiB,64MiB", modes = "single", batches = "16",
              threads = "0", submitters = "1", policies = "single", src_nodes = "0", dst_nodes = "0";
  bool as_json = false, as_csv = false, no_flush = false, no_progress = false;
  CLI::App* copy = bench->add_subcommand("copy", "Copy throughput of an engine against glibc memcpy");
  copy->add_option("--engine", copy_cfg.engine,
                   "Engine: cpu, dsa (this machine's DSAs) or dsa-model (the DSA device model)")
      ->capture_default_str();
  tierflow::bench::DsaCopyBenchConfig dsa_copy_cfg;
  std::string experiments = "submission,threads,placement,cpu";
  copy->add_option("--experiments", experiments,
                   "dsa/dsa-model: thesis experiments submission (Fig. 3.4), threads (3.5), "
                   "placement (3.6/3.7), cpu (3.8)")
      ->capture_default_str();
  copy->add_option("--sysfs-root", dsa_copy_cfg.sysfs_root,
                   "dsa: read the DSA inventory here instead of /sys; dsa-model: lay the models "
                   "out like the devices found here (e.g. a fixture tree)");
  copy->add_option("--dev-root", dsa_copy_cfg.dev_root, "dsa: where the WQ character devices are");
  copy->add_option("--xml", dsa_copy_cfg.xml,
                   "dsa-model: place by this hwloc XML topology (e.g. a Xeon Max); buffers stay local");
  copy->add_option("--sizes", sizes, "Copy sizes, e.g. 4KiB,1MiB,1GiB")->capture_default_str();
  copy->add_option("--mode", modes, "Submission modes: single,batch")->capture_default_str();
  copy->add_option("--batch", batches, "Batch sizes for batch mode")->capture_default_str();
  copy->add_option("--threads", threads, "Engine worker threads (0 = all CPUs of the node); "
                   "memcpy is also split over this many")->capture_default_str();
  copy->add_option("--submitters", submitters, "Submitting threads per engine")->capture_default_str();
  copy->add_option("--policy", policies, "Copy policies: single,push-pull,socket,brute-force")
      ->capture_default_str();
  copy->add_option("--src-node", src_nodes, "Source NUMA nodes")->capture_default_str();
  copy->add_option("--dst-node", dst_nodes, "Destination NUMA nodes")->capture_default_str();
  copy->add_option("--reps", copy_cfg.reps, "Timed repetitions")->capture_default_str();
  copy->add_option("--warmup", copy_cfg.warmup, "Untimed warm-up rounds")->capture_default_str();
  copy->add_option("--min-round-ms", copy_cfg.min_round_ms,
                   "Repeat small copies so a round lasts this long")->capture_default_str();
  copy->add_flag("--no-flush", no_flush, "Do not flush caches before each round");
  copy->add_flag("--no-progress", no_progress, "No progress bar");
  auto* j = copy->add_flag("--json", as_json, "JSON output");
  copy->add_flag("--csv", as_csv, "CSV output")->excludes(j);
  copy->add_option("--plot", copy_cfg.plot_path, "Also write a PNG plot (matplotlib)");

  tierflow::bench::SubmitBenchConfig submit_cfg;
  CLI::App* submit = bench->add_subcommand("submit", "Per-operation cost of the library itself");
  submit->add_option("--engine", submit_cfg.engine, "Engine: cpu, dsa-model (the DSA device model)")->capture_default_str();
  submit->add_option("--samples", submit_cfg.samples, "Samples (median reported)")->capture_default_str();
  submit->add_flag("--json", submit_cfg.json, "JSON output");

  tierflow::bench::CacheBenchConfig cache_cfg;
  std::string entry_size = "4KiB";
  CLI::App* cache_bench = bench->add_subcommand(
      "cache", "The offloading cache's hit and miss costs against a shared_mutex + unordered_map cache");
  cache_bench->add_option("--entries", cache_cfg.entries, "Entries in the shared set")->capture_default_str();
  cache_bench->add_option("--entry-size", entry_size, "Bytes per entry")->capture_default_str();
  cache_bench->add_option("--samples", cache_cfg.samples, "Samples (median reported)")->capture_default_str();
  cache_bench->add_flag("--json", cache_cfg.json, "JSON output");

  tierflow::QdpConfig qdp_cfg;
  std::string qdp_configs = "baseline,upper_limit,prefetch,prefetch_distributed,all_dram";
  std::string qdp_capacity, qdp_read_size;
  tierflow::tools::QdpCommandOptions qdp_opts;
  CLI::App* qdp = app.add_subcommand(
      "qdp", "Query-driven prefetching: SELECT SUM(b) FROM t WHERE a < x from a slow tier (thesis ch. 6)");
  qdp->add_option("--rows", qdp_cfg.rows, "Rows of each column")->capture_default_str();
  qdp->add_option("--chunk-rows", qdp_cfg.chunk_rows, "Rows per chunk (a multiple of 512)")->capture_default_str();
  qdp->add_option("--selectivity", qdp_cfg.selectivity, "Fraction of rows passing a < x")->capture_default_str();
  qdp->add_option("--seed", qdp_cfg.seed, "Data seed")->capture_default_str();
  qdp->add_option("--groups", qdp_cfg.groups, "Thread groups, each running every pipeline")->capture_default_str();
  qdp->add_option("--threads-scan-a", qdp_cfg.threads_scan_a, "SCAN_a threads per group")->capture_default_str();
  qdp->add_option("--threads-scan-b", qdp_cfg.threads_scan_b, "SCAN_b (prefetch) threads per group")->capture_default_str();
  qdp->add_option("--threads-aggregate", qdp_cfg.threads_aggregate, "AGGREGATE threads per group")->capture_default_str();
  qdp->add_option("--cache-capacity", qdp_capacity, "Fast-tier bytes for the cache (default: b's size)");
  qdp->add_option("--iterations", qdp_cfg.iterations, "Timed iterations")->capture_default_str();
  qdp->add_option("--warmup", qdp_cfg.warmup, "Untimed iterations first")->capture_default_str();
  qdp->add_option("--data-dir", qdp_cfg.data_dir, "Directory for the column files, kept (default: new in /tmp, removed)");
  qdp->add_flag("--reuse-data", qdp_cfg.reuse_data, "Read the columns from --data-dir instead of generating them");
  qdp->add_option("--configs", qdp_configs, "Configurations to run")->capture_default_str();
  qdp->add_option("--b-tier", qdp_cfg.b_tier, "Slow tier: storage, node:N, or dram|hbm|cxl|nvm")->capture_default_str();
  qdp->add_option("--cache-tier", qdp_cfg.cache_tier, "Fast tier the cache fills (default: DRAM of the CPUs)");
  qdp->add_option("--a-tier", qdp_cfg.a_tier, "Tier of a in prefetch_distributed (default: DRAM of the CPUs)");
  qdp->add_option("--engine", qdp_cfg.engine, "Fills from memory tiers: cpu, dsa or dsa-model")->capture_default_str();
  qdp->add_option("--queue-depth", qdp_cfg.storage_queue_depth, "io_uring reads in flight")->capture_default_str();
  qdp->add_option("--read-size", qdp_read_size, "Largest io_uring read (default 1MiB)");
  qdp->add_flag("!--no-pin", qdp_cfg.pin, "Do not pin threads");
  qdp->add_flag("!--no-huge-pages", qdp_cfg.huge_pages,
                "Columns, mask and cache memory in 4 KiB pages (default: transparent huge pages)");
  qdp->add_flag("--oversubscribe", qdp_cfg.oversubscribe, "Allow more computing threads than CPUs (exact sums, meaningless times)");
  qdp->add_flag("--json", qdp_opts.json, "JSON output");
  qdp->add_flag("--compare-duckdb", qdp_opts.compare_duckdb, "Time the same query in DuckDB (project venv) and check its sum");
  qdp->add_option("--plot", qdp_opts.plot_path, "Write the per-pipeline times as a PNG");

  CLI11_PARSE(app, argc, argv);

  if (qdp->parsed()) {
    qdp_cfg.configs = SplitList(qdp_configs);
    if (!qdp_capacity.empty()) {
      Result<std::size_t> cap = tierflow::bench::ParseSize(qdp_capacity);
      if (!cap.ok() && qdp_capacity != "0") return Fail(cap.status());
      qdp_cfg.cache_capacity = cap.ok() ? *cap : 0;
    }
    if (!qdp_read_size.empty()) {
      Result<std::size_t> rs = tierflow::bench::ParseSize(qdp_read_size);
      if (!rs.ok()) return Fail(rs.status());
      qdp_cfg.storage_read_bytes = *rs;
    }
    Status s = tierflow::tools::RunQdpCommand(qdp_cfg, qdp_opts, std::cout);
    return s.ok() ? 0 : Fail(s);
  }

  if (topo->parsed()) {
    Status s = tierflow::tools::RunTopologyCommand(topo_opts, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (copy->parsed()) {
    Result<std::vector<std::size_t>> sz = tierflow::bench::ParseSizeList(sizes);
    if (!sz.ok()) return Fail(sz.status());
    copy_cfg.sizes = *sz;
    copy_cfg.modes = SplitList(modes);
    copy_cfg.policies.clear();
    for (const std::string& p : SplitList(policies)) {
      Result<tierflow::PolicyKind> k = tierflow::ParsePolicyKind(p);
      if (!k.ok()) return Fail(k.status());
      copy_cfg.policies.push_back(*k);
    }
    for (auto [name, text, target] :
         {std::tuple{"--batch", &batches, &copy_cfg.batch_sizes},
          std::tuple{"--threads", &threads, &copy_cfg.threads},
          std::tuple{"--submitters", &submitters, &copy_cfg.submitters},
          std::tuple{"--src-node", &src_nodes, &copy_cfg.src_nodes},
          std::tuple{"--dst-node", &dst_nodes, &copy_cfg.dst_nodes}}) {
      Result<std::vector<int>> v = ParseIntList(name, *text);
      if (!v.ok()) return Fail(v.status());
      *target = *v;
    }
    copy_cfg.flush = !no_flush;
    copy_cfg.progress = !no_progress;
    copy_cfg.format = as_json ? "json" : as_csv ? "csv" : "table";
    if (copy_cfg.engine == "dsa" || copy_cfg.engine == "dsa-model") {
      dsa_copy_cfg.experiments = SplitList(experiments);
      dsa_copy_cfg.sizes_given = copy->count("--sizes") > 0;
      dsa_copy_cfg.nodes_given = copy->count("--dst-node") > 0;
      dsa_copy_cfg.policies_given = copy->count("--policy") > 0;
      dsa_copy_cfg.submitters_given = copy->count("--submitters") > 0;
      Status s = tierflow::bench::RunDsaCopyBench(copy_cfg, dsa_copy_cfg, std::cout);
      return s.ok() ? 0 : Fail(s);
    }
    Status s = tierflow::bench::RunCopyBench(copy_cfg, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (cache_bench->parsed()) {
    Result<std::size_t> es = tierflow::bench::ParseSize(entry_size);
    if (!es.ok()) return Fail(es.status());
    cache_cfg.entry_bytes = *es;
    Status s = tierflow::bench::RunCacheBench(cache_cfg, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (submit->parsed()) {
    Status s = tierflow::bench::RunSubmitBench(submit_cfg, &tierflow::tools::AllocationCount, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  return 0;
}
