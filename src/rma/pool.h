// SPDX-License-Identifier: Apache-2.0
// A memory pool that several hosts map (a CXL memory device shared by hosts, as a DAX device
// or a file on it), with a small allocator whose metadata lives in the pool itself.
//
// The pool is a regular file or a character (DAX) device of one user, mode 0600, mapped shared
// by every process that uses it. Its first 2 MiB hold the metadata; the rest is handed out in
// whole pages:
//   header    magic, version, identity (a random 64-bit id), size: written once, magic last
//   lock      the allocator's lock: the lease slot and token of its holder
//   leases    one slot per process using the pool: a random token and a heartbeat (the
//             wall-clock time in milliseconds, renewed by a thread every quarter lease)
//   records   one per allocation: offset, size, generation and the set of lease slots that
//             hold it (a bit per slot)
// A process that stops renewing its lease for longer than the lease (it crashed, or its host
// did) is dead to the others; the next allocator under the lock drops its bits from every
// record and frees the records nobody holds any more: a crashed host's allocations are reclaimed
// once every process that held them is gone, and an allocation some live process still holds is
// never handed out again. Every change to the metadata is published by one aligned 8-byte store
// (a record's generation last), so a process that dies anywhere in an update leaves the metadata
// consistent, and the lock it held is broken once its lease has run out. Two jobs may share a
// pool: each allocation belongs to the processes that hold it.
//
// The pool may not be coherent between hosts: every metadata word another process changes is
// invalidated before it is read and written back after it is changed (tierflow/coherence.h), and
// read-modify-writes act at the point of coherence, as the device's atomics do. Wall clocks of
// the hosts must agree to well within a lease (NTP does): a lease is judged by the reader's
// clock. A process stopped for longer than a lease (SIGSTOP, a debugger) loses its allocations
// to the others; that is why the lease is seconds long.
//
// Thread-safety: a Pool may be used by several threads; regions by one owner each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tierflow/status.h"

namespace tierflow::rma {

struct PoolOptions {
  // The size of a pool file created because the path did not exist (a sparse file: pages use
  // memory only when touched). Ignored for an existing pool.
  std::uint64_t create_size = std::uint64_t{1} << 30;
  // How long a process may go without renewing its lease before the others treat it as dead.
  std::uint64_t lease_ms = 10000;
};

// What a process needs to find an allocation another process made: plain data, sent as bytes.
struct PoolRef {
  std::uint64_t pool_id = 0;     // the pool's identity (its header)
  std::uint64_t generation = 0;  // the record's generation when it was allocated
  std::uint64_t offset = 0;      // from the start of the pool, whole pages
  std::uint64_t size = 0;        // bytes, whole pages
  std::uint32_t record = 0;
  std::uint32_t padding = 0;
};

// A live process using a pool, as others see it: its lease slot and token.
struct PoolLease {
  std::uint32_t slot = 0;
  std::uint64_t token = 0;
};

class Pool;

// An allocation this process holds. Move-only; the destructor releases this process's hold
// (the last holder's release frees it) and, for a region mapped over the program's memory,
// leaves that memory private again with the region's bytes.
class PoolRegion {
 public:
  PoolRegion() = default;
  PoolRegion(PoolRegion&& other) noexcept;
  PoolRegion& operator=(PoolRegion&& other) noexcept;
  PoolRegion(const PoolRegion&) = delete;
  PoolRegion& operator=(const PoolRegion&) = delete;
  ~PoolRegion();

  // Moves the program's memory [base, base+size) into the region: its bytes are copied in and
  // the region is mapped over the range (MAP_FIXED), so every pointer into it stays valid and
  // now reaches pool memory. Whole pages of private anonymous memory only, no more than the
  // region holds. Errors: kInvalidArgument (not whole pages, larger than the region),
  // kUnsupported (memory that is not private and anonymous), kIoError (the mapping failed).
  Status MapOver(void* base, std::size_t size);

  std::byte* data() const { return data_; }
  std::size_t size() const { return static_cast<std::size_t>(ref_.size); }
  const PoolRef& ref() const { return ref_; }

