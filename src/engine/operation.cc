// SPDX-License-Identifier: Apache-2.0
// Operations as the engine layer names them.
#include "tierflow/operation.h"

#include "tierflow/engine.h"

namespace tierflow {

std::string_view EngineKindName(EngineKind kind) {
  switch (kind) {
    case EngineKind::kCpu:
      return "cpu";
    case EngineKind::kOffload:
      return "offload";
    case EngineKind::kStorage:
      return "storage";
  }
  return "unknown";
}

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
    case OpKind::kWriteBack:
      return "write-back";
    case OpKind::kInvalidate:
      return "invalidate";
    case OpKind::kWriteBackInvalidate:
      return "write-back-invalidate";
    case OpKind::kDrain:
      return "drain";
  }
  return "unknown";
}

}  // namespace tierflow
