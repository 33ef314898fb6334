// SPDX-License-Identifier: Apache-2.0
#include "tierflow/dsa_model.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "coherence/lines.h"
#include "common/cpu_relax.h"
#include "common/crc32c.h"
#include "common/fault_guard.h"
#include "common/fork_guard.h"
#include "common/mapping.h"
#include "common/touch.h"
#include "dsa/descriptor.h"

namespace tierflow {

using dsa::Addr;
using dsa::Ptr;

namespace {

constexpr std::uint64_t kPage = 4096;
// Flags a user-space descriptor may carry (the rest are reserved or privileged here).
constexpr std::uint32_t kAllowedFlags =
    IDXD_OP_FLAG_FENCE | IDXD_OP_FLAG_BOF | IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR | IDXD_OP_FLAG_CC |
    IDXD_OP_FLAG_ADDR1_TCS | IDXD_OP_FLAG_ADDR2_TCS | IDXD_OP_FLAG_ADDR3_TCS | IDXD_OP_FLAG_CR_TCS |
    IDXD_OP_FLAG_STORD | IDXD_OP_FLAG_DRDBK;

struct Queued {
  dsa_hw_desc desc;
  std::uint64_t seq;
};

// What one descriptor's execution produced, before it is written to its record.
struct Outcome {
  std::uint8_t status = DSA_COMP_SUCCESS;
  std::uint8_t result = 0;
  std::uint32_t bytes_completed = 0;
  std::uint64_t fault_addr = 0;
  std::uint32_t invalid_flags = 0;
  std::uint32_t crc = 0;  // CRC generation: the CRC of the bytes processed
};

}  // namespace

struct [[gnu::visibility("hidden")]] DsaDeviceModel::Impl final : ForkAware {
  DsaModelConfig cfg;

  mutable std::mutex mu;  // queues, faults, errors, counters
  std::condition_variable work_cv, drain_cv;
  std::vector<std::deque<Queued>> queues;
  std::vector<std::uint32_t> occupancy;  // queued + executing, per WQ
  std::set<std::uint64_t> fault_pages;
  int error_count = 0;
  std::uint8_t error_status = 0;
  Stats counters;
  std::vector<std::string> caller_errors;
  std::uint64_t next_seq = 0;
  std::size_t executing = 0;
  bool stopping = false;
  bool paused = false;
  std::atomic<std::uint32_t> delay_ns{0};
  std::vector<std::thread> engines;
  bool restart_engines = false;  // a fork() child: the engine threads stayed in the parent

  // --- fork --------------------------------------------------------------------------------
  void PrepareFork() override { mu.lock(); }
  void AfterForkParent() override { mu.unlock(); }
  // The child has copies of the queues but none of the engine threads, and the descriptors
  // queued belong to the parent's submissions: the child's model starts empty, and starts
  // its engines again when next given a descriptor.
  void AfterForkChild() override {
    new (&mu) std::mutex();  // the copy is locked by PrepareFork; waiters are gone
    new (&work_cv) std::condition_variable();
    new (&drain_cv) std::condition_variable();
    for (std::thread& t : engines) new (&t) std::thread();  // abandon, never join
    engines.clear();
    for (auto& q : queues) q.clear();
    std::fill(occupancy.begin(), occupancy.end(), 0);
    executing = 0;
    restart_engines = !cfg.instant;
  }
  void StartEngines() {
    for (int i = 0; i < cfg.engines; ++i) engines.emplace_back([this] { EngineLoop(); });
  }

