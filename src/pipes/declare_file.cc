// SPDX-License-Identifier: Apache-2.0
// File locators: opened (or created) and checked when declared.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/own_file.h"
#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "tierflow/size.h"

namespace tierflow {

namespace {

using detail::LocatorImpl;

bool Writes(FileMode mode) { return mode != FileMode::kRead; }

// Closes a descriptor on every path out.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) close(fd);
  }
};

// The open(2) flags of each mode. Files written are never reached through a symbolic link
// (O_NOFOLLOW): one planted in a shared directory would redirect the writes. O_NONBLOCK: a
// FIFO given by mistake is refused (OpenedSize) instead of waiting for a writer forever.
int OpenFlags(FileMode mode) {
  switch (mode) {
    case FileMode::kRead:
      return O_RDONLY | O_NONBLOCK | O_CLOEXEC;
    case FileMode::kCreate:
      return O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    case FileMode::kReplace:
      return O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC;
    case FileMode::kModify:
      return O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  }
  return O_RDONLY | O_CLOEXEC;
}

Status OpenError(const std::string& path, FileMode mode, int err) {
  switch (err) {
    case EEXIST:
      return Status::InvalidArgument(
          fmt::format("{} exists and is not overwritten: choose another path, declare it with "
                      "FileMode::kReplace to replace it, or FileMode::kModify to "
                      "write only the locator's range",
                      path));
    case ELOOP:
      return Status::InvalidArgument(fmt::format(
          "{} is a symbolic link: files are written only under their own name; give the path "
          "it points to",
          path));
    case ENOENT:
      return mode == FileMode::kCreate || mode == FileMode::kReplace
                 ? Status::NotFound(
                       fmt::format("cannot create {}: its directory does not exist", path))
                 : Status::NotFound(fmt::format("{} does not exist: check the path", path));
    case EISDIR:
      return Status::InvalidArgument(fmt::format("{} is a directory, not a file", path));
    default:
      return Status::IoError(fmt::format("cannot open {}{}: {}", path,
                                         mode == FileMode::kRead ? "" : " for writing",
                                         std::strerror(err)));
  }
}

// The file's size, checking that it is one (a FIFO or a device would block or mislead).
Result<std::uint64_t> OpenedSize(int fd, const std::string& path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return Status::IoError(fmt::format("cannot examine {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(fmt::format("{} is a directory", path));
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Status::InvalidArgument(fmt::format(
        "{} is not a regular file (a FIFO, socket or character device): give a file", path));
  }
  return static_cast<std::uint64_t>(st.st_size);
}

// The locator's length: given, or the rest of an existing file. Errors: a range beyond the
// end (reading or modifying), no length for a new file, replacing (truncating) a file to
// write a range that does not start at 0.
Result<std::uint64_t> RangeLength(const std::string& path, FileMode mode, std::uint64_t offset,
                                  std::uint64_t length, std::uint64_t size) {
  if (length > UINT64_MAX - offset) {
    return Status::InvalidArgument(
        fmt::format("{}: offset {} and length {} reach beyond any file", path, offset, length));
  }
  if (mode == FileMode::kCreate || mode == FileMode::kReplace) {
    if (length == 0) {
      return Status::InvalidArgument(fmt::format(
          "{}: a file to be written needs a length (the most that may be written), e.g. "
          "file:{}:0:1GiB",
          path, path));
    }
    if (mode == FileMode::kReplace && offset != 0) {
      return Status::InvalidArgument(fmt::format(
          "{}: replacing the file would truncate it and zero the {} bytes before offset {}: "
          "write only the range with FileMode::kModify, or replace from offset 0",
          path, offset, offset));
    }
    return length;
  }
  if (offset > size || length > size - offset) {
    return Status::InvalidArgument(fmt::format(
        "{} has {} bytes: the range at offset {} of {} bytes is beyond the end of the file", path,
        size, offset, length == 0 ? std::string("the rest") : fmt::format("{}", length)));
  }
  if (length == 0) length = size - offset;
  if (length == 0) {
    return Status::InvalidArgument(
        fmt::format("{} has nothing from offset {} on: the range is empty", path, offset));
  }
  return length;
}

std::uint32_t FileMechanisms(FileMode mode) {
  std::uint32_t bits =
      MechanismBit(Mechanism::kUringRead) | MechanismBit(Mechanism::kCopyFileRange);
  if (Writes(mode)) bits |= MechanismBit(Mechanism::kUringWrite);
  return bits;
}

}  // namespace

