// SPDX-License-Identifier: Apache-2.0
// The DSA engine's state, private to the dsa component: the jobs a submission becomes, and the
// engine's in-flight list, credits and statistics, with its members grouped by concern:
// submission (descriptors, batches, offering them to the portal) and completion (records,
// fault resume, CPU fallback, the completion thread). All are defined in dsa_engine.cc, with
// creation, fork and shutdown.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/fork_guard.h"
#include "common/free_list.h"
#include "common/futex.h"
#include "dsa/descriptor.h"
#include "dsa/portal.h"
#include "kernels/kernels.h"
#include "tierflow/dsa_engine.h"
#include "tierflow/engine_module.h"

namespace tierflow {
namespace dsa {

inline constexpr std::uint64_t kMaxOpBytes = std::uint64_t{1} << 40;
inline constexpr std::size_t kMaxOpsPerSubmit = 4096;
inline constexpr int kMaxFaultsWithoutProgress = 8;
// One UMWAIT round of the completion thread (~10 us at 2-4 GHz), then it polls everything.
inline constexpr std::uint64_t kMonitorWaitCycles = 30000;

// One data descriptor's share of an operation.
// Enqueue sets every field: the empty constructor spares the zeroing that value-initialisation
// would do (a rep stos per piece, a quarter of a batch's build time).
struct Piece {
  enum State : std::uint8_t { kUnsubmitted, kInBatch, kSubmitted, kDone };
  Piece() {}  // NOLINT: deliberately leaves the fields to Enqueue
  OpKind kind;
  State state;
  bool holds_credit;  // submitted on its own to a dedicated WQ
  bool keep_in_cache;
  bool echo;        // second copy of a split dualcast: its bytes are not counted
  int faults_here;  // consecutive faults without progress
  char* dst;
  const char* src;
  const char* src2;
  char* dst2;
  std::uint64_t size;
  std::uint64_t offset;  // within its operation: fill phase, compare report
  std::uint64_t tail;    // bytes of its operation after this piece (CRC combination)
  std::uint64_t report_base;
  std::uint64_t pattern;
  std::uint32_t crc_seed;  // kCrc32c: CRC of the piece's bytes before src (fault resume)
};

// A batch descriptor over pieces [first, first + count).
struct Group {
  dsa::Descriptor desc;
  dsa::Record rec;
  std::uint32_t first = 0, count = 0;
  bool in_flight = false;
};

// Everything one submission needs until it completes. Pooled: the vectors keep their capacity,
// so a warm engine does not allocate per submission.
struct Job {
  OpRef state;
  Job* next_free = nullptr;  // the link of common/free_list.h
  std::vector<Piece> pieces;
  std::vector<dsa::Descriptor> descs;  // descs[i] encodes pieces[i] (contiguous: batch lists)
  std::vector<dsa::Record> recs;
  std::vector<Group> groups;
  std::atomic<bool> busy{false};  // someone is advancing this job
  std::uint64_t bytes = 0;
  std::uint64_t first_difference = OpRef::kNoDifference;
  StatusCode error_code = StatusCode::kOk;
  std::string error_text;
  std::uint32_t open = 0;                  // pieces not done
  std::uint32_t done_unreported = 0;       // pieces done since the last statistics update
  std::uint32_t cancelled_unreported = 0;  // of those, cancelled ones
  std::uint32_t groups_in_flight = 0;
  // An overlapping move cut into pieces: they must run one after the other, in list order
  // (from the end when the destination lies above the source).
  bool ordered = false;
  // A drain: no pieces; complete once no job linked at or before `drain_after` remains.
  bool drain = false;
  std::uint64_t drain_after = 0;
  std::uint64_t seq = 0;  // link order (drains)
  Job* prev = nullptr;
  Job* next = nullptr;
  Job* finished_next = nullptr;

  // A pooled job starting a new submission for `s` (busy: only the submitter advances it).
  void Reset(OpRef s, bool is_drain) {
    busy.store(true, std::memory_order_relaxed);
    state = s;
    bytes = 0;
    first_difference = OpRef::kNoDifference;
    error_code = StatusCode::kOk;
    pieces.clear();
    groups.clear();
    groups_in_flight = 0;
    open = 0;
    done_unreported = 0;
    cancelled_unreported = 0;
    ordered = false;
    drain = is_drain;
  }
};

inline unsigned Log2(std::uint64_t v) {
  return v == 0 ? 0 : 63 - static_cast<unsigned>(__builtin_clzll(v));
}

// Jobs — with their descriptors and completion records — come from per-thread free lists
// (common/free_list.h): the submit path takes no lock and shares no cache line with other
// submitters; a job finished by the completion thread goes to that thread's list, which spills
// to the global one. Jobs are never freed: a record the device may still write must stay
// allocated (see ~DsaEngine), and a reused job keeps the capacity of its vectors, so a warm
// engine does not allocate. Any DSA engine takes jobs from the same lists (a job holds nothing
// engine-specific once finished).
using JobPool = FreeList<Job, /*kLocalMax=*/64, /*kRefill=*/16>;
inline Job* GetJob() { return JobPool::Get(); }
inline void PutJob(Job* j) { JobPool::Put(j); }

}  // namespace dsa

struct [[gnu::visibility("hidden")]] DsaEngine::Impl final : ForkAware {
  using Piece = dsa::Piece;
  using Group = dsa::Group;
  using Job = dsa::Job;

