#include "rma/mpi/datatype.h"

#include <array>
#include <cstring>
#include <mutex>

namespace tierflow::rma {

namespace {

// Direct-mapped by the handle's bits; a miss asks the MPI (three calls). The lock is
// uncontended in nearly every program and cheaper than those calls.
struct Cached {
  std::uint64_t key = 0;
  bool valid = false;
  TypeInfo info;
};
std::array<Cached, 256> g_types;
std::mutex g_types_mu;

std::uint64_t KeyOf(MPI_Datatype t) {
  std::uint64_t k = 0;
  std::memcpy(&k, &t, sizeof(t) < sizeof(k) ? sizeof(t) : sizeof(k));
  return k;
}

std::size_t Slot(std::uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 56; }

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
  std::lock_guard lock(g_types_mu);
  Cached& c = g_types[Slot(key)];
  if (c.valid && c.key == key) {
    out = c.info;
    return true;
  }
  if (!Ask(type, out)) return false;
  c = Cached{key, true, out};
  return true;
}

void ForgetType(MPI_Datatype type) {
  const std::uint64_t key = KeyOf(type);
  std::lock_guard lock(g_types_mu);
  Cached& c = g_types[Slot(key)];
  if (c.key == key) c.valid = false;
}

}  // namespace tierflow::rma

extern "C" int MPI_Type_free(MPI_Datatype* type) {
  if (type != nullptr) tierflow::rma::ForgetType(*type);
  return PMPI_Type_free(type);
}
