// SPDX-License-Identifier: Apache-2.0
// tierflow-ca-MPI: the thesis' cellular automaton (grid.h, automaton.h) run under mpirun with
// or without libtierflow_rma. Rank 0 prints per variant the time of the steps, the time per
// rank split into computation, communication and synchronisation, and the hash of the final
// grid, which is the same for every variant and rank count; --verify also computes the
// automaton on rank 0 alone and compares; --json prints one JSON object per variant instead.
// Exit status: 0 when every checked hash matched, 1 when one did not, 2 on bad usage.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "ca/automaton.h"

namespace {

struct Options {
  ca::Shape shape;
  int iterations = 100;
  std::vector<ca::Variant> variants;
  bool json = false, verify = false;
};

constexpr const char* kUsage =
    "usage: tierflow-ca-MPI [--rows N] [--cells N] [--iterations N] [--variant two-sided,gats]\n"
    "                       [--verify] [--json]\n"
    "  --rows        lines of the grid, dealt out in blocks (default 2400)\n"
    "  --cells       cells per line (default 8190; a line is 2 border cells more)\n"
    "  --iterations  time steps (default 100)\n"
    "  --variant     exchanges to run, one after the other (default both): two-sided\n"
    "                MPI_Isend/Irecv/Waitall, gats MPI_Put in GATS epochs\n"
    "  --verify      also run the automaton on rank 0 alone and compare the hashes\n"
    "  --json        one JSON object per variant on stdout instead of the report\n";

constexpr long long kMaxGridBytes = 1LL << 30;  // MPI's int counts for the whole grid

// A whole number in [low, high], or nullopt.
std::optional<long long> Number(const char* text, long long low, long long high) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < low || v > high) return std::nullopt;
  return v;
}

std::string ParseVariants(const std::string& list, std::vector<ca::Variant>& out) {
  for (const std::string& name : mpiapp::SplitList(list)) {
    std::optional<ca::Variant> v = ca::ParseVariant(name);
    if (!v) return "--variant '" + name + "' is not an exchange: use two-sided or gats";
    out.push_back(*v);
  }
  return "";
}

// One option at argv[i] (and its value); an error message, or "".
std::string ParseOne(int argc, char** argv, int& i, Options& o, std::string& variants) {
  const std::string a = argv[i];
  if (a == "--json") return o.json = true, "";
  if (a == "--verify") return o.verify = true, "";
  if (i + 1 >= argc) return "unknown option or missing value: '" + a + "' (see --help)";
  const char* value = argv[++i];
  if (a == "--variant") return variants = value, "";
  std::optional<long long> n;
  if (a == "--rows" && (n = Number(value, 1, 1 << 24))) return o.shape.rows = int(*n), "";
  if (a == "--cells" && (n = Number(value, 1, 1 << 28))) return o.shape.cells = int(*n), "";
  if (a == "--iterations" && (n = Number(value, 0, 1 << 30))) return o.iterations = int(*n), "";
  if (a == "--rows" || a == "--cells" || a == "--iterations") {
    return a + " " + value + " is not a whole number in range (rows 1..16777216, cells " +
           "1..268435456, iterations 0..1073741824)";
  }
  return "unknown option: '" + a + "' (see --help)";
}

// Every rank parses the same arguments; only rank 0 says what is wrong.
std::optional<Options> Parse(int argc, char** argv, int rank, int ranks, int& status) {
  Options o;
  std::string variants = "two-sided,gats", error;
  for (int i = 1; i < argc && error.empty(); ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      if (rank == 0) std::fputs(kUsage, stdout);
      status = 0;
      return std::nullopt;
    }
    error = ParseOne(argc, argv, i, o, variants);
  }
  if (error.empty()) error = ParseVariants(variants, o.variants);
  if (error.empty() && o.shape.rows < ranks) {
    error = "--rows " + std::to_string(o.shape.rows) + " gives some of the " +
            std::to_string(ranks) + " ranks no line: use at least as many lines as ranks";
  }
  if (error.empty() && static_cast<long long>(o.shape.rows) * o.shape.width() > kMaxGridBytes) {
    error = "--rows x (--cells + 2) is over 1 GiB: use a smaller grid";
  }
  if (error.empty()) return o;
  if (rank == 0) std::fprintf(stderr, "tierflow-ca: %s\n", error.c_str());
  status = 2;
  return std::nullopt;
}

struct Result {
  mpiapp::Times times;
  double total = 0;
  std::uint64_t hash = 0;
};

Result RunSteps(const Options& o, ca::Variant v, int rank, int ranks) {
  Result r;
  std::unique_ptr<ca::Automaton> a = ca::Automaton::Make(v, o.shape, rank, ranks);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iterations; ++i) a->Step(r.times);
  r.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.hash = a->Hash();
  return r;
}

void Print(const Options& o, ca::Variant v, const Result& r, const mpiapp::PerRank& p,
           const char* verified) {
  const int ranks = static_cast<int>(p.total.size());
  const char* over = mpiapp::Oversubscribed(ranks) ? "true" : "false";
  if (o.json) {
    std::printf(
        "{\"app\":\"ca\",\"variant\":\"%s\",\"ranks\":%d,\"rows\":%d,\"cells\":%d,"
        "\"iterations\":%d,\"hash\":\"%016" PRIx64
        "\",\"verified\":%s,\"oversubscribed\":%s,\"total_s\":%.6f,\"compute_s\":%.6f,"
        "\"comm_s\":%.6f,\"sync_s\":%.6f,%s}\n",
        ca::VariantName(v), ranks, o.shape.rows, o.shape.cells, o.iterations, r.hash, verified,
        over, mpiapp::Max(p.total), mpiapp::Mean(p.compute), mpiapp::Mean(p.comm),
        mpiapp::Mean(p.sync), mpiapp::PerRankJson(p).c_str());
    return;
  }
  std::printf("\n cellular automaton, %d lines x %d cells, %d steps, %d ranks%s, %s\n",
              o.shape.rows, o.shape.cells, o.iterations, ranks,
              mpiapp::Oversubscribed(ranks) ? " (oversubscribed: more ranks than CPUs)" : "",
              ca::VariantName(v));
  std::printf(" hash of the final grid %016" PRIx64 " (%s)\n Time in seconds = %12.4f\n", r.hash,
              std::string(verified) == "null" ? "not checked: --verify checks it" : verified,
              mpiapp::Max(p.total));
  mpiapp::PrintBreakdown(p);
}

// Every variant in turn; rank 0 reports. 1 when a checked hash did not match.
int Run(const Options& o, int rank, int ranks) {
  int status = 0;
  std::optional<std::uint64_t> reference;
  if (o.verify && rank == 0) reference = ca::SerialHash(o.shape, o.iterations);
  for (ca::Variant v : o.variants) {
    const Result r = RunSteps(o, v, rank, ranks);
    const mpiapp::PerRank p = mpiapp::PerRank::Gather(r.times, r.total, ranks);
    if (rank != 0) continue;
    const bool ok = !reference || *reference == r.hash;
    if (!ok) status = 1;
    Print(o, v, r, p, !reference ? "null" : ok ? "true" : "false");
    std::fflush(stdout);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiapp::RunProgram(argc, argv,
                            "tierflow-ca: out of memory for the grid: use a smaller one",
                            [&](int rank, int ranks) {
                              int status = 0;
                              std::optional<Options> o = Parse(argc, argv, rank, ranks, status);
                              return o ? Run(*o, rank, ranks) : status;
                            });
}
