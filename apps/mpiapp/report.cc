// SPDX-License-Identifier: Apache-2.0
#include "mpiapp/report.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <new>

namespace mpiapp {

namespace {

std::vector<double> GatherOne(double mine, int ranks) {
  std::vector<double> all(ranks);
  MPI_Gather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return all;
}

}  // namespace

PerRank PerRank::Gather(const Times& t, double total, int ranks) {
  return {GatherOne(t.compute, ranks), GatherOne(t.comm, ranks), GatherOne(t.sync, ranks),
          GatherOne(total, ranks)};
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

std::string JsonArray(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "%s%.6f", i ? "," : "", v[i]);
    s += cell;
  }
  return s + "]";
}

std::string PerRankJson(const PerRank& p) {
  return "\"per_rank\":{\"compute_s\":" + JsonArray(p.compute) +
         ",\"comm_s\":" + JsonArray(p.comm) + ",\"sync_s\":" + JsonArray(p.sync) +
         ",\"total_s\":" + JsonArray(p.total) + "}";
}

void PrintBreakdown(const PerRank& p) {
  std::printf(" %-6s %12s %12s %12s %12s\n", "rank", "compute s", "comm s", "sync s", "total s");
  for (std::size_t r = 0; r < p.total.size(); ++r) {
    std::printf(" %-6zu %12.4f %12.4f %12.4f %12.4f\n", r, p.compute[r], p.comm[r], p.sync[r],
                p.total[r]);
  }
  std::printf(" %-6s %12.4f %12.4f %12.4f %12.4f\n", "skew", Max(p.compute) - Min(p.compute),
              Max(p.comm) - Min(p.comm), Max(p.sync) - Min(p.sync), Max(p.total) - Min(p.total));
}

bool Oversubscribed(int ranks) { return ranks > sysconf(_SC_NPROCESSORS_ONLN); }

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t b = 0; b <= list.size();) {
    const std::size_t e = std::min(list.find(',', b), list.size());
    out.push_back(list.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

int AllocateUnlocked(MPI_Aint bytes, int disp_unit, void* base, MPI_Win* win) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "no_locks", "true");
  const int rc = MPI_Win_allocate(bytes, disp_unit, info, MPI_COMM_WORLD, base, win);
  MPI_Info_free(&info);
  return rc;
}

int RunProgram(int argc, char** argv, const char* out_of_memory,
               const std::function<int(int rank, int ranks)>& body) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  try {
    status = body(rank, ranks);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "rank %d: %s\n", rank, out_of_memory);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}

}  // namespace mpiapp
