// SPDX-License-Identifier: Apache-2.0
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
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tierflow/engine_module.h"

namespace tierflow {

// --- MappedFile ------------------------------------------------------------------------------

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  Result<MappedFile> m = Map(fd, path);
  close(fd);
  return m;
}

Result<MappedFile> MappedFile::Map(int fd, const std::string& name) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0 || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(fmt::format(
        "{} is empty, not a regular file, or cannot be examined: nothing to map", name));
  }
  MappedFile m;
  m.fd_ = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (m.fd_ < 0) return Status::IoError(fmt::format("cannot keep {}: {}", name, strerror(errno)));
  void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return Status::IoError(fmt::format("cannot map {}: {}", name, std::strerror(errno)));
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = static_cast<std::size_t>(st.st_size);
  m.path_ = name;
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)) {}
MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, size_);
    if (fd_ >= 0) close(fd_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}
MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
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
  bool writable = false;
  void* reservation = nullptr;  // the address range OpenFile reserved, unmapped with the file
  ~RegisteredFile() {
    if (fd >= 0) close(fd);
    if (direct_fd >= 0) close(direct_fd);
    if (reservation != nullptr) munmap(reservation, length);
  }
};

enum class PieceKind : std::uint8_t { kRead, kWrite, kSync };

// One piece of an operation: a read or write of at most max_read_bytes (continued after short
// transfers as the same piece), or a sync.
struct Piece {
  OpRef state;
  std::shared_ptr<RegisteredFile> file;  // keeps the descriptors open while in flight
  char* mem = nullptr;                   // destination of a read, source of a write
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
  std::uint32_t done = 0;  // bytes transferred so far
  bool direct = false;
  PieceKind kind = PieceKind::kRead;
};

// A file-to-file piece, run with copy_file_range on the copier thread.
struct FileCopy {
  OpRef state;
  std::shared_ptr<RegisteredFile> src, dst;
  std::uint64_t src_offset = 0, dst_offset = 0, len = 0;
};

constexpr std::uint64_t kWakeUp = 0;  // user_data of the NOP that stops the completion thread

// Direct writes cover whole pages even where the file system takes 512-byte ones: a buffered
// write of the rest of a page that a direct write also touched would write the page back whole
// later, possibly with bytes read before the direct write landed (lost data, seen in the merge
// of `tierflow sort`, whose parts meet at unaligned offsets).
std::size_t WriteAlignment(const RegisteredFile& f) {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return std::max(f.align, page);
}

std::string Verb(PieceKind k) {
  return k == PieceKind::kRead ? "reading" : k == PieceKind::kWrite ? "writing" : "syncing";
}

}  // namespace

struct [[gnu::visibility("hidden")]] IoUringEngine::Impl {
  IoUringEngineOptions opts;
  EngineCapabilities caps;
  io_uring ring{};

  mutable std::shared_mutex files_mu;
  std::map<std::uintptr_t, std::shared_ptr<RegisteredFile>> files;  // by base

  mutable std::mutex sq_mu;    // the submission queue and `pending`
  std::deque<Piece*> pending;  // waiting for a free slot (queue_depth in flight at most)
  unsigned in_flight = 0;      // under sq_mu
  std::atomic<bool> stopping{false};
  std::thread reaper;

  std::mutex copy_mu;  // the copier's queue
  std::condition_variable copy_cv;
  std::deque<FileCopy*> copies;
  bool copier_stop = false;
  std::thread copier;

  // The engine's common counters (Engine::counters); its own ones below.
  EngineCounters* counters = nullptr;
  std::atomic<std::uint64_t> reads{0}, direct_reads{0}, short_reads{0};
  std::atomic<std::uint64_t> writes{0}, direct_writes{0}, short_writes{0}, syncs{0};
  std::atomic<std::uint64_t> file_copies{0};

