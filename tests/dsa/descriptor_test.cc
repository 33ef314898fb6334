// SPDX-License-Identifier: Apache-2.0
// Descriptor encoding against the kernel's structs, field by field (raw 64-bit words), and the
// message of every completion status.
#include <gtest/gtest.h>

#include <cstring>

#include "dsa/descriptor.h"

namespace tierflow::dsa {
namespace {

struct Raw {
  std::uint64_t w[8];
};
Raw Words(const dsa_hw_desc& d) {
  Raw r;
  std::memcpy(&r, &d, sizeof r);
  return r;
}

TEST(DsaDescriptor, MemmoveLayout) {
  Record rec;
  Descriptor desc;
  char src[64] = {}, dst[64] = {};
  EncodeMemmove(desc.d, dst, src, 4096, IDXD_OP_FLAG_CC, &rec);
  Raw r = Words(desc.d);
  // Word 0: pasid:20 rsvd:11 priv:1 | flags:24 opcode:8.
  EXPECT_EQ(r.w[0] & 0xffffffffu, 0u) << "pasid/priv are the kernel's business";
  EXPECT_EQ((r.w[0] >> 32) & 0xffffff, IDXD_OP_FLAG_CC | IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_MEMMOVE));
  EXPECT_EQ(r.w[1], Addr(&rec.r));
  EXPECT_EQ(r.w[2], Addr(src));
  EXPECT_EQ(r.w[3], Addr(dst));
  EXPECT_EQ(r.w[4] & 0xffffffffu, 4096u);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(r.w[i], 0u);
  EXPECT_EQ(Addr(&rec.r) % 32, 0u);
  EXPECT_EQ(Addr(&desc.d) % 64, 0u);
}

// Offsets from the DSA specification: compare-pattern's pattern at byte 24 (where dst goes),
// dualcast's second destination and the CRC seed at byte 40, the CRC in the record at byte 16.
TEST(DsaDescriptor, ComparePatternDualcastCrcCacheFlushLayout) {
  Record rec;
  Descriptor d;
  char a[64] = {}, b[64] = {}, c[64] = {};
  EncodeComparePattern(d.d, a, 0x0102030405060708ull, 4000, 0, &rec);
  Raw r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_COMPVAL));
  EXPECT_EQ(r.w[2], Addr(a));
  EXPECT_EQ(r.w[3], 0x0102030405060708ull);
  EXPECT_EQ(r.w[4] & 0xffffffffu, 4000u);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(r.w[i], 0u);

  EncodeDualcast(d.d, b, c, a, 300, IDXD_OP_FLAG_CC, &rec);
  r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_DUALCAST));
  EXPECT_EQ((r.w[0] >> 32) & 0xffffff, IDXD_OP_FLAG_CC | kRecordFlags);
  EXPECT_EQ(r.w[2], Addr(a));
  EXPECT_EQ(r.w[3], Addr(b));
  EXPECT_EQ(r.w[4] & 0xffffffffu, 300u);
  EXPECT_EQ(r.w[5], Addr(c));
  EXPECT_EQ(r.w[6], 0u);

  EncodeCrc(d.d, a, 0xcafef00du, 77, 0, &rec);
  r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_CRCGEN));
  EXPECT_EQ(r.w[2], Addr(a));
  EXPECT_EQ(r.w[3], 0u);
  EXPECT_EQ(r.w[4] & 0xffffffffu, 77u);
  EXPECT_EQ(r.w[5], 0xcafef00dull) << "seed in the low half, reserved high half zero";
  EXPECT_EQ(r.w[6], 0u) << "no seed address: the seed is in the descriptor";

  EncodeCacheFlush(d.d, b, 8192, 0, &rec);
  r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_CFLUSH));
  EXPECT_EQ((r.w[0] >> 32) & 0xffffff, kRecordFlags) << "no CC: lines are evicted";
  EXPECT_EQ(r.w[2], 0u);
  EXPECT_EQ(r.w[3], Addr(b));
  EXPECT_EQ(r.w[4] & 0xffffffffu, 8192u);

  // The CRC result lies in the record's bytes 16..23 (after status, bytes_completed, fault_addr).
  dsa_completion_record cr{};
  cr.crc_val = 0x89abcdefu;
  std::uint64_t words[4];
  std::memcpy(words, &cr, sizeof words);
  EXPECT_EQ(words[2], 0x89abcdefu);
}

TEST(DsaDescriptor, FillCompareBatchDrainLayout) {
  Record rec;
  Descriptor d;
  char a[64] = {}, b[64] = {};
  EncodeFill(d.d, a, 0x1122334455667788ull, 100, 0, &rec);
  Raw r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_MEMFILL));
  EXPECT_EQ(r.w[2], 0x1122334455667788ull);
  EXPECT_EQ(r.w[3], Addr(a));
  EXPECT_EQ(r.w[4] & 0xffffffffu, 100u);

  EncodeCompare(d.d, a, b, 64, 0, &rec);
  r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_COMPARE));
  EXPECT_EQ(r.w[2], Addr(a));
  EXPECT_EQ(r.w[3], Addr(b));

  Descriptor list[4];
  EncodeBatch(d.d, list, 4, IDXD_OP_FLAG_FENCE, &rec);
  r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_BATCH));
  EXPECT_EQ((r.w[0] >> 32) & 0xffffff, IDXD_OP_FLAG_FENCE | kRecordFlags);
  EXPECT_EQ(r.w[2], Addr(list));
  EXPECT_EQ(r.w[4] & 0xffffffffu, 4u);

  EncodeDrain(d.d, &rec);
  r = Words(d.d);
  EXPECT_EQ(r.w[0] >> 56, static_cast<unsigned>(DSA_OPCODE_DRAIN));
  EXPECT_EQ(r.w[2], 0u);

  EncodeNoop(d.d, nullptr);
  r = Words(d.d);
  EXPECT_EQ((r.w[0] >> 32) & 0xffffff, 0u) << "no record asked for when there is none";
  EXPECT_EQ(r.w[1], 0u);
}

