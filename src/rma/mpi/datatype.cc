// SPDX-License-Identifier: Apache-2.0
#include "rma/mpi/datatype.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <vector>

#include "rma/mpi/window.h"

namespace tierflow::rma {

namespace {

// A direct-mapped cache per thread (no lock on the path of every put); a miss asks the MPI
// (its bounds, and its constructors for contiguity). A freed handle may come back for another
// type, so MPI_Type_free bumps the generation of the one slot its handle maps to: every
// thread's entry in that slot is stale, the other slots stay (a program that frees types
// inside its RMA loop keeps the cache for the types it still uses).
struct Cached {
  std::uint64_t key = 0;
  std::uint64_t generation = 0;  // 0: empty
  TypeInfo info;
};
constexpr std::size_t kCached = 64;
// initial-exec: no __tls_get_addr call on every lookup (the library is loaded at start-up,
// with LD_PRELOAD or as a dependency, where static TLS has room for it).
thread_local std::array<Cached, kCached> t_types __attribute__((tls_model("initial-exec")));
// A slot's entries hold its generation plus one (0 is an empty entry).
std::array<std::atomic<std::uint64_t>, kCached> g_generation{};

std::uint64_t KeyOf(MPI_Datatype t) {
  std::uint64_t k = 0;
  std::memcpy(&k, &t, sizeof(t) < sizeof(k) ? sizeof(t) : sizeof(k));
  return k;
}

std::size_t Slot(std::uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 58; }

bool Bounds(MPI_Datatype type, TypeInfo& out) {
  MPI_Count size = 0;
  MPI_Aint lb = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS) return false;
  if (PMPI_Type_get_extent(type, &lb, &out.extent) != MPI_SUCCESS) return false;
  if (PMPI_Type_get_true_extent(type, &out.true_lb, &out.true_extent) != MPI_SUCCESS) return false;
  out.size = static_cast<MPI_Aint>(size);
  return true;
}

// What MPI_Type_get_contents says of a derived type; the derived types it hands out are
// freed with it (named ones must not be).
struct Contents {
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> ints;
  std::vector<MPI_Aint> addrs;
  std::vector<MPI_Datatype> types;
  ~Contents() {
    for (MPI_Datatype& t : types) {
      int ni, na, nt, c;
      if (PMPI_Type_get_envelope(t, &ni, &na, &nt, &c) == MPI_SUCCESS && c != MPI_COMBINER_NAMED) {
        PMPI_Type_free(&t);
      }
    }
  }
};

// Beyond this many blocks a type is treated as not contiguous: decoding it costs more than
// the MPI's own packing, which is always right.
constexpr int kMaxBlocks = 4096;
constexpr int kMaxDepth = 16;

// `bounded`: false beyond kMaxBlocks blocks.
bool Decode(MPI_Datatype type, Contents& c, bool bounded) {
  int ni = 0, na = 0, nt = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nt, &c.combiner) != MPI_SUCCESS) return false;
  if (c.combiner == MPI_COMBINER_NAMED) return true;
  if (bounded && (ni > kMaxBlocks * 2 + 2 || na > kMaxBlocks || nt > kMaxBlocks)) return false;
  c.ints.resize(static_cast<std::size_t>(ni));
  c.addrs.resize(static_cast<std::size_t>(na));
  c.types.resize(static_cast<std::size_t>(nt));
  return PMPI_Type_get_contents(type, ni, na, nt, c.ints.data(), c.addrs.data(), c.types.data()) ==
         MPI_SUCCESS;
}

bool OneRun(MPI_Datatype type, const TypeInfo& t, int depth);

// n elements of `type` placed one extent apart: one run, in order.
bool RunOf(MPI_Datatype type, MPI_Aint n, int depth, TypeInfo& t) {
  if (!Bounds(type, t)) return false;
  if (n == 0 || t.size == 0) return true;
  return OneRun(type, t, depth + 1) && (n == 1 || t.extent == t.size);
}

// Blocks of bl[i] elements of types[i] at byte displacement disp[i]: one run when each block
// is one and every non-empty block starts where the one before it ended.
struct Block {
  MPI_Aint disp, count;
  MPI_Datatype type;
};

bool Consecutive(const std::vector<Block>& blocks, int depth) {
  bool seen = false;
  MPI_Aint end = 0;
  TypeInfo t;
  const Block* last = nullptr;  // the block whose type t describes
  for (const Block& b : blocks) {
    const bool same = last != nullptr && last->type == b.type && last->count == b.count;
    if (!same && !RunOf(b.type, b.count, depth, t)) return false;
    last = &b;
    if (b.count == 0 || t.size == 0) continue;
    const MPI_Aint start = b.disp + t.true_lb;
    if (seen && start != end) return false;
    seen = true;
    end = start + b.count * t.size;
  }
  return true;
}

