// SPDX-License-Identifier: Apache-2.0
// Fuzzes the RMA library's argument checking against a reference: random target ranks,
// displacements, counts and datatypes (predefined, resized with negative extents, vectors and
// hvectors of negative strides, indexed, structs with negative displacements) for every
// communication call, on a window mapped here and one reached with process_vm copies. The
// reference computes each access's bytes from the type map this file builds the type from
// (not from the MPI's bounds), with 128-bit arithmetic: an access inside the window must
// succeed and change exactly the bytes the reference says, in type-map order; one outside it
// must fail with MPI_ERR_RMA_RANGE and change nothing. Run with 2 ranks and the library linked:
// rank 0 makes every access, rank 1 holds a window. TIERFLOW_FUZZ_SEED and TIERFLOW_FUZZ_CASES
// choose the cases (the seed is printed).
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mpi_check.h"

namespace {

int g_rank = 0, g_failures = 0;

using i128 = __int128;

// A datatype and the reference's description of it: the bytes one element touches, in
// type-map order, and its extent.
struct Block {
  std::int64_t offset, length;
};
struct Type {
  std::string name;
  MPI_Datatype type;
  std::vector<Block> blocks;
  std::int64_t extent;
  MPI_Datatype basic;  // the predefined type it is made of; MPI_DATATYPE_NULL for a mix
};

Type Committed(std::string name, MPI_Datatype t, std::vector<Block> blocks, std::int64_t extent,
               MPI_Datatype basic) {
  MPI_Type_commit(&t);
  return Type{std::move(name), t, std::move(blocks), extent, basic};
}

std::vector<Type> MakeTypes() {
  std::vector<Type> v;
  v.push_back({"int", MPI_INT, {{0, 4}}, 4, MPI_INT});
  v.push_back({"double", MPI_DOUBLE, {{0, 8}}, 8, MPI_DOUBLE});
  MPI_Datatype t;
  MPI_Type_create_resized(MPI_INT, 0, -4, &t);
  v.push_back(Committed("resized(int,0,-4)", t, {{0, 4}}, -4, MPI_INT));
  MPI_Type_create_resized(MPI_INT, 0, -12, &t);
  v.push_back(Committed("resized(int,0,-12)", t, {{0, 4}}, -12, MPI_INT));
  MPI_Type_create_resized(MPI_INT, -8, 12, &t);
  v.push_back(Committed("resized(int,-8,12)", t, {{0, 4}}, 12, MPI_INT));
  MPI_Type_vector(3, 2, 4, MPI_INT, &t);
  v.push_back(Committed("vector(3,2,4,int)", t, {{0, 8}, {16, 8}, {32, 8}}, 40, MPI_INT));
  MPI_Type_vector(2, 1, -3, MPI_INT, &t);
  v.push_back(Committed("vector(2,1,-3,int)", t, {{0, 4}, {-12, 4}}, 16, MPI_INT));
  MPI_Type_create_hvector(3, 1, -20, MPI_DOUBLE, &t);
  v.push_back(
      Committed("hvector(3,1,-20,double)", t, {{0, 8}, {-20, 8}, {-40, 8}}, 48, MPI_DOUBLE));
  MPI_Datatype inner;
  MPI_Type_vector(2, 1, 2, MPI_INT, &inner);
  MPI_Type_create_resized(inner, 0, -12, &t);
  MPI_Type_free(&inner);
  v.push_back(Committed("resized(vector(2,1,2,int),0,-12)", t, {{0, 4}, {8, 4}}, -12, MPI_INT));
  const int lens[] = {2, 1};
  const MPI_Aint at[] = {0, 12};
  const MPI_Datatype ints[] = {MPI_INT, MPI_INT};
  MPI_Type_create_struct(2, lens, at, ints, &t);
  v.push_back(Committed("struct{2 int@0,int@12}", t, {{0, 8}, {12, 4}}, 16, MPI_INT));
  const int ones[] = {1, 1};
  const MPI_Aint below[] = {8, -4};
  MPI_Type_create_struct(2, ones, below, ints, &t);
  v.push_back(Committed("struct{int@8,int@-4}", t, {{8, 4}, {-4, 4}}, 16, MPI_INT));
  const int blens[] = {1, 2}, disps[] = {3, 0};
  MPI_Type_indexed(2, blens, disps, MPI_INT, &t);
  v.push_back(Committed("indexed({1,2},{3,0},int)", t, {{12, 4}, {0, 8}}, 16, MPI_INT));
  const MPI_Aint mixed_at[] = {0, 8};
  const MPI_Datatype mixed[] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, ones, mixed_at, mixed, &t);
  v.push_back(Committed("struct{int@0,double@8}", t, {{0, 4}, {8, 8}}, 16, MPI_DATATYPE_NULL));
  return v;
}