  // --- faults ------------------------------------------------------------------------------
  // First injected page overlapping [p, p+n) at or after p, as an offset from p; n if none.
  std::uint64_t FirstFault(std::uint64_t p, std::uint64_t n) {
    auto it = fault_pages.lower_bound(p & ~(kPage - 1));
    if (it == fault_pages.end() || *it >= p + n) return n;
    return *it <= p ? 0 : *it - p;
  }
  // Offset from p of the end of the last injected page overlapping [p, p+n); 0 if none.
  std::uint64_t LastFaultEnd(std::uint64_t p, std::uint64_t n) {
    auto it = fault_pages.lower_bound(p + n);
    if (it == fault_pages.begin()) return 0;
    --it;
    if (*it + kPage <= p) return 0;
    return std::min(n, *it + kPage - p);
  }
  void Resolve(std::uint64_t addr) { fault_pages.erase(addr & ~(kPage - 1)); }
  void ResolveAll(std::uint64_t p, std::uint64_t n) {
    auto it = fault_pages.lower_bound(p & ~(kPage - 1));
    while (it != fault_pages.end() && *it < p + n) it = fault_pages.erase(it);
  }

  // --- execution ---------------------------------------------------------------------------
  Outcome Validate(const dsa_hw_desc& d, const DsaModelWqConfig& wq) {
    Outcome o;
    if (d.priv) {
      o.status = DSA_COMP_PRIV_BAD;
      return o;
    }
    if (d.rsvd != 0 || d.rsvd1 != 0) {
      o.status = DSA_COMP_NOZERO_RESERVE;
      return o;
    }
    std::uint32_t bad = d.flags & ~kAllowedFlags;
    if ((d.flags & IDXD_OP_FLAG_BOF) && !wq.block_on_fault) bad |= IDXD_OP_FLAG_BOF;
    if (bad != 0) {
      o.status = DSA_COMP_INVALID_FLAGS;
      o.invalid_flags = bad;
      return o;
    }
    if (d.opcode >= 64 || ((cfg.op_cap >> d.opcode) & 1) == 0) {
      o.status = DSA_COMP_BAD_OPCODE;
      return o;
    }
    return o;
  }

  // Address translation, as the IOMMU would do it: the first page of [p, p+n) that is not
  // mapped in this process (n if all are). Two cheap system calls when all is well.
  std::uint64_t FirstUnmapped(std::uint64_t p, std::uint64_t n) const {
    if (p == 0 || !cfg.translate_addresses || CheckMapped("", Ptr(p), n).ok()) return n;
    for (std::uint64_t page = p & ~(kPage - 1); page < p + n; page += kPage) {
      if (!CheckMapped("", Ptr(page), 1).ok()) return page <= p ? 0 : page - p;
    }
    return n;
  }

  // Permissions, as the IOMMU checks them: the first page of [p, p+n) this process cannot
  // read (or, with `write`, write), n if it can all. One byte of each page is read — or
  // written with an atomic OR of 0, which changes nothing — under the fault guard: the access
  // faults the page in, as the device's access would, and a page a CPU access would crash on
  // (PROT_NONE, read-only for a write, past the end of a mapped file) is reported instead.
  std::uint64_t FirstRefused(std::uint64_t p, std::uint64_t n, bool write) const {
    if (p == 0 || !cfg.translate_addresses) return n;
    struct Span {
      std::uint64_t p, n;
    } span{p, n};
    auto locate = [](const void* c, std::uintptr_t a) {
      const Span& s = *static_cast<const Span*>(c);
      return a >= s.p && a - s.p < s.n ? 0 : -1;
    };
    MemoryFault fault;
    const bool all = RunGuarded(&span, locate, &fault, [&] {
      for (std::uint64_t a = p; a < p + n; a = (a & ~(kPage - 1)) + kPage) {
        if (write) {
          TouchForWrite(Ptr<unsigned char>(a));
        } else {
          TouchForRead(Ptr<const unsigned char>(a));
        }
      }
    });
    if (all) return n;
    const std::uint64_t page = fault.address & ~(kPage - 1);
    return page <= p ? 0 : page - p;
  }