  std::shared_ptr<RegisteredFile> FileOf(std::uintptr_t p, std::size_t n) const {
    std::shared_lock lock(files_mu);
    auto it = files.upper_bound(p);
    if (it == files.begin()) return nullptr;
    --it;
    const RegisteredFile& f = *it->second;
    if (p < f.base || p - f.base > f.length || n > f.length - (p - f.base)) return nullptr;
    return it->second;
  }
  std::shared_ptr<RegisteredFile> FileOf(const void* p, std::size_t n) const {
    return FileOf(reinterpret_cast<std::uintptr_t>(p), n);
  }

  void Prepare(io_uring_sqe * sqe, Piece * r) {
    const int fd = r->direct ? r->file->direct_fd : r->file->fd;
    const std::uint64_t off = r->offset + r->done;
    if (r->kind == PieceKind::kRead) {
      io_uring_prep_read(sqe, fd, r->mem + r->done, r->len - r->done, off);
      reads.fetch_add(1, std::memory_order_relaxed);
      if (r->direct) direct_reads.fetch_add(1, std::memory_order_relaxed);
    } else if (r->kind == PieceKind::kWrite) {
      io_uring_prep_write(sqe, fd, r->mem + r->done, r->len - r->done, off);
      writes.fetch_add(1, std::memory_order_relaxed);
      if (r->direct) direct_writes.fetch_add(1, std::memory_order_relaxed);
    } else {
      io_uring_prep_fsync(sqe, r->file->fd, IORING_FSYNC_DATASYNC);
      syncs.fetch_add(1, std::memory_order_relaxed);
    }
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(r));
  }

  // Puts pieces into the ring while slots are free. Caller holds sq_mu.
  void PumpLocked() {
    bool any = false;
    while (in_flight < opts.queue_depth && !pending.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (sqe == nullptr) break;
      Piece* r = pending.front();
      pending.pop_front();
      Prepare(sqe, r);
      ++in_flight;
      any = true;
    }
    if (any) io_uring_submit(&ring);
  }

  void Requeue(Piece * r) {
    std::lock_guard lock(sq_mu);
    pending.push_back(r);
  }

  void Finish(OpRef s, std::uint64_t done, StatusCode code, std::string message) {
    counters->Add(EngineCounters::kPiecesCompleted);
    counters->Sub(EngineCounters::kInFlight);
    if (code == StatusCode::kOk) {
      counters->Add(EngineCounters::kBytesCompleted, done);
      s.CompletePart(done);
    } else {
      counters->Add(EngineCounters::kPiecesFailed);
      s.FailPart(done, code, std::move(message));
    }
  }
  void Finish(Piece * r, StatusCode code, std::string message) {
    OpRef s = r->state;
    const std::uint64_t done = r->done;
    delete r;
    Finish(s, done, code, std::move(message));
  }

  std::string Failure(const Piece* r, int err) const {
    if (r->kind == PieceKind::kSync) {
      return fmt::format("syncing {} (fdatasync) failed: {}", r->file->path, std::strerror(err));
    }
    return fmt::format("{} {} at offset {} ({} bytes) failed: {}", Verb(r->kind), r->file->path,
                       r->offset + r->done, r->len - r->done, std::strerror(err));
  }

  // A transfer that moved nothing: a read at the end of the file, a write that made no progress.
  std::string NoProgress(const Piece* r) const {
    if (r->kind == PieceKind::kRead) {
      return fmt::format(
          "{} ends at offset {}, before the range read does: the file is shorter "
          "than expected (truncated while in use?)",
          r->file->path, r->offset + r->done);
    }
    return fmt::format(
        "writing {} at offset {} made no progress ({} bytes left): is the disk "
        "full?",
        r->file->path, r->offset + r->done, r->len - r->done);
  }

  // A completion: done, continued, retried without O_DIRECT, or failed.
  void Complete(Piece * r, int res) {
    if (res < 0) {
      if (r->direct && res == -EINVAL) {
        r->direct = false;  // the alignment the file system reported was not enough: buffered
        return Requeue(r);
      }
      return Finish(r, StatusCode::kIoError, Failure(r, -res));
    }
    if (r->kind == PieceKind::kSync) return Finish(r, StatusCode::kOk, {});
    if (res == 0) return Finish(r, StatusCode::kIoError, NoProgress(r));
    r->done += static_cast<std::uint32_t>(res);
    if (r->done < r->len) {
      auto& counter = r->kind == PieceKind::kRead ? short_reads : short_writes;
      counter.fetch_add(1, std::memory_order_relaxed);
      const std::size_t a =
          r->kind == PieceKind::kWrite ? WriteAlignment(*r->file) : r->file->align;
      r->direct = r->direct && r->done % a == 0;
      return Requeue(r);
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
      Complete(reinterpret_cast<Piece*>(data), res);
      std::lock_guard lock(sq_mu);
      PumpLocked();
    }
  }

  // --- file to file --------------------------------------------------------------------------

  void RunCopy(FileCopy * c) {
    std::uint64_t done = 0;
    std::string error;
    while (done < c->len) {
      loff_t in = static_cast<loff_t>(c->src_offset + done);
      loff_t out = static_cast<loff_t>(c->dst_offset + done);
      file_copies.fetch_add(1, std::memory_order_relaxed);
      const ssize_t n = copy_file_range(c->src->fd, &in, c->dst->fd, &out, c->len - done, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = fmt::format("copying {} at offset {} to {} at offset {} failed: {}", c->src->path,
                            c->src_offset + done, c->dst->path, c->dst_offset + done,
                            n == 0 ? "the source file ends there" : std::strerror(errno));
        break;
      }
      done += static_cast<std::uint64_t>(n);
    }
    OpRef s = c->state;
    delete c;
    Finish(s, done, error.empty() ? StatusCode::kOk : StatusCode::kIoError, std::move(error));
  }

  void CopierLoop() {
    std::unique_lock lock(copy_mu);
    for (;;) {
      copy_cv.wait(lock, [this] { return copier_stop || !copies.empty(); });
      if (copies.empty()) return;  // stopping, and nothing left
      FileCopy* c = copies.front();
      copies.pop_front();
      lock.unlock();
      RunCopy(c);
      lock.lock();
    }
  }

  // --- splitting operations into pieces ------------------------------------------------------

  // Direct I/O needs offset, length and memory aligned: the aligned middle goes direct when
  // memory and offset share their misalignment; the head and tail go buffered.
  void AddTransfer(OpRef state, const std::shared_ptr<RegisteredFile>& f, PieceKind kind,
                   std::uint64_t offset, char* mem, std::size_t size, std::vector<Piece*>& out) {
    const std::size_t a = kind == PieceKind::kWrite ? WriteAlignment(*f) : f->align;
    std::size_t head = size, middle = 0;
    if (f->direct_fd >= 0 && (offset % a) == (reinterpret_cast<std::uintptr_t>(mem) % a)) {
      head = std::min<std::size_t>(size, (a - offset % a) % a);
      middle = (size - head) / a * a;
    }
    auto add = [&](std::uint64_t off, std::size_t len, bool direct) {
      for (std::size_t done = 0; done < len; done += opts.max_read_bytes) {
        auto* r = new Piece;
        r->state = state;
        r->file = f;
        r->kind = kind;
        r->offset = offset + off + done;
        r->mem = mem + off + done;
        r->len = static_cast<std::uint32_t>(std::min(opts.max_read_bytes, len - done));
        r->direct = direct;
        out.push_back(r);
      }
    };
    if (head != 0) add(0, head, false);
    if (middle != 0) add(head, middle, true);
    if (head + middle < size) add(head + middle, size - head - middle, false);
  }

  void AddFileCopy(OpRef state, const std::shared_ptr<RegisteredFile>& src,
                   const std::shared_ptr<RegisteredFile>& dst, const Operation& op,
                   std::vector<FileCopy*>& out) {
    const std::uint64_t so = reinterpret_cast<std::uintptr_t>(op.src) - src->base;
    const std::uint64_t d = reinterpret_cast<std::uintptr_t>(op.dst) - dst->base;
    for (std::uint64_t done = 0; done < op.size; done += opts.max_read_bytes) {
      auto* c = new FileCopy{
          state,     src,      dst,
          so + done, d + done, std::min<std::uint64_t>(opts.max_read_bytes, op.size - done)};
      out.push_back(c);
    }
  }

  // Splits one operation. Errors: a file unregistered since validation.
  Status Split(OpRef state, const Operation& op, std::vector<Piece*>& pieces,
               std::vector<FileCopy*>& copies_out) {
    std::shared_ptr<RegisteredFile> src = op.src ? FileOf(op.src, op.size) : nullptr;
    std::shared_ptr<RegisteredFile> dst = op.dst ? FileOf(op.dst, op.size) : nullptr;
    if (op.kind == OpKind::kWriteBack) {
      if (dst == nullptr) return Gone();
      auto* r = new Piece;
      r->state = state;
      r->file = dst;
      r->kind = PieceKind::kSync;
      pieces.push_back(r);
      return Status::Ok();
    }
    if (src != nullptr && dst != nullptr) {
      AddFileCopy(state, src, dst, op, copies_out);
    } else if (src != nullptr) {
      AddTransfer(state, src, PieceKind::kRead,
                  reinterpret_cast<std::uintptr_t>(op.src) - src->base, static_cast<char*>(op.dst),
                  op.size, pieces);
    } else if (dst != nullptr) {
      AddTransfer(state, dst, PieceKind::kWrite,
                  reinterpret_cast<std::uintptr_t>(op.dst) - dst->base,
                  static_cast<char*>(const_cast<void*>(op.src)), op.size, pieces);
    } else {
      return Gone();
    }
    return Status::Ok();
  }

  static Status Gone() {
    return Status::InvalidArgument(
        "the file of this io_uring operation is no longer registered "
        "(UnregisterFile or FileWindow::Close while submitting)");
  }
};

