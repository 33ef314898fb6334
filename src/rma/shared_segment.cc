// SPDX-License-Identifier: Apache-2.0
#include "rma/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "common/mapping.h"

namespace tierflow::rma {

namespace {

// 0 when the rounded size does not fit in a file offset.
std::size_t RoundToPages(std::size_t size) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  if (size > static_cast<std::size_t>(INT64_MAX) - page) return 0;
  return size == 0 ? page : (size + page - 1) / page * page;
}

// Whether `fd` is the segment `name` describes: a regular file of its size and identity.
Status CheckIdentity(int fd, const SegmentName& name, const std::string& path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return Status::IoError(fmt::format("cannot examine {}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_dev) != name.dev ||
      static_cast<std::uint64_t>(st.st_ino) != name.ino ||
      static_cast<std::uint64_t>(st.st_size) != name.size) {
    return Status::Unsupported(fmt::format(
        "{} is not the shared memory process {} created (another file: a process of another "
        "PID namespace, or a PID reused): not mapped",
        path, name.pid));
  }
  return Status::Ok();
}

// "/tierflow-rma-" and 32 hex digits from getrandom: not guessable by another user.
Status RandomName(char (&out)[64]) {
  static_assert(sizeof(out) > sizeof("/tierflow-rma-") + 32);
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes)) {
    return Status::IoError(fmt::format("getrandom failed: {}", std::strerror(errno)));
  }
  std::string name = "/tierflow-rma-";
  for (unsigned char b : bytes) name += fmt::format("{:02x}", b);
  std::memcpy(out, name.c_str(), name.size() + 1);
  return Status::Ok();
}

Result<int> MakeFile(SegmentName& name, bool named) {
  if (!named) {
    const int fd = memfd_create("tierflow-rma", MFD_CLOEXEC);
    if (fd < 0) {
      return Status::OutOfMemory(
          fmt::format("cannot create a memfd for an RMA window: {}", std::strerror(errno)));
    }
    return fd;
  }
  if (Status s = RandomName(name.shm_name); !s.ok()) return s;
  const int fd = shm_open(name.shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::OutOfMemory(
        fmt::format("cannot create shared memory for an RMA window: {}", std::strerror(errno)));
  }
  return fd;
}

Result<std::byte*> MapFile(int fd, std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return Status::OutOfMemory(
        fmt::format("cannot map {} bytes of shared window memory: {}", size, std::strerror(errno)));
  }
  return static_cast<std::byte*>(p);
}

}  // namespace

void RestorePrivate(std::byte* at, std::size_t size) {
  void* copy = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) return;
  std::memcpy(copy, at, size);
  if (mmap(at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
      at) {
    std::memcpy(at, copy, size);
  }
  munmap(copy, size);
}

namespace {

// Read from /proc/self/maps, whose lines are in address order.
Status CheckPrivateAnonymous(std::uintptr_t begin, std::uintptr_t end) {
  std::uintptr_t covered = begin;
  std::string why;
  const bool read = ForEachMapping(begin, end, [&](const MapsLine& m) {
    const std::string_view name = m.path;
    if (m.lo > covered) {
      why = "it is not all mapped";
    } else if (m.perms[3] != 'p' || m.inode != 0 || (!name.empty() && name != "[heap]")) {
      why = fmt::format("it lies in a {} mapping{}{}", m.perms[3] == 'p' ? "private" : "shared",
                        name.empty() ? "" : " of ", name);
    }
    covered = m.hi;
    return why.empty() && covered < end;
  });
  if (!read) return Status::Unsupported("cannot read /proc/self/maps");
  if (why.empty() && covered < end) why = "it is not all mapped";
  if (why.empty()) return Status::Ok();
  return Status::Unsupported("only private anonymous memory is shared in place, and " + why);
}

}  // namespace

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      in_place_(std::exchange(other.in_place_, false)),
      name_(std::exchange(other.name_, {})) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    in_place_ = std::exchange(other.in_place_, false);
    name_ = std::exchange(other.name_, {});
  }
  return *this;
}

SharedSegment::~SharedSegment() { Reset(); }

void SharedSegment::Reset() {
  // A fallback name still there (some rank never opened it): no failure leaves it in /dev/shm.
  if (name_.shm_name[0] != '\0' && name_.pid == getpid()) shm_unlink(name_.shm_name);
  name_.shm_name[0] = '\0';
  if (in_place_) {
    RestorePrivate(data_, size_);
  } else if (data_ != nullptr) {
    munmap(data_, size_);
  }
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  fd_ = -1;
  in_place_ = false;
}

