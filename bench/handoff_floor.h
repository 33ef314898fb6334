// SPDX-License-Identifier: Apache-2.0
// The floor under a copy split over threads: the same copy cut into the same contiguous parts,
// run by the calling thread and parts - 1 helper threads pinned to other CPUs, started by one
// release store and joined by spinning on one word per helper, with glibc memcpy. No queue,
// no operation state, no wake-up: what any synchronous split of that copy costs on this
// machine, against which `bench submit` states the engine's own cost on a split copy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace tierflow::bench {

class HandOffFloor {
 public:
  // Splits [0, bytes) of src/dst into `parts` parts (1 or more; the last takes the rest). The
  // helpers start at once and spin until destruction: keep one alive only while measuring.
  // `cpus`: the CPUs to run on; the calling thread should run on cpus[0] (PinThisThreadTo),
  // helper i is pinned to cpus[i % cpus.size()] (best effort; none when empty).
  HandOffFloor(char* dst, const char* src, std::size_t bytes, int parts,
               const std::vector<int>& cpus);
  ~HandOffFloor();
  HandOffFloor(const HandOffFloor&) = delete;
  HandOffFloor& operator=(const HandOffFloor&) = delete;

  // One split copy: starts the helpers, copies the last part here, returns when every part
  // is done. Not thread-safe: one caller.
  void Copy();

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> done{0};  // the last round this helper finished
  };
  void Help(int part);

  char* dst_;
  const char* src_;
  std::size_t part_bytes_;
  std::size_t bytes_;
  int parts_;
  alignas(64) std::atomic<std::uint64_t> round_{0};  // the helpers' start signal
  std::atomic<bool> quit_{false};
  std::unique_ptr<Slot[]> slots_;
  std::vector<std::thread> helpers_;
};

}  // namespace tierflow::bench