  // The ranges an opcode reads, then the ones it writes (0: none).
  struct Ranges {
    std::uint64_t reads[2] = {0, 0}, writes[2] = {0, 0};
  };
  static Ranges RangesOf(const dsa_hw_desc& d) {
    switch (d.opcode) {
      case DSA_OPCODE_MEMMOVE:
        return {{d.src_addr, 0}, {d.dst_addr, 0}};
      case DSA_OPCODE_MEMFILL:
        return {{0, 0}, {d.dst_addr, 0}};
      case DSA_OPCODE_COMPARE:
        return {{d.src_addr, d.src2_addr}, {0, 0}};
      case DSA_OPCODE_COMPVAL:
      case DSA_OPCODE_CRCGEN:
        return {{d.src_addr, 0}, {0, 0}};
      case DSA_OPCODE_DUALCAST:
        return {{d.src_addr, 0}, {d.dst_addr, d.dest2}};
      case DSA_OPCODE_CFLUSH:
        return {{d.dst_addr, 0}, {0, 0}};  // needs no write permission
      default:
        return {};
    }
  }

  // Address translation: false, with a page fault in `o`, when a range the opcode uses has a
  // page that is unmapped or that this process may not access. An unmapped page faults like an
  // injected one, but touching cannot fix it.
  bool Translate(const dsa_hw_desc& d, std::uint64_t n, Outcome& o) {
    const Ranges r = RangesOf(d);
    std::uint64_t first = n, addr = 0;
    bool write = false;
    for (int w = 0; w < 2; ++w) {
      for (std::uint64_t base : w == 0 ? r.reads : r.writes) {
        if (base == 0) continue;
        std::uint64_t f = FirstUnmapped(base, n);
        if (f == n) f = FirstRefused(base, n, /*write=*/w == 1);
        if (f < first) {
          first = f;
          addr = base + f;
          write = w == 1;
        }
      }
    }
    if (first == n) return true;
    ++counters.page_faults;
    o.status =
        static_cast<std::uint8_t>(DSA_COMP_PAGE_FAULT_NOBOF | (write ? DSA_COMP_STATUS_WRITE : 0));
    o.fault_addr = addr;
    o.bytes_completed = 0;  // conservative: nothing done (the engine resumes from here)
    return false;
  }

  // A fault on an injected page after `done` bytes: the page is resolved for the retry.
  Outcome Fault(Outcome o, std::uint64_t done, std::uint64_t addr, bool write,
                bool descending = false) {
    Resolve(addr);
    ++counters.page_faults;
    o.status =
        static_cast<std::uint8_t>(DSA_COMP_PAGE_FAULT_NOBOF | (write ? DSA_COMP_STATUS_WRITE : 0));
    o.bytes_completed = static_cast<std::uint32_t>(done);
    o.fault_addr = addr;
    o.result = descending ? 1 : 0;
    return o;
  }

  static Outcome Done(std::uint64_t n) {
    Outcome o;
    o.bytes_completed = static_cast<std::uint32_t>(n);
    return o;
  }

  // Block on fault: injected faults are resolved before the work, as the device does.
  void ResolveFirst(const dsa_hw_desc& d, std::initializer_list<std::uint64_t> ranges,
                    std::uint64_t n) {
    if ((d.flags & IDXD_OP_FLAG_BOF) == 0) return;
    for (std::uint64_t a : ranges) ResolveAll(a, n);
  }

  // A move with dst above an overlapping src runs from the end, so a fault reports the bytes
  // done at the end (result 1).
  Outcome Move(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t s = d.src_addr, t = d.dst_addr;
    if ((d.flags & IDXD_OP_FLAG_BOF) != 0) counters.faults_blocked += !fault_pages.empty();
    ResolveFirst(d, {s, t}, n);
    if (!(t > s && t < s + n)) {
      std::uint64_t fs = FirstFault(s, n), ft = FirstFault(t, n);
      std::uint64_t f = std::min(fs, ft);
      std::memmove(Ptr(t), Ptr(s), f);
      if (f < n) return Fault({}, f, fs <= ft ? s + f : t + f, fs > ft);
      return Done(n);
    }
    std::uint64_t es = LastFaultEnd(s, n), et = LastFaultEnd(t, n);
    std::uint64_t e = std::max(es, et);  // bytes [e, n) can be moved from the end
    std::memmove(Ptr(t + e), Ptr(s + e), n - e);
    if (e > 0) return Fault({}, n - e, es >= et ? s + e - 1 : t + e - 1, es < et, true);
    return Done(n);
  }

