// SPDX-License-Identifier: Apache-2.0
#include "ft/solver.h"

#include <mpi.h>

#include <chrono>
#include <new>

namespace ft {

namespace {

// NPB's forward transform has the positive exponent, FFTW's "backward" one.
constexpr int kNpbForward = FFTW_BACKWARD;
constexpr int kNpbInverse = FFTW_FORWARD;

enum class Axis { kX, kY, kZ };

// A plan for the 1-D transforms along `axis` of `data`, in place, in the layout that axis is
// complete in (x, y: planes; z: columns; slabs.h). FFTW_ESTIMATE neither touches the data nor
// depends on timing, so every variant runs the same transforms.
fftw_plan PlanAxis(const Slabs& s, Axis axis, Complex* data, int sign) {
  auto* p = reinterpret_cast<fftw_complex*>(data);
  const int nx = s.nx, ny = s.ny;
  fftw_iodim dim{};
  fftw_iodim loops[2]{};
  int nloops = 1;
  if (axis == Axis::kX) {
    dim = {nx, 1, 1};
    loops[0] = {s.nzl * ny, nx, nx};
  } else if (axis == Axis::kY) {
    dim = {ny, nx, nx};
    loops[0] = {s.nzl, ny * nx, ny * nx};
    loops[1] = {nx, 1, 1};
    nloops = 2;
  } else {
    dim = {s.nz, s.nyl * nx, s.nyl * nx};
    loops[0] = {s.nyl * nx, 1, 1};
  }
  fftw_plan plan = fftw_plan_guru_dft(1, &dim, nloops, loops, p, p, sign, FFTW_ESTIMATE);
  if (plan == nullptr) throw std::bad_alloc();
  return plan;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

Solver::Solver(const ProblemClass& c, Variant v, const Slabs& s)
    : class_(c), slabs_(s), transpose_(Transpose::Make(v, s)) {
  work_ = static_cast<Complex*>(fftw_malloc(s.local() * sizeof(Complex)));
  twiddle_ = static_cast<double*>(fftw_malloc(s.local() * sizeof(double)));
  if (work_ == nullptr || twiddle_ == nullptr) {
    fftw_free(work_);
    fftw_free(twiddle_);
    throw std::bad_alloc();
  }
  Complex* columns = transpose_->columns();
  Complex* planes = transpose_->planes();
  forward_ = {PlanAxis(s, Axis::kX, work_, kNpbForward), PlanAxis(s, Axis::kY, work_, kNpbForward),
              PlanAxis(s, Axis::kZ, columns, kNpbForward)};
  inverse_ = {PlanAxis(s, Axis::kZ, work_, kNpbInverse), PlanAxis(s, Axis::kY, planes, kNpbInverse),
              PlanAxis(s, Axis::kX, planes, kNpbInverse)};
}

Solver::~Solver() {
  for (fftw_plan p : forward_) fftw_destroy_plan(p);
  for (fftw_plan p : inverse_) fftw_destroy_plan(p);
  fftw_free(work_);
  fftw_free(twiddle_);
}

// The exponents, the initial conditions and their forward transform into columns().
void Solver::Setup(Times& t) {
  transpose_->Open(Direction::kToColumns, t);
  {
    const Timed timed(t.compute);
    FillTwiddle(class_, slabs_, twiddle_);
    FillInitialConditions(class_, slabs_, work_);
    fftw_execute(forward_[0]);
    fftw_execute(forward_[1]);
  }
  transpose_->Move(Direction::kToColumns, work_, t);
  const Timed timed(t.compute);
  fftw_execute(forward_[2]);
}

// One time step: columns() evolves by the exponents (cumulatively, as NPB 3 does), a copy of
// it is transformed back into planes(), and the checksum of that is summed over the ranks.
Complex Solver::Iterate(Times& t) {
  transpose_->Open(Direction::kToPlanes, t);
  Complex* u0 = transpose_->columns();
  {
    const Timed timed(t.compute);
    for (std::size_t i = 0; i < slabs_.local(); ++i) {
      u0[i] *= twiddle_[i];
      work_[i] = u0[i];
    }
    fftw_execute(inverse_[0]);
  }
  transpose_->Move(Direction::kToPlanes, work_, t);
  Complex local;
  {
    const Timed timed(t.compute);
    fftw_execute(inverse_[1]);
    fftw_execute(inverse_[2]);
    local = LocalChecksum(class_, slabs_, transpose_->planes());
  }
  double parts[2] = {local.real(), local.imag()}, sums[2];
  MPI_Allreduce(parts, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return {sums[0], sums[1]};
}

Run Solver::Solve() {
  Times untimed;
  Setup(untimed);
  MPI_Barrier(MPI_COMM_WORLD);
  Run run;
  const auto start = std::chrono::steady_clock::now();
  Setup(run.times);
  for (int i = 0; i < class_.iterations; ++i) run.checksums.push_back(Iterate(run.times));
  run.total = Seconds(start);
  return run;
}

}  // namespace ft