std::int64_t SizeOf(const Type& t) {
  std::int64_t n = 0;
  for (const Block& b : t.blocks) n += b.length;
  return n;
}

// The reference bounds of count elements at byte `start`: [lo, hi) in 128 bits.
void Bounds(const Type& t, std::int64_t count, i128 start, i128& lo, i128& hi) {
  i128 lo1 = INT64_MAX, hi1 = INT64_MIN;
  for (const Block& b : t.blocks) {
    lo1 = b.offset < lo1 ? b.offset : lo1;
    hi1 = b.offset + b.length > hi1 ? b.offset + b.length : hi1;
  }
  const i128 last = static_cast<i128>(count - 1) * t.extent;
  lo = start + lo1 + (last < 0 ? last : 0);
  hi = start + hi1 + (last > 0 ? last : 0);
}

// Window byte offsets that count elements at byte `start` write, in the order of the packed
// stream (count is small here: the access fits the window).
std::vector<std::int64_t> Touched(const Type& t, std::int64_t count, std::int64_t start) {
  std::vector<std::int64_t> at;
  for (std::int64_t i = 0; i < count; ++i) {
    for (const Block& b : t.blocks) {
      for (std::int64_t k = 0; k < b.length; ++k) at.push_back(start + i * t.extent + b.offset + k);
    }
  }
  return at;
}

enum class Op {
  kPut,
  kGet,
  kRput,
  kRget,
  kAccumulate,
  kGetAccumulate,
  kRaccumulate,
  kFetchAndOp,
  kCompareAndSwap,
  kPutLarge,
  kCount
};
const char* OpName(Op op) {
  static const char* names[] = {"MPI_Put",         "MPI_Get",          "MPI_Rput",
                                "MPI_Rget",        "MPI_Accumulate",   "MPI_Get_accumulate",
                                "MPI_Raccumulate", "MPI_Fetch_and_op", "MPI_Compare_and_swap",
                                "MPI_Put_c"};
  return names[static_cast<int>(op)];
}
bool Accumulates(Op op) {
  return op == Op::kAccumulate || op == Op::kGetAccumulate || op == Op::kRaccumulate ||
         op == Op::kFetchAndOp || op == Op::kCompareAndSwap;
}

struct Win {
  MPI_Win win;
  std::int64_t size;
  int unit;
  const char* kind;
};

struct Case {
  Op op;
  int target;
  MPI_Aint disp;
  std::int64_t count;
  const Type* type;
};

constexpr std::size_t kOrigin = 1 << 16;

// The expected error class of a case; MPI_SUCCESS when it must succeed.
int Expected(const Case& c, const Win& w, int ranks) {
  if (c.target == MPI_PROC_NULL) return MPI_SUCCESS;
  if (c.target < 0 || c.target >= ranks) return MPI_ERR_RANK;
  if (Accumulates(c.op) && c.type->basic == MPI_DATATYPE_NULL && c.count > 0) return MPI_ERR_OP;
  // More bytes than an address holds: the type signatures cannot be compared.
  if (static_cast<i128>(c.count) * SizeOf(*c.type) > INT64_MAX) return MPI_ERR_TYPE;
  if (c.disp < 0) return MPI_ERR_RMA_RANGE;
  if (c.count == 0) return MPI_SUCCESS;
  i128 lo = 0, hi = 0;
  Bounds(*c.type, c.count, static_cast<i128>(c.disp) * w.unit, lo, hi);
  return lo >= 0 && hi <= w.size ? MPI_SUCCESS : MPI_ERR_RMA_RANGE;
}

// The origin buffers: bytes for put/get, elements of the basic type for accumulates.
struct Origin {
  std::vector<unsigned char> bytes = std::vector<unsigned char>(kOrigin);
  std::vector<unsigned char> result = std::vector<unsigned char>(kOrigin);
};

