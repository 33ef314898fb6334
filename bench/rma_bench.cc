// SPDX-License-Identifier: Apache-2.0
#include "bench/rma_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "bench/rma_launch.h"

namespace tierflow::bench {

namespace {

// mpi, window, sync, op, bytes (or targets), target rank (1 unless --target chose another).
using Key = std::tuple<std::string, std::string, std::string, std::string, long, int>;

// The times a row reports ("us", and for GATS per call "start_us", "complete_us", ...).
using Fields = std::map<std::string, std::vector<double>>;

struct Row {
  Fields with, without;
  std::map<std::string, Fields> offload;  // with the library, large puts on an engine, per mode
  std::vector<double> copy;  // glibc memcpy of the row's bytes in the origin, every launch
  bool checked = true;
};

constexpr const char* kCallFields[] = {"start_us", "complete_us", "post_us", "wait_us"};

Key KeyOf(const std::string& mpi, const nlohmann::json& j) {
  const long n = j.contains("bytes") ? j["bytes"].get<long>() : j["targets"].get<long>();
  return {mpi, j["window"], j["sync"], j["op"], n, j.value("target", 1)};
}

// The launches of one repetition: each window kind and operation in a process of its own (an
// MPI alone may slow down after many windows in one process: rma_latency.cc), the two-sided
// baselines, GATS with gats_ranks ranks. Across hosts with two ranks or more on each, the
// rows are measured twice: to rank 1 (this host) and to the first rank of the next host.
std::vector<std::pair<int, std::string>> Launches(const RmaBenchConfig& c) {
  const std::string lat = fmt::format("--iters {} --sizes {}", c.iters, c.sizes);
  const int job = c.hosts > 0 ? c.hosts * c.ranks_per_host : 2;
  std::vector<int> targets{1};
  if (c.hosts > 1 && c.ranks_per_host > 1) targets.push_back(c.ranks_per_host);
  // More ranks than CPUs (hosts of the test bed share this machine's): origin and target get a
  // CPU each, as on hosts of their own (rma_latency.cc).
  const std::string pin = job > sysconf(_SC_NPROCESSORS_ONLN) ? " --pin-pair" : "";
  std::vector<std::pair<int, std::string>> out;
  for (int target : targets) {
    for (const char* window : {"create", "allocate"}) {
      for (const char* op : {"put", "get"}) {
        out.emplace_back(job, fmt::format("{} --windows {} --ops {} --target {}{}", lat, window, op,
                                          target, pin));
      }
    }
  }
  if (job == 2) out.emplace_back(2, lat + " --windows none --ops none --two-sided");
  out.emplace_back(c.hosts > 0 ? job : c.gats_ranks, "--gats-only");
  return out;
}

// The launches of one launch line in a repetition: without and with the library (which goes
// first alternates), offload off; then, for the put rows, with each offload mode asked for.
// With a pool (`pool`: its path, else empty) every run with the library uses it.
std::vector<LaunchSpec> Specs(const RmaBenchConfig& c, int rep, int ranks, const std::string& args,
                              const Hosts* hosts, const std::string& pool) {
  std::vector<LaunchSpec> out;
  for (int k = 0; k < 2; ++k) {
    const bool with = (rep + k) % 2 == 1;
    out.push_back({ranks, with, {}, args, hosts});
    if (with) out.back().env.emplace_back("TIERFLOW_RMA_OFFLOAD", "off");
  }
  if (args.find("--ops put") != std::string::npos) {
    for (const std::string& mode : c.offload) {
      out.push_back({ranks, true, {{"TIERFLOW_RMA_OFFLOAD", mode}}, args, hosts});
    }
  }
  for (LaunchSpec& s : out) {
    if (!s.with_library || pool.empty()) continue;
    s.env.emplace_back("TIERFLOW_RMA_POOL", pool);  // after the offload mode: Record reads it
    s.env.emplace_back("TIERFLOW_RMA_POOL_SIZE", "1GiB");
  }
  return out;
}

void Record(const std::string& mpi, const LaunchSpec& spec, const nlohmann::json& j,
            std::map<Key, Row>& rows) {
  Row& r = rows[KeyOf(mpi, j)];
  const std::string mode = spec.with_library ? spec.env.front().second : "off";
  Fields& f = mode != "off" ? r.offload[mode] : spec.with_library ? r.with : r.without;
  f["us"].push_back(j["us"].get<double>());
  for (const char* field : kCallFields) {
    if (j.contains(field)) f[field].push_back(j[field].get<double>());
  }
  if (j.contains("memcpy_us")) r.copy.push_back(j["memcpy_us"].get<double>());
  r.checked = r.checked && j["data_checked"].get<bool>();
}

Status Collect(const RmaBenchConfig& c, const Mpi& m, const Hosts* hosts, const std::string& pool,
               std::map<Key, Row>& rows, Ticker& ticker) {
  Result<std::pair<std::string, std::string>> files = RmaFiles("rma_latency_" + m.name, m.name);
  if (!files.ok()) return files.status();
  const auto& [prog, lib] = *files;
  for (int rep = 0; rep < c.reps; ++rep) {
    ticker.Set(fmt::format("{}, alternation {} of {}", m.name, rep + 1, c.reps));
    for (const auto& [ranks, args] : Launches(c)) {
      for (const LaunchSpec& spec : Specs(c, rep, ranks, args, hosts, pool)) {
        const std::string command = LaunchCommand(m, prog, lib, spec);
        Result<std::vector<nlohmann::json>> got =
            hosts != nullptr ? LaunchJsonGrace(command, 5) : LaunchJson(command);
        if (!got.ok()) return got.status();
        for (const nlohmann::json& j : *got) Record(m.name, spec, j, rows);
      }
    }
  }
  return Status::Ok();
}

// Which JSON array a row of rma_latency belongs to: the contract's `rows` hold latencies
// (put, get, gats); bandwidth, the two-sided baselines, GATS per call and window creation have
// keys of their own.
std::string Section(const std::string& op) {
  if (op == "put_bw") return "bandwidth";
  if (op == "pingpong" || op == "send_bw") return "two_sided";
  if (op == "gats_calls") return "gats_calls";
  if (op == "create_free") return "creation";
  return "rows";
}

double MedianOf(const Fields& f, const std::string& field) {
  const auto it = f.find(field);
  return it == f.end() ? 0 : Summarize(it->second).median;
}

nlohmann::json RowJson(const Key& k, const Row& r) {
  const auto& [mpi, window, sync, op, n, target] = k;
  const double with = MedianOf(r.with, "us"), without = MedianOf(r.without, "us");
  nlohmann::json j{{"mpi", mpi},
                   {"window", window},
                   {"sync", sync},
                   {"op", op},
                   {"with_us", with},
                   {"without_us", without},
                   {"ratio", without > 0 ? with / without : 0},
                   {"data_checked", r.checked}};
  j[op == "gats" || op == "gats_calls" ? "targets" : "bytes"] = n;
  if (target != 1) j["target"] = target;
  if (!r.copy.empty()) j["memcpy_us"] = Summarize(r.copy).median;
  // Bandwidth rows: us per message of n bytes (bytes per µs is MB/s). The two-sided rows keep
  // their pattern as the operation: "pingpong" (half a round trip) and "send" (a window).
  if (op == "put_bw" || op == "send_bw") {
    j["op"] = op == "put_bw" ? "put" : "send";
    j["with_gbps"] = with > 0 ? n / with / 1e3 : 0;
    j["without_gbps"] = without > 0 ? n / without / 1e3 : 0;
  }
  for (const auto& [mode, f] : r.offload) {  // mode -> us (and GB/s for bandwidth)
    const double us = MedianOf(f, "us");
    j["offload"][mode]["us"] = us;
    if (op == "put_bw") j["offload"][mode]["gbps"] = us > 0 ? n / us / 1e3 : 0;
  }
  if (op == "gats_calls") {  // per call: the origin's start and complete, the targets' post, wait
    for (const char* field : kCallFields) {
      const std::string name = std::string(field).substr(0, std::string(field).size() - 3);
      j["with_" + name + "_us"] = MedianOf(r.with, field);
      j["without_" + name + "_us"] = MedianOf(r.without, field);
    }
  }
  if (op == "create_free") {  // neither a synchronisation nor an operation of the contract's
    j.erase("sync");
    j.erase("op");
  }
  return j;
}

nlohmann::json ToJson(const std::map<Key, Row>& rows) {
  nlohmann::json out{{"rows", nlohmann::json::array()},
                     {"bandwidth", nlohmann::json::array()},
                     {"two_sided", nlohmann::json::array()},
                     {"gats_calls", nlohmann::json::array()},
                     {"creation", nlohmann::json::array()}};
  for (const auto& [k, r] : rows) out[Section(std::get<3>(k))].push_back(RowJson(k, r));
  return out;
}

std::string Cell(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? j[key].get<std::string>() : "";
}

void PrintSection(const std::string& title, const nlohmann::json& rows, std::ostream& out) {
  if (rows.empty()) return;
  out << "\n" << title << "\n";
  out << fmt::format("{:<8} {:<9} {:<9} {:<8} {:<6} {:>9} {:>12} {:>12} {:>7} {:>10}  {}\n", "mpi",
                     "window", "sync", "op", "path", "bytes", "with us", "without us", "ratio",
                     "memcpy us", "data");
  for (const nlohmann::json& j : rows) {
    const std::string n = j.contains("bytes") ? std::to_string(j["bytes"].get<long>())
                                              : fmt::format("{} tgts", j["targets"].get<long>());
    const std::string sync = Cell(j, "sync");
    const std::string copy =
        j.contains("memcpy_us") ? fmt::format("{:.3f}", j["memcpy_us"].get<double>()) : "";
    std::string offload;
    if (j.contains("offload")) {
      for (const auto& [mode, f] : j["offload"].items()) {
        offload += fmt::format("  offload {} {:.3f} us", mode, f["us"].get<double>());
      }
    }
    out << fmt::format(
        "{:<8} {:<9} {:<9} {:<8} {:<6} {:>9} {:>12.3f} {:>12.3f} {:>7.2f} {:>10}  {}{}\n",
        Cell(j, "mpi"), Cell(j, "window"), sync, Cell(j, "op"), Cell(j, "path"), n,
        j["with_us"].get<double>(), j["without_us"].get<double>(), j["ratio"].get<double>(), copy,
        j["data_checked"] ? "checked" : "WRONG", offload);
  }
}

// GATS per call, with and without the library: the thesis' Fig. 3.15.
void PrintGatsCalls(const nlohmann::json& rows, std::ostream& out) {
  if (rows.empty()) return;
  out << "\nGATS per call (µs, medians of 1001 epochs; origin: start, complete; slowest target: "
         "post, wait), with / without the library\n";
  out << fmt::format("{:<8} {:<9} {:>7} {:>17} {:>17} {:>17} {:>17}\n", "mpi", "window", "targets",
                     "start", "complete", "post", "wait");
  for (const nlohmann::json& j : rows) {
    std::string cells;
    for (const char* call : {"start", "complete", "post", "wait"}) {
      cells += fmt::format(" {:>8.3f}/{:<8.3f}", j[fmt::format("with_{}_us", call)].get<double>(),
                           j[fmt::format("without_{}_us", call)].get<double>());
    }
    out << fmt::format("{:<8} {:<9} {:>7}{}\n", Cell(j, "mpi"), Cell(j, "window"),
                       j["targets"].get<long>(), cells);
  }
}

void PrintTables(const nlohmann::json& doc, std::ostream& out) {
  PrintSection("latency (µs per operation and synchronisation)", doc["rows"], out);
  PrintSection("bandwidth (µs per put, 64 puts per lock or GATS epoch)", doc["bandwidth"], out);
  PrintSection("two-sided baselines (µs: half a ping-pong; per message of a window of 64 sends)",
               doc["two_sided"], out);
  PrintGatsCalls(doc["gats_calls"], out);
  PrintSection("window creation (µs per creation and MPI_Win_free of 64 KiB)", doc["creation"],
               out);
}

// Where the MPI programs and libraries are (the executable's directory, and once installed
// the library and libexec directories): the hosts must see them.
// Across hosts: every row's hosts, ranks per host, target and path (local: rank 0 and its
// target, or the GATS origin and all its targets, on host0; mpi: some target on another host,
// reached through the MPI; pool: ... through the pool).
void MarkHosts(const RmaBenchConfig& c, nlohmann::json& doc) {
  for (const char* section : {"rows", "bandwidth", "two_sided", "gats_calls", "creation"}) {
    for (nlohmann::json& r : doc[section]) {
      r["hosts"] = c.hosts;
      r["ranks_per_host"] = c.ranks_per_host;
      // The highest rank the origin reaches: the last of a GATS row's targets, or the target.
      const long last = r.contains("targets") ? r["targets"].get<long>() : r.value("target", 1L);
      // Window creation has no target: every rank makes the window.
      if (!r.contains("targets") && std::string(section) != "creation") r["target"] = last;
      // Two-sided rows have no window: their messages always take the MPI's path.
      const bool window = std::string(section) != "two_sided";
      r["path"] = last < c.ranks_per_host ? "local" : c.pool && window ? "pool" : "mpi";
    }
  }
}

// A new directory of this machine's /dev/shm (mode 0700) for the pool of --pool, removed with
// the pool file in it (made there by the runs) when the benchmark ends.
class PoolDirectory {
 public:
  PoolDirectory() = default;
  PoolDirectory(const PoolDirectory&) = delete;
  PoolDirectory& operator=(const PoolDirectory&) = delete;
  ~PoolDirectory() {
    if (dir_.empty()) return;
    unlink(file().c_str());
    rmdir(dir_.c_str());
  }
  Status Make() {
    char name[] = "/dev/shm/tierflow-bench-pool.XXXXXX";
    if (mkdtemp(name) == nullptr) {
      return Status::IoError(fmt::format("cannot make a directory for the pool in /dev/shm: {}",
                                         std::strerror(errno)));
    }
    dir_ = name;
    return Status::Ok();
  }
  const std::string& dir() const { return dir_; }
  std::string file() const { return dir_.empty() ? "" : dir_ + "/pool"; }

