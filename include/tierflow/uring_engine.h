// The storage engine: copies out of files mapped into memory, done as io_uring reads of the
// file instead of page faults through the mapping (liburing).
//
// A source must lie inside a file registered with RegisterFile (a mapping of the file from
// offset 0, e.g. MappedFile). A copy becomes reads of at most max_read_bytes each, kept at
// most queue_depth in flight; reads go through O_DIRECT where the file system supports it and
// the piece is aligned as direct I/O needs (file offset, length and destination at the file's
// direct-I/O alignment), through the page cache otherwise (the unaligned head and tail of a
// range, tmpfs). A completion thread reaps completions, continues short reads and resubmits.
//
// Only kCopy is supported (a file-backed source, a memory destination). Errors name the file,
// the offset and the cause (the OS error, or the file ending before its mapping does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tierflow/engine.h"
#include "tierflow/export.h"

namespace tierflow {

struct IoUringEngineOptions {
  unsigned queue_depth = 64;                          // reads in flight at most
  std::size_t max_read_bytes = std::size_t{1} << 20;  // larger copies are split
  bool direct = true;                                 // O_DIRECT where possible
};

struct IoUringEngineStats {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t reads = 0;         // reads submitted (continuations of short reads included)
  std::uint64_t direct_reads = 0;  // of which O_DIRECT
  std::uint64_t short_reads = 0;   // continued
  std::uint64_t errors = 0;        // reads that failed
};

// A read-only shared mapping of a whole file, released on destruction.
class TIERFLOW_EXPORT MappedFile {
 public:
  // Errors: the file cannot be opened or is empty.
  static Result<MappedFile> Open(const std::string& path);
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
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
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
  Status RegisterFile(const MappedFile& file);
  // Later copies from the range are refused; copies in flight finish.
  void UnregisterFile(const void* base);
  // Whether [p, p+n) lies inside one registered file (a planner asks before choosing us).
  bool Covers(const void* p, std::size_t n) const;
  bool ReadsSourceDirectly(const void* p, std::size_t n) const override { return Covers(p, n); }

  const EngineCapabilities& capabilities() const override;
  IoUringEngineStats stats() const;

 protected:
  Status CheckOperation(const Operation& op) const override;
  Status Enqueue(std::span<const Operation> ops, Submission& submission) override;
  EngineQueue queue() const override;

 private:
  struct Impl;
  explicit IoUringEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierflow
