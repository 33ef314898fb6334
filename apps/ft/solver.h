// SPDX-License-Identifier: Apache-2.0
// FT's PDE solver on one rank's slabs: the forward 3-D FFT of the initial conditions, then per
// iteration the evolution in frequency space, the inverse 3-D FFT and the checksum. The 1-D
// transforms are FFTW3's (planned once, in place); the global transpose between the z and the
// x/y transforms is the chosen Variant's (transpose.h).
#pragma once

#include <fftw3.h>

#include <memory>
#include <vector>

#include "ft/npb.h"
#include "ft/transpose.h"

namespace ft {

struct Run {
  std::vector<Complex> checksums;  // one per iteration, summed over the ranks
  Times times;                     // this rank's
  double total = 0;                // this rank's seconds from the start to the last checksum
};

class Solver {
 public:
  // Collective. Throws std::bad_alloc when the arrays do not fit.
  Solver(const ProblemClass& c, Variant v, const Slabs& s);
  ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // NPB's way: the setup and forward transform once untimed (every page touched), then the
  // timed run from the setup on. Collective.
  Run Solve();

 private:
  void Setup(Times& t);
  Complex Iterate(Times& t);

  ProblemClass class_;
  Slabs slabs_;
  std::unique_ptr<Transpose> transpose_;
  Complex* work_ = nullptr;    // planes for the forward transform, columns for the inverse
  double* twiddle_ = nullptr;  // columns
  std::vector<fftw_plan> forward_, inverse_;  // in the order they run
};

}  // namespace ft
