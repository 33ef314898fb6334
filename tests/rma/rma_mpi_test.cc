// SPDX-License-Identifier: Apache-2.0
// Checks every synchronisation and transfer on each kind of window, with the data, under the
// MPI it was built for; run by ctest through mpirun with 2 and 4 ranks (more ranks than CPUs:
// oversubscribed). Without TIERFLOW_RMA_EXPECT it checks the MPI alone, which keeps the test
// itself honest; with TIERFLOW_RMA_EXPECT=1 the library must be the one answering (its
// MPI_Put is the one linked) and its errors are checked too.
#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_check.h"

namespace {

int g_rank = 0, g_size = 0, g_failures = 0;

bool LibraryExpected() {
  const char* e = std::getenv("TIERFLOW_RMA_EXPECT");
  return e != nullptr && (std::strcmp(e, "1") == 0 || std::strcmp(e, "pool") == 0);
}

// TIERFLOW_RMA_EXPECT=pool: ranks on several hosts with TIERFLOW_RMA_POOL set, where only
// memory that can move into the pool (rma/mpi/pooled.h) makes a window the library runs whole.
bool PoolExpected() {
  const char* e = std::getenv("TIERFLOW_RMA_EXPECT");
  return e != nullptr && std::strcmp(e, "pool") == 0;
}

bool LibraryAnswers() {
  Dl_info info{};
  void* put = dlsym(RTLD_DEFAULT, "MPI_Put");
  return put != nullptr && dladdr(put, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "tierflow_rma") != nullptr;
}

// MPI_Win_allocate; MPI_Win_create over MPI_Alloc_mem memory, over whole pages of the heap
// (shared in place), over a page and more of the heap, not page-aligned (process_vm copies),
// and over a few bytes of the heap (process_vm copies, or the MPI underneath: TinyLeftToMpi).
enum class Kind { kAllocate, kAllocMem, kPages, kPlain, kTiny };
bool Simulated();
// Under MPICH, with no more ranks than CPUs, a tiny window of the heap runs on the MPI
// (docs/rma.md); in the simulated mode it has a public copy and is the library's.
bool TinyLeftToMpi() {
#if defined(MPICH_VERSION)
  return !Simulated() && g_size <= sysconf(_SC_NPROCESSORS_ONLN);
#else
  return false;
#endif
}
const char* Name(Kind k) {
  switch (k) {
    case Kind::kAllocate:
      return "allocate";
    case Kind::kAllocMem:
      return "alloc_mem";
    case Kind::kPages:
      return "pages";
    case Kind::kPlain:
      return "plain";
    case Kind::kTiny:
      return "tiny";
  }
  return "?";
}

constexpr int kSlots = 64;        // ints per rank's window
constexpr int kPlainInts = 1025;  // a kPlain window: a page and 4 bytes

struct Win {
  MPI_Win win = MPI_WIN_NULL;
  int* base = nullptr;
  Kind kind;
  std::vector<int> plain;
  explicit Win(Kind k) : kind(k) {
    const MPI_Aint bytes = kSlots * sizeof(int);
    if (k == Kind::kAllocate) {
      MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    } else {
      if (k == Kind::kAllocMem) {
        MPI_Alloc_mem(bytes, MPI_INFO_NULL, &base);
      } else if (k == Kind::kPages) {
        void* p = nullptr;
        posix_memalign(&p, 4096, 4096);
        base = static_cast<int*>(p);
        MPI_Win_create(base, 4096, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
      } else {
        plain.assign(k == Kind::kPlain ? kPlainInts : kSlots, 0);
        base = plain.data();
      }
      if (k != Kind::kPages) {
        MPI_Win_create(base, this->bytes(), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
      }
    }
    // Local stores inside a lock of its own window: public at the unlock in either model.
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_rank, 0, win);
    for (int i = 0; i < kSlots; ++i) base[i] = -1;
    MPI_Win_unlock(g_rank, win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ~Win() {
    std::vector<int> before(base, base + kSlots);
    MPI_Win_free(&win);
    // The program's own memory (shared in place, or mapped by the others) keeps what the
    // window held; MPI_Win_allocate's is gone.
    CHECK(kind == Kind::kAllocate || std::memcmp(before.data(), base, kSlots * sizeof(int)) == 0,
          "%s window memory changed by MPI_Win_free", Name(kind));
    if (kind == Kind::kAllocMem) MPI_Free_mem(base);
    if (kind == Kind::kPages) free(base);
  }
  MPI_Aint bytes() const {
    if (kind == Kind::kPages) return 4096;
    return (kind == Kind::kPlain ? kPlainInts : kSlots) * static_cast<MPI_Aint>(sizeof(int));
  }
};

int Right() { return (g_rank + 1) % g_size; }
int Left() { return (g_rank + g_size - 1) % g_size; }

void Attributes(Win& w) {
  int* flavor = nullptr;
  int flag = 0;
  MPI_Win_get_attr(w.win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
  CHECK(flag && *flavor ==
                    (w.kind == Kind::kAllocate ? MPI_WIN_FLAVOR_ALLOCATE : MPI_WIN_FLAVOR_CREATE),
        "flavor %d", flag ? *flavor : -1);
  void* base = nullptr;
  MPI_Win_get_attr(w.win, MPI_WIN_BASE, &base, &flag);
  CHECK(flag && base == w.base, "base");
  MPI_Aint* size = nullptr;
  MPI_Win_get_attr(w.win, MPI_WIN_SIZE, &size, &flag);
  CHECK(flag && *size == w.bytes(), "size");
  MPI_Group g;
  MPI_Win_get_group(w.win, &g);
  int n = 0;
  MPI_Group_size(g, &n);
  CHECK(n == g_size, "group size %d", n);
  MPI_Group_free(&g);
}

void Fence(Win& w) {
  MPI_Win_fence(MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED, w.win);  // no epoch on either side
  MPI_Win_fence(MPI_MODE_NOPRECEDE, w.win);
  const int v = 1000 + g_rank;
  MPI_Put(&v, 1, MPI_INT, Right(), 0, 1, MPI_INT, w.win);
  MPI_Win_fence(0, w.win);
  CHECK(w.base[0] == 1000 + Left(), "fence put: %d", w.base[0]);
  int got = 0;
  MPI_Get(&got, 1, MPI_INT, Left(), 0, 1, MPI_INT, w.win);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, w.win);
  CHECK(got == 1000 + (Left() + g_size - 1) % g_size, "fence get: %d", got);
}

// Ring of PSCW epochs in quick succession: a post of epoch i+1 must never satisfy epoch i.
void Pscw(Win& w) {
  MPI_Group world, to, from;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int right = Right(), left = Left();
  MPI_Group_incl(world, 1, &right, &to);
  MPI_Group_incl(world, 1, &left, &from);
  for (int i = 0; i < 300; ++i) {
    w.base[6] = 7 * i + g_rank;  // a local store the origin reads in this epoch
    MPI_Win_post(from, 0, w.win);
    MPI_Win_start(to, 0, w.win);
    const int v[2] = {i, g_rank};
    int got = -1;
    MPI_Put(v, 2, MPI_INT, right, 1, 2, MPI_INT, w.win);
    MPI_Get(&got, 1, MPI_INT, right, 6, 1, MPI_INT, w.win);
    MPI_Win_complete(w.win);
    MPI_Win_wait(w.win);
    CHECK(w.base[1] == i && w.base[2] == left, "epoch %d: %d %d", i, w.base[1], w.base[2]);
    CHECK(got == 7 * i + right, "epoch %d: got %d, the target stored %d", i, got, 7 * i + right);
  }
  // MPI_Win_test until done; complete with no RMA to the target.
  MPI_Win_post(from, 0, w.win);
  MPI_Win_start(to, 0, w.win);
  MPI_Win_complete(w.win);
  int flag = 0;
  while (!flag) MPI_Win_test(w.win, &flag);
  MPI_Group_free(&to);
  MPI_Group_free(&from);
  MPI_Group_free(&world);
}

bool Simulated() {
  const char* m = std::getenv("TIERFLOW_RMA_COHERENCE");
  return m != nullptr && std::strcmp(m, "simulated") == 0;
}

// Assertions: used as MPI allows they change nothing; in the simulated coherence the library
// shows it honours them by skipping the write-back or invalidation they make unnecessary (the
// deliberately wrong uses below see stale data there, and only there).
void Assertions(Win& w) {
  MPI_Group world, to, from;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int right = Right(), left = Left();
  MPI_Group_incl(world, 1, &right, &to);
  MPI_Group_incl(world, 1, &left, &from);
  // Right: nothing stored locally, the origin only reads.
  MPI_Win_post(from, MPI_MODE_NOSTORE | MPI_MODE_NOPUT, w.win);
  MPI_Barrier(MPI_COMM_WORLD);  // every post is made: MPI_MODE_NOCHECK holds for the start
  MPI_Win_start(to, MPI_MODE_NOCHECK, w.win);
  int got = -5;
  MPI_Get(&got, 1, MPI_INT, right, 1, 1, MPI_INT, w.win);
  MPI_Win_complete(w.win);
  MPI_Win_wait(w.win);
  // Every rank holds the last PSCW epoch's number there.
  CHECK(got == w.base[1], "get under MPI_MODE_NOSTORE|NOPUT: %d, want %d", got, w.base[1]);
  const int before = w.base[1];
  if (Simulated()) {
    // Wrong on purpose: a put into a window whose post said MPI_MODE_NOPUT. The wait skips its
    // invalidation, so this rank does not see it.
    MPI_Win_post(from, MPI_MODE_NOPUT, w.win);
    MPI_Win_start(to, 0, w.win);
    const int v = 9000 + g_rank;
    MPI_Put(&v, 1, MPI_INT, right, 1, 1, MPI_INT, w.win);
    MPI_Win_complete(w.win);
    MPI_Win_wait(w.win);
    CHECK(w.base[1] == before, "MPI_MODE_NOPUT not honoured: the wait refreshed the window");
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_rank, 0, w.win);  // now it does
    CHECK(w.base[1] == 9000 + left, "after a lock: %d", w.base[1]);
    MPI_Win_unlock(g_rank, w.win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Group_free(&to);
  MPI_Group_free(&from);
  MPI_Group_free(&world);
}

void Locks(Win& w) {
  constexpr int kIters = 50;
  if (g_rank == 0) {  // a local store, made public before the others look
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win);
    w.base[3] = 0;
    MPI_Win_unlock(0, w.win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < kIters; ++i) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win);
    int v = 0;
    MPI_Get(&v, 1, MPI_INT, 0, 3, 1, MPI_INT, w.win);
    MPI_Win_flush(0, w.win);
    ++v;
    MPI_Put(&v, 1, MPI_INT, 0, 3, 1, MPI_INT, w.win);
    MPI_Win_unlock(0, w.win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    // Every other rank is past its unlock: MPI_MODE_NOCHECK (no lock taken) is right here.
    MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, w.win);
    CHECK(w.base[3] == kIters * g_size, "exclusive increments: %d", w.base[3]);
    MPI_Win_unlock(0, w.win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void LockAllFlushRequests(Win& w) {
  MPI_Win_lock_all(0, w.win);
  const int v = 2000 + g_rank;
  MPI_Put(&v, 1, MPI_INT, Right(), 4 + 0, 1, MPI_INT, w.win);
  MPI_Win_flush(Right(), w.win);
  int back = 0;
  MPI_Get(&back, 1, MPI_INT, Right(), 4, 1, MPI_INT, w.win);
  MPI_Win_flush_all(w.win);
  CHECK(back == v, "lock_all put/get back: %d", back);
  MPI_Request r[2];
  const int rv = 3000 + g_rank;
  int rget = 0;
  MPI_Rput(&rv, 1, MPI_INT, Right(), 5, 1, MPI_INT, w.win, &r[0]);
  MPI_Wait(&r[0], MPI_STATUS_IGNORE);
  MPI_Rget(&rget, 1, MPI_INT, Right(), 5, 1, MPI_INT, w.win, &r[1]);
  MPI_Wait(&r[1], MPI_STATUS_IGNORE);
  CHECK(rget == rv, "rput/rget: %d", rget);
  // A flushed put is at the target before the barrier: it reads it (after MPI_Win_sync, as
  // the separate memory model asks) while the epoch is still open.
  const int f = 4000 + g_rank;
  MPI_Put(&f, 1, MPI_INT, Right(), 7, 1, MPI_INT, w.win);
  MPI_Win_flush(Right(), w.win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_sync(w.win);
  CHECK(w.base[7] == 4000 + Left(), "flushed put at the target: %d", w.base[7]);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_unlock_all(w.win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_sync(w.win);
  CHECK(w.base[5] == 3000 + Left(), "rput at target: %d", w.base[5]);
}

// A strided origin into a contiguous target and back into a strided buffer.
void Datatypes(Win& w) {
  MPI_Datatype every_other;
  MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int src[8];
  for (int i = 0; i < 8; ++i) src[i] = 100 * g_rank + i;
  MPI_Win_fence(0, w.win);
  int rc = MPI_Put(src, 1, every_other, Right(), 10, 4, MPI_INT, w.win);
  CHECK(rc == MPI_SUCCESS, "vector put: %d", rc);
  MPI_Win_fence(0, w.win);
  for (int i = 0; i < 4; ++i) {
    CHECK(w.base[10 + i] == 100 * Left() + 2 * i, "vector put [%d]: %d", i, w.base[10 + i]);
  }
  for (int i = 0; i < 8; ++i) w.base[20 + i] = 500 * g_rank + i;
  int dst[8];
  for (int& d : dst) d = -7;
  MPI_Win_fence(0, w.win);
  rc = MPI_Get(dst, 1, every_other, Right(), 20, 1, every_other, w.win);
  CHECK(rc == MPI_SUCCESS, "vector get: %d", rc);
  MPI_Win_fence(0, w.win);
  for (int i = 0; i < 8; ++i) {
    const int want = i % 2 == 0 ? 500 * Right() + i : -7;
    CHECK(dst[i] == want, "strided get [%d]: %d, want %d", i, dst[i], want);
  }
  MPI_Type_free(&every_other);
}

// Concurrent accumulates to one element under shared locks: atomic, every kind of them.
void Accumulates(Win& w) {
  constexpr int kIters = 100;
  MPI_Win_fence(MPI_MODE_NOPRECEDE, w.win);  // every rank's slots reset below are ready
  if (g_rank == 0) {
    w.base[30] = 0;
    w.base[31] = 0;
    w.base[32] = -1;
    w.base[33] = -1;
    w.base[34] = 0;
  }
  MPI_Win_fence(MPI_MODE_NOSUCCEED, w.win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock_all(0, w.win);
  const int mine = g_rank + 1, one = 1;
  std::vector<int> fetched(kIters, -1);  // valid once the epoch's flush has completed them
  for (int i = 0; i < kIters; ++i) {
    MPI_Accumulate(&mine, 1, MPI_INT, 0, 30, 1, MPI_INT, MPI_SUM, w.win);
    MPI_Fetch_and_op(&one, &fetched[i], MPI_INT, 0, 31, MPI_SUM, w.win);
  }
  int won = -2, seen = 0;
  const int never = 12345, minus_one = -1;
  MPI_Compare_and_swap(&g_rank, &never, &seen, MPI_INT, 0, 32, w.win);
  MPI_Compare_and_swap(&g_rank, &minus_one, &won, MPI_INT, 0, 33, w.win);
  const int pair[2] = {g_rank * 10, g_rank};
  MPI_Request r;
  MPI_Raccumulate(pair, 1, MPI_2INT, 0, 34, 1, MPI_2INT, MPI_MAXLOC, w.win, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Win_flush_all(w.win);
  MPI_Win_unlock_all(w.win);
  CHECK(seen == -1 && (won == -1 || won >= 0), "compare_and_swap results %d %d", seen, won);
  for (int i = 1; i < kIters; ++i) {
    CHECK(fetched[i] > fetched[i - 1], "fetch_and_op values rise: %d then %d", fetched[i - 1],
          fetched[i]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win);
    int sum = 0, got[6];
    for (int r2 = 0; r2 < g_size; ++r2) sum += (r2 + 1) * kIters;
    MPI_Get_accumulate(nullptr, 0, MPI_INT, got, 5, MPI_INT, 0, 30, 5, MPI_INT, MPI_NO_OP, w.win);
    MPI_Win_unlock(0, w.win);
    CHECK(got[0] == sum, "accumulated sum %d, want %d", got[0], sum);
    CHECK(got[1] == kIters * g_size, "fetch_and_op count %d", got[1]);
    CHECK(got[2] == -1, "a compare that never matches swapped: %d", got[2]);
    CHECK(got[3] >= 0 && got[3] < g_size, "one compare_and_swap won: %d", got[3]);
    CHECK(got[4] == (g_size - 1) * 10, "maxloc value %d", got[4]);
    CHECK(w.base[35] == g_size - 1, "maxloc index %d", w.base[35]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

#if MPI_VERSION >= 4
// The MPI-4 large-count forms: a window from MPI_Win_allocate_c, puts, gets and accumulates
// with MPI_Count counts.
void LargeCount() {
  MPI_Win win;
  long* base = nullptr;
  MPI_Win_allocate_c(64 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  int* flavor = nullptr;
  int flag = 0;
  MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
  CHECK(flag && *flavor == MPI_WIN_FLAVOR_ALLOCATE, "MPI_Win_allocate_c flavour");
  MPI_Win_fence(0, win);
  const long v[4] = {g_rank, g_rank + 1L, g_rank + 2L, g_rank + 3L};
  MPI_Put_c(v, MPI_Count{4}, MPI_LONG, Right(), 0, MPI_Count{4}, MPI_LONG, win);
  MPI_Accumulate_c(v, MPI_Count{1}, MPI_LONG, Right(), 8, MPI_Count{1}, MPI_LONG, MPI_SUM, win);
  MPI_Win_fence(0, win);
  CHECK(base[0] == Left() && base[3] == Left() + 3, "MPI_Put_c: %ld %ld", base[0], base[3]);
  long got[4] = {};
  MPI_Win_lock_all(0, win);
  MPI_Request r;
  MPI_Rget_c(got, MPI_Count{4}, MPI_LONG, Right(), 0, MPI_Count{4}, MPI_LONG, win, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Win_unlock_all(win);
  CHECK(got[2] == g_rank + 2, "MPI_Rget_c: %ld", got[2]);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  MPI_Win_free(&win);
}
#endif

// Accumulates done in place in the window: MPI_REPLACE, MPI_SUM over a contiguous derived
// type, and a fetching MPI_SUM, each checked at the target and, fetched, at the origin.
void AccumulateInPlace(Win& w) {
  for (int i = 56; i < 60; ++i) w.base[i] = 0;
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const int replace[2] = {7 + g_rank, 8 + g_rank}, add[2] = {1, 2}, ten[2] = {10, 10};
  MPI_Win_fence(0, w.win);
  MPI_Accumulate(replace, 2, MPI_INT, Right(), 56, 2, MPI_INT, MPI_REPLACE, w.win);
  MPI_Accumulate(add, 1, pair, Right(), 58, 1, pair, MPI_SUM, w.win);
  MPI_Win_fence(0, w.win);
  CHECK(w.base[56] == 7 + Left() && w.base[57] == 8 + Left(), "MPI_REPLACE: %d %d", w.base[56],
        w.base[57]);
  CHECK(w.base[58] == 1 && w.base[59] == 2, "MPI_SUM of a pair type: %d %d", w.base[58],
        w.base[59]);
  int got[2] = {-1, -1};
  MPI_Win_fence(0, w.win);
  MPI_Get_accumulate(ten, 2, MPI_INT, got, 2, MPI_INT, Right(), 56, 2, MPI_INT, MPI_SUM, w.win);
  MPI_Win_fence(0, w.win);
  CHECK(got[0] == 7 + g_rank && got[1] == 8 + g_rank, "fetched: %d %d", got[0], got[1]);
  CHECK(w.base[56] == 17 + Left() && w.base[57] == 18 + Left(), "fetching MPI_SUM: %d %d",
        w.base[56], w.base[57]);
  MPI_Type_free(&pair);
}

// Found by MPICH's test/mpi/rma suite: a type that covers its extent but in another order
// (a transpose), MPI_PROC_NULL as a target of every call, accumulates of no bytes with
// unlike types, and MAXLOC on a pair type with padding (MPI_LONG_DOUBLE_INT).
void Transpose(Win& w) {
  MPI_Datatype column, xpose;
  MPI_Type_vector(4, 1, 4, MPI_INT, &column);
  MPI_Type_create_hvector(4, 1, sizeof(int), column, &xpose);
  MPI_Type_commit(&xpose);
  int src[16];
  for (int i = 0; i < 16; ++i) src[i] = 16 * g_rank + i;
  MPI_Win_fence(0, w.win);
  MPI_Put(src, 16, MPI_INT, Right(), 40, 1, xpose, w.win);
  MPI_Type_free(&column);
  MPI_Type_free(&xpose);  // freed before the epoch ends, as MPI allows
  MPI_Win_fence(0, w.win);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const int got = w.base[40 + 4 * i + j], want = 16 * Left() + 4 * j + i;
      CHECK(got == want, "transposed [%d][%d]: %d, want %d", i, j, got, want);
    }
  }
}

// A freed type's handle comes back for the next type made (MPICH reuses it at once): a
// contiguous type of 4 ints, then a strided one of 4 ints, each used and freed in turn. A
// library that still took the strided type for the contiguous one would copy the wrong ints.
void ReusedTypeHandles(Win& w) {
  int src[8];
  for (int i = 0; i < 8; ++i) src[i] = 8 * g_rank + i;
  for (int round = 0; round < 4; ++round) {
    const bool strided = round % 2 == 1;
    MPI_Datatype t;
    if (strided) {
      MPI_Type_vector(4, 1, 2, MPI_INT, &t);
    } else {
      MPI_Type_contiguous(4, MPI_INT, &t);
    }
    MPI_Type_commit(&t);
    MPI_Win_fence(0, w.win);
    MPI_Put(src, 1, t, Right(), 60, 4, MPI_INT, w.win);
    MPI_Win_fence(0, w.win);
    MPI_Type_free(&t);
    for (int i = 0; i < 4; ++i) {
      const int want = 8 * Left() + (strided ? 2 * i : i);
      CHECK(w.base[60 + i] == want, "round %d (%s) [%d]: %d, want %d", round,
            strided ? "strided" : "contiguous", i, w.base[60 + i], want);
    }
  }
}

// Communication with MPI_PROC_NULL does nothing (MPI 3.1 §11.3). Lock, unlock and flush of
// MPI_PROC_NULL too with the library, as MPICH does (Open MPI 4.1 refuses the lock and
// crashes in the flush).
void ProcNull(Win& w, bool library) {
  const int v = 5;
  int got = -3, rc = MPI_SUCCESS;
  if (library) rc |= MPI_Win_lock(MPI_LOCK_EXCLUSIVE, MPI_PROC_NULL, 0, w.win);
  MPI_Win_lock_all(0, w.win);
  rc |= MPI_Put(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, w.win);
  rc |= MPI_Get(&got, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, w.win);
  rc |= MPI_Accumulate(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, MPI_SUM, w.win);
  rc |= MPI_Fetch_and_op(&v, &got, MPI_INT, MPI_PROC_NULL, 0, MPI_SUM, w.win);
  rc |= MPI_Compare_and_swap(&v, &v, &got, MPI_INT, MPI_PROC_NULL, 0, w.win);
  MPI_Request r = MPI_REQUEST_NULL;
  rc |= MPI_Rput(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, w.win, &r);
  rc |= MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Win_unlock_all(w.win);
  if (library) rc |= MPI_Win_flush(MPI_PROC_NULL, w.win);
  if (library) rc |= MPI_Win_unlock(MPI_PROC_NULL, w.win);
  CHECK(rc == MPI_SUCCESS && got == -3, "RMA with MPI_PROC_NULL: %d, result %d", rc, got);
}

// With the library only: Open MPI 4.1 alone refuses the empty accumulate (MPI_ERR_ARG) and,
// on created windows, leaves the second of two padded pairs unchanged.
void EmptyAndPairAccumulates(Win& w) {
  struct LongDoubleInt {
    long double a;
    int b;
  };
  auto* at = reinterpret_cast<LongDoubleInt*>(w.base + 40);  // 16-byte aligned: 160 bytes in
  for (int k = 0; k < 2; ++k) at[k] = {-1.0L, -1};
  MPI_Win_fence(0, w.win);
  const int v = 1;
  int rc = MPI_Accumulate(&v, 0, MPI_INT, Right(), 0, 0, MPI_DOUBLE, MPI_SUM, w.win);
  CHECK(rc == MPI_SUCCESS, "an accumulate of no bytes: %d", rc);
  const LongDoubleInt mine[2] = {{10.0L * g_rank, g_rank}, {10.0L * g_rank + 1, g_rank}};
  rc = MPI_Accumulate(mine, 2, MPI_LONG_DOUBLE_INT, Right(), 40, 2, MPI_LONG_DOUBLE_INT, MPI_MAXLOC,
                      w.win);
  CHECK(rc == MPI_SUCCESS, "MAXLOC on MPI_LONG_DOUBLE_INT: %d", rc);
  MPI_Win_fence(0, w.win);
  for (int k = 0; k < 2; ++k) {
    CHECK(at[k].a == 10.0L * Left() + k && at[k].b == Left(), "pair [%d]: %Lf %d", k, at[k].a,
          at[k].b);
  }
}

// Copies of 1-4 KiB, which go through the copy kernel (glibc's rep movsb is slow for them on
// Zen 3 when the destination lies a few bytes above the source modulo 4 KiB): put and get at
// odd offsets on both sides, every byte checked.
void MediumCopies() {
  constexpr int kBytes = 16384;
  MPI_Win win;
  unsigned char* base = nullptr;
  MPI_Win_allocate(kBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  std::vector<unsigned char> mine(kBytes + 64), got(kBytes + 64);
  for (int n : {1024, 2049, 3000, 4095}) {
    for (int i = 0; i < kBytes; ++i) base[i] = static_cast<unsigned char>(g_rank * 7 + i);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<unsigned char>(n + i);
    MPI_Win_fence(0, win);
    MPI_Put(mine.data() + 16, n, MPI_BYTE, Right(), 32, n, MPI_BYTE, win);
    MPI_Get(got.data() + 48, n, MPI_BYTE, Right(), 8192 + 3, n, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      bad += base[32 + i] != static_cast<unsigned char>(n + 16 + i);
      bad += got[48 + i] != static_cast<unsigned char>(Right() * 7 + 8192 + 3 + i);
    }
    bad += base[31] != static_cast<unsigned char>(g_rank * 7 + 31);
    bad += base[32 + n] != static_cast<unsigned char>(g_rank * 7 + 32 + n);
    CHECK(bad == 0, "%d-byte put and get at odd offsets: %d bytes wrong", n, bad);
  }
  MPI_Win_free(&win);
}

// A window of one int on MPI_COMM_SELF, a get_accumulate to itself (MPICH's get_acc_local):
// alone in its window a rank reaches its own memory directly, so even a tiny window stays with
// the library, which gets it right where MPICH 4.0.2 alone returns the updated value.
[[maybe_unused]] void SelfWindow() {
  int counter = 0, one = 1, out = -1;
  MPI_Win win;
  MPI_Win_create(&counter, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_SELF, &win);
  MPI_Win_fence(0, win);
  MPI_Get_accumulate(&one, 1, MPI_INT, &out, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win);
  MPI_Win_fence(0, win);
  CHECK(out == 0 && counter == 1, "get_accumulate to itself: fetched %d, now %d", out, counter);
  MPI_Win_free(&win);
}

// Many small MPI_Alloc_mem blocks attached to a dynamic window (MPICH's linked-list tests):
// Open MPI attaches at most 64 regions, so the blocks must share pages as the MPI's own do.
// Windows alive at once, each still right when the library leaves the later ones to the MPI
// (TIERFLOW_RMA_COMMUNICATORS below their number).
void ManyLiveWindows() {
  constexpr int kWindows = 8;
  std::vector<MPI_Win> wins(kWindows, MPI_WIN_NULL);
  std::vector<int*> bases(kWindows, nullptr);
  for (int i = 0; i < kWindows; ++i) {
    // Not a window of one int: MPICH 4.0 alone puts into the wrong rank's memory there.
    MPI_Win_allocate(64 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &bases[i],
                     &wins[i]);
    MPI_Win_fence(0, wins[i]);
    const int v = 100 * i + g_rank;
    MPI_Put(&v, 1, MPI_INT, (g_rank + 1) % g_size, 0, 1, MPI_INT, wins[i]);
    MPI_Win_fence(0, wins[i]);
  }
  const int from = (g_rank + g_size - 1) % g_size;
  for (int i = 0; i < kWindows; ++i) {
    CHECK(*bases[i] == 100 * i + from, "window %d of %d alive: %d, expected %d", i, kWindows,
          *bases[i], 100 * i + from);
  }
  for (int i = kWindows - 1; i >= 0; --i) MPI_Win_free(&wins[i]);
}

// Windows smaller than a cache line, made one after another: a put's partial lines must be
// cut to the window (in the noncoherent mode, the one that maintains lines, a line reaching
// before the window's first byte may lie in a page the target's memory does not share, where
// maintaining it faults).
void WindowsSmallerThanALine() {
  int bad = 0;
  for (int round = 0; round < 16; ++round) {
    long* base = nullptr;
    MPI_Win win;
    MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < 4; ++i) base[i] = -1;
    MPI_Win_fence(0, win);
    const long v[2] = {g_rank * 1000L + round, -g_rank * 1000L - round};
    MPI_Put(&v[0], 1, MPI_LONG, (g_rank + 1) % g_size, 0, 1, MPI_LONG, win);
    MPI_Put(&v[1], 1, MPI_LONG, (g_rank + 1) % g_size, 3, 1, MPI_LONG, win);
    MPI_Win_fence(0, win);
    const long from = (g_rank + g_size - 1) % g_size;
    bad += base[0] != from * 1000L + round || base[3] != -from * 1000L - round;
    bad += base[1] != -1 || base[2] != -1;
    MPI_Win_free(&win);
  }
  CHECK(bad == 0, "windows of 32 bytes: %d rounds wrong", bad);
}

void ManySmallAllocations() {
  MPI_Win win;
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  std::vector<long*> blocks(300, nullptr);
  int failed = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    failed += MPI_Alloc_mem(32, MPI_INFO_NULL, &blocks[i]) != MPI_SUCCESS;
    if (blocks[i] == nullptr) continue;
    blocks[i][0] = static_cast<long>(i);
    blocks[i][3] = -static_cast<long>(i);
    failed += MPI_Win_attach(win, blocks[i], 32) != MPI_SUCCESS;
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    CHECK(blocks[i] != nullptr && blocks[i][0] == static_cast<long>(i) &&
              blocks[i][3] == -static_cast<long>(i),
          "block %zu overlaps another", i);
  }
  for (long* b : blocks) failed += MPI_Win_detach(win, b) != MPI_SUCCESS;
  MPI_Win_free(&win);
  for (long* b : blocks) failed += MPI_Free_mem(b) != MPI_SUCCESS;
  CHECK(failed == 0, "%d of 300 small allocations, attaches, detaches or frees failed", failed);
}

int ErrorClass(int rc) {
  int c = rc;
  MPI_Error_class(rc, &c);
  return c;
}

void Errors(Win& w) {
  MPI_Win_fence(MPI_MODE_NOSUCCEED, w.win);  // the fence epoch of Datatypes ends
  const int v = 1;
  int rc = MPI_Put(&v, 1, MPI_INT, Right(), 0, 1, MPI_INT, w.win);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_SYNC, "put outside an epoch: %d", rc);
  MPI_Win_lock_all(0, w.win);
  rc = MPI_Put(&v, 1, MPI_INT, g_size + 3, 0, 1, MPI_INT, w.win);
  CHECK(ErrorClass(rc) == MPI_ERR_RANK, "put to a rank outside: %d", rc);
  rc = MPI_Put(&v, 1, MPI_INT, Right(), w.bytes() / sizeof(int), 1, MPI_INT, w.win);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_RANGE, "put beyond the window: %d", rc);
  MPI_Win tmp = w.win;
  rc = MPI_Win_free(&tmp);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_SYNC, "free inside an epoch: %d", rc);
  MPI_Op user;
  MPI_Op_create([](void*, void*, int*, MPI_Datatype*) {}, 1, &user);
  rc = MPI_Accumulate(&v, 1, MPI_INT, Right(), 0, 1, MPI_INT, user, w.win);
  CHECK(ErrorClass(rc) == MPI_ERR_OP, "accumulate with a user-defined op: %d", rc);
  MPI_Op_free(&user);
  MPI_Win_unlock_all(w.win);
  // Only rank 0 has an epoch open: every rank's free fails, none waits for the others.
  if (g_rank == 0) MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win);
  tmp = w.win;
  rc = MPI_Win_free(&tmp);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_SYNC, "free while rank 0 has an epoch open: %d", rc);
  if (g_rank == 0) MPI_Win_unlock(0, w.win);
  rc = MPI_Win_complete(w.win);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_SYNC, "complete without start: %d", rc);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const bool library = LibraryExpected();
  CHECK(library == LibraryAnswers(), "expected the library: %d, answering: %d", library,
        LibraryAnswers());
  for (Kind k : {Kind::kAllocate, Kind::kAllocMem, Kind::kPages, Kind::kPlain, Kind::kTiny}) {
    Win w(k);
    const int before = g_failures;
    // What only the library does (MPI_PROC_NULL locks, its error classes) on windows it runs.
    // In a pool, only MPI_Win_allocate memory and whole pages of the heap move there (the
    // simulated mode copies any memory); the others are split by host or left to the MPI.
    const bool pooled = k == Kind::kAllocate || k == Kind::kPages || Simulated();
    const bool accelerated =
        library && (PoolExpected() ? pooled : k != Kind::kTiny || !TinyLeftToMpi());
    Attributes(w);
    Fence(w);
    Pscw(w);
    Assertions(w);
    Locks(w);
    LockAllFlushRequests(w);
    Datatypes(w);
    Accumulates(w);
    AccumulateInPlace(w);
    Transpose(w);
    ReusedTypeHandles(w);
    ProcNull(w, accelerated);
    if (accelerated) EmptyAndPairAccumulates(w);
    if (accelerated) Errors(w);
    if (g_failures != before)
      std::fprintf(stderr, "rank %d: failures on %s windows\n", g_rank, Name(k));
  }
#if MPI_VERSION >= 4
  LargeCount();
#endif
  ManySmallAllocations();
  if (const char* mode = std::getenv("TIERFLOW_RMA_COHERENCE");
      mode != nullptr && std::strcmp(mode, "noncoherent") == 0) {
    WindowsSmallerThanALine();
  }
  ManyLiveWindows();
  MediumCopies();
#if defined(MPICH_VERSION)  // Open MPI 4.1 refuses a window of one rank
  if (library) SelfWindow();
#endif
  int total = 0;
  MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s: %d failures\n", total == 0 ? "PASS" : "FAIL", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
