// SPDX-License-Identifier: Apache-2.0
// The NAS Parallel Benchmarks' FT kernel as NPB defines it (Bailey et al., NPB 3): the problem
// classes, the pseudo-random initial conditions, the exponents of the PDE's evolution, the
// checksum after each iteration, the checksums NPB publishes per class, and its MFLOPS
// formula. Everything here is local to one rank; the distribution is in slabs.h.
#pragma once

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ft/slabs.h"

namespace ft {

using Complex = std::complex<double>;

struct ProblemClass {
  char name = '?';
  int nx = 0, ny = 0, nz = 0, iterations = 0;
  std::vector<Complex> reference;  // NPB's published checksum after each iteration
};

// Classes S, W, A and B; nullopt for any other name.
std::optional<ProblemClass> FindClass(const std::string& name);

// NPB's random numbers: value k (k >= 1) of the sequence is seed * a^k mod 2^46, divided by
// 2^46, with seed 314159265 and a = 5^13. Element (x, y, z) of the grid takes values 2m+1
// (real) and 2m+2 (imaginary) for m = x + nx * (y + ny * z): a rank computes its planes
// without generating the ones before them.
void FillInitialConditions(const ProblemClass& c, const Slabs& s, Complex* planes);

// exp(-4 alpha pi^2 (i^2 + j^2 + k^2)) with alpha = 1e-6 and i, j, k the wave numbers (index
// shifted to -n/2 .. n/2-1), for the rank's columns layout.
void FillTwiddle(const ProblemClass& c, const Slabs& s, double* columns);

// The rank's part of the checksum of iteration output `planes`: the sum of elements
// (j mod nx, 3j mod ny, 5j mod nz) for j = 1..1024 that it owns, divided by nx * ny * nz.
Complex LocalChecksum(const ProblemClass& c, const Slabs& s, const Complex* planes);

// NPB's check: |got - want| / |want| <= 1e-12.
bool ChecksumMatches(Complex got, Complex want);

// NPB's operation count per second for the whole run, in millions.
double Mflops(const ProblemClass& c, double seconds);

}  // namespace ft
