// SPDX-License-Identifier: Apache-2.0
// The copies that recover from their own faults (src/kernels/copy_recoverable.cc): every small
// size and alignment against memcpy, nothing written outside the destination, and a fault in
// each of their paths (vector loop, short vectors, rep movsb) on either range returns non-zero
// with the fault's address instead of ending the process.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "common/fault_guard.h"
#include "kernels/kernels.h"
#include "testing/random_bytes.h"

namespace tierflow::kernels {
namespace {

using CopyFn = std::size_t (*)(void*, const void*, std::size_t);

std::vector<std::pair<const char*, CopyFn>> Variants() {
  std::vector<std::pair<const char*, CopyFn>> out;
  if (KernelsFor(CpuIsa::kBaseline).copy_recoverable != nullptr) {
    out.emplace_back("sse2", KernelsFor(CpuIsa::kBaseline).copy_recoverable);
  }
  if (IsaSupported(CpuIsa::kAvx2) && KernelsFor(CpuIsa::kAvx2).copy_recoverable != nullptr) {
    out.emplace_back("avx2", KernelsFor(CpuIsa::kAvx2).copy_recoverable);
  }
  return out;
}

TEST(CopyRecoverable, EverySmallSizeAndAlignment) {
  if (Variants().empty())
    GTEST_SKIP() << "no recoverable copy in this build (not x86-64, or a sanitizer build)";
  const auto src = testkit::RandomBytes(1024, 7);
  std::vector<unsigned char> dst(1200), ref(1200);
  for (auto [name, copy] : Variants()) {
    for (std::size_t n = 0; n <= 700; ++n) {
      for (std::size_t d : {0, 1, 15, 31, 63}) {
        for (std::size_t s : {0, 3, 64}) {
          std::fill(dst.begin(), dst.end(), 0xee);
          std::fill(ref.begin(), ref.end(), 0xee);
          ASSERT_EQ(copy(dst.data() + d, src.data() + s, n), 0u) << name << " n=" << n;
          std::memcpy(ref.data() + d, src.data() + s, n);
          ASSERT_EQ(dst, ref) << name << " n=" << n << " dst+" << d << " src+" << s;
        }
      }
    }
  }
}

TEST(CopyRecoverable, LargeCopiesMatchMemcpy) {
  if (Variants().empty()) GTEST_SKIP() << "no recoverable copy in this build";
  const auto src = testkit::RandomBytes(1 << 20, 9);
  std::vector<unsigned char> dst(src.size() + 64), ref(src.size() + 64);
  for (auto [name, copy] : Variants()) {
    for (std::size_t n : {4096u, 4097u, 65536u, 65600u, (1u << 20) - 5}) {
      std::fill(dst.begin(), dst.end(), 0x11);
      std::fill(ref.begin(), ref.end(), 0x11);
      ASSERT_EQ(copy(dst.data() + 5, src.data() + 1, n - 1), 0u);
      std::memcpy(ref.data() + 5, src.data() + 1, n - 1);
      ASSERT_EQ(dst, ref) << name << " n=" << n;
    }
  }
}

// Two pages: the first readable and writable, the second with `second` protection.
struct TwoPages {
  explicit TwoPages(int second) {
    page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
    if (base != nullptr) {
      std::memset(base, 0x5a, 2 * page);
      mprotect(base + page, page, second);
    }
  }
  ~TwoPages() {
    if (base != nullptr) munmap(base, 2 * page);
  }
  unsigned char* base = nullptr;
  std::size_t page = 0;
};

// A copy of n bytes ending `past` bytes into the protected page faults there, on the page.
void ExpectFault(CopyFn copy, const char* name, bool into_destination, std::size_t n,
                 std::size_t past) {
  TwoPages pages(into_destination ? PROT_READ : PROT_NONE);
  ASSERT_NE(pages.base, nullptr);
  std::vector<unsigned char> other(n + 64, 0x33);
  unsigned char* edge = pages.base + pages.page + past - n;  // [edge, edge + n) crosses in
  t_fixup_fault = {};
  const std::size_t left =
      into_destination ? copy(edge, other.data(), n) : copy(other.data(), edge, n);
  EXPECT_NE(left, 0u) << name << " n=" << n;
  EXPECT_TRUE(t_fixup_fault.signal == SIGSEGV || t_fixup_fault.signal == SIGBUS) << name;
  const auto page = reinterpret_cast<std::uintptr_t>(pages.base + pages.page);
  EXPECT_GE(t_fixup_fault.address, page) << name << " n=" << n;
  EXPECT_LT(t_fixup_fault.address, page + pages.page) << name << " n=" << n;
  if (into_destination) {
    EXPECT_EQ(edge[0], 0x33) << name << ": bytes before the fault stay copied (n=" << n << ")";
  }
}

TEST(CopyRecoverable, AFaultOnEitherRangeReturnsWithTheAddress) {
  if (Variants().empty()) GTEST_SKIP() << "no recoverable copy in this build";
  ASSERT_TRUE(InstallFaultHandler().ok());
  for (auto [name, copy] : Variants()) {
    for (bool into_destination : {true, false}) {
      ExpectFault(copy, name, into_destination, 4096, 1);  // the vector loop
      ExpectFault(copy, name, into_destination, 4096, 64);
      ExpectFault(copy, name, into_destination, 40, 8);  // short vectors
      ExpectFault(copy, name, into_destination, 10, 3);  // rep movsb
    }
  }
}

}  // namespace
}  // namespace tierflow::kernels
