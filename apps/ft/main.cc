// SPDX-License-Identifier: Apache-2.0
// tierflow-ft-MPI: the NAS Parallel Benchmarks' FT kernel with the global transpose in three
// forms (transpose.h), run under mpirun with or without libtierflow_rma. Rank 0 prints NPB's
// report per variant (checksums, verification, time, MFLOPS) and the time per rank split into
// computation, communication and synchronisation; --json prints one JSON object per variant
// instead. Exit status: 0 when every variant verified, 1 when one did not, 2 on bad usage.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ft/solver.h"

namespace {

using ft::Complex;

struct Options {
  ft::ProblemClass problem;
  std::vector<ft::Variant> variants;
  bool json = false;
};

constexpr const char* kUsage =
    "usage: tierflow-ft-MPI [--class S|W|A|B] [--variant 2sc,osc,scosco] [--json]\n"
    "  --class    NPB problem class (default S): S 64x64x64, W 128x128x32, A 256x256x128\n"
    "             (6 iterations each), B 512x256x256 (20 iterations)\n"
    "  --variant  transposes to run, one after the other (default all three):\n"
    "             2sc MPI_Alltoall, osc MPI_Put with fences, scosco MPI_Put in GATS epochs\n"
    "  --json     one JSON object per variant on stdout instead of the report\n";

// Every rank parses the same arguments; only rank 0 says what is wrong.
std::optional<Options> Parse(int argc, char** argv, int rank, int ranks, int& status) {
  Options o;
  std::string cls = "S", variants = "2sc,osc,scosco", error;
  for (int i = 1; i < argc && error.empty(); ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      if (rank == 0) std::fputs(kUsage, stdout);
      status = 0;
      return std::nullopt;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--class" && has_value) {
      cls = argv[++i];
    } else if (a == "--variant" && has_value) {
      variants = argv[++i];
    } else {
      error = "unknown option or missing value: '" + a + "' (see --help)";
    }
  }
  if (error.empty()) {
    if (std::optional<ft::ProblemClass> c = ft::FindClass(cls)) {
      o.problem = *c;
    } else {
      error = "--class " + cls + " is not a problem class: use S, W, A or B";
    }
  }
  for (const std::string& name : mpiapp::SplitList(variants)) {
    if (!error.empty()) break;
    if (std::optional<ft::Variant> v = ft::ParseVariant(name)) {
      o.variants.push_back(*v);
    } else {
      error = "--variant '" + name + "' is not a transpose: use 2sc, osc or scosco";
    }
  }
  if (error.empty() && (o.problem.nz % ranks != 0 || o.problem.ny % ranks != 0)) {
    error = "class " + cls + " (" + std::to_string(o.problem.nz) + " planes, " +
            std::to_string(o.problem.ny) + " rows) cannot be split over " + std::to_string(ranks) +
            " ranks: use a rank count that divides both (1, 2, 4, 8...)";
  }
  if (error.empty()) return o;
  if (rank == 0) std::fprintf(stderr, "tierflow-ft: %s\n", error.c_str());
  status = 2;
  return std::nullopt;
}

bool Verify(const ft::ProblemClass& c, const ft::Run& run) {
  bool ok = run.checksums.size() == c.reference.size();
  for (std::size_t i = 0; ok && i < run.checksums.size(); ++i) {
    ok = ft::ChecksumMatches(run.checksums[i], c.reference[i]);
  }
  return ok;
}

void PrintJson(const Options& o, ft::Variant v, const ft::Run& run, const mpiapp::PerRank& p,
               bool verified, std::size_t transpose_bytes) {
  const ft::ProblemClass& c = o.problem;
  std::string sums = "[";
  for (std::size_t i = 0; i < run.checksums.size(); ++i) {
    char cell[96];
    std::snprintf(cell, sizeof cell, "%s[%.12e,%.12e]", i ? "," : "", run.checksums[i].real(),
                  run.checksums[i].imag());
    sums += cell;
  }
  std::printf(
      "{\"app\":\"ft\",\"variant\":\"%s\",\"class\":\"%c\",\"ranks\":%zu,\"verified\":%s,"
      "\"total_s\":%.6f,\"compute_s\":%.6f,\"comm_s\":%.6f,\"sync_s\":%.6f,\"mflops\":%.2f,"
      "\"transposes\":%d,\"transpose_bytes\":%zu,\"oversubscribed\":%s,\"checksums\":%s],%s}\n",
      ft::VariantName(v), c.name, p.total.size(), verified ? "true" : "false", mpiapp::Max(p.total),
      mpiapp::Mean(p.compute), mpiapp::Mean(p.comm), mpiapp::Mean(p.sync),
      ft::Mflops(c, mpiapp::Max(p.total)), c.iterations + 1, transpose_bytes,
      mpiapp::Oversubscribed(static_cast<int>(p.total.size())) ? "true" : "false", sums.c_str(),
      mpiapp::PerRankJson(p).c_str());
}

void PrintReport(const Options& o, ft::Variant v, const ft::Run& run, const mpiapp::PerRank& p,
                 bool verified) {
  const ft::ProblemClass& c = o.problem;
  const int ranks = static_cast<int>(p.total.size());
  std::printf("\n NAS Parallel Benchmarks FT, class %c (%dx%dx%d, %d iterations), %d ranks%s, %s\n",
              c.name, c.nx, c.ny, c.nz, c.iterations, ranks,
              mpiapp::Oversubscribed(ranks) ? " (oversubscribed: more ranks than CPUs)" : "",
              ft::VariantName(v));
  for (std::size_t i = 0; i < run.checksums.size(); ++i) {
    std::printf(" T = %5zu     Checksum = %22.12e %22.12e\n", i + 1, run.checksums[i].real(),
                run.checksums[i].imag());
  }
  std::printf(" %s\n", verified ? "Verification successful" : "Verification FAILED");
  std::printf(" Time in seconds = %12.4f\n Mop/s total     = %12.2f\n", mpiapp::Max(p.total),
              ft::Mflops(c, mpiapp::Max(p.total)));
  mpiapp::PrintBreakdown(p);
}

bool RunVariant(const Options& o, ft::Variant v, int rank, int ranks) {
  const ft::Slabs slabs(o.problem.nx, o.problem.ny, o.problem.nz, ranks, rank);
  ft::Run run;
  {
    ft::Solver solver(o.problem, v, slabs);
    run = solver.Solve();
  }
  const mpiapp::PerRank p = mpiapp::PerRank::Gather(run.times, run.total, ranks);
  if (rank != 0) return true;
  const bool verified = Verify(o.problem, run);
  // What one transpose moves, over all ranks: every element once.
  const std::size_t bytes = slabs.local() * ranks * sizeof(Complex);
  if (o.json) {
    PrintJson(o, v, run, p, verified, bytes);
  } else {
    PrintReport(o, v, run, p, verified);
  }
  std::fflush(stdout);
  return verified;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiapp::RunProgram(
      argc, argv,
      "tierflow-ft: out of memory: a class needs about 72 bytes per grid point, "
      "spread over the ranks (B: 1.2 GiB per rank at 2 ranks); use more ranks or a "
      "smaller class",
      [&](int rank, int ranks) {
        int status = 0;
        std::optional<Options> o = Parse(argc, argv, rank, ranks, status);
        if (!o) return status;
        for (ft::Variant v : o->variants) {
          if (!RunVariant(*o, v, rank, ranks)) status = 1;
        }
        return status;
      });
}
