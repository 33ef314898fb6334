// SPDX-License-Identifier: Apache-2.0
// The RMA library's pack, unpack and local reduction for counts beyond an int (security
// review, item 14): split into pieces, they must give the bytes the MPI gives for the whole,
// and an element no piece can hold is an error, never a truncated count. Pieces are forced
// small here (the `piece` argument); with the default the MPI's large-count forms run where it
// has them. One rank: `mpiexec -n 1`.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mpi_check.h"
#include "rma/mpi/access.h"
#include "rma/mpi/datatype.h"

namespace {

int g_rank = 0, g_failures = 0;  // one rank

using tierflow::rma::TypeInfo;

// Packs and unpacks `count` elements of `type` in pieces of `piece` and as a whole.
void PiecesMatchTheWhole(MPI_Datatype type, const char* name, int count, MPI_Aint piece) {
  TypeInfo t;
  CHECK(tierflow::rma::LookUpType(type, t), "%s: lookup", name);
  MPI_Aint lo = 0, hi = 0;
  CHECK(tierflow::rma::TouchedBounds(t, count, lo, hi), "%s: bounds", name);
  std::vector<unsigned char> memory(static_cast<std::size_t>(hi - lo));
  for (std::size_t i = 0; i < memory.size(); ++i)
    memory[i] = static_cast<unsigned char>(i * 13 + 1);
  unsigned char* addr = memory.data() - lo;
  const auto n = static_cast<std::size_t>(count * t.size);
  std::vector<unsigned char> whole(n), pieces(n, 0);
  int pos = 0;
  PMPI_Pack(addr, count, type, whole.data(), static_cast<int>(n), &pos, MPI_COMM_SELF);
  const int rc = tierflow::rma::PackElements(
      addr, count, type, t, reinterpret_cast<std::byte*>(pieces.data()), MPI_COMM_SELF, piece);
  CHECK(rc == MPI_SUCCESS && whole == pieces, "%s: packed in pieces of %ld differs", name,
        static_cast<long>(piece));
  std::vector<unsigned char> back(memory.size(), 0), back_whole(memory.size(), 0);
  pos = 0;
  PMPI_Unpack(whole.data(), static_cast<int>(n), &pos, back_whole.data() - lo, count, type,
              MPI_COMM_SELF);
  const int urc =
      tierflow::rma::UnpackElements(reinterpret_cast<const std::byte*>(whole.data()),
                                    back.data() - lo, count, type, t, MPI_COMM_SELF, piece);
  CHECK(urc == MPI_SUCCESS && back == back_whole, "%s: unpacked in pieces of %ld differs", name,
        static_cast<long>(piece));
}

void ReductionInPieces() {
  std::vector<int> in(1001), inout(1001), want(1001);
  for (int i = 0; i < 1001; ++i) {
    in[i] = i;
    inout[i] = want[i] = 3 * i;
  }
  PMPI_Reduce_local(in.data(), want.data(), 1001, MPI_INT, MPI_SUM);
  const int rc =
      tierflow::rma::ReduceElements(in.data(), inout.data(), 1001, MPI_INT, 4, MPI_SUM, 7);
  CHECK(rc == MPI_SUCCESS && inout == want, "MPI_SUM in pieces of 7 differs");
}

// An element of more bytes than an int counts cannot be packed by an MPI-3 call: refused.
void AnElementBeyondAnIntIsRefused() {
  TypeInfo huge;
  huge.size = MPI_Aint{INT_MAX} + 1;
  huge.extent = huge.size;
  huge.true_extent = huge.size;
  const int rc =
      tierflow::rma::PackElements(nullptr, 2, MPI_BYTE, huge, nullptr, MPI_COMM_SELF, 1000);
  CHECK(rc == MPI_ERR_COUNT, "an element of 2^31 bytes gave %d, not MPI_ERR_COUNT", rc);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Datatype vec, neg, hvec;
  MPI_Type_vector(3, 2, 4, MPI_INT, &vec);
  MPI_Type_create_resized(MPI_INT, 0, -12, &neg);
  MPI_Type_create_hvector(3, 1, -20, MPI_DOUBLE, &hvec);
  for (MPI_Datatype* t : {&vec, &neg, &hvec}) MPI_Type_commit(t);
  for (MPI_Aint piece : {MPI_Aint{1}, MPI_Aint{7}, MPI_Aint{1000}, tierflow::rma::kWholePiece}) {
    PiecesMatchTheWhole(vec, "vector(3,2,4,int)", 1000, piece);
    PiecesMatchTheWhole(neg, "resized(int,0,-12)", 1000, piece);
    PiecesMatchTheWhole(hvec, "hvector(3,1,-20,double)", 999, piece);
  }
  ReductionInPieces();
  AnElementBeyondAnIntIsRefused();
  for (MPI_Datatype* t : {&vec, &neg, &hvec}) MPI_Type_free(t);
  std::printf("rma_pack_test: %s (%d failures)\n", g_failures == 0 ? "pieces as the whole" : "FAIL",
              g_failures);
  MPI_Finalize();
  return g_failures == 0 ? 0 : 1;
}