 private:
  std::string dir_;
};

std::string Heading(const RmaBenchConfig& c) {
  if (c.hosts > 0) {
    const char* remote = c.pool ? "pool" : "mpi";
    return fmt::format(
        "libtierflow_rma{} against the MPI alone across {} hosts x {} ranks (test bed of "
        "namespaces on this machine: scripts/hosts.sh; the hosts share its memory and CPUs{}); "
        "medians of {} alternated runs; origin rank 0, target {}\n",
        c.pool ? " with a pool" : "", c.hosts, c.ranks_per_host,
        c.pool ? ", and the pool is a file in its memory, coherent: an upper bound for a CXL "
                 "device, maintained as a non-coherent one"
               : "",
        c.reps,
        c.ranks_per_host >= 2
            ? fmt::format("rank 1 (same host: path local) or rank {} (other host: path {})",
                          c.ranks_per_host, remote)
            : fmt::format("rank 1 (other host: path {})", remote));
  }
  return fmt::format(
      "libtierflow_rma against the MPI alone: medians of {} alternated runs; "
      "put/get latency with 2 ranks, GATS with {} ranks on {} CPUs\n",
      c.reps, c.gats_ranks, sysconf(_SC_NPROCESSORS_ONLN));
}

}  // namespace

std::vector<std::string> RmaBenchMpis() {
  std::vector<std::string> out;
  for (const Mpi& m : BuiltMpis()) out.push_back(m.name);
  return out;
}

Status RunRmaBench(const RmaBenchConfig& c, std::ostream& out) {
  if (!c.apps.empty()) return RunRmaApps(c, out);
  PoolDirectory pool;  // outlives the test bed that shows it to the hosts
  std::unique_ptr<Hosts> hosts;
  if (c.hosts > 0) {
    std::vector<std::string> shares = ProgramDirectories();
    if (c.pool) {
      if (Status s = pool.Make(); !s.ok()) return s;
      shares.push_back(pool.dir());
    }
    Result<std::unique_ptr<Hosts>> up = Hosts::Up(c.hosts, shares);
    if (!up.ok()) return up.status();
    hosts = std::move(*up);
  }
  std::map<Key, Row> rows;
  int ran = 0;
  Ticker ticker("tierflow bench rma", c.progress && !c.json && StderrIsTerminal());
  for (const Mpi& m : BuiltMpis()) {
    if (!c.mpis.empty() && std::find(c.mpis.begin(), c.mpis.end(), m.name) == c.mpis.end()) {
      continue;
    }
    if (Status s = Collect(c, m, hosts.get(), pool.file(), rows, ticker); !s.ok()) return s;
    ++ran;
  }
  if (ran == 0) {
    return Status::NotFound(
        "no MPI to run: this build has libtierflow_rma for none of them "
        "(install Open MPI or MPICH with `make setup` and rebuild)");
  }
  nlohmann::json doc = ToJson(rows);
  if (c.hosts > 0) MarkHosts(c, doc);
  if (c.json) {
    doc["reps"] = c.reps;
    doc["iters"] = c.iters;
    out << doc.dump(2) << "\n";
  } else {
    out << Heading(c);
    PrintTables(doc, out);
  }
  if (!c.plot.empty()) {
    if (Status s = Plot("plot_rma.py", doc["rows"], c.plot); !s.ok()) return s;
  }
  for (const char* section : {"rows", "bandwidth", "two_sided", "gats_calls", "creation"}) {
    for (const nlohmann::json& r : doc[section]) {
      if (!r["data_checked"].get<bool>()) {
        return Status(StatusCode::kFailed, "a row received wrong data (marked WRONG above)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