 private:
  friend class Pool;
  void Reset();

  std::shared_ptr<Pool> pool_;
  PoolRef ref_;
  std::byte* data_ = nullptr;
  std::size_t over_ = 0;  // bytes mapped over the program's memory at data_ (MapOver)
};

class Pool : public std::enable_shared_from_this<Pool> {
 public:
  friend class PoolRegion;
  // The first 2 MiB hold the metadata; a pool needs room for at least one more 2 MiB.
  static constexpr std::uint64_t kMetadataBytes = std::uint64_t{2} << 20;
  static constexpr std::uint64_t kMinimumBytes = 2 * kMetadataBytes;
  static constexpr std::uint32_t kLeases = 256;
  static constexpr std::uint32_t kRecords = 1024;

  // Opens the pool at `path`, creating it (O_EXCL, mode 0600, options.create_size bytes) when
  // nothing is there, takes a lease and starts renewing it. Refusals, each naming the fix:
  // kInvalidArgument for a path that is a symbolic link, not a regular file or character
  // device, of another user, readable or writable by others than its owner (mode not 0600),
  // smaller than kMinimumBytes, holding other data (not a tierflow pool), of another version,
  // of another size than its header says, or left half-formatted by a process that died;
  // kUnsupported when its filesystem cannot map it shared; kOutOfMemory when every lease slot
  // is held by a live process. kIoError for a system call that failed (the path cannot be
  // opened or mapped here). A pool whose metadata area is all zeros (a new file, a new DAX
  // device) is formatted first, by one process even when several open it at once.
  static Result<std::shared_ptr<Pool>> Open(const std::string& path, const PoolOptions& options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A new allocation of `bytes` (rounded up to pages; at least one) held by this process.
  // Errors: kOutOfMemory naming the pool's free bytes and the fix when no free range is large
  // enough or every record is in use; kInvalidArgument for a size that does not fit the pool.
  Result<PoolRegion> Allocate(std::uint64_t bytes);
  // Holds the allocation another process made and sent as `ref`. Errors: kNotFound when it has
  // been freed (its holders are gone) or belongs to another pool.
  Result<PoolRegion> Attach(const PoolRef& ref);

  // Whether the process that held `lease` when it sent it still renews it.
  bool Alive(const PoolLease& lease) const;
  PoolLease lease() const { return {slot_, token_}; }
  // A word of this process's lease slot that others can read: a process that reads back the
  // value another wrote shares the pool's memory with it (not a copy of the file).
  void WriteProbe(std::uint64_t value);
  std::uint64_t ReadProbe(const PoolLease& lease) const;

  std::uint64_t id() const;
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Bytes in no allocation now (after reclaiming the dead's), for messages and tools.
  std::uint64_t FreeBytes();

 private:
  struct Header;
  struct Lease;
  struct Record;
  Pool() = default;
  Status Map(int fd, std::uint64_t size);
  Status Format(std::uint64_t size);
  Status CheckHeader() const;
  Status TakeLease();
  void Renew();
  Header& header() const;
  Lease& lease(std::uint32_t slot) const;
  Record& record(std::uint32_t index) const;
  std::uint64_t LockWord() const;
  void Lock();
  void Refresh() const;
  void Unlock();
  bool Dead(std::uint32_t slot) const;
  void DropHold(std::uint32_t index, std::uint32_t slot);
  void DropHolds(std::uint32_t slot);
  void Reclaim();
  std::uint64_t FreeBytesLocked() const;
  bool FindRange(std::uint64_t bytes, std::uint64_t& offset) const;
  void Release(const PoolRef& ref);
  PoolRegion Region(const PoolRef& ref);

  std::string path_;
  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint64_t lease_ms_ = 0;
  std::uint32_t slot_ = 0;
  std::uint64_t token_ = 0;
  std::mutex mu_;  // one allocator call of this process at a time (the pool lock is per process)
  std::mutex renew_mu_;
  std::condition_variable renew_cv_;
  bool stopping_ = false;
  std::thread renewer_;
};

}  // namespace tierflow::rma