// The blocks of a derived type's constructor, in type-map order; false for a combiner whose
// order is not simply its arguments' (subarray, darray, ...).
bool Blocks(const Contents& c, std::vector<Block>& out) {
  const auto& i = c.ints;
  const auto& a = c.addrs;
  MPI_Aint lb = 0, ext = 0;
  if (!c.types.empty() && PMPI_Type_get_extent(c.types[0], &lb, &ext) != MPI_SUCCESS) return false;
  const auto at = [](const auto& v, int k) { return v[static_cast<std::size_t>(k)]; };
  switch (c.combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:  // the same bytes; only lb and extent change
      out.push_back({0, 1, c.types[0]});
      return true;
    case MPI_COMBINER_CONTIGUOUS:
      out.push_back({0, i[0], c.types[0]});
      return true;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
      // Every block has the same shape: the first two tell whether all follow each other.
      for (int k = 0; k < std::min(i[0], 2); ++k) {
        const MPI_Aint stride = c.combiner == MPI_COMBINER_VECTOR ? i[2] * ext : a[0];
        out.push_back({k * stride, i[1], c.types[0]});
      }
      return true;
    case MPI_COMBINER_INDEXED:
      for (int k = 0; k < i[0]; ++k)
        out.push_back({at(i, 1 + i[0] + k) * ext, at(i, 1 + k), c.types[0]});
      return true;
    case MPI_COMBINER_HINDEXED:
      for (int k = 0; k < i[0]; ++k) out.push_back({at(a, k), at(i, 1 + k), c.types[0]});
      return true;
    case MPI_COMBINER_INDEXED_BLOCK:
      for (int k = 0; k < i[0]; ++k) out.push_back({at(i, 2 + k) * ext, i[1], c.types[0]});
      return true;
    case MPI_COMBINER_HINDEXED_BLOCK:
      for (int k = 0; k < i[0]; ++k) out.push_back({at(a, k), i[1], c.types[0]});
      return true;
    case MPI_COMBINER_STRUCT:
      for (int k = 0; k < i[0]; ++k) out.push_back({at(a, k), at(i, 1 + k), at(c.types, k)});
      return true;
    default:
      return false;
  }
}

bool OneRun(MPI_Datatype type, const TypeInfo& t, int depth) {
  if (t.size != t.true_extent || depth > kMaxDepth) return false;
  Contents c;
  if (!Decode(type, c, true)) return false;
  if (c.combiner == MPI_COMBINER_NAMED) return true;
  std::vector<Block> blocks;
  return Blocks(c, blocks) && Consecutive(blocks, depth);
}

bool Ask(MPI_Datatype type, TypeInfo& out) {
  if (!Bounds(type, out)) return false;
  out.one_run = OneRun(type, out, 0);
  out.basic = BasicType(type);
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  if (out.basic != MPI_DATATYPE_NULL && PMPI_Type_size(out.basic, &size) == MPI_SUCCESS &&
      PMPI_Type_get_extent(out.basic, &lb, &extent) == MPI_SUCCESS && extent == size) {
    out.basic_size = size;
  }
  return true;
}

}  // namespace

bool TouchedBounds(const TypeInfo& t, MPI_Aint count, MPI_Aint& lo, MPI_Aint& hi) {
  lo = hi = 0;
  if (count < 0 || t.true_extent < 0) return false;
  if (count == 0 || t.size == 0) return true;  // touches nothing
  MPI_Aint reach = 0;  // (count - 1) * extent: where the last element starts
  if (__builtin_mul_overflow(count - 1, t.extent, &reach)) return false;
  const MPI_Aint first = std::min<MPI_Aint>(0, reach);
  const MPI_Aint last = std::max<MPI_Aint>(0, reach);
  return !__builtin_add_overflow(first, t.true_lb, &lo) &&
         !__builtin_add_overflow(last, t.true_lb, &hi) &&
         !__builtin_add_overflow(hi, t.true_extent, &hi);
}

bool LookUpType(MPI_Datatype type, TypeInfo& out) {
  if (type == MPI_DATATYPE_NULL) return false;
  const std::uint64_t key = KeyOf(type);
  const std::size_t slot = Slot(key);
  const std::uint64_t generation = g_generation[slot].load(std::memory_order_acquire) + 1;
  Cached& c = t_types[slot];
  if (c.generation == generation && c.key == key) {
    out = c.info;
    return true;
  }
  if (!Ask(type, out)) return false;
  c = Cached{key, generation, out};
  return true;
}

MPI_Datatype BasicType(MPI_Datatype type) {
  Contents c;
  if (!Decode(type, c, false)) return MPI_DATATYPE_NULL;
  if (c.combiner == MPI_COMBINER_NAMED) return type;
  MPI_Datatype basic = MPI_DATATYPE_NULL;
  for (MPI_Datatype d : c.types) {
    const MPI_Datatype b = BasicType(d);
    if (b == MPI_DATATYPE_NULL || (basic != MPI_DATATYPE_NULL && b != basic)) {
      return MPI_DATATYPE_NULL;
    }
    basic = b;
  }
  return basic;
}

void ForgetType(MPI_Datatype type) {
  g_generation[Slot(KeyOf(type))].fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace tierflow::rma

extern "C" int MPI_Type_free(MPI_Datatype* type) {
  return tierflow::rma::Guarded("MPI_Type_free", [&]() -> int {
    if (type != nullptr) tierflow::rma::ForgetType(*type);
    return PMPI_Type_free(type);
  });
}