  Outcome Fill(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t t = d.dst_addr;
    ResolveFirst(d, {t}, n);
    std::uint64_t f = FirstFault(t, n);
    auto* out = Ptr<unsigned char>(t);
    for (std::uint64_t i = 0; i < f; ++i) {
      out[i] = static_cast<unsigned char>(d.pattern >> (8 * (i % 8)));
    }
    if (f < n) return Fault({}, f, t + f, true);
    return Done(n);
  }

  // Different: result 1 and bytes_completed the offset of the first difference.
  Outcome Compare(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t a = d.src_addr, b = d.src2_addr;
    ResolveFirst(d, {a, b}, n);
    std::uint64_t fa = FirstFault(a, n), fb = FirstFault(b, n);
    std::uint64_t f = std::min(fa, fb);
    const auto* x = Ptr<const unsigned char>(a);
    const auto* y = Ptr<const unsigned char>(b);
    for (std::uint64_t i = 0; i < f; ++i) {
      if (x[i] != y[i]) {
        Outcome o;
        o.result = 1;
        o.bytes_completed = static_cast<std::uint32_t>(i);
        return o;
      }
    }
    if (f < n) return Fault({}, f, fa <= fb ? a + f : b + f, false);
    return Done(n);
  }

  // The pattern is compared in 8-byte words; a difference reports the word that differs (the
  // engine finds the byte, so a device reporting the byte works as well).
  Outcome CompareValue(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t a = d.src_addr;
    ResolveFirst(d, {a}, n);
    std::uint64_t f = FirstFault(a, n);
    const auto* x = Ptr<const unsigned char>(a);
    for (std::uint64_t i = 0; i < f; ++i) {
      if (x[i] != static_cast<unsigned char>(d.comp_pattern >> (8 * (i % 8)))) {
        Outcome o;
        o.result = 1;
        o.bytes_completed = static_cast<std::uint32_t>(i & ~std::uint64_t{7});
        return o;
      }
    }
    if (f < n) return Fault({}, f, a + f, false);
    return Done(n);
  }

  Outcome Dualcast(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t s = d.src_addr, t = d.dst_addr, t2 = d.dest2;
    if ((t & 0xfff) != (t2 & 0xfff)) {
      Outcome o;
      o.status = DSA_COMP_DCAST_ERR;  // destinations must share bits 11:0
      return o;
    }
    ResolveFirst(d, {s, t, t2}, n);
    std::uint64_t fs = FirstFault(s, n), ft = FirstFault(t, n), ft2 = FirstFault(t2, n);
    std::uint64_t f = std::min({fs, ft, ft2});
    std::memcpy(Ptr(t), Ptr(s), f);
    std::memcpy(Ptr(t2), Ptr(s), f);
    if (f < n) {
      const bool on_src = fs == f;
      return Fault({}, f, on_src ? s + f : (ft == f ? t + f : t2 + f), !on_src);
    }
    return Done(n);
  }

  // Default flags: the seed and the result are inverted (standard CRC-32C), so the result of
  // a partial run is the seed to continue with.
  Outcome CrcGen(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t a = d.src_addr;
    ResolveFirst(d, {a}, n);
    std::uint64_t f = FirstFault(a, n);
    Outcome o = Done(n);
    o.crc = Crc32c(d.crc_seed, Ptr(a), f);
    if (f < n) return Fault(o, f, a + f, false);
    return o;
  }

