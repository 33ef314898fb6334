// SPDX-License-Identifier: Apache-2.0
// `tierflow bench rma --apps`: the thesis' applications (apps/ft, apps/ca) under each MPI,
// without the library and with it in each coherence mode, alternated (rma_bench.h).
#include <unistd.h>

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "bench/rma_bench.h"
#include "bench/rma_launch.h"

namespace tierflow::bench {

namespace {

using nlohmann::json;

// app, mpi, variant, ranks, with the library, coherence mode, offload mode
using RunKey =
    std::tuple<std::string, std::string, std::string, int, bool, std::string, std::string>;
using Runs = std::map<RunKey, std::vector<json>>;

struct App {
  std::string name, args;
  std::vector<std::string> variants;
  std::vector<int> ranks;
};

std::vector<App> Apps(const RmaBenchConfig& c) {
  std::vector<App> out;
  for (const std::string& a : c.apps) {
    if (a == "ft") {
      out.push_back({a, "--class " + c.ft_class + " --json", {"2sc", "osc", "scosco"}, c.ft_ranks});
    } else {
      out.push_back({a,
                     fmt::format("--rows {} --cells {} --iterations {} --json", c.ca_rows,
                                 c.ca_cells, c.ca_iterations),
                     {"two-sided", "gats"},
                     c.ca_ranks});
    }
  }
  return out;
}

// `list` rotated left by `by`, comma-joined: the order of the variants changes every repetition.
std::string Rotated(const std::vector<std::string>& list, int by) {
  std::string s;
  for (std::size_t i = 0; i < list.size(); ++i) {
    s += (i ? "," : "") + list[(i + by) % list.size()];
  }
  return s;
}

struct Mode {
  bool with;
  std::string coherence, offload;
};

// Without the library, then with it in each coherence mode (offload off), then coherent with
// each offload mode; rotated by the repetition.
std::vector<Mode> Modes(const RmaBenchConfig& c, int rep) {
  std::vector<Mode> m{{false, "coherent", "off"}};
  for (const std::string& mode : c.coherence) m.push_back({true, mode, "off"});
  for (const std::string& offload : c.offload) m.push_back({true, "coherent", offload});
  std::rotate(m.begin(), m.begin() + rep % m.size(), m.end());
  return m;
}

Status CollectApp(const RmaBenchConfig& c, const Mpi& m, const App& app, Runs& runs,
                  Ticker& ticker) {
  Result<std::pair<std::string, std::string>> files =
      RmaFiles("tierflow-" + app.name + "-" + m.name, m.name);
  if (!files.ok()) return files.status();
  const auto& [prog, lib] = *files;
  for (int rep = 0; rep < c.reps; ++rep) {
    for (int ranks : app.ranks) {
      ticker.Set(fmt::format("{} {}, {} ranks, alternation {} of {}", m.name, app.name, ranks,
                             rep + 1, c.reps));
      for (const auto& [with, mode, offload] : Modes(c, rep)) {
        LaunchSpec spec{ranks, with, {}, app.args + " --variant " + Rotated(app.variants, rep)};
        if (with) {
          spec.env.emplace_back("TIERFLOW_RMA_COHERENCE", mode);
          spec.env.emplace_back("TIERFLOW_RMA_OFFLOAD", offload);
        }
        // Exit status 1 is the program's word that a result did not verify: reported per run.
        Result<std::vector<json>> got = LaunchJson(LaunchCommand(m, prog, lib, spec), 1);
        if (!got.ok()) return got.status();
        for (const json& j : *got) {
          runs[{app.name, m.name, j["variant"], ranks, with, mode, offload}].push_back(j);
        }
      }
    }
  }
  return Status::Ok();
}

// The automaton's hash on one rank, checked by the program against its serial recomputation:
// every run of every variant and rank count must end in it.
Result<std::string> CaReference(const RmaBenchConfig& c, const Mpi& m) {
  Result<std::pair<std::string, std::string>> files = RmaFiles("tierflow-ca-" + m.name, m.name);
  if (!files.ok()) return files.status();
  const LaunchSpec spec{1,
                        false,
                        {},
                        fmt::format("--rows {} --cells {} --iterations {} --variant two-sided "
                                    "--verify --json",
                                    c.ca_rows, c.ca_cells, c.ca_iterations)};
  Result<std::vector<json>> got = LaunchJson(LaunchCommand(m, files->first, files->second, spec));
  if (!got.ok()) return got.status();
  const json& j = got->front();
  if (!j.value("verified", false)) {
    return Status(StatusCode::kFailed,
                  "the automaton's one-rank run did not match its serial "
                  "recomputation: " +
                      j.dump());
  }
  return j["hash"].get<std::string>();
}

double Field(const json& j, const char* key) { return j.value(key, 0.0); }

double Median(const std::vector<json>& runs, const char* key) {
  std::vector<double> v;
  for (const json& j : runs) v.push_back(Field(j, key));
  return Summarize(v).median;
}

double CommSync(const json& j) { return Field(j, "comm_s") + Field(j, "sync_s"); }

bool Verified(const std::vector<json>& runs, const std::string& reference) {
  for (const json& j : runs) {
    const bool ok = j.contains("hash") ? j["hash"] == reference : j.value("verified", false);
    if (!ok) return false;
  }
  return true;
}

json Summarise(const RunKey& k, const std::vector<json>& runs, const std::string& reference) {
  const auto& [app, mpi, variant, ranks, with, mode, offload] = k;
  std::vector<double> totals, comm_sync;
  for (const json& j : runs) {
    totals.push_back(Field(j, "total_s"));
    comm_sync.push_back(CommSync(j));
  }
  const Summary t = Summarize(totals);
  // The run whose total is the median supplies the per-rank split (process skew).
  const json& middle =
      *std::min_element(runs.begin(), runs.end(), [&](const json& a, const json& b) {
        return std::abs(Field(a, "total_s") - t.median) < std::abs(Field(b, "total_s") - t.median);
      });
  json s{{"app", app},
         {"variant", variant},
         {"ranks", ranks},
         {"mpi", mpi},
         {"with_library", with},
         {"coherence", mode},
         {"offload", offload},
         {"verified", Verified(runs, reference)},
         {"total_s", t.median},
         {"total_s_min", t.min},
         {"total_s_max", t.max},
         {"compute_s", Median(runs, "compute_s")},
         {"comm_s", Median(runs, "comm_s")},
         {"sync_s", Median(runs, "sync_s")},
         {"comm_sync_s", Summarize(comm_sync).median},
         {"runs", runs.size()},
         {"oversubscribed", middle.value("oversubscribed", false)},
         {"per_rank", middle["per_rank"]}};
  for (const char* key : {"class", "checksums", "hash", "rows", "cells", "iterations"}) {
    if (middle.contains(key)) s[key] = middle[key];
  }
  if (app == "ft") s["mflops"] = Median(runs, "mflops");
  return s;
}

const json* Find(const json& apps, const std::string& app, const std::string& mpi,
                 const std::string& variant, bool with, const std::string& mode) {
  for (const json& r : apps) {
    if (r["app"] == app && r["mpi"] == mpi && r["variant"] == variant && r["ranks"] == 2 &&
        r["with_library"] == with && r["coherence"] == mode && r["offload"] == "off") {
      return &r;
    }
  }
  return nullptr;
}

struct Target {
  std::string app, what;
  const char* key;  // "total_s" or "comm_sync_s"
  double limit;
  std::string variant;
  bool with;
  std::string mode;  // the run measured
  std::string base_variant;
  bool base_with;
  std::string base_mode;  // the run it is measured against
};

// The comparisons the issue sets (2 ranks): FT's scosco against 2sc, the automaton's gats
// against two-sided and against itself on the MPI alone, non-coherent against coherent.
std::vector<Target> Targets() {
  return {
      {"ft", "scosco with the library, comm+sync / 2sc's", "comm_sync_s", 0.8, "scosco", true,
       "coherent", "2sc", false, "coherent"},
      {"ft", "scosco with the library, total / 2sc's", "total_s", 1.0, "scosco", true, "coherent",
       "2sc", false, "coherent"},
      {"ca", "gats with the library, total / two-sided's", "total_s", 0.9, "gats", true, "coherent",
       "two-sided", false, "coherent"},
      {"ca", "gats with the library, total / gats on the MPI alone", "total_s", 0.7, "gats", true,
       "coherent", "gats", false, "coherent"},
      {"ft", "scosco, noncoherent / coherent total", "total_s", 1.3, "scosco", true, "noncoherent",
       "scosco", true, "coherent"},
      {"ca", "gats, noncoherent / coherent total", "total_s", 1.3, "gats", true, "noncoherent",
       "gats", true, "coherent"},
  };
}

json Evaluate(const json& apps, const std::vector<std::string>& mpis) {
  json out = json::array();
  for (const std::string& mpi : mpis) {
    for (const Target& t : Targets()) {
      const json* a = Find(apps, t.app, mpi, t.variant, t.with, t.mode);
      const json* b = Find(apps, t.app, mpi, t.base_variant, t.base_with, t.base_mode);
      if (a == nullptr || b == nullptr || (*b)[t.key].get<double>() <= 0) continue;
      const double ratio = (*a)[t.key].get<double>() / (*b)[t.key].get<double>();
      json j{{"app", t.app},           {"mpi", mpi},     {"ranks", 2},
             {"what", t.what},         {"ratio", ratio}, {"limit", t.limit},
             {"met", ratio <= t.limit}};
      // A total cannot fall below the computation in it: the ratio with no communication.
      if (std::string(t.key) == "total_s") {
        j["floor"] = (*a)["compute_s"].get<double>() / (*b)["total_s"].get<double>();
      }
      if (a->contains("class")) j["class"] = (*a)["class"];
      out.push_back(j);
    }
  }
  return out;
}

std::string Library(const json& r) {
  if (!r["with_library"].get<bool>()) return "MPI alone";
  const std::string offload = r["offload"].get<std::string>();
  return r["coherence"].get<std::string>() + (offload == "off" ? "" : "+" + offload);
}

void PrintApp(const json& apps, const std::string& app, const std::string& title,
              std::ostream& out) {
  if (std::none_of(apps.begin(), apps.end(), [&](const json& r) { return r["app"] == app; })) {
    return;
  }
  out << "\n" << title << "\n";
  out << fmt::format("{:<8} {:>5} {:<10} {:<18} {:>9} {:>9} {:>9} {:>9} {:>10} {:>16}  {}\n", "mpi",
                     "ranks", "variant", "library", "total s", "compute", "comm", "sync",
                     "comm+sync", app == "ft" ? "MFLOPS" : "hash", "result");
  for (const json& r : apps) {
    if (r["app"] != app) continue;
    const std::string extra = app == "ft" ? fmt::format("{:.0f}", r["mflops"].get<double>())
                                          : r.value("hash", std::string());
    out << fmt::format(
        "{:<8} {:>5}{} {:<10} {:<18} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>10.4f} "
        "{:>16}  {}\n",
        r["mpi"].get<std::string>(), r["ranks"].get<int>(),
        r["oversubscribed"].get<bool>() ? "*" : " ", r["variant"].get<std::string>(), Library(r),
        r["total_s"].get<double>(), r["compute_s"].get<double>(), r["comm_s"].get<double>(),
        r["sync_s"].get<double>(), r["comm_sync_s"].get<double>(), extra,
        r["verified"].get<bool>() ? "verified" : "WRONG");
  }
}

void PrintTargets(const json& targets, std::ostream& out) {
  if (targets.empty()) return;
  out << "\ntargets (2 ranks, medians):\n";
  for (const json& t : targets) {
    std::string line = fmt::format(
        "  {:<8} {:<3} {:<52} {:>6.2f}x  (<= {:.2f}): {}", t["mpi"].get<std::string>(),
        t["app"].get<std::string>(), t["what"].get<std::string>(), t["ratio"].get<double>(),
        t["limit"].get<double>(), t["met"].get<bool>() ? "met" : "NOT met");
    if (t.contains("floor") && !t["met"].get<bool>()) {
      line += fmt::format("; its computation alone is {:.2f}x", t["floor"].get<double>());
    }
    out << line << "\n";
  }
}

Status CollectAll(const RmaBenchConfig& c, Runs& runs, std::map<std::string, std::string>& refs,
                  std::vector<std::string>& mpis) {
  Ticker ticker("tierflow bench rma --apps", c.progress && !c.json && StderrIsTerminal());
  for (const Mpi& m : BuiltMpis()) {
    if (!c.mpis.empty() && std::find(c.mpis.begin(), c.mpis.end(), m.name) == c.mpis.end()) {
      continue;
    }
    mpis.push_back(m.name);
    if (std::find(c.apps.begin(), c.apps.end(), "ca") != c.apps.end()) {
      ticker.Set(m.name + " ca, the one-rank reference");
      Result<std::string> ref = CaReference(c, m);
      if (!ref.ok()) return ref.status();
      refs[m.name] = *ref;
    }
    for (const App& app : Apps(c)) {
      if (Status s = CollectApp(c, m, app, runs, ticker); !s.ok()) return s;
    }
  }
  if (mpis.empty()) {
    return Status::NotFound(
        "no MPI to run: this build has libtierflow_rma for none of them "
        "(install Open MPI or MPICH with `make setup` and rebuild)");
  }
  return Status::Ok();
}

}  // namespace

Status RunRmaApps(const RmaBenchConfig& c, std::ostream& out) {
  Runs runs;
  std::map<std::string, std::string> refs;
  std::vector<std::string> mpis;
  if (Status s = CollectAll(c, runs, refs, mpis); !s.ok()) return s;
  json doc{{"apps", json::array()}, {"reps", c.reps}};
  for (const auto& [k, r] : runs) doc["apps"].push_back(Summarise(k, r, refs[std::get<1>(k)]));
  doc["targets"] = Evaluate(doc["apps"], mpis);
  if (c.json) {
    out << doc.dump(2) << "\n";
  } else {
    out << fmt::format(
        "The thesis' applications with libtierflow_rma and on the MPI alone: "
        "medians of {} alternated runs, seconds per rank (mean); * more ranks "
        "than the {} CPUs\n",
        c.reps, sysconf(_SC_NPROCESSORS_ONLN));
    PrintApp(doc["apps"], "ft", "NAS FT, class " + c.ft_class, out);
    PrintApp(doc["apps"], "ca",
             fmt::format("cellular automaton, {} lines x {} cells, {} steps", c.ca_rows, c.ca_cells,
                         c.ca_iterations),
             out);
    PrintTargets(doc["targets"], out);
  }
  if (!c.plot.empty()) {
    if (Status s = Plot("plot_rma_apps.py", doc["apps"], c.plot); !s.ok()) return s;
  }
  for (const json& r : doc["apps"]) {
    if (!r["verified"].get<bool>()) {
      return Status(StatusCode::kFailed, "a run computed a wrong result (marked WRONG above)");
    }
  }
  return Status::Ok();
}

}  // namespace tierflow::bench
