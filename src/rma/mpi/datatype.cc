#include "rma/mpi/datatype.h"

#include <array>
#include <atomic>
#include <cstring>

namespace tierflow::rma {

namespace {

// A direct-mapped cache per thread (no lock on the path of every put); a miss asks the MPI
// (three calls). MPI_Type_free bumps a global generation that empties every thread's cache,
// since a freed handle may come back for another type.
struct Cached {
  std::uint64_t key = 0;
  std::uint64_t generation = 0;  // 0: empty
  TypeInfo info;
};
constexpr std::size_t kCached = 64;
// initial-exec: no __tls_get_addr call on every lookup (the library is loaded at start-up,
// with LD_PRELOAD or as a dependency, where static TLS has room for it).
thread_local std::array<Cached, kCached> t_types __attribute__((tls_model("initial-exec")));
std::atomic<std::uint64_t> g_generation{1};

std::uint64_t KeyOf(MPI_Datatype t) {
  std::uint64_t k = 0;
  std::memcpy(&k, &t, sizeof(t) < sizeof(k) ? sizeof(t) : sizeof(k));
  return k;
}

std::size_t Slot(std::uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 58; }

bool Ask(MPI_Datatype type, TypeInfo& out) {
  int size = 0;
  MPI_Aint lb = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS) return false;
  if (PMPI_Type_get_extent(type, &lb, &out.extent) != MPI_SUCCESS) return false;
  if (PMPI_Type_get_true_extent(type, &out.true_lb, &out.true_extent) != MPI_SUCCESS) return false;
  out.size = size;
  return true;
}

}  // namespace

bool LookUpType(MPI_Datatype type, TypeInfo& out) {
  if (type == MPI_DATATYPE_NULL) return false;
  const std::uint64_t key = KeyOf(type);
  const std::uint64_t generation = g_generation.load(std::memory_order_acquire);
  Cached& c = t_types[Slot(key)];
  if (c.generation == generation && c.key == key) {
    out = c.info;
    return true;
  }
  if (!Ask(type, out)) return false;
  c = Cached{key, generation, out};
  return true;
}

void ForgetType(MPI_Datatype) { g_generation.fetch_add(1, std::memory_order_acq_rel); }

}  // namespace tierflow::rma

extern "C" int MPI_Type_free(MPI_Datatype* type) {
  if (type != nullptr) tierflow::rma::ForgetType(*type);
  return PMPI_Type_free(type);
}
