// SPDX-License-Identifier: Apache-2.0
#include "ft/transpose.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "mpiapp/report.h"

namespace ft {

namespace {

constexpr int kDoubles = 2;  // a complex element is sent as two MPI_DOUBLEs

struct FreeDeleter {
  void operator()(Complex* p) const { std::free(p); }
};
using Array = std::unique_ptr<Complex, FreeDeleter>;

Array Allocate(std::size_t elements) {
  void* p = std::aligned_alloc(64, elements * sizeof(Complex));  // local() is a multiple of 4
  if (p == nullptr) throw std::bad_alloc();
  return Array(static_cast<Complex*>(p));
}

// The ranks in the order a rank sends to them: itself last, the others starting with the next
// one, so that not every rank writes into the same rank at once.
int Peer(const Slabs& s, int k) { return (s.rank + 1 + k) % s.ranks; }

class TwoSided final : public Transpose {
 public:
  explicit TwoSided(const Slabs& s)
      : Transpose(s),
        column_memory_(Allocate(s.local())),
        plane_memory_(Allocate(s.local())),
        staging_(Allocate(s.local())) {
    columns_ = column_memory_.get();
    planes_ = plane_memory_.get();
  }

  void Move(Direction d, const Complex* from, Times& t) override {
    const Timed timed(t.comm);
    const int count = static_cast<int>(slabs_.nzl * slabs_.block()) * kDoubles;
    if (d == Direction::kToColumns) {
      Copy(d, from, staging_.get(), true);  // pack: the blocks for each rank together
      MPI_Alltoall(staging_.get(), count, MPI_DOUBLE, columns_, count, MPI_DOUBLE, MPI_COMM_WORLD);
    } else {
      MPI_Alltoall(from, count, MPI_DOUBLE, staging_.get(), count, MPI_DOUBLE, MPI_COMM_WORLD);
      Copy(d, staging_.get(), planes_, false);  // unpack: each block to its place
    }
  }

 private:
  // Between an array and the staging buffer, where rank r's blocks are r * nzl, r * nzl + 1...
  void Copy(Direction d, const Complex* from, Complex* to, bool pack) const {
    const Slabs& s = slabs_;
    for (int r = 0; r < s.ranks; ++r) {
      for (int zl = 0; zl < s.nzl; ++zl) {
        const std::size_t staged = static_cast<std::size_t>(r * s.nzl + zl) * s.block();
        if (pack) {
          std::memcpy(to + staged, from + s.SourceOffset(d, r, zl), s.block() * sizeof(Complex));
        } else {
          std::memcpy(to + s.DestinationOffset(d, r, zl), from + staged,
                      s.block() * sizeof(Complex));
        }
      }
    }
  }

  Array column_memory_, plane_memory_, staging_;
};

// A window that MPI_Win_allocate made, freed collectively.
struct Window {
  MPI_Win win = MPI_WIN_NULL;
  Complex* base = nullptr;
  explicit Window(const Slabs& s) {
    mpiapp::AllocateUnlocked(static_cast<MPI_Aint>(s.local() * sizeof(Complex)), sizeof(Complex),
                             &base, &win);
  }
  ~Window() { MPI_Win_free(&win); }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
};

// Puts every block of `from` to where `place` says, in `win` (displacement unit: one element).
template <typename Place>
void PutBlocks(const Slabs& s, Direction d, const Complex* from, MPI_Win win, Place place) {
  const int count = static_cast<int>(s.block()) * kDoubles;
  for (int k = 0; k < s.ranks; ++k) {
    const int r = Peer(s, k);
    for (int zl = 0; zl < s.nzl; ++zl) {
      MPI_Put(from + s.SourceOffset(d, r, zl), count, MPI_DOUBLE, r,
              static_cast<MPI_Aint>(place(zl)), count, MPI_DOUBLE, win);
    }
  }
}

class OneSided final : public Transpose {
 public:
  explicit OneSided(const Slabs& s)
      : Transpose(s),
        column_memory_(Allocate(s.local())),
        plane_memory_(Allocate(s.local())),
        window_(s) {
    columns_ = column_memory_.get();
    planes_ = plane_memory_.get();
  }

  void Move(Direction d, const Complex* from, Times& t) override {
    const Slabs& s = slabs_;
    {
      const Timed timed(t.sync);
      MPI_Win_fence(MPI_MODE_NOPRECEDE, window_.win);
    }
    {
      const Timed timed(t.comm);  // block zl from rank r lands at (r * nzl + zl) * block
      PutBlocks(s, d, from, window_.win,
                [&](int zl) { return static_cast<std::size_t>(s.rank * s.nzl + zl) * s.block(); });
    }
    {
      const Timed timed(t.sync);
      MPI_Win_fence(MPI_MODE_NOSUCCEED, window_.win);
    }
    const Timed timed(t.comm);  // out of the transfer window, into the array
    Complex* to = d == Direction::kToColumns ? columns_ : planes_;
    for (int r = 0; r < s.ranks; ++r) {
      for (int zl = 0; zl < s.nzl; ++zl) {
        std::memcpy(to + s.DestinationOffset(d, r, zl),
                    window_.base + static_cast<std::size_t>(r * s.nzl + zl) * s.block(),
                    s.block() * sizeof(Complex));
      }
    }
  }

 private:
  Array column_memory_, plane_memory_;
  Window window_;
};

class Scosco final : public Transpose {
 public:
  explicit Scosco(const Slabs& s) : Transpose(s), column_window_(s), plane_window_(s) {
    columns_ = column_window_.base;
    planes_ = plane_window_.base;
    MPI_Comm_group(MPI_COMM_WORLD, &everyone_);
  }
  ~Scosco() override { MPI_Group_free(&everyone_); }

  void Open(Direction d, Times& t) override {
    const Timed timed(t.sync);
    MPI_Win win = Destination(d).win;
    MPI_Win_post(everyone_, 0, win);
    MPI_Win_start(everyone_, 0, win);
    open_[static_cast<int>(d)] = true;
  }

  void Move(Direction d, const Complex* from, Times& t) override {
    if (!open_[static_cast<int>(d)]) Open(d, t);
    open_[static_cast<int>(d)] = false;
    const Slabs& s = slabs_;
    MPI_Win win = Destination(d).win;
    {
      const Timed timed(t.comm);
      PutBlocks(s, d, from, win, [&](int zl) { return s.DestinationOffset(d, s.rank, zl); });
    }
    const Timed timed(t.sync);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
  }

 private:
  Window& Destination(Direction d) {
    return d == Direction::kToColumns ? column_window_ : plane_window_;
  }

  Window column_window_, plane_window_;
  MPI_Group everyone_ = MPI_GROUP_NULL;
  bool open_[2] = {false, false};
};

}  // namespace

std::optional<Variant> ParseVariant(const std::string& name) {
  if (name == "2sc") return Variant::kTwoSided;
  if (name == "osc") return Variant::kOneSided;
  if (name == "scosco") return Variant::kScosco;
  return std::nullopt;
}

const char* VariantName(Variant v) {
  switch (v) {
    case Variant::kTwoSided:
      return "2sc";
    case Variant::kOneSided:
      return "osc";
    case Variant::kScosco:
      return "scosco";
  }
  return "?";
}

std::unique_ptr<Transpose> Transpose::Make(Variant v, const Slabs& s) {
  switch (v) {
    case Variant::kTwoSided:
      return std::make_unique<TwoSided>(s);
    case Variant::kOneSided:
      return std::make_unique<OneSided>(s);
    case Variant::kScosco:
      return std::make_unique<Scosco>(s);
  }
  return nullptr;
}

}  // namespace ft
