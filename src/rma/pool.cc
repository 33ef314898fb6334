// SPDX-License-Identifier: Apache-2.0
#include "rma/pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "rma/shared_segment.h"
#include "tierflow/coherence.h"

namespace tierflow::rma {

namespace {

constexpr std::uint64_t kMagic = 0x314c4f4f50465400;  // "\0TFPOOL1"
constexpr std::uint64_t kFormatting = 0x474e4954414d524f;
constexpr std::uint64_t kVersion = 1;
constexpr std::uint64_t kLockOffset = 64;
constexpr std::uint64_t kLeaseOffset = 4096;
constexpr std::uint64_t kRecordOffset = kLeaseOffset + 64 * Pool::kLeases;
constexpr std::uint32_t kHolderWords = Pool::kLeases / 64;
constexpr std::uint64_t kLow = (std::uint64_t{1} << 48) - 1;  // a token's bits in the lock word
static_assert(kRecordOffset + 64 * Pool::kRecords <= Pool::kMetadataBytes);

// Metadata words another process may change: invalidated before each read, written back after
// each change, so that they work where the hosts do not keep the pool coherent.
std::uint64_t Load(const std::atomic<std::uint64_t>& w) {
  (void)Invalidate(&w, sizeof(w));
  return w.load(std::memory_order_acquire);
}

// A word read under the allocator's lock, after Lock invalidated the tables once: every
// writer of the records holds the lock, so no line of them has changed since.
std::uint64_t Peek(const std::atomic<std::uint64_t>& w) {
  return w.load(std::memory_order_acquire);
}

void Store(std::atomic<std::uint64_t>& w, std::uint64_t v) {
  w.store(v, std::memory_order_release);
  (void)WriteBack(&w, sizeof(w));
}

bool Cas(std::atomic<std::uint64_t>& w, std::uint64_t expected, std::uint64_t desired) {
  (void)Invalidate(&w, sizeof(w));
  const bool ok = w.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  (void)WriteBack(&w, sizeof(w));
  return ok;
}

std::uint64_t NowMs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// A random nonzero word: tokens and generations nobody else picks.
std::uint64_t RandomWord() {
  std::uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
      v = static_cast<std::uint64_t>(NowMs()) * 0x9e3779b97f4a7c15ULL ^
          static_cast<std::uint64_t>(getpid());
    }
  }
  return v;
}

constexpr std::uint64_t kPage = 4096;
std::uint64_t PageUp(std::uint64_t n) { return (n + kPage - 1) / kPage * kPage; }

// The size of a character device from sysfs (a DAX device's), 0 when it has none.
std::uint64_t DeviceSize(const struct stat& st) {
  std::ifstream in(fmt::format("/sys/dev/char/{}:{}/size", major(st.st_rdev), minor(st.st_rdev)));
  std::uint64_t size = 0;
  in >> size;
  return in ? size : 0;
}

// The path as a pool may be: this user's, only theirs, a file or a device, large enough. An
// empty file may be one another process has just created by name: it gets 2 s to be sized.
Result<std::uint64_t> CheckFile(int fd, const std::string& path) {
  struct stat st {};
  for (int i = 0; i < 2000 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0; ++i) {
    usleep(1000);
  }
  if (fstat(fd, &st) != 0) {
    return Status::IoError(fmt::format("cannot examine the pool {}: {}", path, strerror(errno)));
  }
  if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} is neither a regular file nor a DAX device: give a file on memory every "
        "host maps, or the device",
        path));
  }
  if (st.st_uid != geteuid()) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} belongs to uid {}, not to this job's user (uid {}): every job of another "
        "user needs a pool of its own",
        path, st.st_uid, geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} has mode {:04o}: others than its owner could read or change the windows "
        "in it; make it 0600 (chmod 600 {})",
        path, st.st_mode & 07777, path));
  }
  const std::uint64_t size =
      S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : DeviceSize(st);
  if (size < Pool::kMinimumBytes) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} holds {} bytes, less than the {} a pool needs (2 MiB of metadata and room "
        "for windows): give a larger file or device",
        path, size, Pool::kMinimumBytes));
  }
  return size;
}

