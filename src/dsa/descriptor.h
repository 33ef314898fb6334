// SPDX-License-Identifier: Apache-2.0
// Encoding of DSA descriptors and reading of completion records, on the kernel's own structs
// (linux/idxd.h). Shared by the engine (which builds descriptors) and the device model (which
// executes them), so both agree on every field by construction; tests/dsa/descriptor_test.cc
// checks the encoding field by field.
#pragma once

#include <linux/idxd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tierflow/status.h"

namespace tierflow::dsa {

static_assert(sizeof(dsa_hw_desc) == 64, "DSA descriptors are 64 bytes");
static_assert(sizeof(dsa_completion_record) == 32, "DSA completion records are 32 bytes");

// A completion record slot: 32-byte aligned, as the device requires.
struct alignas(32) Record {
  dsa_completion_record r;
};
// A descriptor slot: 64-byte aligned (batch descriptor lists must be).
struct alignas(64) Descriptor {
  dsa_hw_desc d;
};

// Every descriptor asks for a completion record (CRAV) and for it to be written (RCR).
constexpr std::uint32_t kRecordFlags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;

inline std::uint64_t Addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
template <typename T = void>
inline T* Ptr(std::uint64_t a) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(a));
}

inline void Begin(dsa_hw_desc& d, std::uint8_t opcode, std::uint32_t flags, Record* record) {
  std::memset(&d, 0, sizeof d);
  d.opcode = opcode;
  d.flags = flags | (record != nullptr ? kRecordFlags : 0);
  d.completion_addr = record != nullptr ? Addr(&record->r) : 0;
}

inline void EncodeMemmove(dsa_hw_desc& d, void* dst, const void* src, std::uint32_t size,
                          std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_MEMMOVE, flags, rec);
  d.src_addr = Addr(src);
  d.dst_addr = Addr(dst);
  d.xfer_size = size;
}
// dst[i] = byte (i % 8) of pattern (DSA 1.0 fills with an 8-byte pattern).
inline void EncodeFill(dsa_hw_desc& d, void* dst, std::uint64_t pattern, std::uint32_t size,
                       std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_MEMFILL, flags, rec);
  d.pattern = pattern;
  d.dst_addr = Addr(dst);
  d.xfer_size = size;
}
inline void EncodeCompare(dsa_hw_desc& d, const void* a, const void* b, std::uint32_t size,
                          std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_COMPARE, flags, rec);
  d.src_addr = Addr(a);
  d.src2_addr = Addr(b);
  d.xfer_size = size;
}
// Compares src with the 8-byte pattern repeated; the record says where they first differ.
inline void EncodeComparePattern(dsa_hw_desc& d, const void* src, std::uint64_t pattern,
                                 std::uint32_t size, std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_COMPVAL, flags, rec);
  d.src_addr = Addr(src);
  d.comp_pattern = pattern;
  d.xfer_size = size;
}
// src to dst and dst2, which must agree in address bits 11:0.
inline void EncodeDualcast(dsa_hw_desc& d, void* dst, void* dst2, const void* src,
                           std::uint32_t size, std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_DUALCAST, flags, rec);
  d.src_addr = Addr(src);
  d.dst_addr = Addr(dst);
  d.dest2 = Addr(dst2);
  d.xfer_size = size;
}
// CRC-32C of src continuing from seed (default flags: seed and result inverted, as the
// standard CRC-32C); the record's crc_val holds the result.
inline void EncodeCrc(dsa_hw_desc& d, const void* src, std::uint32_t seed, std::uint32_t size,
                      std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_CRCGEN, flags, rec);
  d.src_addr = Addr(src);
  d.crc_seed = seed;
  d.xfer_size = size;
}
// Writes dst's cache lines back; with IDXD_OP_FLAG_CC they stay cached, otherwise evicted.
inline void EncodeCacheFlush(dsa_hw_desc& d, void* dst, std::uint32_t size, std::uint32_t flags,
                             Record* rec) {
  Begin(d, DSA_OPCODE_CFLUSH, flags, rec);
  d.dst_addr = Addr(dst);
  d.xfer_size = size;
}
inline void EncodeDrain(dsa_hw_desc& d, Record* rec) { Begin(d, DSA_OPCODE_DRAIN, 0, rec); }
inline void EncodeNoop(dsa_hw_desc& d, Record* rec) { Begin(d, DSA_OPCODE_NOOP, 0, rec); }
inline void EncodeBatch(dsa_hw_desc& d, const Descriptor* list, std::uint32_t count,
                        std::uint32_t flags, Record* rec) {
  Begin(d, DSA_OPCODE_BATCH, flags, rec);
  d.desc_list_addr = Addr(list);
  d.desc_count = count;
}

// The status byte, read with acquire ordering: the device writes the rest of the record first.
inline std::uint8_t LoadStatus(const dsa_completion_record& r) {
  return __atomic_load_n(const_cast<const std::uint8_t*>(&r.status), __ATOMIC_ACQUIRE);
}
inline void PublishStatus(dsa_completion_record& r, std::uint8_t status) {
  __atomic_store_n(const_cast<std::uint8_t*>(&r.status), status, __ATOMIC_RELEASE);
}
inline void ClearRecord(Record& rec) { std::memset(static_cast<void*>(&rec.r), 0, sizeof rec.r); }

std::string_view OpcodeName(unsigned opcode);
// A non-success completion as an error that names the cause and, where there is one, the fix.
// `status` is the raw byte (the write-fault bit 0x80 is honoured and masked).
Status RecordError(const dsa_completion_record& r, unsigned opcode);
// Just the text for a masked status code ("page fault without block-on-fault", ...).
std::string StatusText(unsigned masked_status);

}  // namespace tierflow::dsa
