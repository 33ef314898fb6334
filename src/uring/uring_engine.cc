#include "tierflow/uring_engine.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tierflow/engine_impl.h"

namespace tierflow {

// --- MappedFile ------------------------------------------------------------------------------

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    close(fd);
    return Status::Invalid(
        fmt::format("{} is empty (or cannot be examined): nothing to map", path));
  }
  void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED)
    return Status::IoError(fmt::format("cannot map {}: {}", path, std::strerror(err)));
  MappedFile m;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = static_cast<std::size_t>(st.st_size);
  m.path_ = path;
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}
MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}
MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, size_);
}

// --- the engine ------------------------------------------------------------------------------

namespace {

struct RegisteredFile {
  std::string path;
  std::uintptr_t base = 0;
  std::size_t length = 0;
  int fd = -1;               // buffered
  int direct_fd = -1;        // O_DIRECT, or -1 where the file system refuses it
  std::size_t align = 4096;  // direct I/O alignment of offsets, lengths and memory
  ~RegisteredFile() {
    if (fd >= 0) close(fd);
    if (direct_fd >= 0) close(direct_fd);
  }
};

// One read: a part of an operation.
struct Read {
  OpRef state;
  std::shared_ptr<RegisteredFile> file;  // keeps the descriptors open while in flight
  char* dst = nullptr;
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
  std::uint32_t done = 0;  // bytes read so far (short reads continue)
  bool direct = false;
};

constexpr std::uint64_t kWakeUp = 0;  // user_data of the NOP that stops the completion thread

}  // namespace

struct [[gnu::visibility("hidden")]] IoUringEngine::Impl {
  IoUringEngineOptions opts;
  EngineCapabilities caps;
  io_uring ring{};

  mutable std::shared_mutex files_mu;
  std::map<std::uintptr_t, std::shared_ptr<RegisteredFile>> files;  // by base

  mutable std::mutex sq_mu;   // the submission queue and `pending`
  std::deque<Read*> pending;  // waiting for a free slot (queue_depth in flight at most)
  unsigned in_flight = 0;     // under sq_mu
  std::atomic<bool> stopping{false};
  std::thread reaper;

  // The engine's common counters (Engine::counters); its own ones below. A piece is a read
  // of at most max_read_bytes (its continuations after short reads are the same piece).
  EngineCounters* counters = nullptr;
  std::atomic<std::uint64_t> reads{0}, direct_reads{0}, short_reads{0};

  std::shared_ptr<RegisteredFile> FileOf(std::uintptr_t p, std::size_t n) const {
    std::shared_lock lock(files_mu);
    auto it = files.upper_bound(p);
    if (it == files.begin()) return nullptr;
    --it;
    const RegisteredFile& f = *it->second;
    if (p < f.base || p - f.base > f.length || n > f.length - (p - f.base)) return nullptr;
    return it->second;
  }

  // Puts reads into the ring while slots are free. Caller holds sq_mu.
  void PumpLocked() {
    bool any = false;
    while (in_flight < opts.queue_depth && !pending.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (sqe == nullptr) break;
      Read* r = pending.front();
      pending.pop_front();
      const int fd = r->direct ? r->file->direct_fd : r->file->fd;
      io_uring_prep_read(sqe, fd, r->dst + r->done, r->len - r->done, r->offset + r->done);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(r));
      ++in_flight;
      reads.fetch_add(1, std::memory_order_relaxed);
      if (r->direct) direct_reads.fetch_add(1, std::memory_order_relaxed);
      any = true;
    }
    if (any) io_uring_submit(&ring);
  }

  void Finish(Read * r, StatusCode code, std::string message) {
    OpRef s = r->state;
    const std::uint64_t done = r->done;
    delete r;
    counters->pieces_completed.fetch_add(1, std::memory_order_relaxed);
    counters->in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (code == StatusCode::kOk) {
      counters->bytes_completed.fetch_add(done, std::memory_order_relaxed);
      s.CompletePart(done);
    } else {
      counters->pieces_failed.fetch_add(1, std::memory_order_relaxed);
      s.FailPart(done, code, std::move(message));
    }
  }

  // A completion: done, continued, retried without O_DIRECT, or failed.
  void Complete(Read * r, int res) {
    if (res < 0) {
      if (r->direct && res == -EINVAL) {
        r->direct = false;  // the alignment the file system reported was not enough: buffered
        std::lock_guard lock(sq_mu);
        pending.push_back(r);
        return;
      }
      return Finish(r, StatusCode::kIoError,
                    fmt::format("reading {} at offset {} ({} bytes) failed: {}", r->file->path,
                                r->offset + r->done, r->len - r->done, std::strerror(-res)));
    }
    if (res == 0) {
      return Finish(r, StatusCode::kIoError,
                    fmt::format("{} ends at offset {}, before its mapping does ({} bytes): the "
                                "file was truncated after it was registered",
                                r->file->path, r->offset + r->done, r->file->length));
    }
    r->done += static_cast<std::uint32_t>(res);
    if (r->done < r->len) {
      short_reads.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(sq_mu);
      pending.push_back(r);
      return;
    }
    Finish(r, StatusCode::kOk, {});
  }

  void ReaperLoop() {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) {
        if (stopping.load()) return;
        continue;
      }
      const std::uint64_t data = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (data == kWakeUp) {
        if (stopping.load()) return;
        continue;
      }
      {
        std::lock_guard lock(sq_mu);
        --in_flight;
      }
      Complete(reinterpret_cast<Read*>(data), res);
      std::lock_guard lock(sq_mu);
      PumpLocked();
    }
  }
};

