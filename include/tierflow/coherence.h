// SPDX-License-Identifier: Apache-2.0
// Software-maintained coherence: write a range's cache lines back to memory, drop them from
// this CPU's caches, and order or wait for that. What a program needs where hardware does not
// keep caches coherent: memory shared between hosts over CXL 2.0 (write back before release,
// invalidate before acquire), non-coherent DMA on Arm SoCs (clean before the device reads,
// invalidate before the CPU reads what it wrote), PCIe non-transparent bridges, and
// persistence of stores to persistent memory. On a coherent host the same calls are correct
// and cost what the instructions cost; `tierflow bench coherence` measures that.
//
// What each instruction guarantees (docs/coherence.md has the long form):
//   x86   CLWB        writes a dirty line back; the line may stay cached (clean).
//         CLFLUSHOPT  writes a dirty line back and evicts it; weakly ordered: only a fence
//                     (or a locked instruction) orders it with later stores.
//         CLFLUSH     as CLFLUSHOPT, but ordered with other stores and CLFLUSHes (slower).
//   arm64 DC CVAC     cleans a line to the point of coherence; the line may stay.
//         DC CIVAC    cleans and invalidates to the point of coherence.
//         DC IVAC (invalidate without cleaning) is privileged at EL0 and not offered: user
//         space invalidates with clean+invalidate, so Invalidate never discards a store.
// None of them is complete when it retires: Fence orders the maintenance before later stores
// (SFENCE / DMB SY), Complete waits until it has reached memory (MFENCE / DSB SY).
//
// Thread-safety: every function may be called from any thread at once. The instructions act
// on the caller's CPU caches and, on coherent systems, on every cache of the coherence domain;
// a fence orders only the calling thread's maintenance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "tierflow/export.h"
#include "tierflow/status.h"

namespace tierflow {

// The instruction that does the maintenance. kAuto (the default) picks, per operation, the
// best this CPU has (CoherenceSupport). Naming one is for studies and for working around a
// CPU: it must exist on this CPU and suit the operation, or the call fails without doing
// anything.
enum class LineInstruction : std::uint8_t {
  kAuto,
  kClwb,        // x86 write back, keep; WriteBack only
  kClflushopt,  // x86 write back + evict
  kClflush,     // x86 write back + evict, strongly ordered
  kDcCvac,      // arm64 clean; WriteBack only
  kDcCivac,     // arm64 clean + invalidate
};
// "auto", "clwb", "clflushopt", "clflush", "dc-cvac", "dc-civac".
TIERFLOW_EXPORT std::string_view LineInstructionName(LineInstruction instruction);
// The inverse of LineInstructionName; an unknown name is an error that lists the names.
TIERFLOW_EXPORT Result<LineInstruction> ParseLineInstruction(std::string_view name);

// What the call does after the last line's instruction.
enum class MaintenanceFence : std::uint8_t {
  kComplete,  // (default) Complete(): the lines have reached memory when the call returns
  kFence,     // Fence(): ordered before the caller's later stores, maybe not yet in memory
  kNone,      // nothing: the caller fences once after several calls (cheapest for lists
              // built call by call); until then nothing is ordered or complete
};

struct CoherenceOptions {
  // Default kAuto: the cheapest instruction this CPU has for the operation (see
  // LineInstruction). Naming one pins it, e.g. to compare them; one the CPU lacks is refused.
  LineInstruction instruction = LineInstruction::kAuto;
  // Default kComplete: the lines have reached memory when the call returns. kFence or kNone
  // save the wait when several calls are fenced once (see MaintenanceFence).
  MaintenanceFence fence = MaintenanceFence::kComplete;
};

// One range of a scatter list.
struct MemorySpan {
  const void* data = nullptr;
  std::size_t size = 0;
};

// What this CPU offers, detected once per process.
struct CoherenceSupport {
  // Bytes per cache line as the maintenance instructions see it: CPUID leaf 1 EBX[15:8] × 8
  // on x86, 4 << CTR_EL0.DminLine on arm64 (32-, 64- and 256-byte lines exist). Never assumed.
  std::size_t line_size = 0;
  std::string_view line_size_source;                    // where line_size came from, for reports
  std::string_view architecture;                        // "x86-64" or "arm64"
  bool clwb = false;                                    // x86: CPUID.(EAX=7,ECX=0):EBX[24]
  bool clflushopt = false;                              // x86: CPUID.(EAX=7,ECX=0):EBX[23]
  LineInstruction write_back = LineInstruction::kAuto;  // what kAuto uses for WriteBack
  LineInstruction invalidate = LineInstruction::kAuto;  // ... for (WriteBack)Invalidate
};
TIERFLOW_EXPORT const CoherenceSupport& GetCoherenceSupport();

// Writes every dirty cache line overlapping [data, data+size) back to memory. The lines may
// stay cached (CLWB, DC CVAC) or be evicted (CLFLUSHOPT, CLFLUSH when the CPU lacks CLWB or
// one of them is named). Bytes outside the range that share its first or last line are
// written back too; that never changes memory's view of them beyond what this CPU stored.
// Errors (nothing is done): data null with size > 0, a range that wraps the address space, an
// instruction this CPU lacks or that does not write back (kInvalidArgument / kUnsupported,
// naming the CPUID bit or register). A range that is not mapped (PROT_NONE, past the end of a
// file mapping) is kInvalidArgument naming the address and why, not a crash; the lines before
// it have been written back and no fence was run. size 0 does nothing and succeeds.
TIERFLOW_EXPORT Status WriteBack(const void* data, std::size_t size,
                                 const CoherenceOptions& options = {});
// Every range of the list, then one fence (options.fence) for all of them.
TIERFLOW_EXPORT Status WriteBack(std::span<const MemorySpan> ranges,
                                 const CoherenceOptions& options = {});

// Makes this CPU's next reads of [data, data+size) come from memory: drops the lines from its
// caches. In user space that is clean+invalidate (CLFLUSHOPT / CLFLUSH, DC CIVAC): a dirty
// line is written back before it is dropped, so no store is ever discarded, and the bytes of
// the first and last line outside the range are written back, not lost. Call it after the
// other side's release (a flag, a message), before reading what it wrote. Errors as WriteBack;
// kClwb and kDcCvac are refused (they do not invalidate).
TIERFLOW_EXPORT Status Invalidate(const void* data, std::size_t size,
                                  const CoherenceOptions& options = {});
TIERFLOW_EXPORT Status Invalidate(std::span<const MemorySpan> ranges,
                                  const CoherenceOptions& options = {});

// Writes back and drops: the release and the acquire of one range in one pass (what a
// producer that will not read its data again wants). Same instructions and errors as
// Invalidate; it differs in intent, and a device-side engine may implement the two
// differently.
TIERFLOW_EXPORT Status WriteBackInvalidate(const void* data, std::size_t size,
                                           const CoherenceOptions& options = {});
TIERFLOW_EXPORT Status WriteBackInvalidate(std::span<const MemorySpan> ranges,
                                           const CoherenceOptions& options = {});

// Orders this thread's earlier maintenance before its later stores (SFENCE on x86, DMB SY on
// arm64). Does not wait for the lines to reach memory.
TIERFLOW_EXPORT void Fence();
// Waits until this thread's earlier maintenance and stores have taken effect in memory
// (MFENCE on x86, DSB SY on arm64).
TIERFLOW_EXPORT void Complete();

}  // namespace tierflow
