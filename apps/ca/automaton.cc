// SPDX-License-Identifier: Apache-2.0
#include "ca/automaton.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "mpiapp/report.h"

namespace ca {

namespace {

using mpiapp::Timed;
using mpiapp::Times;

// Tags of the two-sided messages by the ghost line they fill at the receiver.
constexpr int kUpperGhost = 0, kLowerGhost = 1;

class TwoSided final : public Automaton {
 public:
  TwoSided(const Shape& s, int rank, int ranks) : Automaton(s, rank, ranks) {
    for (auto& a : memory_) {
      a.reset(static_cast<std::uint8_t*>(std::calloc(block_.bytes(s), 1)));
      if (a == nullptr) throw std::bad_alloc();
    }
    arrays_[0] = memory_[0].get();
    arrays_[1] = memory_[1].get();
    Start();
  }

  void Step(Times& t) override {
    const int w = static_cast<int>(shape_.width()), n = block_.count;
    MPI_Request requests[4];
    {
      const Timed timed(t.comm);
      MPI_Irecv(Line(next(), shape_, 0), w, MPI_BYTE, up_, kUpperGhost, MPI_COMM_WORLD,
                &requests[0]);
      MPI_Irecv(Line(next(), shape_, n + 1), w, MPI_BYTE, down_, kLowerGhost, MPI_COMM_WORLD,
                &requests[1]);
    }
    ComputeBorders(t);
    {
      const Timed timed(t.comm);
      MPI_Isend(Line(next(), shape_, 1), w, MPI_BYTE, up_, kLowerGhost, MPI_COMM_WORLD,
                &requests[2]);
      MPI_Isend(Line(next(), shape_, n), w, MPI_BYTE, down_, kUpperGhost, MPI_COMM_WORLD,
                &requests[3]);
    }
    ComputeInner(t);
    {
      const Timed timed(t.sync);
      MPI_Waitall(4, requests, MPI_STATUSES_IGNORE);
    }
    current_ = 1 - current_;
  }

 private:
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, Free> memory_[2];
};

class Gats final : public Automaton {
 public:
  Gats(const Shape& s, int rank, int ranks) : Automaton(s, rank, ranks) {
    // Sizes rounded up to whole cache lines: MPICH 4.0.2 (ch4) misplaces the windows of the
    // ranks above 0 when a size is not a multiple of 8 (a put of 1002 bytes into rank 1's
    // window of 16002 bytes does not arrive there; of 16008 it does), and lines are cells + 2.
    const MPI_Aint bytes = static_cast<MPI_Aint>((block_.bytes(s) + 63) / 64 * 64);
    for (int k = 0; k < 2; ++k) {
      mpiapp::AllocateUnlocked(bytes, 1, &arrays_[k], &windows_[k]);
    }
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    const int both[2] = {up_, down_};
    MPI_Group_incl(world, up_ == down_ ? 1 : 2, both, &neighbours_);
    MPI_Group_free(&world);
    Start();
  }

  ~Gats() override {
    MPI_Group_free(&neighbours_);
    for (MPI_Win& w : windows_) MPI_Win_free(&w);
  }

  void Step(Times& t) override {
    const int k = 1 - current_;
    MPI_Win win = windows_[k];
    {
      const Timed timed(t.sync);
      // MPI_MODE_NOSTORE from the second post of an array on: its lines were computed inside
      // its last epoch, and the step since only read it, so there are no local stores since
      // its last synchronisation (a library for non-coherent memory then writes nothing back).
      MPI_Win_post(neighbours_, posted_[k] ? MPI_MODE_NOSTORE : 0, win);
      posted_[k] = true;
      MPI_Win_start(neighbours_, 0, win);
    }
    ComputeBorders(t);
    {
      const Timed timed(t.comm);
      const int w = static_cast<int>(shape_.width()), n = block_.count;
      const int up_lines = Block::Of(shape_, up_, ranks_).count;
      MPI_Put(Line(next(), shape_, 1), w, MPI_BYTE, up_, static_cast<MPI_Aint>(up_lines + 1) * w, w,
              MPI_BYTE, win);
      MPI_Put(Line(next(), shape_, n), w, MPI_BYTE, down_, 0, w, MPI_BYTE, win);
    }
    ComputeInner(t);
    {
      const Timed timed(t.sync);
      MPI_Win_complete(win);
      MPI_Win_wait(win);
    }
    current_ = 1 - current_;
  }

 private:
  MPI_Win windows_[2] = {MPI_WIN_NULL, MPI_WIN_NULL};
  bool posted_[2] = {false, false};
  MPI_Group neighbours_ = MPI_GROUP_NULL;
};

}  // namespace

std::optional<Variant> ParseVariant(const std::string& name) {
  if (name == "two-sided") return Variant::kTwoSided;
  if (name == "gats") return Variant::kGats;
  return std::nullopt;
}

const char* VariantName(Variant v) { return v == Variant::kTwoSided ? "two-sided" : "gats"; }

std::unique_ptr<Automaton> Automaton::Make(Variant v, const Shape& s, int rank, int ranks) {
  if (v == Variant::kTwoSided) return std::make_unique<TwoSided>(s, rank, ranks);
  return std::make_unique<Gats>(s, rank, ranks);
}

Automaton::Automaton(const Shape& s, int rank, int ranks)
    : shape_(s),
      block_(Block::Of(s, rank, ranks)),
      rank_(rank),
      ranks_(ranks),
      up_((rank + ranks - 1) % ranks),
      down_((rank + 1) % ranks) {}

// The first ghost lines come by MPI_Sendrecv, outside any epoch and outside the timing.
void Automaton::Start() {
  // Both arrays touched before the timing, whichever memory the variant got them from.
  std::memset(current(), 0, block_.bytes(shape_));
  std::memset(next(), 0, block_.bytes(shape_));
  Seed(shape_, block_, current());
  const int w = static_cast<int>(shape_.width()), n = block_.count;
  MPI_Sendrecv(Line(current(), shape_, 1), w, MPI_BYTE, up_, kLowerGhost,
               Line(current(), shape_, n + 1), w, MPI_BYTE, down_, kLowerGhost, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(Line(current(), shape_, n), w, MPI_BYTE, down_, kUpperGhost,
               Line(current(), shape_, 0), w, MPI_BYTE, up_, kUpperGhost, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
}

void Automaton::ComputeBorders(Times& t) const {
  const Timed timed(t.compute);
  StepLine(shape_, current(), next(), 1);
  if (block_.count > 1) StepLine(shape_, current(), next(), block_.count);
}

void Automaton::ComputeInner(Times& t) const {
  const Timed timed(t.compute);
  for (int i = 2; i < block_.count; ++i) StepLine(shape_, current(), next(), i);
}

std::uint64_t Automaton::Hash() const {
  const int w = static_cast<int>(shape_.width());
  std::vector<int> counts(ranks_), offsets(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    const Block b = Block::Of(shape_, r, ranks_);
    counts[r] = b.count * w;
    offsets[r] = b.first * w;
  }
  std::vector<std::uint8_t> all(rank_ == 0 ? shape_.rows * shape_.width() : 0);
  MPI_Gatherv(Line(current(), shape_, 1), block_.count * w, MPI_BYTE, all.data(), counts.data(),
              offsets.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
  return rank_ == 0 ? HashLines(shape_, all.data(), shape_.rows, kHashStart) : 0;
}

}  // namespace ca