  // The model's effect on the caches is the CPU's: flush the same lines.
  Outcome CacheFlush(const dsa_hw_desc& d, std::uint64_t n) {
    const std::uint64_t t = d.dst_addr;
    ResolveFirst(d, {t}, n);
    std::uint64_t f = FirstFault(t, n);
    const CoherenceSupport& cpu = GetCoherenceSupport();
    const bool keep = (d.flags & IDXD_OP_FLAG_CC) != 0;
    coherence::ApplyLines(keep ? cpu.write_back : cpu.invalidate, Ptr(t), f);
    coherence::CompleteNow();  // the device reports a flush once it has reached memory
    if (f < n) return Fault({}, f, t + f, false);
    return Done(n);
  }

  Outcome ExecuteData(const dsa_hw_desc& d) {
    Outcome o;
    // No-op and drain move no data: the transfer size is not theirs to check (a zero there
    // is what software writes).
    if (d.opcode == DSA_OPCODE_NOOP || d.opcode == DSA_OPCODE_DRAIN) return o;
    const std::uint64_t n = d.xfer_size;
    if (n == 0 || n > cfg.max_transfer_size) {
      o.status = DSA_COMP_XFER_ERANGE;
      return o;
    }
    if (!Translate(d, n, o)) return o;
    switch (d.opcode) {
      case DSA_OPCODE_MEMMOVE:
        return Move(d, n);
      case DSA_OPCODE_MEMFILL:
        return Fill(d, n);
      case DSA_OPCODE_COMPARE:
        return Compare(d, n);
      case DSA_OPCODE_COMPVAL:
        return CompareValue(d, n);
      case DSA_OPCODE_DUALCAST:
        return Dualcast(d, n);
      case DSA_OPCODE_CRCGEN:
        return CrcGen(d, n);
      case DSA_OPCODE_CFLUSH:
        return CacheFlush(d, n);
      default:
        // In op_cap but not modelled: say so rather than pretend.
        o.status = DSA_COMP_BAD_OPCODE;
        return o;
    }
  }

  void Write(const dsa_hw_desc& d, const Outcome& o) {
    if (!(d.flags & IDXD_OP_FLAG_CRAV)) return;
    if (o.status == DSA_COMP_SUCCESS && !(d.flags & IDXD_OP_FLAG_RCR)) return;
    auto* r = Ptr<dsa_completion_record>(d.completion_addr);
    r->result = o.result;
    r->bytes_completed = o.bytes_completed;
    r->fault_addr = o.fault_addr;
    if (d.opcode == DSA_OPCODE_CRCGEN) {
      r->crc_val = o.crc;
    } else {
      r->invalid_flags = o.invalid_flags;
    }
    dsa::PublishStatus(*r, o.status);
  }

  // Executes one non-batch descriptor and writes its record. Caller holds `mu`.
  Outcome ExecuteOne(const dsa_hw_desc& d, const DsaModelWqConfig& wq) {
    ++counters.executed;
    Outcome o = Validate(d, wq);
    if (o.status == DSA_COMP_SUCCESS && error_count > 0) {
      --error_count;
      ++counters.injected_errors;
      o.status = error_status;
    } else if (o.status == DSA_COMP_SUCCESS) {
      if (d.opcode == DSA_OPCODE_BATCH) {
        o.status = DSA_COMP_BAD_OPCODE;  // no batch inside a batch
      } else {
        o = ExecuteData(d);
      }
    }
    Write(d, o);
    return o;
  }

