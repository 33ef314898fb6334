// SPDX-License-Identifier: Apache-2.0
// The MPI side of `tierflow bench rma`: put/get latency per window kind, synchronisation and
// size (OSU osu_put_latency's pattern: rank 0 the origin, rank 1 the target), put bandwidth
// under lock and GATS epochs (osu_put_bw: 64 puts per epoch), the two-sided baselines measured
// the same way (osu_latency's ping-pong, osu_bw's window of 64 sends), and the thesis' GATS
// benchmark per call (rank 0 the origin of k = 1 .. ranks-1 targets, start, complete, post and
// wait timed apart, no data, no barrier). Run under mpirun with or without libtierflow_rma
// preloaded; rank 0 prints one JSON object per row. The received data are checked after each
// row: a row whose data are wrong says so.
//
// With more than two ranks (a job across hosts), rank 0 is still the origin and the target is
// rank 1 or the one --target names (a rank on another host); the other ranks only take part
// in the collectives (windows, fences, checks) and wait for the timed loop to end without
// spinning on a CPU the two need. With --pin-pair (for a job with more ranks than the machine
// has CPUs, as the test bed of hosts on one machine runs) rank 0 keeps the first CPU and every
// other rank the rest, so that origin and target never share one: unpinned, the scheduler put
// them on one CPU after a barrier for milliseconds at a time, in both runs, at random.
//
// Usage: rma_latency [--iters N] [--sizes a,b,...] [--windows create,allocate] [--ops put,get]
//                    [--target R] [--pin-pair] [--two-sided] [--gats-only]
// Open MPI alone slows down after many windows were created in one process (its 1 MiB puts
// to allocated windows took 7-8x longer after about a hundred windows): `tierflow bench rma`
// launches each window kind and operation in a process of its own.
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int g_rank = 0, g_size = 0;
int g_target = 1;  // the rank the origin, rank 0, puts to and gets from

struct Args {
  int iters = 1000;
  std::vector<long> sizes{1, 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304};
  bool gats_only = false, two_sided = false, pin_pair = false;
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
    if (s == "--target" && i + 1 < argc) g_target = std::atoi(argv[++i]);
    if (s == "--gats-only") a.gats_only = true;
    if (s == "--pin-pair") a.pin_pair = true;
    if (s == "--two-sided") a.two_sided = true;
    if (s == "--windows" && i + 1 < argc) a.windows = Split(argv[++i]);
    if (s == "--ops" && i + 1 < argc) a.ops = Split(argv[++i]);
    if (s == "--sizes" && i + 1 < argc) {
      a.sizes.clear();
      for (const std::string& t : Split(argv[++i])) a.sizes.push_back(std::atol(t.c_str()));
    }
  }
  return a;
}

// Rank 0 on the first CPU it may use, every other rank on the others (nothing with one CPU).
void PinPair() {
  cpu_set_t all, mine;
  if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) return;
  CPU_ZERO(&mine);
  bool first = true;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &all)) continue;
    if (first == (g_rank == 0)) CPU_SET(c, &mine);
    if (first && g_rank == 0) break;
    first = false;
  }
  sched_setaffinity(0, sizeof mine, &mine);
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

// One timed iteration of `sync` moving `n` bytes from rank 0 to the target (put) or back (get).
void Iteration(const std::string& sync, bool put, Window& w, unsigned char* buf, long n,
               MPI_Group peer) {
  auto op = [&] {
    if (put)
      MPI_Put(buf, n, MPI_BYTE, g_target, 0, n, MPI_BYTE, w.win);
    else
      MPI_Get(buf, n, MPI_BYTE, g_target, 0, n, MPI_BYTE, w.win);
  };
  if (sync == "pscw") {
    if (g_rank == 0) {
      MPI_Win_start(peer, 0, w.win);
      op();
      MPI_Win_complete(w.win);
    } else if (g_rank == g_target) {
      MPI_Win_post(peer, 0, w.win);
      MPI_Win_wait(w.win);
    }
  } else if (sync == "fence") {
    if (g_rank == 0) op();
    MPI_Win_fence(0, w.win);
  } else if (sync == "lock") {
    if (g_rank == 0) {
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_target, 0, w.win);
      op();
      MPI_Win_unlock(g_target, w.win);
    }
  } else if (g_rank == 0) {  // flush, inside one lock epoch
    op();
    MPI_Win_flush(g_target, w.win);
  }
}

