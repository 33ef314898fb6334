// SPDX-License-Identifier: Apache-2.0
#include "ft/npb.h"

#include <cmath>

namespace ft {

namespace {

constexpr std::uint64_t kSeed = 314159265;
constexpr std::uint64_t kMultiplier = 1220703125;  // 5^13
constexpr std::uint64_t kMask46 = (std::uint64_t{1} << 46) - 1;
constexpr double kTwoToMinus46 = 1.0 / static_cast<double>(std::uint64_t{1} << 46);
constexpr double kAlpha = 1.0e-6;
constexpr double kPi = 3.141592653589793238;

// Products modulo 2^46 are exact in 64 bits: 2^46 divides 2^64, so reducing the wrapped
// product gives the same residue (NPB's randlc does the same in doubles, also exactly).
std::uint64_t MulMod46(std::uint64_t a, std::uint64_t b) { return (a * b) & kMask46; }

std::uint64_t PowMod46(std::uint64_t base, std::uint64_t exponent) {
  std::uint64_t result = 1;
  for (; exponent != 0; exponent >>= 1) {
    if (exponent & 1) result = MulMod46(result, base);
    base = MulMod46(base, base);
  }
  return result;
}

// NPB's published checksums (NPB 3.4, ft verify), real and imaginary part per iteration.
const double kReferenceS[][2] = {
    {5.546087004964e+02, 4.845363331978e+02}, {5.546385409189e+02, 4.865304269511e+02},
    {5.546148406171e+02, 4.883910722336e+02}, {5.545423607415e+02, 4.901273169046e+02},
    {5.544255039624e+02, 4.917475857993e+02}, {5.542683411902e+02, 4.932597244941e+02}};
const double kReferenceW[][2] = {
    {5.673612178944e+02, 5.293246849175e+02}, {5.631436885271e+02, 5.282149986629e+02},
    {5.594024089970e+02, 5.270996558037e+02}, {5.560698047020e+02, 5.260027904925e+02},
    {5.530898991250e+02, 5.249400845633e+02}, {5.504159734538e+02, 5.239212247086e+02}};
const double kReferenceA[][2] = {
    {5.046735008193e+02, 5.114047905510e+02}, {5.059412319734e+02, 5.098809666433e+02},
    {5.069376896287e+02, 5.098144042213e+02}, {5.077892868474e+02, 5.101336130759e+02},
    {5.085233095391e+02, 5.104914655194e+02}, {5.091487099959e+02, 5.107917842803e+02}};
const double kReferenceB[][2] = {
    {5.177643571579e+02, 5.077803458597e+02}, {5.154521291263e+02, 5.088249431599e+02},
    {5.146409228649e+02, 5.096208912659e+02}, {5.142378756213e+02, 5.101023387619e+02},
    {5.139626667737e+02, 5.103976610617e+02}, {5.137423460082e+02, 5.105948019802e+02},
    {5.135547056878e+02, 5.107404165783e+02}, {5.133910925466e+02, 5.108576573661e+02},
    {5.132470705390e+02, 5.109577278523e+02}, {5.131197729984e+02, 5.110460304483e+02},
    {5.130070319283e+02, 5.111252433800e+02}, {5.129070537032e+02, 5.111968077718e+02},
    {5.128182883502e+02, 5.112616233064e+02}, {5.127393733383e+02, 5.113203605551e+02},
    {5.126691062020e+02, 5.113735928093e+02}, {5.126064276004e+02, 5.114218460548e+02},
    {5.125504076570e+02, 5.114656139760e+02}, {5.125002331720e+02, 5.115053595966e+02},
    {5.124551951846e+02, 5.115415130407e+02}, {5.124146770029e+02, 5.115744692211e+02}};

template <std::size_t N>
ProblemClass Make(char name, int nx, int ny, int nz, const double (&ref)[N][2]) {
  ProblemClass c{name, nx, ny, nz, static_cast<int>(N), {}};
  for (const auto& r : ref) c.reference.emplace_back(r[0], r[1]);
  return c;
}

// The wave number of index i of n points: i for the first half, i - n for the second.
long Wave(long i, long n) { return (i + n / 2) % n - n / 2; }

}  // namespace

std::optional<ProblemClass> FindClass(const std::string& name) {
  if (name == "S") return Make('S', 64, 64, 64, kReferenceS);
  if (name == "W") return Make('W', 128, 128, 32, kReferenceW);
  if (name == "A") return Make('A', 256, 256, 128, kReferenceA);
  if (name == "B") return Make('B', 512, 256, 256, kReferenceB);
  return std::nullopt;
}

void FillInitialConditions(const ProblemClass& c, const Slabs& s, Complex* planes) {
  const std::uint64_t first = 2 * static_cast<std::uint64_t>(c.nx) * c.ny * s.z0();
  std::uint64_t x = MulMod46(kSeed, PowMod46(kMultiplier, first));
  for (std::size_t i = 0; i < s.local(); ++i) {
    x = MulMod46(x, kMultiplier);
    const double re = static_cast<double>(x) * kTwoToMinus46;
    x = MulMod46(x, kMultiplier);
    planes[i] = Complex(re, static_cast<double>(x) * kTwoToMinus46);
  }
}

void FillTwiddle(const ProblemClass& c, const Slabs& s, double* columns) {
  const double ap = -4.0 * kAlpha * kPi * kPi;
  std::size_t i = 0;
  for (int z = 0; z < c.nz; ++z) {
    const long kk = Wave(z, c.nz);
    for (int yl = 0; yl < s.nyl; ++yl) {
      const long jj = Wave(s.y0() + yl, c.ny);
      for (int x = 0; x < c.nx; ++x) {
        const long ii = Wave(x, c.nx);
        columns[i++] = std::exp(ap * static_cast<double>(ii * ii + jj * jj + kk * kk));
      }
    }
  }
}

Complex LocalChecksum(const ProblemClass& c, const Slabs& s, const Complex* planes) {
  Complex sum = 0;
  for (long j = 1; j <= 1024; ++j) {
    const long x = j % c.nx, y = 3 * j % c.ny, z = 5 * j % c.nz;
    if (z < s.z0() || z >= s.z0() + s.nzl) continue;
    sum += planes[(static_cast<std::size_t>(z - s.z0()) * c.ny + y) * c.nx + x];
  }
  return sum / (static_cast<double>(c.nx) * c.ny * c.nz);
}

bool ChecksumMatches(Complex got, Complex want) {
  // Written so that a NaN fails: every comparison with NaN is false.
  return std::abs((got - want) / want) <= 1.0e-12;
}

double Mflops(const ProblemClass& c, double seconds) {
  const double n = static_cast<double>(c.nx) * c.ny * c.nz;
  const double ops =
      n * (14.8157 + 7.19641 * std::log(n) + (5.23518 + 7.21113 * std::log(n)) * c.iterations);
  return seconds > 0 ? 1.0e-6 * ops / seconds : 0;
}

}  // namespace ft
