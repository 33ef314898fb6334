// Operations as the engine layer names and checks them.
#include "engine/operation_checks.h"

#include "common/mapping.h"
#include "tierflow/operation.h"

namespace tierflow {

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kCopy:
      return "copy";
    case OpKind::kMove:
      return "move";
    case OpKind::kFill:
      return "fill";
    case OpKind::kCompare:
      return "compare";
    case OpKind::kComparePattern:
      return "compare-pattern";
    case OpKind::kDualcast:
      return "dualcast";
    case OpKind::kCrc32c:
      return "crc32c";
    case OpKind::kCacheFlush:
      return "cache-flush";
    case OpKind::kDrain:
      return "drain";
  }
  return "unknown";
}

Status CheckMapped(const Operation& op) {
  Status s = CheckMapped("dst", op.dst, op.size);
  if (s.ok()) s = CheckMapped("src", op.src, op.size);
  if (s.ok()) s = CheckMapped("src2", op.src2, op.size);
  if (s.ok()) s = CheckMapped("dst2", op.dst2, op.size);
  return s;
}

}  // namespace tierflow