Result<Locator> PipeRuntime::File(const std::string& path, std::uint64_t offset,
                                  std::uint64_t length, FileMode mode) {
  if (path.empty()) return Status::InvalidArgument("a file locator needs a path");
  const bool creates = mode == FileMode::kCreate || mode == FileMode::kReplace;
  if (creates) {  // checked before the file is made or truncated
    if (Result<std::uint64_t> len = RangeLength(path, mode, offset, length, 0); !len.ok()) {
      return len.status();
    }
  }
  Descriptor d{open(path.c_str(), OpenFlags(mode), 0644)};
  if (d.fd < 0) return OpenError(path, mode, errno);
  Result<std::uint64_t> size = OpenedSize(d.fd, path);
  Result<std::uint64_t> len =
      size.ok() ? RangeLength(path, mode, offset, length, *size) : size.status();
  // The engine opens the file just checked (or created), never the path again.
  const FileAccess access = Writes(mode) ? FileAccess::kReadWrite : FileAccess::kRead;
  Result<FileWindow> w = len.ok()
                             ? impl_->uring->OpenDescriptor(d.fd, path, {access, offset + *len})
                             : Result<FileWindow>(len.status());
  if (!w.ok()) {
    if (mode == FileMode::kCreate) RemoveIfStill(d.fd, path);  // ours, and empty
    return w.status();
  }
  auto impl = std::make_shared<LocatorImpl>();
  impl_->FileLeaf(*impl, d.fd, std::move(*w), path, mode);
  impl->file_offset = offset;
  impl->capacity = *len;
  impl->created = mode == FileMode::kCreate;
  impl->name = fmt::format("file:{}:{}:{}", path, offset, *len);
  return detail::LocatorAccess::Make(std::move(impl));
}

void PipeRuntime::Impl::FileLeaf(LocatorImpl& l, int fd, FileWindow w, const std::string& path,
                                 FileMode mode) const {
  l.kind = LocatorKind::kFile;
  l.direct_alignment = uring->DirectAlignment(w.base());
  l.alignment = l.direct_alignment == 0 ? 1 : l.direct_alignment;
  l.window = std::move(w);
  l.path = path;
  l.tier = TierKind::kStorage;
  l.writable = Writes(mode);
  l.mechanisms = FileMechanisms(mode);
  if (Writes(mode)) {
    l.file = std::make_shared<detail::SharedFd>();
    l.file->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  }
}

Result<Locator> PipeRuntime::Spill(const std::vector<Locator>& members) {
  if (members.size() < 2) {
    return Status::InvalidArgument(
        "a spill chain needs at least two members (e.g. DRAM, then a file)");
  }
  auto impl = std::make_shared<LocatorImpl>();
  impl->kind = LocatorKind::kSpill;
  impl->name = "spill:";
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Locator& m = members[i];
    if (!m.valid() || m.kind() == LocatorKind::kSpill || m.kind() == LocatorKind::kStaging) {
      return Status::InvalidArgument(
          fmt::format("spill chain member {} is {}: members are memory, borrowed memory or files",
                      i, m.valid() ? LocatorKindName(m.kind()) : "not declared"));
    }
    impl->capacity += m.capacity();
    impl->mechanisms |= m.mechanisms();
    impl->writable = impl->writable && m.writable();
    if (i != 0) impl->name.push_back(',');
    impl->name.append(m.name());
  }
  impl->tier = members.front().tier();
  impl->node = members.front().node();
  impl->alignment = members.front().alignment();
  impl->members = members;
  return detail::LocatorAccess::Make(std::move(impl));
}

}  // namespace tierflow
