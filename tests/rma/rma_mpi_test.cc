// Checks every synchronisation and transfer on each kind of window, with the data, under the
// MPI it was built for; run by ctest through mpirun with 2 and 4 ranks (more ranks than CPUs:
// oversubscribed). Without TIERFLOW_RMA_EXPECT it checks the MPI alone, which keeps the test
// itself honest; with TIERFLOW_RMA_EXPECT=1 the library must be the one answering (its
// MPI_Put is the one linked) and its errors are checked too.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_size = 0, g_failures = 0;

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed: ", g_rank, __FILE__, __LINE__, \
                   #cond);                                                                   \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fprintf(stderr, "\n");                                                            \
      ++g_failures;                                                                          \
    }                                                                                        \
  } while (0)

bool LibraryExpected() {
  const char* e = std::getenv("TIERFLOW_RMA_EXPECT");
  return e != nullptr && std::strcmp(e, "1") == 0;
}

bool LibraryAnswers() {
  Dl_info info{};
  void* put = dlsym(RTLD_DEFAULT, "MPI_Put");
  return put != nullptr && dladdr(put, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "tierflow_rma") != nullptr;
}

enum class Kind { kAllocate, kAllocMem, kPlain };
const char* Name(Kind k) {
  return k == Kind::kAllocate ? "allocate" : k == Kind::kAllocMem ? "alloc_mem" : "plain";
}

constexpr int kSlots = 64;  // ints per rank's window

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
      } else {
        plain.assign(kSlots, 0);
        base = plain.data();
      }
      MPI_Win_create(base, bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    }
    for (int i = 0; i < kSlots; ++i) base[i] = -1;
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ~Win() {
    MPI_Win_free(&win);
    if (kind == Kind::kAllocMem) MPI_Free_mem(base);
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
  CHECK(flag && *size == kSlots * static_cast<MPI_Aint>(sizeof(int)), "size");
  MPI_Group g;
  MPI_Win_get_group(w.win, &g);
  int n = 0;
  MPI_Group_size(g, &n);
  CHECK(n == g_size, "group size %d", n);
  MPI_Group_free(&g);
}

void Fence(Win& w) {
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
    MPI_Win_post(from, 0, w.win);
    MPI_Win_start(to, 0, w.win);
    const int v[2] = {i, g_rank};
    MPI_Put(v, 2, MPI_INT, right, 1, 2, MPI_INT, w.win);
    MPI_Win_complete(w.win);
    MPI_Win_wait(w.win);
    CHECK(w.base[1] == i && w.base[2] == left, "epoch %d: %d %d", i, w.base[1], w.base[2]);
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

void Locks(Win& w) {
  constexpr int kIters = 50;
  if (g_rank == 0) {
    w.base[3] = 0;
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
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win);
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
  rc = MPI_Put(&v, 1, MPI_INT, Right(), kSlots, 1, MPI_INT, w.win);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_RANGE, "put beyond the window: %d", rc);
  MPI_Win tmp = w.win;
  rc = MPI_Win_free(&tmp);
  CHECK(ErrorClass(rc) == MPI_ERR_RMA_SYNC, "free inside an epoch: %d", rc);
  MPI_Win_unlock_all(w.win);
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
  for (Kind k : {Kind::kAllocate, Kind::kAllocMem, Kind::kPlain}) {
    Win w(k);
    const int before = g_failures;
    Attributes(w);
    Fence(w);
    Pscw(w);
    Locks(w);
    LockAllFlushRequests(w);
    Datatypes(w);
    if (library) Errors(w);
    if (g_failures != before)
      std::fprintf(stderr, "rank %d: failures on %s windows\n", g_rank, Name(k));
  }
  int total = 0;
  MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s: %d failures\n", total == 0 ? "PASS" : "FAIL", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
