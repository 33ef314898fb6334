// SPDX-License-Identifier: Apache-2.0
// The MPI side of `tierflow bench rma`: put/get latency per window kind, synchronisation and
// size (OSU osu_put_latency's pattern: rank 0 the origin, rank 1 the target) and the thesis'
// GATS benchmark (rank 0 the origin, every other rank a target, no data, no barrier). Run
// under mpirun with or without libtierflow_rma preloaded; rank 0 prints one JSON object per
// row. The received data are checked after each row: a row whose data are wrong says so.
//
// Usage: rma_latency [--iters N] [--sizes a,b,...] [--windows create,allocate] [--ops put,get]
//                    [--gats-only] [--no-stencil]
// With 2 ranks and without --gats-only it ends with the cellular automaton (see Stencil).
// Open MPI alone slows down after many windows were created in one process (its 1 MiB puts
// to allocated windows took 7-8x longer after about a hundred windows): `tierflow bench rma`
// launches each window kind and operation in a process of its own.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int g_rank = 0, g_size = 0;

struct Args {
  int iters = 1000;
  std::vector<long> sizes{1, 8, 64, 512, 4096, 32768, 262144, 1048576};
  bool gats_only = false, stencil = true;
  std::vector<std::string> windows{"create", "allocate"}, ops{"put", "get"};
};

std::vector<std::string> Split(char* list) {
  std::vector<std::string> out;
  for (char* t = std::strtok(list, ","); t != nullptr; t = std::strtok(nullptr, ",")) {
    out.emplace_back(t);
  }
  return out;
}

