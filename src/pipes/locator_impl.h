// SPDX-License-Identifier: Apache-2.0
// What a Locator holds. Private to the pipes component.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tierflow/buffer.h"
#include "tierflow/locator.h"
#include "tierflow/uring_engine.h"

namespace tierflow::detail {

class TieredArea;

// A descriptor closed with its last owner.
struct SharedFd {
  int fd = -1;
  ~SharedFd();
};

struct LocatorImpl {
  LocatorKind kind = LocatorKind::kMemory;
  std::string name;
  std::uint64_t capacity = 0;
  std::size_t alignment = 1;
  TierKind tier = TierKind::kDram;
  int node = -1;
  std::uint32_t mechanisms = 0;
  bool writable = true;
  bool modelled = false;
  Buffer buffer;              // memory and staging locators own theirs
  std::byte* data = nullptr;  // memory: the first byte
  // Files: a window over [0, file_offset + capacity) of the file, so that byte i of the
  // locator is window.at(file_offset + i).
  FileWindow window;
  std::string path;
  std::uint64_t file_offset = 0;
  std::size_t direct_alignment = 0;  // 0: no O_DIRECT
  // A file this runtime created (kCreate): a blueprint whose instantiation fails removes it,
  // through `file`, only while its path still names that very file (RemoveIfStill).
  bool created = false;
  std::shared_ptr<SharedFd> file;      // files declared for writing: to give back blocks (Release)
  std::vector<Locator> members;        // spill chains, tiered areas' stages
  std::shared_ptr<TieredArea> tiered;  // tiered areas: where each extent is
  bool stage = false;                  // a tiered area's stage: planned for, never connected

  // The address that stands for byte `offset` (memory, or the file window).
  std::byte* At(std::uint64_t offset) const {
    return kind == LocatorKind::kFile ? window.at(file_offset + offset) : data + offset;
  }
  bool is_file() const { return kind == LocatorKind::kFile; }
  // Calibration endpoint: "dram:0", or "file".
  std::string Endpoint() const;
};

// How the library makes locators and reads what they hold (Locator keeps both private).
struct LocatorAccess {
  static Locator Make(std::shared_ptr<LocatorImpl> impl) { return Locator(std::move(impl)); }
  static LocatorImpl* Get(const Locator& l) { return l.impl_.get(); }
};

// The leaves of a locator: a spill chain's members, a tiered area's stages, or the locator.
inline std::vector<const LocatorImpl*> Leaves(const Locator& l) {
  if (l.kind() != LocatorKind::kSpill && l.kind() != LocatorKind::kTiered) {
    return {LocatorAccess::Get(l)};
  }
  std::vector<const LocatorImpl*> out;
  for (const Locator& m : l.members()) out.push_back(LocatorAccess::Get(m));
  return out;
}

}  // namespace tierflow::detail
