// SPDX-License-Identifier: Apache-2.0
#include "tierflow/coherence.h"

#include <sys/mman.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "coherence/lines.h"

namespace tierflow {
namespace {

using coherence::LinesCovering;

TEST(Coherence, LineSizeComesFromTheCpu) {
  const CoherenceSupport& s = GetCoherenceSupport();
  EXPECT_GE(s.line_size, 16u);
  EXPECT_LE(s.line_size, 2048u);
  EXPECT_EQ(s.line_size & (s.line_size - 1), 0u) << "a power of two";
  EXPECT_FALSE(s.line_size_source.empty());
  // The test runner states the expected size when it knows it (qemu's -cpu models).
  if (const char* want = std::getenv("TIERFLOW_EXPECT_LINE_SIZE")) {
    EXPECT_EQ(s.line_size, std::strtoul(want, nullptr, 10)) << s.line_size_source;
  }
  EXPECT_NE(s.write_back, LineInstruction::kAuto);
  EXPECT_NE(s.invalidate, LineInstruction::kAuto);
}

TEST(Coherence, LinesCoveringEveryLineSize) {
  for (std::size_t line : {32u, 64u, 128u, 256u}) {
    EXPECT_EQ(LinesCovering(0x1000, 0, line).count, 0u);
    EXPECT_EQ(LinesCovering(0x1000, 1, line).first, 0x1000u);
    EXPECT_EQ(LinesCovering(0x1000, 1, line).count, 1u);
    EXPECT_EQ(LinesCovering(0x1000, line, line).count, 1u);
    EXPECT_EQ(LinesCovering(0x1000, line + 1, line).count, 2u);
    // An unaligned range touches the partial lines at both edges.
    const auto r = LinesCovering(0x1000 + line - 1, 2, line);
    EXPECT_EQ(r.first, 0x1000u);
    EXPECT_EQ(r.count, 2u);
    EXPECT_EQ(LinesCovering(0x1000 + 3, 4 * line, line).count, 5u);
    // Brute force: every byte's line is covered, and no other line.
    for (std::uintptr_t start = 0x2000; start < 0x2000 + 2 * line; start += 7) {
      for (std::size_t n : {std::size_t{1}, line - 1, line, 3 * line + 5}) {
        const auto c = LinesCovering(start, n, line);
        EXPECT_EQ(c.first, start / line * line);
        EXPECT_EQ(c.first + c.count * line, (start + n + line - 1) / line * line);
      }
    }
  }
}

TEST(Coherence, OperationsKeepTheDataEverywhere) {
  std::vector<unsigned char> data(1 << 16);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7);
  const auto copy = data;
  const std::size_t line = GetCoherenceSupport().line_size;
  for (MaintenanceFence f :
       {MaintenanceFence::kComplete, MaintenanceFence::kFence, MaintenanceFence::kNone}) {
    CoherenceOptions o;
    o.fence = f;
    // Unaligned edges: the bytes outside the range on its first and last lines stay intact.
    ASSERT_TRUE(WriteBack(data.data() + 5, data.size() - line, o).ok());
    ASSERT_TRUE(Invalidate(data.data() + line / 2, 3 * line, o).ok());
    ASSERT_TRUE(WriteBackInvalidate(data.data() + 1, 1, o).ok());
    EXPECT_EQ(data, copy);
  }
  Fence();
  Complete();
  const MemorySpan list[] = {{data.data(), 100}, {data.data() + 4096, 3}, {nullptr, 0}};
  EXPECT_TRUE(WriteBack(list).ok());
  EXPECT_TRUE(Invalidate(list).ok());
  EXPECT_TRUE(WriteBackInvalidate(list).ok());
  EXPECT_TRUE(WriteBack(nullptr, 0).ok());
  EXPECT_EQ(data, copy);
}

TEST(Coherence, InvalidateKeepsStoresNotYetWrittenBack) {
  // User-space invalidate is clean+invalidate: a store made just before is never discarded,
  // including on the partial lines at the range's edges.
  std::vector<unsigned char> data(4096, 1);
  const std::size_t line = GetCoherenceSupport().line_size;
  data[line - 1] = 9;      // outside the range, on its first line
  data[line + 10] = 8;     // inside
  data[3 * line + 2] = 7;  // outside, on its last line
  ASSERT_TRUE(Invalidate(data.data() + line, 2 * line + 1).ok());
  EXPECT_EQ(data[line - 1], 9);
  EXPECT_EQ(data[line + 10], 8);
  EXPECT_EQ(data[3 * line + 2], 7);
}

TEST(Coherence, EveryInstructionThisCpuHas) {
  const CoherenceSupport& s = GetCoherenceSupport();
  std::vector<char> data(8192, 3);
  for (int i = 1; i <= 5; ++i) {
    const auto instruction = static_cast<LineInstruction>(i);
    CoherenceOptions o;
    o.instruction = instruction;
    const Status wb = WriteBack(data.data(), data.size(), o);
    const Status inv = Invalidate(data.data(), data.size(), o);
    const bool x86 = s.architecture == "x86-64";
    const bool on_this_cpu = (instruction == LineInstruction::kClwb && s.clwb) ||
                             (instruction == LineInstruction::kClflushopt && s.clflushopt) ||
                             (instruction == LineInstruction::kClflush && x86) ||
                             (!x86 && (instruction == LineInstruction::kDcCvac ||
                                       instruction == LineInstruction::kDcCivac));
    const bool keeps =
        instruction == LineInstruction::kClwb || instruction == LineInstruction::kDcCvac;
    SCOPED_TRACE(std::string(LineInstructionName(instruction)));
    EXPECT_EQ(wb.ok(), on_this_cpu) << wb.message();
    EXPECT_EQ(inv.ok(), on_this_cpu && !keeps) << inv.message();
    if (!on_this_cpu) {
      EXPECT_EQ(wb.code(), StatusCode::kUnsupported);
      EXPECT_NE(wb.message().find("use auto"), std::string::npos) << wb.message();
    } else if (keeps) {
      EXPECT_EQ(inv.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(inv.message().find("does not invalidate"), std::string::npos) << inv.message();
    }
  }
}

TEST(Coherence, BadInputNamesTheProblem) {
  Status s = WriteBack(nullptr, 64);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the range is null with size 64"), std::string::npos) << s.message();
  s = Invalidate(reinterpret_cast<void*>(~std::uintptr_t{0} - 10), 100);
  EXPECT_NE(s.message().find("wraps around the address space"), std::string::npos) << s.message();
  char b[64];
  const MemorySpan list[] = {{b, 64}, {nullptr, 8}};
  s = WriteBackInvalidate(list);
  EXPECT_NE(s.message().find("WriteBackInvalidate: range 1 is null"), std::string::npos)
      << s.message();
  CoherenceOptions odd;
  odd.instruction = static_cast<LineInstruction>(17);
  s = WriteBack(b, 64, odd);
  EXPECT_NE(s.message().find("unknown LineInstruction value 17"), std::string::npos) << s.message();
  odd = {};
  odd.fence = static_cast<MaintenanceFence>(9);
  s = Invalidate(b, 64, odd);
  EXPECT_NE(s.message().find("unknown MaintenanceFence value 9"), std::string::npos) << s.message();
  Result<LineInstruction> r = ParseLineInstruction("clflushopt");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), LineInstruction::kClflushopt);
  Result<LineInstruction> bad = ParseLineInstruction("wbinvd");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use one of: auto, clwb"), std::string::npos);
}

TEST(Coherence, ProtectedMemoryIsAnErrorNotACrash) {
  const std::size_t page = 4096;
  auto* p = static_cast<char*>(
      mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 5, 3 * page);
  ASSERT_EQ(mprotect(p + page, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(p + 2 * page, page, PROT_READ), 0);
  EXPECT_TRUE(WriteBack(p + 2 * page, page).ok()) << "read-only memory needs no write access";
  EXPECT_TRUE(Invalidate(p + 2 * page, page).ok());
  if (const char* q = std::getenv("TIERFLOW_UNDER_QEMU"); q == nullptr) {
    // qemu-user runs DC instructions as no-ops without a permission check.
    Status s = WriteBack(p, 3 * page);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("PROT_NONE"), std::string::npos) << s.message();
    const MemorySpan list[] = {{p, 10}, {p + page + 7, 100}};
    s = Invalidate(list);
    EXPECT_NE(s.message().find("range 1"), std::string::npos) << s.message();
  }
  munmap(p, 3 * page);
}

}  // namespace
}  // namespace tierflow