bool Has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--iters" && i + 1 < argc) a.iters = std::atoi(argv[++i]);
    if (s == "--gats-only") a.gats_only = true;
    if (s == "--no-stencil") a.stencil = false;
    if (s == "--windows" && i + 1 < argc) a.windows = Split(argv[++i]);
    if (s == "--ops" && i + 1 < argc) a.ops = Split(argv[++i]);
    if (s == "--sizes" && i + 1 < argc) {
      a.sizes.clear();
      for (const std::string& t : Split(argv[++i])) a.sizes.push_back(std::atol(t.c_str()));
    }
  }
  return a;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Created windows over whole pages of page-aligned heap memory (posix_memalign, as OSU's
// benchmarks allocate theirs).
struct Window {
  MPI_Win win;
  unsigned char* base;
  bool allocated;
  Window(bool allocate, long bytes) : allocated(allocate) {
    if (allocate) {
      MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    } else {
      const long page = 4096, rounded = (bytes + page - 1) / page * page;
      void* p = nullptr;
      if (posix_memalign(&p, page, rounded) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
      base = static_cast<unsigned char*>(p);
      std::memset(base, 0, rounded);
      MPI_Win_create(base, rounded, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    }
  }
  ~Window() {
    MPI_Win_free(&win);
    if (!allocated) std::free(base);
  }
};

// One timed iteration of `sync` moving `n` bytes from rank 0 to rank 1 (put) or back (get).
void Iteration(const std::string& sync, bool put, Window& w, unsigned char* buf, long n,
               MPI_Group peer) {
  auto op = [&] {
    if (put)
      MPI_Put(buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, w.win);
    else
      MPI_Get(buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, w.win);
  };
  if (sync == "pscw") {
    if (g_rank == 0) {
      MPI_Win_start(peer, 0, w.win);
      op();
      MPI_Win_complete(w.win);
    } else if (g_rank == 1) {
      MPI_Win_post(peer, 0, w.win);
      MPI_Win_wait(w.win);
    }
  } else if (sync == "fence") {
    if (g_rank == 0) op();
    MPI_Win_fence(0, w.win);
  } else if (sync == "lock") {
    if (g_rank == 0) {
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, w.win);
      op();
      MPI_Win_unlock(1, w.win);
    }
  } else if (g_rank == 0) {  // flush, inside one lock epoch
    op();
    MPI_Win_flush(1, w.win);
  }
}

// Rank 0 sends the iteration's pattern; afterwards the target (put) or the origin (get) checks.
bool Check(bool put, Window& w, unsigned char* buf, long n, unsigned char pattern) {
  int ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (put && g_rank == 1) {
    // A lock of its own window makes the puts visible to the target's loads in either memory
    // model (MPI's separate model needs it; the unified one allows it).
    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, w.win);
    for (long i = 0; i < n; ++i) ok &= w.base[i] == static_cast<unsigned char>(pattern + i);
    MPI_Win_unlock(1, w.win);
  }
  if (!put && g_rank == 0) {
    for (long i = 0; i < n; ++i) ok &= buf[i] == static_cast<unsigned char>(7 + i);
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

// µs per call of `step` over `iters` timed calls, after a tenth as many untimed ones.
template <typename Step>
double PerIteration(int iters, Step step) {
  const int warmup = iters / 10;
  Clock::time_point t0;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = Clock::now();
    step();
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
}

// What glibc's memcpy takes for the row's bytes, measured by the origin right after it: the
// same n bytes between its buffer and page-aligned private memory (where a window starts), in
// the row's direction, as many times, no MPI involved. The alignments matter: glibc 2.36's
// rep movsb (from 2112 bytes) on Zen 3 takes 25-30 times longer when the destination lies a few
// bytes above the source modulo 4 KiB, as it does for a get into a malloc'd buffer.
double Memcpy(unsigned char* buf, long n, int iters, bool put) {
  const long page = 4096, rounded = (n + page - 1) / page * page;
  auto* mem = static_cast<unsigned char*>(std::aligned_alloc(page, rounded));
  if (mem == nullptr) MPI_Abort(MPI_COMM_WORLD, 2);
  std::memset(mem, 1, rounded);
  unsigned char* to = put ? mem : buf;
  const unsigned char* from = put ? buf : mem;
  const double us = PerIteration(iters, [&] {
    std::memcpy(to, from, n);
    asm volatile("" : : "r"(to) : "memory");  // every copy happens
  });
  std::free(mem);
  return us;
}

void Row(const Args& a, bool allocate, const std::string& sync, bool put, long n) {
  // At least a page: OSU's benchmarks make a window of exactly the message size, and one of a
  // few bytes of the heap stays with the MPI underneath (docs/rma.md), so its row would
  // compare the MPI with itself.
  Window w(allocate, std::max(n, 4096L));
  std::vector<unsigned char> buf(n);
  MPI_Group world, peer;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int other = 1 - g_rank;
  MPI_Group_incl(world, 1, &other, &peer);
  if (g_rank == 1 && !put) {
    for (long i = 0; i < n; ++i) w.base[i] = static_cast<unsigned char>(7 + i);
  }
  // As many iterations at every size (OSU runs a tenth at large ones): a 1 MiB row then spans
  // tens of milliseconds, not four, and one preemption no longer decides its ratio.
  const int iters = a.iters;
  const unsigned char pattern = static_cast<unsigned char>(iters);
  for (long i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(pattern + i);
  MPI_Barrier(MPI_COMM_WORLD);
  if (sync == "fence") MPI_Win_fence(0, w.win);
  if (sync == "flush" && g_rank == 0) MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, w.win);
  const double us = PerIteration(iters, [&] { Iteration(sync, put, w, buf.data(), n, peer); });
  if (sync == "flush" && g_rank == 0) MPI_Win_unlock(1, w.win);
  if (sync == "fence") MPI_Win_fence(MPI_MODE_NOSUCCEED, w.win);
  const bool checked = Check(put, w, buf.data(), n, pattern);
  const double copy = g_rank == 0 ? Memcpy(buf.data(), n, iters, put) : 0;
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"%s\",\"op\":\"%s\",\"bytes\":%ld,\"us\":%.4f,"
        "\"memcpy_us\":%.4f,\"data_checked\":%s}\n",
        allocate ? "allocate" : "create", sync.c_str(), put ? "put" : "get", n, us, copy,
        checked ? "true" : "false");
    std::fflush(stdout);
  }
  MPI_Group_free(&peer);
  MPI_Group_free(&world);
}

// What a window costs to make and free: MPI_Win_allocate or MPI_Win_create of 64 KiB (page
// aligned and cleared, as in Row, inside the timing) and MPI_Win_free, median of `n` pairs,
// each after a barrier; the slowest rank's median.
void Creation(bool allocate, int n) {
  std::vector<double> times;
  for (int i = 0; i < n; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    { Window w(allocate, 65536); }
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  double mine = Median(times), slowest = 0;
  MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"none\",\"op\":\"create_free\",\"bytes\":65536,"
        "\"us\":%.4f,\"data_checked\":true}\n",
        allocate ? "allocate" : "create", slowest);
    std::fflush(stdout);
  }
}