// A new pool file of `size` bytes appears at `path` whole, never empty or short: made unnamed
// in the directory (O_TMPFILE), sized, then linked there, which fails if another process linked
// its own first (that one is then opened). -1 with errno set when the directory cannot hold
// unnamed files; EEXIST when another process won.
int CreateWhole(const std::string& path, std::uint64_t size) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  const std::string self = fmt::format("/proc/self/fd/{}", fd);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// Opens the pool, creating a file of `create_size` bytes when nothing is at `path`.
Result<int> OpenFile(const std::string& path, std::uint64_t create_size) {
  int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    fd = CreateWhole(path, create_size);
    if (fd < 0 && errno != EEXIST) {
      // Where unnamed files are not supported: created by name, sized at once; an opener that
      // finds it still empty waits for the size (WaitForSize).
      fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0 && ftruncate(fd, static_cast<off_t>(create_size)) != 0) {
        const int e = errno;
        close(fd);
        unlink(path.c_str());  // made by this call a moment ago, empty
        return Status::IoError(fmt::format("cannot size the new pool {} to {} bytes: {}", path,
                                           create_size, strerror(e)));
      }
    }
    if (fd < 0 && errno == EEXIST) fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd >= 0) return fd;
  if (errno == ELOOP) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} is a symbolic link, which the library never follows: give the path of the "
        "file or device itself",
        path));
  }
  if (errno == EACCES) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} cannot be opened by this user ({}): it belongs to another user's job", path,
        strerror(errno)));
  }
  return Status::IoError(fmt::format("cannot open the pool {}: {}", path, strerror(errno)));
}

}  // namespace

struct Pool::Header {
  std::atomic<std::uint64_t> magic, version, id, size, leases, records, uid, unused;
};

struct alignas(64) Pool::Lease {
  std::atomic<std::uint64_t> token, beat, probe;
};

struct alignas(64) Pool::Record {
  std::atomic<std::uint64_t> generation, offset, size;
  std::atomic<std::uint64_t> holders[kHolderWords];
};
static_assert(sizeof(std::atomic<std::uint64_t>) == 8);

Pool::Header& Pool::header() const { return *reinterpret_cast<Header*>(base_); }
Pool::Lease& Pool::lease(std::uint32_t slot) const {
  return *reinterpret_cast<Lease*>(base_ + kLeaseOffset + 64 * std::uint64_t{slot});
}
Pool::Record& Pool::record(std::uint32_t index) const {
  return *reinterpret_cast<Record*>(base_ + kRecordOffset + 64 * std::uint64_t{index});
}

Result<std::shared_ptr<Pool>> Pool::Open(const std::string& path, const PoolOptions& options) {
  if (options.create_size < kMinimumBytes || options.lease_ms == 0) {
    return Status::InvalidArgument(fmt::format(
        "a pool is created with at least {} bytes and a lease of at least 1 ms", kMinimumBytes));
  }
  Result<int> fd = OpenFile(path, options.create_size);
  if (!fd.ok()) return fd.status();
  std::shared_ptr<Pool> pool(new Pool());
  pool->fd_ = *fd;
  pool->path_ = path;
  pool->lease_ms_ = options.lease_ms;
  Result<std::uint64_t> size = CheckFile(pool->fd_, path);
  if (!size.ok()) return size.status();
  if (Status s = pool->Map(pool->fd_, *size); !s.ok()) return s;
  if (Status s = pool->Format(*size); !s.ok()) return s;
  if (Status s = pool->CheckHeader(); !s.ok()) return s;
  if (Status s = pool->TakeLease(); !s.ok()) return s;
  pool->renewer_ = std::thread([p = pool.get()] { p->Renew(); });
  return pool;
}

Status Pool::Map(int fd, std::uint64_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    if (e == ENODEV || e == EINVAL) {
      return Status::Unsupported(fmt::format(
          "the pool {} is on a filesystem that cannot map it shared ({}): put it on memory "
          "every host maps (a DAX device, tmpfs, a DAX filesystem)",
          path_, strerror(e)));
    }
    return Status::IoError(
        fmt::format("cannot map the pool {} ({} bytes): {}", path_, size, strerror(e)));
  }
  base_ = static_cast<std::byte*>(p);
  size_ = size;
  return Status::Ok();
}