TEST(DsaDescriptor, CompletionRecordLayout) {
  Record rec;
  ClearRecord(rec);
  rec.r.result = 1;
  rec.r.bytes_completed = 0x12345;
  rec.r.fault_addr = 0xdeadbeef000;
  PublishStatus(rec.r, DSA_COMP_PAGE_FAULT_NOBOF | DSA_COMP_STATUS_WRITE);
  std::uint64_t w[4];
  std::memcpy(w, &rec.r, sizeof w);
  EXPECT_EQ(w[0] & 0xff, 0x83u);
  EXPECT_EQ((w[0] >> 8) & 0xff, 1u);
  EXPECT_EQ(w[0] >> 32, 0x12345u);
  EXPECT_EQ(w[1], 0xdeadbeef000u);
  EXPECT_EQ(LoadStatus(rec.r), 0x83);
}

TEST(DsaDescriptor, EveryStatusHasAMessage) {
  const unsigned codes[] = {DSA_COMP_SUCCESS_PRED,
                            DSA_COMP_PAGE_FAULT_NOBOF,
                            DSA_COMP_PAGE_FAULT_IR,
                            DSA_COMP_BATCH_FAIL,
                            DSA_COMP_BATCH_PAGE_FAULT,
                            DSA_COMP_DR_OFFSET_NOINC,
                            DSA_COMP_DR_OFFSET_ERANGE,
                            DSA_COMP_DIF_ERR,
                            DSA_COMP_BAD_OPCODE,
                            DSA_COMP_INVALID_FLAGS,
                            DSA_COMP_NOZERO_RESERVE,
                            DSA_COMP_XFER_ERANGE,
                            DSA_COMP_DESC_CNT_ERANGE,
                            DSA_COMP_DR_ERANGE,
                            DSA_COMP_OVERLAP_BUFFERS,
                            DSA_COMP_DCAST_ERR,
                            DSA_COMP_DESCLIST_ALIGN,
                            DSA_COMP_INT_HANDLE_INVAL,
                            DSA_COMP_CRA_XLAT,
                            DSA_COMP_CRA_ALIGN,
                            DSA_COMP_ADDR_ALIGN,
                            DSA_COMP_PRIV_BAD,
                            DSA_COMP_TRAFFIC_CLASS_CONF,
                            DSA_COMP_PFAULT_RDBA,
                            DSA_COMP_HW_ERR1,
                            DSA_COMP_HW_ERR_DRB,
                            DSA_COMP_TRANSLATION_FAIL};
  for (unsigned c : codes) {
    std::string t = StatusText(c);
    EXPECT_EQ(t.find("undocumented"), std::string::npos) << std::hex << c;
    EXPECT_GT(t.size(), 15u) << std::hex << c;
  }
  EXPECT_NE(StatusText(0x3c).find("undocumented completion status 0x3c"), std::string::npos);
  // Every status number printed is the one the device wrote (issue 12, item 7: 0x20 and 0x21
  // were printed as 0x1e and 0x1f).
  static_assert(DSA_COMP_HW_ERR1 == 0x20 && DSA_COMP_HW_ERR_DRB == 0x21);
  for (unsigned c : codes) {
    const std::string t = StatusText(c);
    const std::size_t at = t.find("status 0x");
    if (at == std::string::npos) continue;
    EXPECT_EQ(std::stoul(t.substr(at + 9, 2), nullptr, 16), c) << t;
  }
  EXPECT_NE(StatusText(DSA_COMP_HW_ERR1).find("status 0x20"), std::string::npos);
  EXPECT_NE(StatusText(DSA_COMP_HW_ERR_DRB).find("status 0x21"), std::string::npos);

  Record rec;
  ClearRecord(rec);
  rec.r.status = DSA_COMP_PAGE_FAULT_NOBOF | DSA_COMP_STATUS_WRITE;
  rec.r.fault_addr = 0x7000;
  rec.r.bytes_completed = 12;
  Status s = RecordError(rec.r, DSA_OPCODE_MEMMOVE);
  EXPECT_EQ(s.code(), StatusCode::kFailed);
  EXPECT_NE(s.message().find("memmove"), std::string::npos);
  EXPECT_NE(s.message().find("write fault at 0x7000 after 12 bytes"), std::string::npos)
      << s.message();
  rec.r.status = DSA_COMP_XFER_ERANGE;
  s = RecordError(rec.r, DSA_OPCODE_MEMFILL);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("split"), std::string::npos);
  rec.r.status = DSA_COMP_BAD_OPCODE;
  EXPECT_EQ(RecordError(rec.r, 0x33).code(), StatusCode::kUnsupported);
  EXPECT_EQ(OpcodeName(0x33), "unknown opcode");
}

}  // namespace
}  // namespace tierflow::dsa
