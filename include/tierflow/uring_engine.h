// SPDX-License-Identifier: Apache-2.0
// The storage engine: copies into and out of files, done as io_uring reads and writes (liburing).
//
// Files are named by address ranges. A range registered with RegisterFile (a read-only mapping
// of the file from offset 0, e.g. MappedFile) or opened with OpenFile (an address range reserved
// for the file, with no memory behind it) stands for the file: byte p of the range is byte
// (p - base) of the file. Operations on such ranges become file I/O:
//   kCopy, source in a file, destination memory:      reads
//   kCopy, source memory, destination a writable file: writes (they extend the file)
//   kCopy, both in files:                              copy_file_range on a helper thread
//                                                      (io_uring has no opcode for it)
//   kWriteBack of a writable file's range:             fdatasync (IORING_OP_FSYNC): every
//                                                      write completed before it is durable
// A copy becomes pieces of at most max_read_bytes each, kept at most queue_depth in flight; they
// go through O_DIRECT where the file system supports it and the piece is aligned as direct I/O
// needs (file offset, length and memory at the file's direct-I/O alignment), through the page
// cache otherwise (the unaligned head and tail of a range, tmpfs). A completion thread reaps
// completions, continues short reads and short writes and resubmits.
//
// Errors name the file, the offset and the cause (the OS error; the file ending before the
// range does; a write that made no progress).
//
// Thread-safety: as every engine (engine.h), and OpenFile, OpenDescriptor, RegisterFile and
// their counterparts may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tierflow/engine.h"
#include "tierflow/export.h"

namespace tierflow {

// Each field: its default, and what moving it trades.
struct IoUringEngineOptions {
  // Default 64: reads and writes in flight at most. More: more parallelism for devices that
  // need it (NVMe), more memory locked for the ring.
  unsigned queue_depth = 64;
  // Default 1 MiB: larger copies are split into pieces of this size. Larger: fewer system
  // calls, fewer pieces to overlap.
  std::size_t max_read_bytes = std::size_t{1} << 20;
  // Default true: O_DIRECT where the file system and alignment allow, bypassing the page cache.
  // Off: every piece goes through the page cache (cached re-reads, a copy more).
  bool direct = true;
};

struct IoUringEngineStats {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t reads = 0;          // reads submitted (continuations of short reads included)
  std::uint64_t direct_reads = 0;   // of which O_DIRECT
  std::uint64_t short_reads = 0;    // continued
  std::uint64_t writes = 0;         // writes submitted (continuations included)
  std::uint64_t direct_writes = 0;  // of which O_DIRECT
  std::uint64_t short_writes = 0;   // continued
  std::uint64_t syncs = 0;          // fdatasyncs submitted
  std::uint64_t file_copies = 0;    // copy_file_range calls
  std::uint64_t errors = 0;         // pieces that failed
};

// How OpenFile opens a file.
enum class FileAccess : std::uint8_t {
  kRead,       // reads only; the file must be at least as long as the range
  kReadWrite,  // reads and writes; writes past the end extend the file
};

struct FileOpenOptions {
  FileAccess access = FileAccess::kRead;
  // Length of the address range (the most of the file it reaches). 0: the file's size now
  // (kRead) — with kReadWrite a length is required, since the file may still be empty.
  std::uint64_t length = 0;
};

class IoUringEngine;

// An address range standing for a file (IoUringEngine::OpenFile). Copies to and from
// [base(), base() + length()) are file I/O on that engine; the range holds no memory, so
// touching it directly faults. Closing (or destroying) it unregisters the file; operations in
// flight finish. It must not outlive its engine. Move-only; not thread-safe itself.
class TIERFLOW_EXPORT FileWindow {
 public:
  FileWindow() = default;
  FileWindow(FileWindow&& o) noexcept;
  FileWindow& operator=(FileWindow&& o) noexcept;
  FileWindow(const FileWindow&) = delete;
  FileWindow& operator=(const FileWindow&) = delete;
  ~FileWindow();

  std::byte* base() const { return base_; }
  std::size_t length() const { return length_; }
  const std::string& path() const { return path_; }
  bool writable() const { return writable_; }
  // The address of file offset `offset` (no check).
  std::byte* at(std::uint64_t offset) const { return base_ + offset; }
  void Close();