Result<std::unique_ptr<IoUringEngine>> IoUringEngine::Create(const IoUringEngineOptions& options) {
  if (options.queue_depth == 0 || options.queue_depth > 4096) {
    return Status::Invalid(
        fmt::format("io_uring queue depth {}: use 1..4096", options.queue_depth));
  }
  if (options.max_read_bytes == 0 || options.max_read_bytes % 4096 != 0 ||
      options.max_read_bytes > (std::size_t{1} << 30)) {
    return Status::Invalid(fmt::format("io_uring read size {}: use a multiple of 4 KiB up to 1 GiB",
                                       options.max_read_bytes));
  }
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  // One extra entry for the wake-up NOP.
  if (int rc = io_uring_queue_init(options.queue_depth + 1, &impl->ring, 0); rc < 0) {
    return Status::Unsupported(fmt::format(
        "io_uring is not available: {} (Linux 5.1 or later, and not blocked by seccomp or "
        "/proc/sys/kernel/io_uring_disabled)",
        std::strerror(-rc)));
  }
  EngineCapabilities& c = impl->caps;
  c.name = "io_uring";
  c.ops = OpBit(OpKind::kCopy);
  c.max_op_bytes = std::uint64_t{1} << 40;
  c.max_batch = 4096;
  c.preferred_min_bytes = 64 * 1024;
  c.preferred_chunk_bytes = options.max_read_bytes;
  c.node = -1;
  c.copies_memory = false;
  std::unique_ptr<IoUringEngine> e(new IoUringEngine(std::move(impl)));
  Impl* raw = e->impl_.get();
  raw->reaper = std::thread([raw] { raw->ReaperLoop(); });
  return e;
}

IoUringEngine::IoUringEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->counters = &counters();
}

IoUringEngine::~IoUringEngine() {
  Impl& m = *impl_;
  m.stopping.store(true);
  // Reads not submitted yet are cancelled — also continuations of short reads and retries
  // that the reaper queues while we wait. Reads in flight write into their destinations:
  // wait for them, then stop the reaper.
  auto cancel_pending = [&m] {
    std::deque<Read*> dropped;
    {
      std::lock_guard lock(m.sq_mu);
      dropped.swap(m.pending);
    }
    for (Read* r : dropped) {
      m.counters->pieces_cancelled.fetch_add(1, std::memory_order_relaxed);
      m.counters->in_flight.fetch_sub(1, std::memory_order_relaxed);
      OpRef s = r->state;
      const std::uint64_t done = r->done;
      delete r;
      s.CompletePart(done, StatusCode::kCancelled,
                     "the io_uring engine was destroyed before this read was submitted");
    }
  };
  for (;;) {
    cancel_pending();
    {
      std::lock_guard lock(m.sq_mu);
      if (m.in_flight == 0 && m.pending.empty()) {
        io_uring_sqe* sqe = io_uring_get_sqe(&m.ring);
        if (sqe != nullptr) {
          io_uring_prep_nop(sqe);
          io_uring_sqe_set_data64(sqe, kWakeUp);
          io_uring_submit(&m.ring);
          break;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  m.reaper.join();
  io_uring_queue_exit(&m.ring);
}

Status IoUringEngine::RegisterFile(const MappedFile& file) {
  return RegisterFile(file.path(), file.data(), file.size());
}

Status IoUringEngine::RegisterFile(const std::string& path, const void* base, std::size_t length) {
  if (base == nullptr || length == 0) {
    return Status::Invalid("RegisterFile needs the mapping's address and a length above 0");
  }
  auto f = std::make_shared<RegisteredFile>();
  f->path = path;
  f->base = reinterpret_cast<std::uintptr_t>(base);
  f->length = length;
  f->fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd < 0)
    return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(f->fd, &st) != 0)
    return Status::IoError(fmt::format("cannot examine {}: {}", path, std::strerror(errno)));
  if (static_cast<std::uint64_t>(st.st_size) < length) {
    return Status::Invalid(
        fmt::format("{} has {} bytes, fewer than the {} registered: a short "
                    "column file?",
                    path, st.st_size, length));
  }
  if (impl_->opts.direct) {
    f->direct_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);  // tmpfs refuses
    struct statx sx {};
    if (f->direct_fd >= 0 && statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN) != 0 && sx.stx_dio_offset_align != 0) {
      f->align = std::max<std::size_t>(sx.stx_dio_offset_align, sx.stx_dio_mem_align);
    }
  }
  std::unique_lock lock(impl_->files_mu);
  auto next = impl_->files.lower_bound(f->base);
  if (next != impl_->files.end() && next->first < f->base + length) {
    return Status::Invalid(
        fmt::format("{} overlaps the registered file {}", path, next->second->path));
  }
  if (next != impl_->files.begin()) {
    const RegisteredFile& prev = *std::prev(next)->second;
    if (prev.base + prev.length > f->base) {
      return Status::Invalid(fmt::format("{} overlaps the registered file {}", path, prev.path));
    }
  }
  impl_->files.emplace(f->base, std::move(f));
  return Status::Ok();
}

