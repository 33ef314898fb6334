// SPDX-License-Identifier: Apache-2.0
#include "qdp/floor.h"

#include <algorithm>
#include <chrono>

#include "tierflow/copy_policy.h"

namespace tierflow::qdp {
namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  double busy_s = 0;
  std::uint64_t fingerprint = 0;
};

void GiveBack(const FloorSetup& f, const std::vector<void*>& blocks) {
  for (void* p : blocks) f.arena->Free(p, f.piece);
}

Result<std::vector<void*>> TakeBlocks(const FloorSetup& f) {
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < f.pieces_in_flight && i * f.piece < f.bytes; ++i) {
    Status err;
    void* p = f.arena->Allocate(f.piece, &err);
    if (p == nullptr) {
      GiveBack(f, blocks);
      return err;
    }
    blocks.push_back(p);
  }
  return blocks;
}

// Submits one round: block i receives the piece at round + i * piece.
Status SubmitRound(const FloorSetup& f, const std::vector<void*>& blocks, std::size_t round,
                   std::vector<Handle>& handles) {
  const CopyPolicy policy;
  for (std::size_t i = 0; i < blocks.size() && round + i * f.piece < f.bytes; ++i) {
    const std::size_t off = round + i * f.piece, n = std::min(f.piece, f.bytes - off);
    Result<std::vector<CopyPart>> parts =
        PlanFill(policy, *f.topology, f.engines, f.b + off, f.source_node, f.fast_node, n);
    if (!parts.ok()) return parts.status();
    Result<Handle> h = SubmitParts(Operation::Copy(blocks[i], f.b + off, n), *parts);
    if (!h.ok()) return h.status();
    handles.push_back(std::move(*h));
  }
  return Status::Ok();
}

Status MeasureRound(const FloorSetup& f, const std::vector<void*>& blocks, std::size_t round,
                    Tally& tally) {
  if (f.b_file != nullptr) {
    if (Status s = MakeCold(*f.b_file); !s.ok()) return s;
  }
  const auto t0 = Clock::now();
  std::vector<Handle> handles;
  Status failed = SubmitRound(f, blocks, round, handles);
  // Every submitted read finishes before its memory is given back; sleeping, as the cache
  // waits (a polling waiter would take a CPU from the completions).
  for (Handle& h : handles) {
    if (Status s = h.Wait(WaitMode::kBlock); !s.ok() && failed.ok()) failed = s;
  }
  tally.busy_s += std::chrono::duration<double>(Clock::now() - t0).count();
  if (!failed.ok()) return failed;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    const std::size_t off = round + i * f.piece, n = std::min(f.piece, f.bytes - off);
    tally.fingerprint += Fingerprint(static_cast<const std::uint64_t*>(blocks[i]),
                                     n / sizeof(std::uint64_t), off / sizeof(std::uint64_t));
  }
  return Status::Ok();
}

}  // namespace

Result<double> MeasureFloor(const FloorSetup& f) {
  Result<std::vector<void*>> blocks = TakeBlocks(f);
  if (!blocks.ok()) return blocks.status();
  Tally tally;
  Status failed;
  for (std::size_t round = 0; round < f.bytes && failed.ok(); round += blocks->size() * f.piece) {
    failed = MeasureRound(f, *blocks, round, tally);
  }
  GiveBack(f, *blocks);
  if (!failed.ok()) return failed;
  if (tally.fingerprint != f.b_fingerprint) {
    return Status(StatusCode::kInternal,
                  "b as read from the slow tier differs from b: the floor "
                  "measurement read wrong data; please report this");
  }
  return tally.busy_s * 1e3;
}

}  // namespace tierflow::qdp
