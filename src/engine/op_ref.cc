// SPDX-License-Identifier: Apache-2.0
// The engine author interface (tierflow/engine_module.h) over the operation state.
#include <utility>

#include "common/mapping.h"
#include "engine/op_state.h"
#include "tierflow/engine_module.h"

namespace tierflow {

bool OpRef::CompletePart(std::uint64_t bytes, StatusCode code, const char* message,
                         std::uint64_t first_difference) const {
  return detail::CompletePart(state_, bytes, code, message, first_difference);
}

void OpRef::FailPart(std::uint64_t bytes, StatusCode code, std::string message) const {
  detail::FailPart(state_, bytes, code, std::move(message));
}

void OpRef::AddCrc(std::uint32_t contribution) const {
  state_->crc.fetch_xor(contribution, std::memory_order_relaxed);
}

void* OpRef::scratch() const { return state_->engine_area; }

std::atomic<std::uint64_t>& OpRef::claims() const { return state_->piece_claims; }

void OpRef::SetHelper(bool (*help)(OpRef op)) const { state_->help = help; }

void Submission::CompleteHere(std::uint64_t bytes, std::uint64_t first_difference) const {
  detail::CompleteHere(op_.state_, bytes, first_difference);
}

void Submission::FailHere(std::uint64_t bytes, StatusCode code, std::string message) const {
  detail::FailHere(op_.state_, bytes, code, std::move(message));
}

Status CheckMapped(const Operation& op) {
  Status s = CheckMapped("dst", op.dst, op.size);
  if (s.ok()) s = CheckMapped("src", op.src, op.size);
  if (s.ok()) s = CheckMapped("src2", op.src2, op.size);
  if (s.ok()) s = CheckMapped("dst2", op.dst2, op.size);
  return s;
}

}  // namespace tierflow