  // The size histogram, updated once per run of pieces in the same bucket (one atomic add for
  // a batch of equal sizes, not one per piece).
  struct SizeRun {
    unsigned bucket = 0;
    std::uint64_t count = 0;
    void Add(std::array<std::atomic<std::uint64_t>, 32>& histogram, unsigned b) {
      if (b != bucket) {
        Flush(histogram);
        bucket = b;
      }
      ++count;
    }
    void Flush(std::array<std::atomic<std::uint64_t>, 32>& histogram) {
      if (count != 0) histogram[bucket].fetch_add(count, std::memory_order_relaxed);
      count = 0;
    }
  };

  DsaEngineOptions opts;
  EngineCapabilities caps;
  std::string description;
  std::unique_ptr<dsa::Portal> portal;
  std::shared_ptr<DsaDeviceModel> model;  // keeps the model alive while we submit to it
  // On hardware: the WQ, to open it again in a fork() child.
  DsaWq hw_wq;
  DsaCpuFeatures hw_cpu;
  // Set in a fork() child: the completion thread stayed in the parent and the portal belongs
  // to the parent's address space; the next submission re-initialises.
  std::atomic<bool> reinit_after_fork{false};
  std::mutex reinit_mu;
  bool shared = true;
  std::uint32_t wq_size = 0;
  std::uint64_t max_xfer = 0;
  std::uint32_t max_batch = 0;
  bool bof_allowed = false;
  const kernels::Kernels* kernels = nullptr;

  // In-flight jobs (intrusive list).
  std::mutex list_mu;
  Job* head = nullptr;
  std::uint64_t link_seq = 0;  // under list_mu
  std::atomic<std::size_t> jobs_in_flight{0};

  bool use_umwait = false;       // resolved from opts.completion_wait
  std::uint64_t umwait_max = 0;  // the kernel's cap on one UMWAIT (TSC cycles)

  std::atomic<std::uint32_t> credits_used{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> draining{false};
  WakeWord idle;  // where the completion thread sleeps while nothing is in flight
  std::thread poller;

  // Statistics.
  // The engine's common counters (Engine::counters); the DSA's own ones below.
  EngineCounters* counters = nullptr;
  std::atomic<std::uint64_t> ops_done{0}, descriptors{0}, batches{0}, submit_retries{0},
      retried_later{0}, cpu_fallbacks{0}, faults_resumed{0}, faults_on_cpu{0}, credit_waits{0},
      dualcast_splits{0}, monitor_waits{0};
  std::array<std::atomic<std::uint64_t>, 32> histogram{};

  // --- in-flight list --------------------------------------------------------------------
  void Link(Job * j) {
    std::lock_guard lock(list_mu);
    LinkLocked(j);
  }
  void LinkLocked(Job * j) {
    j->seq = ++link_seq;
    j->prev = nullptr;
    j->next = head;
    if (head != nullptr) head->prev = j;
    head = j;
    jobs_in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  void UnlinkLocked(Job * j) {
    if (j->prev != nullptr)
      j->prev->next = j->next;
    else
      head = j->next;
    if (j->next != nullptr) j->next->prev = j->prev;
    j->prev = j->next = nullptr;
    jobs_in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
  // Whether a job linked at or before `seq` is still linked (running, or being finished).
  bool AnyLinkedUpTo(std::uint64_t seq) const {
    for (const Job* j = head; j != nullptr; j = j->next) {
      if (j->seq <= seq) return true;
    }
    return false;
  }

  // --- fork ------------------------------------------------------------------------------
  void PrepareFork() override { list_mu.lock(); }
  void AfterForkParent() override { list_mu.unlock(); }
  void AfterForkChild() override;
  Status ReinitAfterFork();

  // --- credits (dedicated WQ) --------------------------------------------------------------
  bool TryCredit() {
    if (shared) return true;
    std::uint32_t used = credits_used.load(std::memory_order_relaxed);
    while (used < wq_size) {
      if (credits_used.compare_exchange_weak(used, used + 1, std::memory_order_acq_rel))
        return true;
    }
    return false;
  }
  void ReleaseCredit() {
    if (!shared) credits_used.fetch_sub(1, std::memory_order_acq_rel);
  }

  // --- submission ------------------------------------------------------------------
  Status CheckBatch(std::span<const Operation> ops) const;
  bool OverlappingBigMove(const Operation& op) const;
  void AddPieces(Job & j, const Operation& op, const Submission& submission, SizeRun& sizes);
  void GroupPieces(Job & j);
  void Launch(Job * j, Submission & submission);
  Status EnqueueDrain(Submission & submission);
  void Encode(Job & j, std::uint32_t i);
  dsa::Offer Offer(const dsa_hw_desc& d, int retries);
  void WaitForCredit(Job & j);
  void SubmitPiece(Job & j, std::uint32_t i, bool blocking);
  void SubmitGroup(Job & j, Group & g);

  // --- completion ----------------------------------------------------------------
  std::uint64_t ExactDifference(const Piece& p, std::uint64_t at) const;
  void NoteDifference(Job & j, const Piece& p, std::uint64_t at);
  void AddCrc(Job & j, const Piece& p, std::uint32_t crc);
  void RunOnCpu(Job & j, std::uint32_t i);
  void Done(Job & j, std::uint32_t i, std::uint64_t bytes);
  void ReportDone(Job & j);
  void Fail(Job & j, std::uint32_t i, StatusCode code, std::string text);
  bool TouchFaultPage(Job & j, std::uint32_t i, std::uint64_t addr, bool write);
  void Process(Job & j, std::uint32_t i, std::uint8_t raw);
  void Reap(Job & j);
  bool Advance(Job & j);
  void Complete(Job * j);
  bool PollAll();
  void PollerLoop();
  const volatile std::uint8_t* RecordToWatch();
};

}  // namespace tierflow