  Outcome ExecuteBatch(const dsa_hw_desc& b, const DsaModelWqConfig& wq) {
    Outcome o = Validate(b, wq);
    if (o.status != DSA_COMP_SUCCESS) {
      Write(b, o);
      return o;
    }
    ++counters.batches;
    if (b.desc_count < 2 || b.desc_count > cfg.max_batch_size) {
      o.status = DSA_COMP_DESC_CNT_ERANGE;
    } else if (b.desc_list_addr % 64 != 0) {
      o.status = DSA_COMP_DESCLIST_ALIGN;
    } else {
      const auto* list = Ptr<const dsa_hw_desc>(b.desc_list_addr);
      bool failed = false;
      std::uint32_t processed = 0;
      for (std::uint32_t i = 0; i < b.desc_count; ++i) {
        dsa_hw_desc d;
        std::memcpy(&d, &list[i], sizeof d);
        if ((d.flags & IDXD_OP_FLAG_FENCE) && failed) break;  // fence: abort after a failure
        Outcome m = ExecuteOne(d, wq);
        ++processed;
        if ((m.status & DSA_COMP_STATUS_MASK) != DSA_COMP_SUCCESS) failed = true;
      }
      o.status = failed ? DSA_COMP_BATCH_FAIL : DSA_COMP_SUCCESS;
      o.bytes_completed = processed;  // descs_completed shares the field
    }
    Write(b, o);
    return o;
  }

  // Caller holds `mu`: the model executes one descriptor at a time (it models semantics,
  // not speed); slowness is modelled by the engine delay, spent outside the lock.
  void Execute(const dsa_hw_desc& d, int wq) {
    if (d.opcode == DSA_OPCODE_BATCH) {
      ExecuteBatch(d, cfg.wqs[wq]);
    } else {
      ExecuteOne(d, cfg.wqs[wq]);
    }
  }