void FillOrigin(const Case& c, Origin& o) {
  if (c.type->basic == MPI_DOUBLE) {
    auto* d = reinterpret_cast<double*>(o.bytes.data());
    for (std::size_t i = 0; i < kOrigin / 8; ++i) d[i] = static_cast<double>(i + 1);
  } else if (Accumulates(c.op)) {
    auto* n = reinterpret_cast<int*>(o.bytes.data());
    for (std::size_t i = 0; i < kOrigin / 4; ++i) n[i] = static_cast<int>(i + 1);
  } else {
    for (std::size_t i = 0; i < kOrigin; ++i) o.bytes[i] = static_cast<unsigned char>(i % 251 + 1);
  }
  std::fill(o.result.begin(), o.result.end(), 0xee);
}

int BasicSize(const Type& t) { return t.basic == MPI_DOUBLE ? 8 : 4; }

// Runs the call; the origin side is contiguous bytes (or basic elements for accumulates) when
// they fit the origin buffer, else the target's own type (then the access cannot fit the
// window and the origin is never read).
int Issue(const Case& c, Origin& o, MPI_Win win) {
  const Type& t = *c.type;
  const i128 bytes = static_cast<i128>(c.count) * SizeOf(t);  // the huge counts overflow 64 bits
  const bool plain = bytes <= static_cast<i128>(kOrigin);
  const int tcount = static_cast<int>(c.count);
  // A mix of predefined types cannot be accumulated: the same type on both sides, refused
  // with MPI_ERR_OP before anything else.
  const bool same = !plain || (Accumulates(c.op) && t.basic == MPI_DATATYPE_NULL);
  const MPI_Datatype otype = same ? t.type : Accumulates(c.op) ? t.basic : MPI_BYTE;
  const int ocount = same                ? tcount
                     : Accumulates(c.op) ? static_cast<int>(bytes / BasicSize(t))
                                         : static_cast<int>(bytes);
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  switch (c.op) {
    case Op::kPut:
      return MPI_Put(o.bytes.data(), ocount, otype, c.target, c.disp, tcount, t.type, win);
    case Op::kGet:
      return MPI_Get(o.result.data(), ocount, otype, c.target, c.disp, tcount, t.type, win);
    case Op::kRput:
      rc = MPI_Rput(o.bytes.data(), ocount, otype, c.target, c.disp, tcount, t.type, win, &r);
      break;
    case Op::kRget:
      rc = MPI_Rget(o.result.data(), ocount, otype, c.target, c.disp, tcount, t.type, win, &r);
      break;
    case Op::kAccumulate:
      return MPI_Accumulate(o.bytes.data(), ocount, otype, c.target, c.disp, tcount, t.type,
                            MPI_SUM, win);
    case Op::kGetAccumulate:
      return MPI_Get_accumulate(o.bytes.data(), ocount, otype, o.result.data(), ocount, otype,
                                c.target, c.disp, tcount, t.type, MPI_SUM, win);
    case Op::kRaccumulate:
      rc = MPI_Raccumulate(o.bytes.data(), ocount, otype, c.target, c.disp, tcount, t.type,
                           MPI_REPLACE, win, &r);
      break;
    case Op::kFetchAndOp:
      return MPI_Fetch_and_op(o.bytes.data(), o.result.data(), t.type, c.target, c.disp, MPI_SUM,
                              win);
    case Op::kCompareAndSwap: {
      static const unsigned char zeros[8] = {};
      return MPI_Compare_and_swap(o.bytes.data(), zeros, o.result.data(), t.type, c.target, c.disp,
                                  win);
    }
    case Op::kPutLarge:
#if MPI_VERSION >= 4
      return MPI_Put_c(o.bytes.data(), same ? MPI_Count{c.count} : MPI_Count{ocount}, otype,
                       c.target, c.disp, c.count, t.type, win);
#else
      return MPI_Put(o.bytes.data(), ocount, otype, c.target, c.disp, tcount, t.type, win);
#endif
    case Op::kCount:
      break;
  }
  if (rc == MPI_SUCCESS && r != MPI_REQUEST_NULL) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
  return rc;
}

// What the window must hold after a successful case, from `before`.
std::vector<unsigned char> Reference(const Case& c, const Win& w, const Origin& o,
                                     const std::vector<unsigned char>& before) {
  std::vector<unsigned char> after = before;
  const bool writes = c.op != Op::kGet && c.op != Op::kRget;
  if (!writes || c.count == 0 || c.target == MPI_PROC_NULL) return after;
  const std::vector<std::int64_t> at =
      Touched(*c.type, c.count, static_cast<std::int64_t>(c.disp) * w.unit);
  for (std::size_t k = 0; k < at.size(); ++k) after[static_cast<std::size_t>(at[k])] = o.bytes[k];
  return after;
}