// Rank 0 sends the iteration's pattern; afterwards the target (put) or the origin (get) checks.
bool Check(bool put, Window& w, unsigned char* buf, long n, unsigned char pattern) {
  int ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (put && g_rank == g_target) {
    // A lock of its own window makes the puts visible to the target's loads in either memory
    // model (MPI's separate model needs it; the unified one allows it).
    MPI_Win_lock(MPI_LOCK_SHARED, g_target, 0, w.win);
    for (long i = 0; i < n; ++i) ok &= w.base[i] == static_cast<unsigned char>(pattern + i);
    MPI_Win_unlock(g_target, w.win);
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

// Ranks that take no part in a timed loop (one k of the GATS sweep, a row's other ranks) wait
// here without spinning on a CPU the others need (more ranks than CPUs is this benchmark's
// normal case): all ranks meet in a non-blocking barrier; the idle ones poll it every
// millisecond.
void Meet(bool idle) {
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  if (!idle) {
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    return;
  }
  for (int done = 0; !done; MPI_Test(&r, &done, MPI_STATUS_IGNORE)) {
    struct timespec ms {
      0, 1000000
    };
    nanosleep(&ms, nullptr);
  }
}

// Whether this rank is the row's origin or target (the others look on).
bool InPair() { return g_rank == 0 || g_rank == g_target; }

// The group of the other rank of the pair: the target for the origin, the origin for the rest.
MPI_Group Peer() {
  MPI_Group world, peer;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int other = g_rank == 0 ? g_target : 0;
  MPI_Group_incl(world, 1, &other, &peer);
  MPI_Group_free(&world);
  return peer;
}

void Row(const Args& a, bool allocate, const std::string& sync, bool put, long n) {
  // At least a page: OSU's benchmarks make a window of exactly the message size, and one of a
  // few bytes of the heap stays with the MPI underneath (docs/rma.md), so its row would
  // compare the MPI with itself.
  Window w(allocate, std::max(n, 4096L));
  std::vector<unsigned char> buf(n);
  MPI_Group peer = Peer();
  if (g_rank == g_target && !put) {
    for (long i = 0; i < n; ++i) w.base[i] = static_cast<unsigned char>(7 + i);
  }
  // As many iterations at every size (OSU runs a tenth at large ones): a 1 MiB row then spans
  // tens of milliseconds, not four, and one preemption no longer decides its ratio.
  const int iters = a.iters;
  const unsigned char pattern = static_cast<unsigned char>(iters);
  for (long i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(pattern + i);
  // Fences are collective: every rank iterates. Otherwise the onlookers sleep meanwhile.
  const bool looks_on = !InPair() && sync != "fence";
  Meet(looks_on);
  if (sync == "fence") MPI_Win_fence(0, w.win);
  if (sync == "flush" && g_rank == 0) MPI_Win_lock(MPI_LOCK_SHARED, g_target, 0, w.win);
  const double us =
      looks_on ? 0 : PerIteration(iters, [&] { Iteration(sync, put, w, buf.data(), n, peer); });
  if (sync != "fence") Meet(looks_on);
  if (sync == "flush" && g_rank == 0) MPI_Win_unlock(g_target, w.win);
  if (sync == "fence") MPI_Win_fence(MPI_MODE_NOSUCCEED, w.win);
  const bool checked = Check(put, w, buf.data(), n, pattern);
  const double copy = g_rank == 0 ? Memcpy(buf.data(), n, iters, put) : 0;
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"%s\",\"op\":\"%s\",\"bytes\":%ld,\"target\":%d,"
        "\"us\":%.4f,\"memcpy_us\":%.4f,\"data_checked\":%s}\n",
        allocate ? "allocate" : "create", sync.c_str(), put ? "put" : "get", n, g_target, us, copy,
        checked ? "true" : "false");
    std::fflush(stdout);
  }
  MPI_Group_free(&peer);
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

// Medians of one rank's per-call times, and the largest median over the ranks that send
// `mine` (others send 0): the slowest target decides a target's cost.
double SlowestMedian(const std::vector<double>& mine) {
  const double m = Median(mine);
  double out = 0;
  MPI_Reduce(&m, &out, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return out;
}

// `epochs` GATS epochs of origin 0 with targets 1..k: per call, the origin's start and complete
// and the targets' post and wait; the per-epoch time of each side.
struct GatsTimes {
  std::vector<double> first, second;  // start/complete (origin), post/wait (target)
};

GatsTimes GatsEpochs(MPI_Win win, MPI_Group group, int epochs) {
  GatsTimes t;
  for (int e = 0; e < epochs; ++e) {
    const auto t0 = Clock::now();
    g_rank == 0 ? MPI_Win_start(group, 0, win) : MPI_Win_post(group, 0, win);
    const auto t1 = Clock::now();
    g_rank == 0 ? MPI_Win_complete(win) : MPI_Win_wait(win);
    const auto t2 = Clock::now();
    t.first.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    t.second.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  return t;
}

// The thesis' benchmark (Fig. 3.15) as a sweep: k = 1 .. ranks-1 targets in one run.
void GatsSweep(bool allocate, int epochs) {
  Window w(allocate, 64);
  MPI_Group world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  for (int k = 1; k < g_size; ++k) {
    const bool active = g_rank <= k;
    GatsTimes t;
    Meet(!active);
    if (active) {
      std::vector<int> members;
      for (int r = 1; r <= k; ++r) members.push_back(r);
      if (g_rank != 0) members = {0};
      MPI_Group group;
      MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group);
      t = GatsEpochs(w.win, group, epochs);
      MPI_Group_free(&group);
    }
    Meet(false);
    const bool target = active && g_rank != 0;
    const double post = SlowestMedian(target ? t.first : std::vector<double>{});
    const double wait = SlowestMedian(target ? t.second : std::vector<double>{});
    if (g_rank != 0) continue;
    std::vector<double> epoch(t.first.size());
    for (std::size_t i = 0; i < epoch.size(); ++i) epoch[i] = t.first[i] + t.second[i];
    const char* window = allocate ? "allocate" : "create";
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"pscw\",\"op\":\"gats\",\"targets\":%d,\"us\":%.4f,"
        "\"data_checked\":true}\n"
        "{\"window\":\"%s\",\"sync\":\"pscw\",\"op\":\"gats_calls\",\"targets\":%d,\"us\":%.4f,"
        "\"start_us\":%.4f,\"complete_us\":%.4f,\"post_us\":%.4f,\"wait_us\":%.4f,"
        "\"data_checked\":true}\n",
        window, k, Median(epoch), window, k, Median(epoch), Median(t.first), Median(t.second), post,
        wait);
    std::fflush(stdout);
  }
  MPI_Group_free(&world);
}

// 64 puts of n bytes to consecutive places per epoch (osu_put_bw's window), under an exclusive
// lock or a GATS epoch; us is the time per put (64 * n bytes / (64 * us) is the bandwidth).
void PutEpoch(const std::string& sync, MPI_Win win, MPI_Group peer, const unsigned char* buf,
              long n, int puts) {
  if (!InPair()) return;
  if (g_rank == g_target) {
    if (sync == "pscw") {
      MPI_Win_post(peer, 0, win);
      MPI_Win_wait(win);
    }
    return;
  }
  sync == "pscw" ? MPI_Win_start(peer, 0, win) : MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_target, 0, win);
  for (int k = 0; k < puts; ++k) MPI_Put(buf, n, MPI_BYTE, g_target, k * n, n, MPI_BYTE, win);
  sync == "pscw" ? MPI_Win_complete(win) : MPI_Win_unlock(g_target, win);
}

// What the target holds after the bandwidth rows: every slot the pattern.
bool SlotsHold(Window& w, long n, int slots, unsigned char first) {
  int ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == g_target) {
    MPI_Win_lock(MPI_LOCK_SHARED, g_target, 0, w.win);
    for (long i = 0; i < slots * n; ++i) {
      ok &= w.base[i] == static_cast<unsigned char>(first + i % n);
    }
    MPI_Win_unlock(g_target, w.win);
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

constexpr int kWindow = 64;  // osu_bw's and osu_put_bw's messages per epoch

void Bandwidth(bool allocate, const std::string& sync, long n, int iters) {
  Window w(allocate, kWindow * n);
  std::vector<unsigned char> buf(n);
  for (long i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(3 + i);
  MPI_Group peer = Peer();
  Meet(!InPair());
  const double us =
      InPair() ? PerIteration(iters, [&] { PutEpoch(sync, w.win, peer, buf.data(), n, kWindow); }) /
                     kWindow
               : 0;
  Meet(!InPair());
  const bool ok = SlotsHold(w, n, kWindow, 3);
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"%s\",\"sync\":\"%s\",\"op\":\"put_bw\",\"bytes\":%ld,\"target\":%d,"
        "\"us\":%.4f,\"data_checked\":%s}\n",
        allocate ? "allocate" : "create", sync.c_str(), n, g_target, us, ok ? "true" : "false");
    std::fflush(stdout);
  }
  MPI_Group_free(&peer);
}

bool AllTrue(bool mine) {
  int ok = mine, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

bool Holds(const std::vector<unsigned char>& b, long n, unsigned char first) {
  for (long i = 0; i < static_cast<long>(b.size()); ++i) {
    if (b[i] != static_cast<unsigned char>(first + i % n)) return false;
  }
  return true;
}

// osu_latency: a ping-pong of n bytes, us the half round trip.
void PingPong(long n, int iters) {
  std::vector<unsigned char> out(n), in(n);
  for (long i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(g_rank * 50 + i);
  const int other = 1 - g_rank;
  MPI_Barrier(MPI_COMM_WORLD);
  const double us =
      PerIteration(
          iters,
          [&] {
            if (g_rank == 0) {
              MPI_Send(out.data(), n, MPI_BYTE, other, 1, MPI_COMM_WORLD);
              MPI_Recv(in.data(), n, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
              MPI_Recv(in.data(), n, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
              MPI_Send(out.data(), n, MPI_BYTE, other, 1, MPI_COMM_WORLD);
            }
          }) /
      2;
  const bool ok = AllTrue(Holds(in, n, static_cast<unsigned char>(other * 50)));
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"none\",\"sync\":\"two-sided\",\"op\":\"pingpong\",\"bytes\":%ld,"
        "\"us\":%.4f,\"data_checked\":%s}\n",
        n, us, ok ? "true" : "false");
    std::fflush(stdout);
  }
}

// osu_bw: 64 MPI_Isend of n bytes, MPI_Waitall, an acknowledgement; us per message. The
// receiver takes each message into a slot of its own, so that all are checked.
void SendBandwidth(long n, int iters) {
  std::vector<unsigned char> out(n), in(g_rank == 1 ? kWindow * n : 0);
  for (long i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(5 + i);
  MPI_Request reqs[kWindow];
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double us =
      PerIteration(iters,
                   [&] {
                     for (int k = 0; k < kWindow; ++k) {
                       if (g_rank == 0) {
                         MPI_Isend(out.data(), n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
                       } else {
                         MPI_Irecv(in.data() + k * n, n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
                       }
                     }
                     MPI_Waitall(kWindow, reqs, MPI_STATUSES_IGNORE);
                     if (g_rank == 0) {
                       MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                     } else {
                       MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
                     }
                   }) /
      kWindow;
  const bool ok = AllTrue(g_rank == 0 || Holds(in, n, 5));
  if (g_rank == 0) {
    std::printf(
        "{\"window\":\"none\",\"sync\":\"two-sided\",\"op\":\"send_bw\",\"bytes\":%ld,"
        "\"us\":%.4f,\"data_checked\":%s}\n",
        n, us, ok ? "true" : "false");
    std::fflush(stdout);
  }
}

// Iterations of a bandwidth row: fewer for large messages (64 of 4 MiB are 256 MiB an epoch).
int BandwidthIters(long n) { return n >= (1L << 20) ? 10 : n >= 65536 ? 50 : 200; }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const Args a = Parse(argc, argv);
  if (a.pin_pair) PinPair();
  for (bool allocate : {false, true}) {
    if (!Has(a.windows, allocate ? "allocate" : "create")) continue;
    if (a.gats_only) {
      GatsSweep(allocate, 1001);
    } else if (g_size > g_target && g_target > 0) {  // rank 0 the origin; the rest look on
      for (bool put : {true, false}) {
        if (!Has(a.ops, put ? "put" : "get")) continue;
        for (const char* sync : {"pscw", "fence", "lock", "flush"}) {
          for (long n : a.sizes) Row(a, allocate, sync, put, n);
        }
      }
      if (Has(a.ops, "put")) {
        for (const char* sync : {"lock", "pscw"}) {
          for (long n : a.sizes) Bandwidth(allocate, sync, n, BandwidthIters(n));
        }
        Creation(allocate, std::max(a.iters / 5, 11));
      }
    }
  }
  if (a.two_sided && g_size == 2) {
    for (long n : a.sizes) PingPong(n, a.iters);
    for (long n : a.sizes) SendBandwidth(n, BandwidthIters(n));
  }
  // Every row printed: a launcher that waits past this for MPI_Finalize may stop waiting.
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf("{\"complete\":true}\n");
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