// The thesis' benchmark: origin 0 and targets 1..k, start/complete against post/wait, no data
// and no barrier between epochs; medians of per-epoch times, origin and targets apart.
void Gats(bool allocate, int epochs) {
  Window w(allocate, 64);
  MPI_Group world, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> targets;
  for (int r = 1; r < g_size; ++r) targets.push_back(r);
  const int zero = 0;
  if (g_rank == 0)
    MPI_Group_incl(world, static_cast<int>(targets.size()), targets.data(), &group);
  else
    MPI_Group_incl(world, 1, &zero, &group);
  std::vector<double> times;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int e = 0; e < epochs; ++e) {
    const auto t0 = Clock::now();
    if (g_rank == 0) {
      MPI_Win_start(group, 0, w.win);
      MPI_Win_complete(w.win);
    } else {
      MPI_Win_post(group, 0, w.win);
      MPI_Win_wait(w.win);
    }
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  double mine = Median(times), target_max = 0;
  double send = g_rank == 0 ? 0 : mine;
  MPI_Reduce(&send, &target_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"pscw\",\"op\":\"gats\",\"targets\":%d,"
        "\"us\":%.4f,\"target_us\":%.4f,\"data_checked\":true}\n",
        allocate ? "allocate" : "create", g_size - 1, mine, target_max);
    std::fflush(stdout);
  }
  MPI_Group_free(&group);
  MPI_Group_free(&world);
}

// osu_put_bw's pattern: a window of 64 puts of n bytes to consecutive places per lock epoch;
// us is the time per put (64 * n bytes / (64 * us) is the bandwidth).
void Bandwidth(bool allocate, long n, int iters) {
  constexpr int kWindow = 64;
  Window w(allocate, kWindow * n);
  std::vector<unsigned char> buf(n);
  for (long i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(3 + i);
  MPI_Barrier(MPI_COMM_WORLD);
  Clock::time_point t0;
  for (int it = 0; it < iters + 2; ++it) {
    if (it == 2) t0 = Clock::now();
    if (g_rank == 0) {
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, w.win);
      for (int k = 0; k < kWindow; ++k) {
        MPI_Put(buf.data(), n, MPI_BYTE, 1, k * n, n, MPI_BYTE, w.win);
      }
      MPI_Win_unlock(1, w.win);
    }
  }
  const double us =
      std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters / kWindow;
  int ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) {
    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, w.win);
    for (long i = 0; i < kWindow * n; ++i) ok &= w.base[i] == static_cast<unsigned char>(3 + i % n);
    MPI_Win_unlock(1, w.win);
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"lock\",\"op\":\"put_bw\",\"bytes\":%ld,"
        "\"us\":%.4f,\"data_checked\":%s}\n",
        allocate ? "allocate" : "create", n, us, all ? "true" : "false");
    std::fflush(stdout);
  }
}

// The thesis' application check: a cellular automaton (Conway's rule on the 9-point
// neighbourhood), rows split over the ranks of a ring, halo rows exchanged each step either by
// GATS puts into the neighbours' windows or by MPI_Sendrecv. Both must end in the same grid;
// rank 0 prints the time per step of each.
struct Grid {
  int rows, cols;  // owned rows, plus a halo row above and below
  std::vector<unsigned char> cells, next;
  Grid(int r, int c) : rows(r), cols(c), cells((r + 2) * c), next((r + 2) * c) {
    for (int i = 1; i <= r; ++i) {
      for (int j = 0; j < c; ++j) {
        const unsigned h = (g_rank * r + i) * 2654435761u ^ j * 40503u;
        cells[i * c + j] = (h >> 13) % 3 == 0;
      }
    }
  }
  unsigned char* row(int i) { return cells.data() + i * cols; }
  void Step() {
    for (int i = 1; i <= rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        int n = 0;
        for (int di = -1; di <= 1; ++di) {
          for (int dj = -1; dj <= 1; ++dj) {
            if (di != 0 || dj != 0) n += cells[(i + di) * cols + (j + dj + cols) % cols];
          }
        }
        const unsigned char alive = cells[i * cols + j];
        next[i * cols + j] = n == 3 || (alive && n == 2);
      }
    }
    for (int i = 1; i <= rows; ++i) std::memcpy(row(i), next.data() + i * cols, cols);
  }
  long Checksum() {
    long sum = 0;
    for (int i = 1; i <= rows; ++i) {
      for (int j = 0; j < cols; ++j) sum += row(i)[j] * ((g_rank * rows + i) * 31L + j);
    }
    return sum;
  }
};