// A blank pool (its metadata all zeros) gets a header, by whoever claims its magic word first;
// the others wait for the magic.
Status Pool::Format(std::uint64_t size) {
  Header& h = header();
  (void)Invalidate(base_, kMetadataBytes);  // what another host wrote, not this CPU's old lines
  if (Load(h.magic) == 0 &&
      std::all_of(base_, base_ + kMetadataBytes, [](std::byte b) { return b == std::byte{0}; }) &&
      Cas(h.magic, 0, kFormatting)) {
    Store(h.version, kVersion);
    Store(h.id, RandomWord());
    Store(h.size, size);
    Store(h.leases, kLeases);
    Store(h.records, kRecords);
    Store(h.uid, geteuid());
    Store(h.magic, kMagic);
  }
  for (int i = 0; i < 2000 && Load(h.magic) == kFormatting; ++i) usleep(1000);
  return Status::Ok();
}

Status Pool::CheckHeader() const {
  const Header& h = header();
  const std::uint64_t magic = Load(h.magic);
  if (magic == kFormatting) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} is still being formatted after 2 s: the process formatting it died; "
        "remove the file (or zero the device's first 2 MiB) and start again",
        path_));
  }
  if (magic != kMagic) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} holds other data (no tierflow pool header): the library never overwrites "
        "it; give an empty file or device",
        path_));
  }
  if (Load(h.version) != kVersion || Load(h.leases) != kLeases || Load(h.records) != kRecords) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} was formatted by another version of tierflow: give every job the same "
        "version, or a pool of its own",
        path_));
  }
  if (Load(h.size) != size_) {
    return Status::InvalidArgument(fmt::format(
        "the pool {} is {} bytes but was formatted as {}: it was resized under its users; "
        "restore its size or remove it",
        path_, size_, Load(h.size)));
  }
  return Status::Ok();
}

bool Pool::Dead(std::uint32_t slot) const {
  const Lease& l = lease(slot);
  if (Load(l.token) == 0) return true;
  const std::uint64_t beat = Load(l.beat), now = NowMs();
  return now > beat && now - beat > lease_ms_;
}

bool Pool::Alive(const PoolLease& l) const {
  return l.slot < kLeases && Load(lease(l.slot).token) == l.token && !Dead(l.slot);
}

// A free slot, or one whose holder died (its holds are dropped under the lock before any
// allocation can count them).
Status Pool::TakeLease() {
  token_ = RandomWord();
  for (std::uint32_t s = 0; s < kLeases; ++s) {
    Lease& l = lease(s);
    const std::uint64_t old = Load(l.token);
    if (old != 0 && !Dead(s)) continue;
    Store(l.beat, NowMs());  // fresh before the token: nobody may take it for dead
    if (!Cas(l.token, old, token_)) continue;
    Store(l.beat, NowMs());
    slot_ = s;
    std::lock_guard guard(mu_);
    Lock();
    DropHolds(s);  // the previous holder's, if it died
    Reclaim();
    Unlock();
    return Status::Ok();
  }
  return Status::OutOfMemory(fmt::format(
      "all {} lease slots of the pool {} are held by live processes: end some jobs using it, "
      "or give this one a pool of its own",
      kLeases, path_));
}

// Renews the lease every quarter of it. A process whose lease was taken for dead (stopped for
// longer than a lease) must not touch the pool again: its allocations may be someone else's.
void Pool::Renew() {
  std::unique_lock lock(renew_mu_);
  while (!renew_cv_.wait_for(lock,
                             std::chrono::milliseconds(std::max<std::uint64_t>(1, lease_ms_ / 4)),
                             [this] { return stopping_; })) {
    Lease& l = lease(slot_);
    if (Load(l.token) != token_) {
      std::fprintf(stderr,
                   "tierflow: this process lost its lease on the pool %s (it did not renew it "
                   "for longer than %llu ms, so other processes may reuse its memory): aborting\n",
                   path_.c_str(), static_cast<unsigned long long>(lease_ms_));
      std::abort();
    }
    Store(l.beat, NowMs());
  }
}

