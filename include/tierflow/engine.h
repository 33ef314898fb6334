// SPDX-License-Identifier: Apache-2.0
// An engine moves bytes: the CPU, a DSA device, io_uring, later GPUs and MPI windows.
//
// Every engine offers the same contract: Submit (one operation) or SubmitBatch (several, one
// handle), both validating their input and returning a Handle or an error that names the
// problem. Engines publish what they can do (capabilities) and what they are doing (stats) so
// that callers and planners can see the hardware at work. Writing an engine: engine_module.h.
//
// Thread-safety: every public member of an engine may be called from any number of threads at
// once (several threads submitting to one engine is the normal case). Destroying an engine
// while another thread submits to it is a race; operations still running when it is destroyed
// end as the engine's header says (completed or cancelled, never left pending).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tierflow/export.h"
#include "tierflow/handle.h"
#include "tierflow/operation.h"
#include "tierflow/status.h"

namespace tierflow {

class Submission;  // engine_module.h

// Where an engine does its work. Planners (copy policies, pipes, calibration) choose engines
// by kind and capabilities, never by name.
enum class EngineKind : std::uint8_t {
  kCpu,      // on the host's cores (the CPU engine, or any engine that copies with them): the
             // cheapest for small operations, at the price of the cores it occupies
  kOffload,  // on a device beside the cores (DSA, a GPU copy engine, or a software model of
             // one): frees the cores, at the price of a submission per operation
  kStorage,  // between files and memory (io_uring): reads the sources it holds directly
};
// "cpu", "offload", "storage"
TIERFLOW_EXPORT std::string_view EngineKindName(EngineKind kind);

// What an engine can do; fixed for its lifetime. An engine author fills every field.
struct EngineCapabilities {
  std::string name;                         // for people: "cpu", "dsa", "io_uring", ...
  EngineKind kind = EngineKind::kCpu;       // where its work runs (an author sets it)
  std::uint32_t ops = 0;                    // OpBit mask of supported kinds
  std::uint64_t max_op_bytes = 0;           // largest single operation
  std::size_t max_batch = 0;                // most operations in one SubmitBatch
  std::uint64_t preferred_min_bytes = 0;    // below this another path is usually cheaper
  std::uint64_t preferred_chunk_bytes = 0;  // the engine splits work into pieces of about this size
  int node = -1;                            // NUMA node the engine sits on, -1 if none
  bool is_model = false;                    // a software model of hardware (say so in all output)
  bool copies_memory = true;                // false: reads only sources it holds (storage engines)
};

// A snapshot of the counters every engine keeps ("visible state"). A piece is the unit an
// engine completes: a CPU engine's piece of a split operation, a DSA descriptor, an io_uring
// read. Once an engine is idle, pieces started = pieces_completed + pieces_cancelled and
// in_flight is 0.
struct EngineStats {
  std::size_t queue_capacity = 0;       // pieces of work that can wait (0: no queue of its own)
  std::size_t queued = 0;               // waiting now (pieces, or tickets for split operations)
  std::size_t in_flight = 0;            // pieces started and not finished
  std::uint64_t ops_submitted = 0;      // operations accepted (a batch of n counts n)
  std::uint64_t pieces_completed = 0;   // pieces finished, the failed ones included
  std::uint64_t bytes_completed = 0;    // bytes of the pieces that succeeded
  std::uint64_t ops_inline = 0;         // operations run on the submitting thread
  std::uint64_t pieces_by_waiters = 0;  // pieces run by a thread waiting on their handle
  std::uint64_t pieces_failed = 0;      // pieces that finished with an error
  std::uint64_t pieces_cancelled = 0;   // dropped because the engine shut down
  std::uint64_t callback_errors = 0;    // callbacks that threw
};

struct EngineQueue;  // engine_module.h: an engine's own queue, as its author reports it
class Engine;

// A part of one operation given to one engine: bytes [offset, offset + size) of it.
struct EnginePart {
  Engine* engine = nullptr;
  std::size_t offset = 0;
  std::size_t size = 0;
};

class EngineCounters;  // engine_module.h: the counters an engine author updates

struct SubmitOptions {
  CompletionCallback callback;  // invoked once, on completion
};

class TIERFLOW_EXPORT Engine {
 public:
  virtual ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  virtual const EngineCapabilities& capabilities() const = 0;
  // The counters, read now (each atomically; together they are not one instant). Thread-safe.
  EngineStats stats() const;

  // Submits `op` divided among engines as `parts` describe (offsets relative to the operation;
  // the parts must tile [0, op.size) exactly) and returns one handle that completes when every
  // part has (a copy policy's plan, PlanCopy). `op` may be any kind that acts on a range
  // except kCrc32c (one CRC, computed by one engine), kDrain and an overlapping move. Errors:
  // those, parts that do not tile the operation, and any part's validation error (nothing is
  // submitted then). A part whose engine refuses it at submission fails the handle; parts
  // already started run to completion.
  static Result<Handle> SubmitParts(const Operation& op, std::span<const EnginePart> parts,
                                    SubmitOptions options = {});

  // Validates and submits. Errors (nothing was submitted): null or non-canonical pointers,
  // size 0, size above max_op_bytes, overlapping copy ranges, an address range that wraps,
  // an operation kind the engine does not support, and engine-specific checks (see the engine).
  Result<Handle> Submit(const Operation& op, SubmitOptions options = {});
  // One handle for all; it completes when every member has. Errors as Submit, plus an empty
  // batch or more than max_batch members; the error names the offending member.
  Result<Handle> SubmitBatch(std::span<const Operation> ops, SubmitOptions options = {});

  // The checks Submit applies, without submitting.
  Status Validate(const Operation& op) const;

  // Whether this engine reads [p, p+n) from where it really lives rather than through memory:
  // a storage engine for a file it has registered. Planners send such copies to it (a file
  // read instead of page faults). Memory engines: false.
  virtual bool ReadsSourceDirectly(const void* p, std::size_t n) const {
    (void)p;
    (void)n;
    return false;
  }

 protected:
  Engine();
  // Engine-specific validation beyond the common checks.
  virtual Status CheckOperation(const Operation& op) const;
  // The members below are for engine authors; engine_module.h gives their contract.
  // Whether Validate calls CheckOperation (default true). Set in the constructor only.
  void set_checks_operations(bool on) { checks_operations_ = on; }
  // Starts `ops` (validated) as parts of `submission`.
  virtual Status Enqueue(std::span<const Operation> ops, Submission& submission) = 0;
  // The counters this engine keeps up to date.
  EngineCounters& counters() const { return *counters_; }
  // Its own queue, if it has one (default: none).
  virtual EngineQueue queue() const;

 private:
  Result<Handle> Start(std::span<const Operation> ops, SubmitOptions& options);
  std::unique_ptr<EngineCounters> counters_;
  bool checks_operations_ = true;
};

}  // namespace tierflow