Result<SharedSegment> SharedSegment::Create(std::size_t size, bool named) {
  SharedSegment s;
  s.size_ = RoundToPages(size);
  if (s.size_ == 0) {
    return Status::OutOfMemory(
        fmt::format("cannot make {} bytes of shared window memory: more than a file holds", size));
  }
  Result<int> fd = MakeFile(s.name_, named);
  if (!fd.ok()) return fd.status();
  s.fd_ = *fd;
  s.name_.pid = getpid();
  if (ftruncate(s.fd_, static_cast<off_t>(s.size_)) != 0) {
    const int e = errno;
    s.MarkMapped();
    return Status::OutOfMemory(
        fmt::format("cannot size shared window memory to {} bytes: {}", s.size_, strerror(e)));
  }
  Result<std::byte*> p = MapFile(s.fd_, s.size_);
  if (!p.ok()) {
    s.MarkMapped();
    return p.status();
  }
  s.data_ = *p;
  s.name_.fd = s.name_.shm_name[0] != '\0' ? -1 : s.fd_;
  s.name_.size = s.size_;
  struct stat st {};
  if (fstat(s.fd_, &st) != 0) {
    return Status::IoError(
        fmt::format("cannot examine shared window memory: {}", std::strerror(errno)));
  }
  s.name_.dev = static_cast<std::uint64_t>(st.st_dev);
  s.name_.ino = static_cast<std::uint64_t>(st.st_ino);
  return s;
}

Status CheckInPlace(void* base, std::size_t size) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  if (base == nullptr || size == 0 || reinterpret_cast<std::uintptr_t>(base) % page != 0 ||
      size % page != 0) {
    return Status::InvalidArgument(
        fmt::format("{} bytes at {}: only whole pages can be shared in place", size, base));
  }
  const auto at = reinterpret_cast<std::uintptr_t>(base);
  if (Status st = CheckPrivateAnonymous(at, at + size); !st.ok()) {
    return Status::Unsupported(fmt::format("{} bytes at {}: {}", size, base, st.message()));
  }
  return Status::Ok();
}

Result<SharedSegment> SharedSegment::ShareInPlace(void* base, std::size_t size) {
  if (Status st = CheckInPlace(base, size); !st.ok()) return st;
  Result<SharedSegment> s = Create(size);
  if (!s.ok()) return s.status();
  std::memcpy(s->data_, base, size);
  // MAP_FIXED replaces the range's mapping in one step (mremap would too, but memory hooks of
  // some MPI transports, UCX's, refuse a fixed mremap).
  if (mmap(base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, s->fd_, 0) != base) {
    return Status::OutOfMemory(fmt::format("cannot map shared memory over {} bytes at {}: {}", size,
                                           base, std::strerror(errno)));
  }
  munmap(s->data_, size);
  s->data_ = static_cast<std::byte*>(base);
  s->in_place_ = true;
  return s;
}

Result<SharedSegment> SharedSegment::Open(const SegmentName& name) {
  SharedSegment s;
  s.name_ = name;
  s.size_ = name.size;
  std::string path = name.fd >= 0 ? fmt::format("/proc/{}/fd/{}", name.pid, name.fd) : "";
  const int fd = name.fd >= 0 ? open(path.c_str(), O_RDWR | O_CLOEXEC)
                              : shm_open(name.shm_name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    const int e = errno;
    if (path.empty()) path = fmt::format("/dev/shm{}", name.shm_name);
    const std::string why = fmt::format("cannot open {} (the shared memory of process {}): {}",
                                        path, name.pid, std::strerror(e));
    if (e == EACCES || e == EPERM) return Status::Unsupported(why);
    return Status::NotFound(why);
  }
  s.fd_ = fd;
  if (path.empty()) path = fmt::format("/dev/shm{}", name.shm_name);
  if (Status st = CheckIdentity(fd, name, path); !st.ok()) {
    s.name_.shm_name[0] = '\0';  // not ours to unlink
    return st;
  }
  Result<std::byte*> p = MapFile(fd, s.size_);
  if (!p.ok()) return p.status();
  s.data_ = *p;
  // The mapping keeps the memory; a descriptor per window would run into the fd limit.
  close(s.fd_);
  s.fd_ = -1;
  return s;
}

void SharedSegment::MarkMapped() {
  if (name_.shm_name[0] != '\0' && name_.pid == getpid()) shm_unlink(name_.shm_name);
  name_.shm_name[0] = '\0';
  if (fd_ >= 0 && name_.pid == getpid() && data_ != nullptr) {
    // Everyone has it mapped: the descriptor is no longer needed to open it.
    close(fd_);
    fd_ = -1;
  }
}

Status SharedSegment::SetOpenable(bool openable) {
  if (fd_ < 0) return Status::Ok();  // nothing left to open it through
  if (fchmod(fd_, openable ? 0600 : 0) != 0) {
    return Status::IoError(
        fmt::format("cannot change the mode of shared window memory: {}", std::strerror(errno)));
  }
  return Status::Ok();
}

bool CanReadProcess(std::int32_t pid, const void* addr) {
  char byte;
  iovec local{&byte, 1};
  iovec remote{const_cast<void*>(addr), 1};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == 1;
}

}  // namespace tierflow::rma