 private:
  friend class IoUringEngine;
  IoUringEngine* engine_ = nullptr;
  std::byte* base_ = nullptr;
  std::size_t length_ = 0;
  std::string path_;
  bool writable_ = false;
};

// A read-only shared mapping of a whole file, released on destruction.
class TIERFLOW_EXPORT MappedFile {
 public:
  // Errors: the file cannot be opened or is empty.
  static Result<MappedFile> Open(const std::string& path);
  // Maps the regular file the caller holds open as `fd` (the caller keeps fd); `name` stands
  // for it in messages and path(). IoUringEngine::RegisterFile opens this very file, never
  // the name. Errors: empty, not a regular file, cannot be mapped.
  static Result<MappedFile> Map(int fd, const std::string& name);
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  friend class IoUringEngine;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
  int fd_ = -1;  // the file mapped, for RegisterFile
};

class TIERFLOW_EXPORT IoUringEngine final : public Engine {
 public:
  // Errors: io_uring unavailable (old kernel, seccomp), a queue depth outside 1..4096, a read
  // size that is 0 or not a multiple of 4 KiB.
  static Result<std::unique_ptr<IoUringEngine>> Create(const IoUringEngineOptions& options = {});
  // Waits for reads in flight; parts not submitted yet are cancelled.
  ~IoUringEngine() override;

  // Sources in [base, base+length) are read from `path` at offset (p - base). Errors: the file
  // cannot be opened, is shorter than `length`, or the range overlaps a registered one.
  Status RegisterFile(const std::string& path, const void* base, std::size_t length);
  // Opens an existing file (creating it is the caller's decision: this never does) and reserves
  // an address range for it (address space only, no memory). Errors: the file cannot be opened
  // as asked (missing, a directory, no permission, read-only for kReadWrite), kRead of a range
  // longer than the file, kReadWrite without a length. Thread-safe.
  Result<FileWindow> OpenFile(const std::string& path, const FileOpenOptions& options = {});
  // As OpenFile, for the file the caller holds open as `fd` (a file it just created with
  // O_EXCL, say): the engine opens that very file again (through /proc/self/fd), never a path,
  // so a name replaced meanwhile changes nothing. The caller keeps `fd` and may close it at
  // once. `name` stands for the file in messages and FileWindow::path(). Errors: fd is -1, and
  // OpenFile's. Thread-safe.
  Result<FileWindow> OpenDescriptor(int fd, const std::string& name,
                                    const FileOpenOptions& options = {});
  Status RegisterFile(const MappedFile& file);
  // Later copies from the range are refused; copies in flight finish.
  void UnregisterFile(const void* base);
  // Whether [p, p+n) lies inside one registered file (a planner asks before choosing us).
  bool Covers(const void* p, std::size_t n) const;
  // Whether [p, p+n) lies inside one file opened for writing.
  bool CoversWritable(const void* p, std::size_t n) const;
  // The direct-I/O alignment of the file under p (offsets, lengths and memory), 0 when p is in
  // no file or the file cannot be read or written with O_DIRECT (tmpfs, direct off). For a file
  // opened for writing at least the page size: direct writes never share a page with buffered
  // ones.
  std::size_t DirectAlignment(const void* p) const;
  bool ReadsSourceDirectly(const void* p, std::size_t n) const override { return Covers(p, n); }

  const EngineCapabilities& capabilities() const override;
  IoUringEngineStats ring_stats() const;

 protected:
  Status CheckOperation(const Operation& op) const override;
  Status Enqueue(std::span<const Operation> ops, Submission& submission) override;
  EngineQueue queue() const override;

 private:
  struct Impl;
  explicit IoUringEngine(std::unique_ptr<Impl> impl);
  // RegisterFile by path (from -1) or of the file behind `from`.
  Status RegisterOpened(const std::string& path, int from, const void* base, std::size_t length);
  // OpenFile (from -1) and OpenDescriptor (the file behind `from`).
  Result<FileWindow> OpenWindow(const std::string& path, int from, const FileOpenOptions& options);
  Status AddFile(std::shared_ptr<void> file);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