void Fill(std::vector<unsigned char>& v, bool zero) {
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = zero ? 0 : static_cast<unsigned char>(i * 7 + 3);
}

// Sets the target's window to `bytes` and reads it back around the case, inside one
// exclusive lock.
void Put(const std::vector<unsigned char>& bytes, int target, MPI_Win win) {
  MPI_Put(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, target, 0,
          static_cast<int>(bytes.size()), MPI_BYTE, win);
  MPI_Win_flush(target, win);
}

std::string Describe(const Case& c, const Win& w) {
  return std::string(OpName(c.op)) + " on the " + w.kind + " window (unit " +
         std::to_string(w.unit) + ", " + std::to_string(w.size) + " bytes): target " +
         std::to_string(c.target) + ", disp " + std::to_string(c.disp) + ", count " +
         std::to_string(c.count) + " of " + c.type->name;
}

void RunCase(const Case& c, const Win& w, int ranks) {
  const int expect = Expected(c, w, ranks);
  const int holder = c.target >= 0 && c.target < ranks ? c.target : 1;
  std::vector<unsigned char> before(static_cast<std::size_t>(w.size));
  // Accumulates add to zeros, and compare-and-swap compares with zeros (the result is the
  // origin's elements); put and get start from a pattern, so a get reads known bytes.
  Fill(before, Accumulates(c.op));
  Origin o;
  FillOrigin(c, o);
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, holder, 0, w.win);
  Put(before, holder, w.win);
  const int rc = Issue(c, o, w.win);
  MPI_Win_flush(holder, w.win);
  std::vector<unsigned char> now(before.size());
  MPI_Get(now.data(), static_cast<int>(now.size()), MPI_BYTE, holder, 0,
          static_cast<int>(now.size()), MPI_BYTE, w.win);
  MPI_Win_unlock(holder, w.win);
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  CHECK(cls == expect, "%s: error class %d, the reference says %d", Describe(c, w).c_str(), cls,
        expect);
  const std::vector<unsigned char> want =
      expect == MPI_SUCCESS && holder == c.target ? Reference(c, w, o, before) : before;
  std::size_t bad = 0;
  while (bad < want.size() && want[bad] == now[bad]) ++bad;
  CHECK(bad == want.size(), "%s: window byte %zu is %d, the reference says %d",
        Describe(c, w).c_str(), bad, bad < now.size() ? now[bad] : -1,
        bad < want.size() ? want[bad] : -1);
  if (cls == MPI_SUCCESS && expect == MPI_SUCCESS && (c.op == Op::kGet || c.op == Op::kRget) &&
      c.count > 0 && c.target != MPI_PROC_NULL) {
    const std::vector<std::int64_t> at =
        Touched(*c.type, c.count, static_cast<std::int64_t>(c.disp) * w.unit);
    std::size_t k = 0;
    while (k < at.size() && o.result[k] == before[static_cast<std::size_t>(at[k])]) ++k;
    CHECK(k == at.size(), "%s: origin byte %zu differs from the window's", Describe(c, w).c_str(),
          k);
  }
}

MPI_Aint RandomDisp(std::mt19937_64& rng, const Win& w) {
  const std::int64_t units = w.size / w.unit;
  switch (rng() % 10) {
    case 0:
      return -static_cast<MPI_Aint>(rng() % 64) - 1;
    case 1: {
      const MPI_Aint huge[] = {INT64_MAX,         INT64_MAX / w.unit, (MPI_Aint{1} << 61) + 3,
                               MPI_Aint{1} << 30, INT64_MAX - 40,     (MPI_Aint{1} << 62) / w.unit};
      return huge[rng() % 6];
    }
    case 2:
      return units - static_cast<MPI_Aint>(rng() % 16);
    default:
      return static_cast<MPI_Aint>(rng() % static_cast<std::uint64_t>(units + 8));
  }
}

std::int64_t RandomCount(std::mt19937_64& rng, Op op) {
  if (op == Op::kFetchAndOp || op == Op::kCompareAndSwap) return 1;
  switch (rng() % 12) {
    case 0:
      return 0;
    case 1: {
      const std::int64_t big[] = {INT_MAX, INT_MAX - 1, 1 << 30, 100000};
      return big[rng() % 4];
    }
    case 2:
      if (op == Op::kPutLarge && MPI_VERSION >= 4) {
        const std::int64_t huge[] = {std::int64_t{1} << 40, std::int64_t{1} << 59, INT64_MAX / 8};
        return huge[rng() % 3];
      }
      return 1 + static_cast<std::int64_t>(rng() % 200);
    default:
      return 1 + static_cast<std::int64_t>(rng() % 24);
  }
}