Pool::~Pool() {
  if (renewer_.joinable()) {
    {
      std::lock_guard lock(renew_mu_);
      stopping_ = true;
    }
    renew_cv_.notify_all();
    renewer_.join();
    // Regions hold the pool alive, so none is left: the slot's holds are all released.
    Cas(lease(slot_).token, token_, 0);
  }
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

std::uint64_t Pool::LockWord() const { return (std::uint64_t{slot_} + 1) << 48 | (token_ & kLow); }

// The allocator's lock, broken when its holder's lease has run out (it died holding it: every
// update it made is whole, so the metadata is consistent).
void Pool::Lock() {
  auto& word = *reinterpret_cast<std::atomic<std::uint64_t>*>(base_ + kLockOffset);
  for (int round = 0;; ++round) {
    const std::uint64_t held = Load(word);
    if (held == 0 && Cas(word, 0, LockWord())) return Refresh();
    if (held != 0) {
      const auto holder = static_cast<std::uint32_t>((held >> 48) - 1);
      const bool gone =
          holder >= kLeases || (Load(lease(holder).token) & kLow) != (held & kLow) || Dead(holder);
      if (gone && Cas(word, held, LockWord())) return Refresh();
    }
    if (round < 100) {
      sched_yield();
    } else {
      usleep(200);
    }
  }
}

// Just after taking the lock: the lease and record tables as other hosts last wrote them, in
// one pass (a word at a time cost more than the rest of an allocation).
void Pool::Refresh() const {
  (void)Invalidate(base_ + kLeaseOffset,
                   kRecordOffset + 64 * std::uint64_t{kRecords} - kLeaseOffset);
}

void Pool::Unlock() {
  Store(*reinterpret_cast<std::atomic<std::uint64_t>*>(base_ + kLockOffset), 0);
}

// Under the lock: `slot`'s hold of record `index` dropped; the record freed when nobody else
// holds it.
void Pool::DropHold(std::uint32_t index, std::uint32_t slot) {
  Record& r = record(index);
  if (Peek(r.generation) == 0) return;
  const std::uint64_t bit = std::uint64_t{1} << (slot % 64);
  std::atomic<std::uint64_t>& word = r.holders[slot / 64];
  if ((Peek(word) & bit) != 0) {
    word.fetch_and(~bit, std::memory_order_acq_rel);
    (void)WriteBack(&word, sizeof(word));
  }
  bool held = false;
  for (std::uint32_t w = 0; w < kHolderWords; ++w) held = held || Peek(r.holders[w]) != 0;
  if (!held) Store(r.generation, 0);
}

void Pool::DropHolds(std::uint32_t slot) {
  for (std::uint32_t i = 0; i < kRecords; ++i) DropHold(i, slot);
}

// Under the lock: the holds of every process whose lease ran out are dropped, and its slot freed.
void Pool::Reclaim() {
  for (std::uint32_t s = 0; s < kLeases; ++s) {
    const std::uint64_t token = Peek(lease(s).token);
    if (token == 0 || s == slot_ || !Dead(s)) continue;  // Dead reads the beat afresh
    DropHolds(s);
    Cas(lease(s).token, token, 0);
  }
}

// Under the lock: the lowest free range of `bytes` after the metadata (first fit).
bool Pool::FindRange(std::uint64_t bytes, std::uint64_t& offset) const {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used;
  for (std::uint32_t i = 0; i < kRecords; ++i) {
    const Record& r = record(i);
    if (Peek(r.generation) != 0) used.emplace_back(Peek(r.offset), Peek(r.size));
  }
  std::sort(used.begin(), used.end());
  std::uint64_t at = kMetadataBytes;
  for (const auto& [o, n] : used) {
    if (o >= at && o - at >= bytes) break;
    at = std::max(at, o + n);
  }
  if (at > size_ || size_ - at < bytes) return false;
  offset = at;
  return true;
}

Result<PoolRegion> Pool::Allocate(std::uint64_t bytes) {
  if (bytes > size_) {
    return Status::InvalidArgument(fmt::format(
        "{} bytes cannot fit in the pool {} of {} bytes: ask for less, or give a larger pool",
        bytes, path_, size_));
  }
  const std::uint64_t need = std::max(kPage, PageUp(bytes));
  std::lock_guard guard(mu_);
  Lock();
  Reclaim();
  std::uint64_t offset = 0;
  std::uint32_t index = kRecords;
  for (std::uint32_t i = 0; i < kRecords && index == kRecords; ++i) {
    if (Peek(record(i).generation) == 0) index = i;
  }
  if (index == kRecords || !FindRange(need, offset)) {
    Unlock();
    return Status::OutOfMemory(fmt::format(
        "the pool {} has no free range of {} bytes ({} of its {} bytes free{}): free windows, "
        "end the jobs using it, or give a larger pool",
        path_, need, FreeBytesLocked(), size_,
        index == kRecords ? fmt::format(", all {} allocation records used", kRecords) : ""));
  }
  PoolRef ref{id(), RandomWord(), offset, need, index, 0};
  Record& r = record(index);
  Store(r.offset, offset);
  Store(r.size, need);
  for (std::uint32_t w = 0; w < kHolderWords; ++w) {
    Store(r.holders[w], w == slot_ / 64 ? std::uint64_t{1} << (slot_ % 64) : 0);
  }
  Store(r.generation, ref.generation);  // published: the allocation exists from here on
  Unlock();
  return Region(ref);
}

Result<PoolRegion> Pool::Attach(const PoolRef& ref) {
  std::lock_guard guard(mu_);
  Lock();
  const bool found = ref.pool_id == id() && ref.record < kRecords &&
                     Peek(record(ref.record).generation) == ref.generation &&
                     Peek(record(ref.record).offset) == ref.offset &&
                     Peek(record(ref.record).size) == ref.size;
  if (found) {
    std::atomic<std::uint64_t>& word = record(ref.record).holders[slot_ / 64];
    word.fetch_or(std::uint64_t{1} << (slot_ % 64), std::memory_order_acq_rel);
    (void)WriteBack(&word, sizeof(word));
  }
  Unlock();
  if (!found) {
    return Status::NotFound(fmt::format(
        "allocation {} of the pool {} is gone (freed, or its holders died) or belongs to another "
        "pool",
        ref.record, path_));
  }
  return Region(ref);
}

void Pool::Release(const PoolRef& ref) {
  std::lock_guard guard(mu_);
  Lock();
  if (Peek(record(ref.record).generation) == ref.generation) DropHold(ref.record, slot_);
  Unlock();
}

// Under the lock: bytes in no allocation.
std::uint64_t Pool::FreeBytesLocked() const {
  std::uint64_t used = 0;
  for (std::uint32_t i = 0; i < kRecords; ++i) {
    if (Peek(record(i).generation) != 0) used += Peek(record(i).size);
  }
  return size_ - kMetadataBytes - std::min(used, size_ - kMetadataBytes);
}

std::uint64_t Pool::FreeBytes() {
  std::lock_guard guard(mu_);
  Lock();
  Reclaim();
  const std::uint64_t free = FreeBytesLocked();
  Unlock();
  return free;
}

PoolRegion Pool::Region(const PoolRef& ref) {
  PoolRegion region;
  region.pool_ = shared_from_this();
  region.ref_ = ref;
  region.data_ = base_ + ref.offset;
  return region;
}

void Pool::WriteProbe(std::uint64_t value) { Store(lease(slot_).probe, value); }

std::uint64_t Pool::ReadProbe(const PoolLease& l) const {
  return l.slot < kLeases ? Load(lease(l.slot).probe) : 0;
}

std::uint64_t Pool::id() const { return Load(header().id); }

PoolRegion::PoolRegion(PoolRegion&& other) noexcept
    : pool_(std::move(other.pool_)),
      ref_(std::exchange(other.ref_, {})),
      data_(std::exchange(other.data_, nullptr)),
      over_(std::exchange(other.over_, 0)) {}

PoolRegion& PoolRegion::operator=(PoolRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::move(other.pool_);
    ref_ = std::exchange(other.ref_, {});
    data_ = std::exchange(other.data_, nullptr);
    over_ = std::exchange(other.over_, 0);
  }
  return *this;
}

PoolRegion::~PoolRegion() { Reset(); }

void PoolRegion::Reset() {
  if (over_ != 0) RestorePrivate(data_, over_);
  if (pool_ != nullptr) pool_->Release(ref_);
  pool_.reset();
  data_ = nullptr;
  over_ = 0;
}

Status PoolRegion::MapOver(void* base, std::size_t size) {
  if (pool_ == nullptr || over_ != 0 || size > ref_.size) {
    return Status::InvalidArgument(fmt::format(
        "{} bytes do not fit the pool region of {} bytes (or it is mapped over memory already)",
        size, ref_.size));
  }
  if (Status s = CheckInPlace(base, size); !s.ok()) return s;
  std::memcpy(data_, base, size);
  if (mmap(base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, pool_->fd_,
           static_cast<off_t>(ref_.offset)) != base) {
    return Status::IoError(fmt::format("cannot map the pool over {} bytes at {}: {}", size, base,
                                       std::strerror(errno)));
  }
  data_ = static_cast<std::byte*>(base);
  over_ = size;
  return Status::Ok();
}

}  // namespace tierflow::rma
