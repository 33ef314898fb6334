// SPDX-License-Identifier: Apache-2.0
// Memory that the ranks of one node map together, private to the job's user.
//
// A segment is a memfd of one process, opened by the others through /proc/PID/fd/FD (the
// kernel allows that only to processes that may ptrace-read the owner: the same user, a
// dumpable process), so it has no name anyone else could guess or map and nothing is left
// behind when a rank dies. Where /proc does not allow it (a hardened /proc, another user
// namespace), the fallback is a POSIX shared memory object of mode 0600 with a random
// 128-bit name, unlinked as soon as every rank has mapped it (MarkMapped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tierflow/status.h"

namespace tierflow::rma {

// What another process needs to map a segment: plain data, sent between ranks as bytes.
struct SegmentName {
  std::int32_t pid = 0;    // the creator
  std::int32_t fd = -1;    // its memfd, or -1 for the named fallback
  std::uint64_t size = 0;  // bytes
  // The file's identity (st_dev, st_ino): Open maps only this file, never whatever
  // /proc/PID/fd/FD or the name happens to be (another PID namespace, a recycled PID).
  std::uint64_t dev = 0, ino = 0;
  char shm_name[64] = {};  // "/tierflow-rma-<32 hex>" for the fallback, else empty
};

// A mapped segment. Move-only; the destructor unmaps and closes.
// Thread-safety: none; one owner.
class SharedSegment {
 public:
  SharedSegment() = default;
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  // A new zero-filled segment of `size` bytes (rounded up to pages; 0 gives one page), mapped
  // read-write: a memfd, or with `named` the fallback (whose name stays until MarkMapped or the
  // segment's destruction, whichever comes first). Errors: kOutOfMemory naming the size when
  // memory or file descriptors run out, or when the size does not fit in a file.
  static Result<SharedSegment> Create(std::size_t size, bool named = false);
  // Turns [base, base+size) (whole pages: base and size multiples of the page size) into a
  // segment in place: its bytes are copied into a new memfd whose mapping then replaces the
  // range (MAP_FIXED), so every pointer into it stays valid. On destruction the range becomes
  // private memory again with the same bytes. Stores into the range by other threads while
  // this runs would be lost: call it where the range is quiescent (collective window creation).
  // Only private anonymous memory (heap, anonymous mmap) qualifies: memory already shared
  // with someone (an MPI's shared window, a file) must stay theirs.
  // Errors: kInvalidArgument for a range that is not whole pages; kUnsupported for memory
  // that is not all private and anonymous (the message says what it is); kOutOfMemory.
  static Result<SharedSegment> ShareInPlace(void* base, std::size_t size);
  // Maps the segment another process of this job created, after checking that what it opened
  // is that segment: a regular file of the size and identity in `name`. Errors: kUnsupported
  // when the kernel refuses (another user, a non-dumpable process) or the file is another one;
  // kNotFound when the creator is gone or the name was unlinked; the message says which and why.
  static Result<SharedSegment> Open(const SegmentName& name);

  // After every rank has opened it: removes the fallback's name (the memfd has none). Idempotent.
  void MarkMapped();
  // Whether other processes may open the segment through /proc/PID/fd while its creator keeps
  // the descriptor (MPI_Alloc_mem memory lives between windows): the file's mode, 0600 or 0.
  // The kernel lets any process of the user that may ptrace-read the creator open that path,
  // Yama or not: a segment kept open stays closed to them except while a window is created.
  // Errors: kIoError when the mode cannot be changed.
  Status SetOpenable(bool openable);

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const SegmentName& name() const { return name_; }

 private:
  void Reset();

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
  bool in_place_ = false;  // data_ is the user's range: restore it, do not unmap it
  SegmentName name_;
};

// Whether [base, base+size) may be replaced by a shared mapping of the same bytes: whole pages
// (base and size multiples of the page size) of private anonymous memory (heap, malloc's
// mmaps). Memory already shared (an MPI's shared window, a file, a window shared in place
// before) would stop being shared with whoever else maps it. Errors: kInvalidArgument for a
// range that is not whole pages; kUnsupported naming what the memory is.
Status CheckInPlace(void* base, std::size_t size);
// The shared range at `at` becomes private anonymous memory with the same bytes (one MAP_FIXED
// mmap replaces the mapping; the range is never unmapped). If memory runs out the range stays
// shared, which is still correct memory for its owner.
void RestorePrivate(std::byte* at, std::size_t size);

// Whether this process may read another's memory with process_vm_readv (the kernel's ptrace
// rules: Yama's ptrace_scope, same user, dumpable). Checked by reading one byte at `addr`.
bool CanReadProcess(std::int32_t pid, const void* addr);

}  // namespace tierflow::rma