Case RandomCase(std::mt19937_64& rng, const Win& w, const std::vector<Type>& types, int ranks) {
  Case c;
  c.op = static_cast<Op>(rng() % static_cast<int>(Op::kCount));
  const int pick = static_cast<int>(rng() % 20);
  c.target = pick < 9 ? 1 : pick < 17 ? 0 : pick == 17 ? MPI_PROC_NULL : pick == 18 ? ranks : -3;
  c.disp = RandomDisp(rng, w);
  c.count = RandomCount(rng, c.op);
  if (c.op == Op::kFetchAndOp || c.op == Op::kCompareAndSwap) {
    c.type = &types[rng() % 2];  // predefined: int, double
  } else {
    c.type = &types[rng() % types.size()];
  }
  return c;
}

// The cases the review reproduced, first.
std::vector<Case> KnownCases(const std::vector<Type>& types, const Win& w) {
  const Type* negative = &types[2];  // resized(int, 0, -4)
  return {{Op::kPut, 1, 4096 + 8, 3, negative},
          {Op::kPut, 1, MPI_Aint{1} << 30, 3, negative},
          {Op::kGet, 1, MPI_Aint{1} << 30, 3, negative},
          {Op::kPut, 1, (MPI_Aint{1} << 61) + 3, 1, &types[1]},
          {Op::kAccumulate, 1, w.size / w.unit, 2, negative},
          {Op::kRput, 1, 1, 2, negative},
          {Op::kPut, 1, 8 / w.unit, 3, negative},
          {Op::kGetAccumulate, 1, (MPI_Aint{1} << 62) / w.unit + 1, 1, &types[0]}};
}

Win Allocated(int unit) {
  Win w{MPI_WIN_NULL, 4096, unit, "allocated"};
  void* base = nullptr;
  MPI_Win_allocate(w.size, unit, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w.win);
  return w;
}

// Heap memory that is not whole pages: reached with process_vm copies.
Win Plain(int unit, std::vector<unsigned char>& memory) {
  Win w{MPI_WIN_NULL, 4100, unit, "process_vm"};
  memory.assign(4100 + 64, 0);
  MPI_Win_create(memory.data() + 3, w.size, unit, MPI_INFO_NULL, MPI_COMM_WORLD, &w.win);
  return w;
}

// Security review, item 10: sizes that add up to more than a segment holds are an error on
// every rank, and baseptr is left alone.
void HugeAllocationFails() {
  void* base = reinterpret_cast<void*>(0x1234);
  MPI_Win win = MPI_WIN_NULL;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rc = MPI_Win_allocate(INT64_MAX, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  CHECK(rc != MPI_SUCCESS, "MPI_Win_allocate(INT64_MAX) on every rank succeeded");
  CHECK(base == reinterpret_cast<void*>(0x1234), "a failed MPI_Win_allocate set baseptr to %p",
        base);
  if (rc == MPI_SUCCESS && win != MPI_WIN_NULL) MPI_Win_free(&win);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const char* seed_text = std::getenv("TIERFLOW_FUZZ_SEED");
  const char* cases_text = std::getenv("TIERFLOW_FUZZ_CASES");
  const std::uint64_t seed =
      seed_text != nullptr ? std::strtoull(seed_text, nullptr, 10) : 20261127;
  const int cases = cases_text != nullptr ? std::atoi(cases_text) : 12000;
  if (g_rank == 0)
    std::printf("rma_fuzz_test: seed %llu, %d random cases over 6 windows\n",
                static_cast<unsigned long long>(seed), cases);
  HugeAllocationFails();
  const std::vector<Type> types = MakeTypes();
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> memory;
  int run = 0;
  for (int unit : {1, 4, 8}) {
    for (bool plain : {false, true}) {
      Win w = plain ? Plain(unit, memory) : Allocated(unit);
      MPI_Win_set_errhandler(w.win, MPI_ERRORS_RETURN);
      if (g_rank == 0) {
        for (const Case& c : KnownCases(types, w)) RunCase(c, w, ranks);
        for (int i = 0; i < cases / 6; ++i, ++run)
          RunCase(RandomCase(rng, w, types, ranks), w, ranks);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Win_free(&w.win);
    }
  }
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf("rma_fuzz_test: %d random cases and the known ones: %s (%d failures)\n", run,
                failures == 0 ? "all as the reference says" : "FAIL", failures);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
