// SPDX-License-Identifier: Apache-2.0
// `tierflow bench dsort` (dsort_bench.h): runs tierflow-dsort-MPI through the launchers of
// `tierflow bench rma` (rma_launch.h) and summarises its JSON.
#include "bench/dsort_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "bench/rma_launch.h"
#include "tierflow/size.h"

namespace tierflow::bench {

namespace {

using nlohmann::json;

// A directory of this benchmark's own for the ranks' files (shown to every host), removed at
// the end; the sort removes its files itself, so it is empty then unless a job was killed.
class RunDirectory {
 public:
  RunDirectory() = default;
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;
  ~RunDirectory() {
    if (!dir_.empty() && rmdir(dir_.c_str()) != 0) {
      std::fprintf(stderr, "tierflow bench dsort: %s is not empty (a job left files): kept\n",
                   dir_.c_str());
    }
  }
  Status Make(const std::string& base) {
    std::string name = base + "/tierflow-bench-dsort.XXXXXX";
    if (mkdtemp(name.data()) == nullptr) {
      return Status::IoError(
          fmt::format("cannot make a directory in {}: {} (give --dir a "
                      "writable directory on the storage to measure)",
                      base, std::strerror(errno)));
    }
    dir_ = name;
    return Status::Ok();
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

int Ranks(const DsortBenchConfig& c) { return c.hosts * c.ranks_per_host; }

std::string Args(const DsortBenchConfig& c, const std::string& keys, const std::string& dir) {
  return fmt::format(
      "--generate {} --keys {} --format {} --memory {} --threads {} --exchange {} --dir {} "
      "--verify --json --quiet",
      c.total_bytes / static_cast<std::uint64_t>(Ranks(c)), keys, c.format, c.memory_bytes,
      c.threads, c.exchange, Quote(dir));
}

// One job: its JSON object. A job whose output did not verify is an error.
Result<json> RunOnce(const DsortBenchConfig& c, const Mpi& m, const std::string& program,
                     const Hosts* hosts, const std::string& dir, const std::string& keys) {
  LaunchSpec spec;
  spec.ranks = Ranks(c);
  spec.hosts = hosts;
  spec.args = Args(c, keys, dir);
  const std::string command = LaunchCommand(m, program, "", spec);
  Result<std::vector<json>> got =
      hosts != nullptr ? LaunchJsonGrace(command, 15, 1) : LaunchJson(command);
  if (!got.ok()) return got.status();
  const json& j = got->back();
  if (!j.value("verified", false)) {
    return Status(StatusCode::kFailed,
                  fmt::format("{}: the output did not verify: {}", command, j.dump()));
  }
  return j;
}

double Median(const std::vector<json>& runs, const char* key) {
  std::vector<double> v;
  for (const json& r : runs) v.push_back(r[key].is_number() ? r[key].get<double>() : 0.0);
  return Summarize(v).median;
}

double Most(const std::vector<json>& runs, const char* key) {
  double most = 0;
  for (const json& r : runs) most = std::max(most, r[key].get<double>());
  return most;
}

// The runs of one MPI and key distribution as one row: medians of the times, the most of what
// a rank held.
json Row(const std::vector<json>& runs) {
  const json& first = runs.front();
  json row;
  for (const char* k : {"mpi", "ranks", "hosts", "ranks_per_host", "format", "keys", "exchange",
                        "records", "bytes", "memory_bytes", "run_bytes"}) {
    row[k] = first[k];
  }
  for (const char* k : {"sort_ms", "floor_ms", "vs_floor", "exchange_ms", "merge_ms", "io_floor_ms",
                        "exchange_floor_ms"}) {
    row[k] = Median(runs, k);
  }
  for (const char* k : {"max_partition_vs_mean", "temp_peak_bytes", "rss_peak_bytes"}) {
    row[k] = Most(runs, k);
  }
  row["sort_ms_runs"] = json::array();
  for (const json& r : runs) row["sort_ms_runs"].push_back(r["sort_ms"]);
  row["verified"] = true;
  return row;
}

json Target(const json& row, std::string what, double ratio, double limit) {
  return {{"mpi", row["mpi"]}, {"keys", row["keys"]}, {"what", std::move(what)},
          {"ratio", ratio},    {"limit", limit},      {"met", ratio <= limit}};
}

// The distributed sort's targets for one MPI's rows (docs/benchmark-methods.md).
void AddTargets(json& rows, json& targets) {
  const json* uniform = nullptr;
  for (const json& r : rows) {
    if (r["keys"] == "uniform") uniform = &r;
  }
  for (json& r : rows) {
    const double share = r["bytes"].get<double>() / r["ranks"].get<double>();
    if (uniform != nullptr) {
      r["vs_uniform"] = r["sort_ms"].get<double>() / (*uniform)["sort_ms"].get<double>();
    }
    if (&r == uniform) {
      targets.push_back(Target(r, "sort / floor", r["vs_floor"], 1.4));
      targets.push_back(Target(
          r, "temporary space / (1.1 x share + one run)",
          r["temp_peak_bytes"].get<double>() / (1.1 * share + r["run_bytes"].get<double>()), 1.0));
      targets.push_back(Target(r, "resident / --memory",
                               r["rss_peak_bytes"].get<double>() / r["memory_bytes"].get<double>(),
                               1.1));
    } else if (r.contains("vs_uniform")) {
      targets.push_back(Target(r, "time / uniform keys' time", r["vs_uniform"], 1.5));
    }
    targets.push_back(Target(r, "largest partition / mean", r["max_partition_vs_mean"], 1.2));
  }
}

std::string Where(const DsortBenchConfig& c) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (c.hosts == 1) {
    return fmt::format("{} ranks on this machine ({} CPUs, one file system)", c.ranks_per_host,
                       cpus);
  }
  return fmt::format(
      "{} hosts x {} ranks of a test bed of namespaces on this one machine: the hosts share its "
      "{} CPUs and one file system, and reach each other over TCP through a virtual bridge",
      c.hosts, c.ranks_per_host, cpus);
}

// Every MPI's rows for `c.keys`, the distributions alternated `c.reps` times.
Status Collect(const DsortBenchConfig& c, const Hosts* hosts, const std::string& dir, json& doc,
               Ticker& ticker) {
  int ran = 0;
  for (const Mpi& m : BuiltMpis()) {
    if (!c.mpis.empty() && std::find(c.mpis.begin(), c.mpis.end(), m.name) == c.mpis.end()) {
      continue;
    }
    Result<std::pair<std::string, std::string>> files =
        RmaFiles("tierflow-dsort-" + m.name, m.name);
    if (!files.ok()) return files.status();
    std::map<std::string, std::vector<json>> runs;
    for (int rep = 0; rep < c.reps; ++rep) {
      for (const std::string& k : c.keys) {
        ticker.Set(fmt::format("{} keys {} (run {} of {})", m.name, k, rep + 1, c.reps));
        Result<json> r = RunOnce(c, m, files->first, hosts, dir, k);
        if (!r.ok()) return r.status();
        runs[k].push_back(std::move(*r));
      }
    }
    json rows = json::array();
    for (const std::string& k : c.keys) rows.push_back(Row(runs[k]));
    AddTargets(rows, doc["targets"]);
    for (json& r : rows) doc["rows"].push_back(std::move(r));
    ++ran;
  }
  if (ran == 0) {
    return Status::NotFound(
        "no MPI to run: this build has the distributed sort for none of them (install Open MPI "
        "or MPICH with `make setup` and rebuild)");
  }
  return Status::Ok();
}

void PrintTables(const json& doc, std::ostream& out) {
  out << fmt::format("{:<9}{:<9}{:>9}{:>10}{:>10}{:>9}{:>11}{:>11}{:>11}\n", "MPI", "keys",
                     "sort s", "floor s", "vs floor", "vs unif", "partition", "temp MiB",
                     "RSS MiB");
  for (const json& r : doc["rows"]) {
    out << fmt::format(
        "{:<9}{:<9}{:>9.2f}{:>10.2f}{:>9.2f}x{:>8.2f}x{:>10.3f}x{:>11.1f}{:>11.1f}\n",
        r["mpi"].get<std::string>(), r["keys"].get<std::string>(), r["sort_ms"].get<double>() / 1e3,
        r["floor_ms"].get<double>() / 1e3, r["vs_floor"].get<double>(), r.value("vs_uniform", 0.0),
        r["max_partition_vs_mean"].get<double>(), r["temp_peak_bytes"].get<double>() / (1 << 20),
        r["rss_peak_bytes"].get<double>() / (1 << 20));
  }
  out << "\ntargets:\n";
  for (const json& t : doc["targets"]) {
    out << fmt::format("  {:<8} {:<8} {:<38} {:>6.3f}  <= {:.2f}  {}\n",
                       t["mpi"].get<std::string>(), t["keys"].get<std::string>(),
                       t["what"].get<std::string>(), t["ratio"].get<double>(),
                       t["limit"].get<double>(), t["met"].get<bool>() ? "met" : "NOT met");
  }
}

Status CheckConfig(const DsortBenchConfig& c) {
  const std::uint64_t per_rank = c.total_bytes / static_cast<std::uint64_t>(Ranks(c));
  if (per_rank < 4096) {
    return Status::InvalidArgument(
        fmt::format("--size {} gives each of the {} ranks less than 4KiB: give --size at least {}",
                    FormatSize(c.total_bytes), Ranks(c), FormatSize(4096ull * Ranks(c))));
  }
  return Status::Ok();
}

}  // namespace

Status RunDsortBench(const DsortBenchConfig& c, std::ostream& out) {
  if (Status s = CheckConfig(c); !s.ok()) return s;
  RunDirectory dir;  // outlives the test bed that shows it to the hosts
  const char* tmp = std::getenv("TMPDIR");
  if (Status s = dir.Make(!c.dir.empty()           ? c.dir
                          : tmp != nullptr && *tmp ? tmp
                                                   : "/tmp");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<Hosts> hosts;
  if (c.hosts > 1) {
    std::vector<std::string> shares = ProgramDirectories();
    shares.push_back(dir.dir());
    Result<std::unique_ptr<Hosts>> up = Hosts::Up(c.hosts, shares);
    if (!up.ok()) return up.status();
    hosts = std::move(*up);
  }
  json doc = {
      {"where", Where(c)}, {"reps", c.reps}, {"rows", json::array()}, {"targets", json::array()}};
  Ticker ticker("tierflow bench dsort", c.progress && !c.json && StderrIsTerminal());
  if (Status s = Collect(c, hosts.get(), dir.dir(), doc, ticker); !s.ok()) return s;
  if (c.json) {
    out << doc.dump(2) << "\n";
  } else {
    out << "tierflow-dsort, " << doc["where"].get<std::string>() << "; medians of " << c.reps
        << " alternated run(s), every output verified\n";
    PrintTables(doc, out);
  }
  if (!c.plot.empty()) return Plot("plot_dsort.py", doc, c.plot);
  return Status::Ok();
}

}  // namespace tierflow::bench
