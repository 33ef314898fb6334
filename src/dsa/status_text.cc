// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "dsa/descriptor.h"

namespace tierflow::dsa {

std::string_view OpcodeName(unsigned opcode) {
  switch (opcode) {
    case DSA_OPCODE_NOOP:
      return "noop";
    case DSA_OPCODE_BATCH:
      return "batch";
    case DSA_OPCODE_DRAIN:
      return "drain";
    case DSA_OPCODE_MEMMOVE:
      return "memmove";
    case DSA_OPCODE_MEMFILL:
      return "memfill";
    case DSA_OPCODE_COMPARE:
      return "compare";
    case DSA_OPCODE_COMPVAL:
      return "compare-pattern";
    case DSA_OPCODE_CR_DELTA:
      return "create-delta";
    case DSA_OPCODE_AP_DELTA:
      return "apply-delta";
    case DSA_OPCODE_DUALCAST:
      return "dualcast";
    case DSA_OPCODE_CRCGEN:
      return "crc";
    case DSA_OPCODE_COPY_CRC:
      return "copy-crc";
    case DSA_OPCODE_DIF_CHECK:
      return "dif-check";
    case DSA_OPCODE_DIF_INS:
      return "dif-insert";
    case DSA_OPCODE_DIF_STRP:
      return "dif-strip";
    case DSA_OPCODE_DIF_UPDT:
      return "dif-update";
    case DSA_OPCODE_CFLUSH:
      return "cache-flush";
  }
  return "unknown opcode";
}

std::string StatusText(unsigned s) {
  switch (s) {
    case DSA_COMP_NONE:
      return "not completed yet (status 0)";
    case DSA_COMP_SUCCESS:
      return "success";
    case DSA_COMP_SUCCESS_PRED:
      return "success with false predicate";
    case DSA_COMP_PAGE_FAULT_NOBOF:
      return "page fault without block-on-fault: the device stopped at an unmapped or not yet "
             "touched page; touch the page and resubmit the rest, prefault the buffers, or use a "
             "WQ with block_on_fault=1";
    case DSA_COMP_PAGE_FAULT_IR:
      return fmt::format(
          "page fault reported by interrupt (status 0x{:02x}): not used by "
          "user-space submission; the descriptor asked for an interrupt it cannot "
          "get",
          s);
    case DSA_COMP_BATCH_FAIL:
      return "batch failed: at least one descriptor of the batch did not succeed (see its own "
             "completion record)";
    case DSA_COMP_BATCH_PAGE_FAULT:
      return "page fault while reading the batch's descriptor list: prefault or touch the list";
    case DSA_COMP_DR_OFFSET_NOINC:
      return "delta record offsets do not increase";
    case DSA_COMP_DR_OFFSET_ERANGE:
      return "delta record offset out of range";
    case DSA_COMP_DIF_ERR:
      return "DIF check failed";
    case DSA_COMP_BAD_OPCODE:
      return "unsupported opcode: this device's op_cap does not include it (see tierflow topology)";
    case DSA_COMP_INVALID_FLAGS:
      return "invalid flags: a flag is reserved or not allowed for this operation or WQ (for "
             "example block-on-fault on a WQ configured with block_on_fault=0)";
    case DSA_COMP_NOZERO_RESERVE:
      return "a reserved descriptor field is not zero";
    case DSA_COMP_XFER_ERANGE:
      return "transfer size out of range: 0 or above the WQ's max_transfer_size; split the "
             "operation";
    case DSA_COMP_DESC_CNT_ERANGE:
      return "batch descriptor count out of range: must be 2..max_batch_size of the WQ";
    case DSA_COMP_DR_ERANGE:
      return "delta record size out of range";
    case DSA_COMP_OVERLAP_BUFFERS:
      return "overlapping buffers, which this operation does not allow (memmove does)";
    case DSA_COMP_DCAST_ERR:
      return "dualcast destinations must have the same address bits 11:0 (same offset within "
             "a page)";
    case DSA_COMP_DESCLIST_ALIGN:
      return "batch descriptor list is not 64-byte aligned";
    case DSA_COMP_INT_HANDLE_INVAL:
      return "invalid interrupt handle";
    case DSA_COMP_CRA_XLAT:
      return "the completion record address could not be translated (unmapped memory)";
    case DSA_COMP_CRA_ALIGN:
      return "completion record address is not 32-byte aligned";
    case DSA_COMP_ADDR_ALIGN:
      return "address alignment: this operation needs aligned addresses or sizes (cache flush "
             "and some DIF operations)";
    case DSA_COMP_PRIV_BAD:
      return "privileged descriptor submitted from user space";
    case DSA_COMP_TRAFFIC_CLASS_CONF:
      return "traffic class configuration error";
    case DSA_COMP_PFAULT_RDBA:
      return "page fault on a read-back address";
    // The numbers come from the header's values, never written by hand (0x20 and 0x21 were
    // once printed as 0x1e and 0x1f).
    case DSA_COMP_HW_ERR1:
      return fmt::format("hardware error (status 0x{:02x}): check dmesg for idxd errors", s);
    case DSA_COMP_HW_ERR_DRB:
      return fmt::format(
          "hardware error on a read-back (status 0x{:02x}): check dmesg for "
          "idxd errors",
          s);
    case DSA_COMP_TRANSLATION_FAIL:
      return "address translation failed: the buffer is not mapped in this process, or the "
             "PASID of this process is not bound to the device";
  }
  return fmt::format("undocumented completion status 0x{:02x}", s);
}

Status RecordError(const dsa_completion_record& r, unsigned opcode) {
  const unsigned raw = r.status;
  const unsigned s = raw & DSA_COMP_STATUS_MASK;
  std::string text = fmt::format("DSA {}: {}", OpcodeName(opcode), StatusText(s));
  if (s == DSA_COMP_PAGE_FAULT_NOBOF || s == DSA_COMP_PAGE_FAULT_IR) {
    text += fmt::format(" ({} fault at 0x{:x} after {} bytes)",
                        (raw & DSA_COMP_STATUS_WRITE) ? "write" : "read", r.fault_addr,
                        r.bytes_completed);
  }
  if (s == DSA_COMP_INVALID_FLAGS)
    text += fmt::format(" (invalid flag bits 0x{:06x})", r.invalid_flags);
  StatusCode code = s == DSA_COMP_BAD_OPCODE ? StatusCode::kUnsupported
                    : s >= 0x10 && s != DSA_COMP_HW_ERR1 && s != DSA_COMP_HW_ERR_DRB
                        ? StatusCode::kInvalidArgument
                        : StatusCode::kFailed;
  return Status(code, text);
}

}  // namespace tierflow::dsa
