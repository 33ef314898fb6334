// File locators: opened (or created) and checked when declared.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "tierflow/size.h"

namespace tierflow {

namespace {

using detail::LocatorImpl;

bool Writes(FileMode mode) { return mode != FileMode::kRead; }

// Creates the file for kCreate/kReplace. Errors: it exists (kCreate), its directory is missing,
// it cannot be created.
Status CreateFile(const std::string& path, FileMode mode) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == FileMode::kCreate ? O_EXCL : O_TRUNC);
  const int fd = open(path.c_str(), flags, 0644);
  if (fd >= 0) {
    close(fd);
    return Status::Ok();
  }
  const int err = errno;
  if (err == EEXIST) {
    return Status::Invalid(
        fmt::format("{} exists and is not overwritten: choose another path, or declare it with "
                    "FileMode::kReplace (--overwrite) to replace it",
                    path));
  }
  if (err == ENOENT) {
    return Status::NotFound(fmt::format("cannot create {}: its directory does not exist", path));
  }
  if (err == EISDIR) return Status::Invalid(fmt::format("{} is a directory, not a file", path));
  return Status::IoError(fmt::format("cannot create {}: {}", path, std::strerror(err)));
}

// The length of an existing file, checking that it is one. Errors name the path and the fix.
Result<std::uint64_t> ExistingSize(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return Status::NotFound(fmt::format("{} does not exist: check the path", path));
    }
    return Status::IoError(fmt::format("cannot examine {}: {}", path, std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) return Status::Invalid(fmt::format("{} is a directory", path));
  return static_cast<std::uint64_t>(st.st_size);
}

// The locator's length: given, or the rest of an existing file. Errors: a range beyond the
// end (reading or modifying), no length for a new file.
Result<std::uint64_t> RangeLength(const std::string& path, FileMode mode, std::uint64_t offset,
                                  std::uint64_t length, std::uint64_t size) {
  if (mode == FileMode::kCreate || mode == FileMode::kReplace) {
    if (length == 0) {
      return Status::Invalid(fmt::format(
          "{}: a file to be written needs a length (the most that may be written), e.g. "
          "file:{}:0:1GiB",
          path, path));
    }
    return length;
  }
  if (offset > size || length > size - offset) {
    return Status::Invalid(fmt::format(
        "{} has {} bytes: the range at offset {} of {} bytes is beyond the end of the file", path,
        size, offset, length == 0 ? std::string("the rest") : fmt::format("{}", length)));
  }
  if (length == 0) length = size - offset;
  if (length == 0) {
    return Status::Invalid(
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
  if (path.empty()) return Status::Invalid("a file locator needs a path");
  std::uint64_t size = 0;
  const bool creates = mode == FileMode::kCreate || mode == FileMode::kReplace;
  if (!creates) {
    Result<std::uint64_t> s = ExistingSize(path);
    if (!s.ok()) return s.status();
    size = *s;
  }
  Result<std::uint64_t> len = RangeLength(path, mode, offset, length, size);
  if (!len.ok()) return len.status();
  if (creates) {
    if (Status s = CreateFile(path, mode); !s.ok()) return s;
  }
  FileOpenOptions fo{Writes(mode) ? FileAccess::kReadWrite : FileAccess::kRead, offset + *len};
  Result<FileWindow> w = impl_->uring->OpenFile(path, fo);
  if (!w.ok()) {
    std::error_code ec;
    if (mode == FileMode::kCreate) std::filesystem::remove(path, ec);  // ours, and empty
    return w.status();
  }
  auto impl = std::make_shared<LocatorImpl>();
  impl->kind = LocatorKind::kFile;
  impl->direct_alignment = impl_->uring->DirectAlignment(w->base());
  impl->window = std::move(*w);
  impl->path = path;
  impl->file_offset = offset;
  impl->capacity = *len;
  impl->alignment = impl->direct_alignment == 0 ? 1 : impl->direct_alignment;
  impl->tier = TierKind::kStorage;
  impl->writable = Writes(mode);
  impl->mechanisms = FileMechanisms(mode);
  impl->name = fmt::format("file:{}:{}:{}", path, offset, *len);
  return Locator(std::move(impl));
}

Result<Locator> PipeRuntime::Spill(const std::vector<Locator>& members) {
  if (members.size() < 2) {
    return Status::Invalid("a spill chain needs at least two members (e.g. DRAM, then a file)");
  }
  auto impl = std::make_shared<LocatorImpl>();
  impl->kind = LocatorKind::kSpill;
  impl->name = "spill:";
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Locator& m = members[i];
    if (!m.valid() || m.kind() == LocatorKind::kSpill || m.kind() == LocatorKind::kStaging) {
      return Status::Invalid(
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
  return Locator(std::move(impl));
}

}  // namespace tierflow