  void EngineLoop() {
    std::unique_lock lock(mu);
    std::size_t rr = 0;
    for (;;) {
      work_cv.wait(lock, [&] {
        return stopping || (!paused && std::any_of(queues.begin(), queues.end(),
                                                   [](const auto& q) { return !q.empty(); }));
      });
      if (stopping) return;
      int wq = -1;
      for (std::size_t k = 0; k < queues.size(); ++k) {
        std::size_t i = (rr + k) % queues.size();
        if (!queues[i].empty()) {
          wq = static_cast<int>(i);
          break;
        }
      }
      rr = static_cast<std::size_t>(wq) + 1;
      Queued q = queues[wq].front();
      queues[wq].pop_front();
      if (q.desc.opcode == DSA_OPCODE_DRAIN) {
        // Waits for every descriptor submitted before it (all popped already: FIFO).
        drain_cv.wait(lock, [&] { return executing == 0 || stopping; });
      }
      ++executing;
      if (std::uint32_t delay = delay_ns.load(std::memory_order_relaxed); delay != 0) {
        lock.unlock();  // a slow engine: the portal keeps accepting (and refusing) meanwhile
        auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(delay);
        while (std::chrono::steady_clock::now() < until) CpuRelax();
        lock.lock();
      }
      Execute(q.desc, wq);
      --executing;
      --occupancy[wq];
      drain_cv.notify_all();
    }
  }
};

Result<std::shared_ptr<DsaDeviceModel>> DsaDeviceModel::Create(const DsaModelConfig& config) {
  if (config.wqs.empty())
    return Status::InvalidArgument("DSA model without work queues: give at least one");
  for (std::size_t i = 0; i < config.wqs.size(); ++i) {
    if (config.wqs[i].size == 0 || config.wqs[i].size > 128) {
      return Status::InvalidArgument(
          fmt::format("DSA model WQ {} has size {}: use 1..128", i, config.wqs[i].size));
    }
  }
  if (!config.instant && (config.engines < 1 || config.engines > 4)) {
    return Status::InvalidArgument(
        fmt::format("DSA model with {} engines: a DSA has 1..4", config.engines));
  }
  if (config.max_batch_size < 2 || config.max_batch_size > 1024) {
    return Status::InvalidArgument(
        fmt::format("max_batch_size {}: use 2..1024", config.max_batch_size));
  }
  if (config.max_transfer_size == 0 || config.max_transfer_size > (std::uint64_t{1} << 31)) {
    return Status::InvalidArgument(
        fmt::format("max_transfer_size {}: use 1..2 GiB", config.max_transfer_size));
  }
  if (Status s = InstallFaultHandler(); !s.ok()) return s;  // address translation probes pages
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  impl->queues.resize(config.wqs.size());
  impl->occupancy.assign(config.wqs.size(), 0);
  impl->delay_ns = config.engine_delay_ns;
  std::shared_ptr<DsaDeviceModel> model(new DsaDeviceModel(std::move(impl)));
  if (!config.instant) model->impl_->StartEngines();
  RegisterForkAware(model->impl_.get());
  return model;
}

DsaDeviceModel::DsaDeviceModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DsaDeviceModel::~DsaDeviceModel() {
  UnregisterForkAware(impl_.get());
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->work_cv.notify_all();
  impl_->drain_cv.notify_all();
  for (std::thread& t : impl_->engines) t.join();
}

DsaEnqueueResult DsaDeviceModel::Enqueue(int wq, const void* descriptor) {
  Impl& m = *impl_;
  dsa_hw_desc d;
  std::memcpy(&d, descriptor, sizeof d);
  std::unique_lock lock(m.mu);
  if (m.restart_engines) {
    m.restart_engines = false;
    m.StartEngines();
  }
  if (wq < 0 || static_cast<std::size_t>(wq) >= m.queues.size()) {
    m.caller_errors.push_back(fmt::format("descriptor sent to WQ {}, which does not exist", wq));
    return DsaEnqueueResult::kAccepted;  // a posted write to nowhere: lost
  }
  const DsaModelWqConfig& c = m.cfg.wqs[wq];
  if (m.occupancy[wq] >= c.size) {
    if (c.shared) {
      ++m.counters.swq_retries;
      return DsaEnqueueResult::kRetry;
    }
    ++m.counters.dwq_overflows;
    m.caller_errors.push_back(fmt::format(
        "dedicated WQ {} overflowed: a {} descriptor was submitted with {} already in flight "
        "(size {}); the hardware drops it silently and it never completes",
        wq, dsa::OpcodeName(d.opcode), m.occupancy[wq], c.size));
    return DsaEnqueueResult::kAccepted;
  }
  ++m.counters.descriptors;
  if (m.cfg.instant) {
    m.Execute(d, wq);
    return DsaEnqueueResult::kAccepted;
  }
  ++m.occupancy[wq];
  m.queues[wq].push_back({d, m.next_seq++});
  lock.unlock();
  m.work_cv.notify_one();
  return DsaEnqueueResult::kAccepted;
}

void DsaDeviceModel::InjectPageFault(const void* addr) {
  std::lock_guard lock(impl_->mu);
  impl_->fault_pages.insert(Addr(addr) & ~(kPage - 1));
}

void DsaDeviceModel::InjectError(std::uint8_t status, int count) {
  std::lock_guard lock(impl_->mu);
  impl_->error_status = status;
  impl_->error_count = count;
}

void DsaDeviceModel::SetEngineDelay(std::uint32_t ns) { impl_->delay_ns = ns; }

void DsaDeviceModel::Pause() {
  std::lock_guard lock(impl_->mu);
  impl_->paused = true;
}

void DsaDeviceModel::Resume() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->paused = false;
  }
  impl_->work_cv.notify_all();
}

DsaDeviceModel::Stats DsaDeviceModel::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->counters;
}

std::vector<std::string> DsaDeviceModel::caller_errors() const {
  std::lock_guard lock(impl_->mu);
  return impl_->caller_errors;
}

const DsaModelConfig& DsaDeviceModel::config() const { return impl_->cfg; }

std::uint32_t DsaDeviceModel::occupancy(int wq) const {
  std::lock_guard lock(impl_->mu);
  return wq >= 0 && static_cast<std::size_t>(wq) < impl_->occupancy.size() ? impl_->occupancy[wq]
                                                                           : 0;
}

}  // namespace tierflow