double StencilTwoSided(Grid& g, int steps) {
  const int up = (g_rank + g_size - 1) % g_size, down = (g_rank + 1) % g_size;
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    MPI_Sendrecv(g.row(1), g.cols, MPI_BYTE, up, 0, g.row(g.rows + 1), g.cols, MPI_BYTE, down, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(g.row(g.rows), g.cols, MPI_BYTE, down, 1, g.row(0), g.cols, MPI_BYTE, up, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    g.Step();
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps;
}

// The halo rows live in the window: a neighbour's put lands in them directly.
double StencilGats(Grid& g, int steps) {
  MPI_Win win;
  unsigned char* base = nullptr;
  MPI_Win_allocate(2L * g.cols, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  const int up = (g_rank + g_size - 1) % g_size, down = (g_rank + 1) % g_size;
  MPI_Group world, nbrs;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int both[2] = {up, down};
  MPI_Group_incl(world, up == down ? 1 : 2, both, &nbrs);
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    MPI_Win_post(nbrs, 0, win);
    MPI_Win_start(nbrs, 0, win);
    MPI_Put(g.row(1), g.cols, MPI_BYTE, up, g.cols, g.cols, MPI_BYTE, win);    // its bottom halo
    MPI_Put(g.row(g.rows), g.cols, MPI_BYTE, down, 0, g.cols, MPI_BYTE, win);  // its top halo
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    std::memcpy(g.row(0), base, g.cols);
    std::memcpy(g.row(g.rows + 1), base + g.cols, g.cols);
    g.Step();
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps;
  MPI_Group_free(&nbrs);
  MPI_Group_free(&world);
  MPI_Win_free(&win);
  return us;
}

void Stencil(int rows, int cols, int steps) {
  Grid a(rows / g_size, cols), b(rows / g_size, cols);
  const double two = StencilTwoSided(a, steps), gats = StencilGats(b, steps);
  long sums[2] = {a.Checksum(), b.Checksum()}, total[2];
  MPI_Reduce(sums, total, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    const char* same = total[0] == total[1] ? "true" : "false";
    for (const auto& [sync, us] : {std::pair{"pscw", gats}, std::pair{"two-sided", two}}) {
      std::printf(
          "{\"window\":\"allocate\",\"sync\":\"%s\",\"op\":\"stencil\","
          "\"bytes\":%d,\"us\":%.4f,\"data_checked\":%s}\n",
          sync, cols, us, same);
    }
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const Args a = Parse(argc, argv);
  for (bool allocate : {false, true}) {
    if (!Has(a.windows, allocate ? "allocate" : "create")) continue;
    if (!a.gats_only && g_size == 2) {
      for (bool put : {true, false}) {
        if (!Has(a.ops, put ? "put" : "get")) continue;
        for (const char* sync : {"pscw", "fence", "lock", "flush"}) {
          for (long n : a.sizes) Row(a, allocate, sync, put, n);
        }
      }
      if (Has(a.ops, "put")) {
        for (long n : {4096L, 65536L, 1048576L}) Bandwidth(allocate, n, n >= 1048576 ? 10 : 50);
        Creation(allocate, std::max(a.iters / 5, 11));
      }
    }
    if (a.gats_only || Has(a.ops, "put")) Gats(allocate, 1001);
  }
  if (!a.gats_only && a.stencil) Stencil(512, 2048, 50);
  MPI_Finalize();
  return 0;
}