namespace {

// The one check of IoUringEngineOptions: every refusal of Create before the ring is made.
Status SanitizeOptions(const IoUringEngineOptions& options) {
  if (options.queue_depth == 0 || options.queue_depth > 4096) {
    return Status::InvalidArgument(
        fmt::format("io_uring queue depth {}: use 1..4096", options.queue_depth));
  }
  if (options.max_read_bytes == 0 || options.max_read_bytes % 4096 != 0 ||
      options.max_read_bytes > (std::size_t{1} << 30)) {
    return Status::InvalidArgument(fmt::format(
        "io_uring read size {}: use a multiple of 4 KiB up to 1 GiB", options.max_read_bytes));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<IoUringEngine>> IoUringEngine::Create(const IoUringEngineOptions& options) {
  if (Status s = SanitizeOptions(options); !s.ok()) return s;
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
  c.kind = EngineKind::kStorage;
  c.ops = OpBit(OpKind::kCopy) | OpBit(OpKind::kWriteBack);
  c.max_op_bytes = std::uint64_t{1} << 40;
  c.max_batch = 4096;
  c.preferred_min_bytes = 64 * 1024;
  c.preferred_chunk_bytes = options.max_read_bytes;
  c.node = -1;
  c.copies_memory = false;
  std::unique_ptr<IoUringEngine> e(new IoUringEngine(std::move(impl)));
  Impl* raw = e->impl_.get();
  raw->reaper = std::thread([raw] { raw->ReaperLoop(); });
  raw->copier = std::thread([raw] { raw->CopierLoop(); });
  return e;
}

IoUringEngine::IoUringEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->counters = &counters();
}

namespace {

void CancelPiece(EngineCounters& counters, OpRef s, std::uint64_t done) {
  counters.Add(EngineCounters::kPiecesCancelled);
  counters.Sub(EngineCounters::kInFlight);
  s.CompletePart(done, StatusCode::kCancelled,
                 "the io_uring engine was destroyed before this piece was submitted");
}

}  // namespace

IoUringEngine::~IoUringEngine() {
  Impl& m = *impl_;
  m.stopping.store(true);
  {
    // File copies not started are cancelled; the one running finishes.
    std::unique_lock lock(m.copy_mu);
    std::deque<FileCopy*> dropped;
    dropped.swap(m.copies);
    m.copier_stop = true;
    lock.unlock();
    m.copy_cv.notify_all();
    for (FileCopy* c : dropped) {
      OpRef s = c->state;
      delete c;
      CancelPiece(*m.counters, s, 0);
    }
  }
  m.copier.join();
  // Pieces not submitted yet are cancelled — also continuations and retries that the reaper
  // queues while we wait. Pieces in flight use their memory: wait for them, then stop the
  // reaper.
  auto cancel_pending = [&m] {
    std::deque<Piece*> dropped;
    {
      std::lock_guard lock(m.sq_mu);
      dropped.swap(m.pending);
    }
    for (Piece* r : dropped) {
      OpRef s = r->state;
      const std::uint64_t done = r->done;
      delete r;
      CancelPiece(*m.counters, s, done);
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
  return RegisterOpened(file.path(), file.fd_, file.data(), file.size());
}

namespace {

// The error of opening f.path as asked, with the fix.
Status OpenError(const RegisteredFile& f, int err) {
  std::string hint = err == EACCES || err == EROFS
                         ? (f.writable ? ": it cannot be written (permissions or a read-only "
                                         "file system): choose another destination"
                                       : ": check its permissions")
                     : err == ENOENT ? ": check the path"
                                     : "";
  return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                fmt::format("cannot open {}{}: {}{}", f.path, f.writable ? " for writing" : "",
                            std::strerror(err), hint));
}

// The path that opens the file behind `fd` again, never another file of the same name.
std::string ReopenPath(int fd) { return fmt::format("/proc/self/fd/{}", fd); }

// Opens the buffered descriptor (by path, or as the file behind `from` when it is not -1) and,
// where the file system allows, the O_DIRECT one through the buffered one, so both are the same
// file; learns the direct-I/O alignment.
Status OpenDescriptors(RegisteredFile& f, bool direct, int from = -1) {
  const int mode = f.writable ? O_RDWR : O_RDONLY;
  f.fd = open(from >= 0 ? ReopenPath(from).c_str() : f.path.c_str(), mode | O_CLOEXEC);
  if (f.fd < 0) return OpenError(f, errno);
  struct stat st {};
  if (fstat(f.fd, &st) != 0) {
    return Status::IoError(fmt::format("cannot examine {}: {}", f.path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("{} is not a regular file or block device", f.path));
  }
  if (!direct) return Status::Ok();
  f.direct_fd = open(ReopenPath(f.fd).c_str(), mode | O_CLOEXEC | O_DIRECT);  // tmpfs refuses
  struct statx sx {};
  if (f.direct_fd >= 0 && statx(f.fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
      (sx.stx_mask & STATX_DIOALIGN) != 0 && sx.stx_dio_offset_align != 0) {
    f.align = std::max<std::size_t>(sx.stx_dio_offset_align, sx.stx_dio_mem_align);
  }
  return Status::Ok();
}

std::uint64_t FileSize(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

}  // namespace

Status IoUringEngine::AddFile(std::shared_ptr<void> file) {
  auto f = std::static_pointer_cast<RegisteredFile>(std::move(file));
  std::unique_lock lock(impl_->files_mu);
  auto next = impl_->files.lower_bound(f->base);
  if (next != impl_->files.end() && next->first < f->base + f->length) {
    return Status::InvalidArgument(
        fmt::format("{} overlaps the registered file {}", f->path, next->second->path));
  }
  if (next != impl_->files.begin()) {
    const RegisteredFile& prev = *std::prev(next)->second;
    if (prev.base + prev.length > f->base) {
      return Status::InvalidArgument(
          fmt::format("{} overlaps the registered file {}", f->path, prev.path));
    }
  }
  impl_->files.emplace(f->base, std::move(f));
  return Status::Ok();
}

Status IoUringEngine::RegisterFile(const std::string& path, const void* base, std::size_t length) {
  return RegisterOpened(path, -1, base, length);
}

Status IoUringEngine::RegisterOpened(const std::string& path, int from, const void* base,
                                     std::size_t length) {
  if (base == nullptr || length == 0) {
    return Status::InvalidArgument("RegisterFile needs the mapping's address and a length above 0");
  }
  auto f = std::make_shared<RegisteredFile>();
  f->path = path;
  f->base = reinterpret_cast<std::uintptr_t>(base);
  f->length = length;
  if (Status s = OpenDescriptors(*f, impl_->opts.direct, from); !s.ok()) return s;
  if (const std::uint64_t size = FileSize(f->fd); size < length) {
    return Status::InvalidArgument(fmt::format(
        "{} has {} bytes, fewer than the {} registered: a short column file?", path, size, length));
  }
  return AddFile(std::move(f));
}

Result<FileWindow> IoUringEngine::OpenFile(const std::string& path,
                                           const FileOpenOptions& options) {
  return OpenWindow(path, -1, options);
}

Result<FileWindow> IoUringEngine::OpenDescriptor(int fd, const std::string& name,
                                                 const FileOpenOptions& options) {
  if (fd < 0)
    return Status::InvalidArgument(fmt::format("{}: no open descriptor (-1) to open", name));
  return OpenWindow(name, fd, options);
}

Result<FileWindow> IoUringEngine::OpenWindow(const std::string& path, int from,
                                             const FileOpenOptions& options) {
  auto f = std::make_shared<RegisteredFile>();
  f->path = path;
  f->writable = options.access == FileAccess::kReadWrite;
  if (Status s = OpenDescriptors(*f, impl_->opts.direct, from); !s.ok()) return s;
  const std::uint64_t size = FileSize(f->fd);
  std::uint64_t length = options.length;
  if (length == 0 && f->writable) {
    return Status::InvalidArgument(fmt::format(
        "opening {} for writing needs FileOpenOptions::length (how far writes may reach)", path));
  }
  if (length == 0) length = size;
  if (length == 0)
    return Status::InvalidArgument(fmt::format("{} is empty: nothing to read", path));
  if (!f->writable && length > size) {
    return Status::InvalidArgument(
        fmt::format("{} has {} bytes, fewer than the {} asked for: a range "
                    "beyond the end of the file",
                    path, size, length));
  }
  void* p = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Status::OutOfMemory(fmt::format("cannot reserve {} bytes of address space for {}: {}",
                                           length, path, std::strerror(errno)));
  }
  f->reservation = p;
  f->base = reinterpret_cast<std::uintptr_t>(p);
  f->length = length;
  if (Status s = AddFile(f); !s.ok()) return s;
  FileWindow w;
  w.engine_ = this;
  w.base_ = static_cast<std::byte*>(p);
  w.length_ = length;
  w.path_ = path;
  w.writable_ = f->writable;
  return w;
}

void IoUringEngine::UnregisterFile(const void* base) {
  std::unique_lock lock(impl_->files_mu);
  impl_->files.erase(reinterpret_cast<std::uintptr_t>(base));
}

bool IoUringEngine::Covers(const void* p, std::size_t n) const {
  return impl_->FileOf(p, n) != nullptr;
}

bool IoUringEngine::CoversWritable(const void* p, std::size_t n) const {
  std::shared_ptr<RegisteredFile> f = impl_->FileOf(p, n);
  return f != nullptr && f->writable;
}

std::size_t IoUringEngine::DirectAlignment(const void* p) const {
  std::shared_ptr<RegisteredFile> f = impl_->FileOf(p, 0);
  if (f == nullptr || f->direct_fd < 0) return 0;
  return f->writable ? WriteAlignment(*f) : f->align;
}

const EngineCapabilities& IoUringEngine::capabilities() const { return impl_->caps; }

EngineQueue IoUringEngine::queue() const {
  std::lock_guard lock(impl_->sq_mu);
  return {impl_->opts.queue_depth, impl_->pending.size()};
}

IoUringEngineStats IoUringEngine::ring_stats() const {
  const Impl& m = *impl_;
  auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  IoUringEngineStats s;
  s.ops = counters().Total(EngineCounters::kOpsSubmitted);
  s.bytes = counters().Total(EngineCounters::kBytesCompleted);
  s.reads = get(m.reads);
  s.direct_reads = get(m.direct_reads);
  s.short_reads = get(m.short_reads);
  s.writes = get(m.writes);
  s.direct_writes = get(m.direct_writes);
  s.short_writes = get(m.short_writes);
  s.syncs = get(m.syncs);
  s.file_copies = get(m.file_copies);
  s.errors = counters().Total(EngineCounters::kPiecesFailed);
  return s;
}

Status IoUringEngine::CheckOperation(const Operation& op) const {
  if (op.kind == OpKind::kWriteBack) {
    if (CoversWritable(op.dst, op.size)) return Status::Ok();
    return Status::InvalidArgument(fmt::format(
        "io_uring write-back (fdatasync) of [{}, +{}): the range is not inside a file opened "
        "for writing with this engine (OpenFile with FileAccess::kReadWrite)",
        op.dst, op.size));
  }
  const bool src_file = Covers(op.src, op.size);
  const bool dst_file = Covers(op.dst, op.size);
  if (dst_file && !CoversWritable(op.dst, op.size)) {
    return Status::InvalidArgument(
        fmt::format("io_uring copy destination [{}, +{}) is a file opened read-only: open it with "
                    "FileAccess::kReadWrite to write it",
                    op.dst, op.size));
  }
  if (!src_file && !dst_file) {
    return Status::InvalidArgument(fmt::format(
        "io_uring copy [{}, +{}) -> [{}, +{}) touches no file registered with this engine: "
        "RegisterFile/OpenFile the file first (memory-to-memory copies belong to the CPU or DSA "
        "engine)",
        op.src, op.size, op.dst, op.size));
  }
  return Status::Ok();
}

Status IoUringEngine::Enqueue(std::span<const Operation> ops, Submission& submission) {
  Impl& m = *impl_;
  if (m.stopping.load(std::memory_order_relaxed)) {
    return Status(StatusCode::kCancelled, "the io_uring engine is being destroyed");
  }
  OpRef state = submission.op();
  std::vector<Piece*> pieces;
  std::vector<FileCopy*> copies;
  for (const Operation& op : ops) {
    if (Status s = m.Split(state, op, pieces, copies); !s.ok()) {
      for (Piece* r : pieces) delete r;
      for (FileCopy* c : copies) delete c;
      return s;
    }
  }
  const std::size_t n = pieces.size() + copies.size();
  submission.AddParts(static_cast<std::uint32_t>(n));
  m.counters->Add(EngineCounters::kInFlight, n);
  if (!copies.empty()) {
    {
      std::lock_guard lock(m.copy_mu);
      for (FileCopy* c : copies) m.copies.push_back(c);
    }
    m.copy_cv.notify_one();
  }
  std::lock_guard lock(m.sq_mu);
  for (Piece* r : pieces) m.pending.push_back(r);
  m.PumpLocked();
  return Status::Ok();
}

// --- FileWindow ------------------------------------------------------------------------------

FileWindow::FileWindow(FileWindow&& o) noexcept
    : engine_(std::exchange(o.engine_, nullptr)),
      base_(std::exchange(o.base_, nullptr)),
      length_(std::exchange(o.length_, 0)),
      path_(std::move(o.path_)),
      writable_(o.writable_) {}

FileWindow& FileWindow::operator=(FileWindow&& o) noexcept {
  if (this != &o) {
    Close();
    engine_ = std::exchange(o.engine_, nullptr);
    base_ = std::exchange(o.base_, nullptr);
    length_ = std::exchange(o.length_, 0);
    path_ = std::move(o.path_);
    writable_ = o.writable_;
  }
  return *this;
}

FileWindow::~FileWindow() { Close(); }

// The reservation is unmapped when the last piece in flight lets go of the file.
void FileWindow::Close() {
  if (engine_ != nullptr) engine_->UnregisterFile(base_);
  engine_ = nullptr;
  base_ = nullptr;
  length_ = 0;
}

}  // namespace tierflow