void IoUringEngine::UnregisterFile(const void* base) {
  std::unique_lock lock(impl_->files_mu);
  impl_->files.erase(reinterpret_cast<std::uintptr_t>(base));
}

bool IoUringEngine::Covers(const void* p, std::size_t n) const {
  return impl_->FileOf(reinterpret_cast<std::uintptr_t>(p), n) != nullptr;
}

const EngineCapabilities& IoUringEngine::capabilities() const { return impl_->caps; }

EngineQueue IoUringEngine::queue() const {
  std::lock_guard lock(impl_->sq_mu);
  return {impl_->opts.queue_depth, impl_->pending.size()};
}

IoUringEngineStats IoUringEngine::stats() const {
  const Impl& m = *impl_;
  IoUringEngineStats s;
  s.ops = counters().ops_submitted.load(std::memory_order_relaxed);
  s.bytes = counters().bytes_completed.load(std::memory_order_relaxed);
  s.reads = m.reads.load(std::memory_order_relaxed);
  s.direct_reads = m.direct_reads.load(std::memory_order_relaxed);
  s.short_reads = m.short_reads.load(std::memory_order_relaxed);
  s.errors = counters().pieces_failed.load(std::memory_order_relaxed);
  return s;
}

Status IoUringEngine::CheckOperation(const Operation& op) const {
  if (!Covers(op.src, op.size)) {
    return Status::Invalid(fmt::format(
        "io_uring copy source [{}, +{}) is not inside a file registered with this engine: "
        "RegisterFile the file's mapping first (memory-to-memory copies belong to the CPU or DSA "
        "engine)",
        op.src, op.size));
  }
  return Status::Ok();
}

Status IoUringEngine::Enqueue(std::span<const Operation> ops, Submission& submission) {
  Impl& m = *impl_;
  if (m.stopping.load(std::memory_order_relaxed)) {
    return Status(StatusCode::kCancelled, "the io_uring engine is being destroyed");
  }
  OpRef state = submission.op();
  std::vector<Read*> reads;
  for (const Operation& op : ops) {
    const auto p = reinterpret_cast<std::uintptr_t>(op.src);
    std::shared_ptr<RegisteredFile> f = m.FileOf(p, op.size);
    if (f == nullptr) {
      for (Read* r : reads) delete r;
      return Status::Invalid("io_uring copy source is no longer registered (UnregisterFile)");
    }
    const std::uint64_t offset = p - f->base;
    char* dst = static_cast<char*>(op.dst);
    const std::size_t a = f->align;
    // Direct I/O needs offset, length and memory aligned: the aligned middle goes direct when
    // destination and offset share their misalignment; the head and tail go buffered.
    std::size_t head = op.size, middle = 0;
    if (f->direct_fd >= 0 && (offset % a) == (reinterpret_cast<std::uintptr_t>(dst) % a)) {
      head = std::min<std::size_t>(op.size, (a - offset % a) % a);
      middle = (op.size - head) / a * a;
    }
    auto add = [&](std::uint64_t off, std::size_t len, bool direct) {
      for (std::size_t done = 0; done < len; done += m.opts.max_read_bytes) {
        auto* r = new Read;
        r->state = state;
        r->file = f;
        r->offset = offset + off + done;
        r->dst = dst + off + done;
        r->len = static_cast<std::uint32_t>(std::min(m.opts.max_read_bytes, len - done));
        r->direct = direct;
        reads.push_back(r);
      }
    };
    if (head != 0) add(0, head, false);
    if (middle != 0) add(head, middle, true);
    if (head + middle < op.size) add(head + middle, op.size - head - middle, false);
  }
  submission.AddParts(static_cast<std::uint32_t>(reads.size()));
  m.counters->in_flight.fetch_add(reads.size(), std::memory_order_relaxed);
  std::lock_guard lock(m.sq_mu);
  for (Read* r : reads) m.pending.push_back(r);
  m.PumpLocked();
  return Status::Ok();
}

}  // namespace tierflow
