// SPDX-License-Identifier: Apache-2.0
#include "tierflow/noncoherent_memory.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "coherence/lines.h"

namespace tierflow {
namespace {

// A write-back on its way to memory: a snapshot of one whole line.
struct Pending {
  std::size_t line = 0;
  std::uint64_t epoch = 0;
  std::vector<std::byte> bytes;
};

struct Cache {
  std::vector<std::byte> data;  // the cached copy of every line (valid where `valid`)
  std::vector<std::uint8_t> valid;
  std::vector<std::uint8_t> dirty;
  std::vector<Pending> pending;
  std::uint64_t epoch = 0;  // Fence starts a new one
};

Status CheckOptions(const NoncoherentMemory::Options& o) {
  const std::size_t l = o.line_size;
  if (o.size == 0)
    return Status::InvalidArgument("NoncoherentMemory: size is 0; give it a size in bytes");
  if (l < 8 || l > 4096 || (l & (l - 1)) != 0) {
    return Status::InvalidArgument(fmt::format(
        "NoncoherentMemory: line_size {} is not a power of two in [8, 4096]; use 32, 64 or 256",
        l));
  }
  if (o.cpus < 1 || o.cpus > 64) {
    return Status::InvalidArgument(
        fmt::format("NoncoherentMemory: cpus {} is outside [1, 64]", o.cpus));
  }
  for (auto [name, rate] :
       {std::pair{"eviction_rate", o.eviction_rate}, std::pair{"prefetch_rate", o.prefetch_rate},
        std::pair{"drain_rate", o.drain_rate}}) {
    if (!(rate >= 0.0 && rate <= 1.0)) {
      return Status::InvalidArgument(
          fmt::format("NoncoherentMemory: {} {} is not a probability in [0, 1]", name, rate));
    }
  }
  return Status::Ok();
}

}  // namespace

struct NoncoherentMemory::Impl {
  Options o;
  std::size_t lines = 0;
  std::vector<std::byte> memory;
  std::vector<Cache> caches;
  std::mt19937_64 rng;
  Stats stats;
  mutable std::mutex mu;

  explicit Impl(const Options& options) : o(options), rng(options.seed) {
    lines = (o.size + o.line_size - 1) / o.line_size;
    memory.assign(lines * o.line_size, std::byte{0});
    caches.resize(static_cast<std::size_t>(o.cpus));
    for (Cache& c : caches) {
      c.data.assign(memory.size(), std::byte{0});
      c.valid.assign(lines, 0);
      c.dirty.assign(lines, 0);
    }
  }

  bool Chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < p; }
  std::size_t Pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  }
  std::byte* LineIn(std::vector<std::byte>& v, std::size_t line) {
    return v.data() + line * o.line_size;
  }

  Status Check(int cpu, std::size_t offset, std::size_t size, std::size_t align) const {
    if (cpu < 0 || cpu >= o.cpus) {
      return Status::InvalidArgument(
          fmt::format("NoncoherentMemory: cpu {} does not exist; use 0 to {}", cpu, o.cpus - 1));
    }
    return CheckRange(offset, size, align);
  }
  Status CheckRange(std::size_t offset, std::size_t size, std::size_t align) const {
    if (offset > memory.size() || size > memory.size() - offset) {
      return Status::InvalidArgument(
          fmt::format("NoncoherentMemory: bytes [{}, {}) lie outside the memory's {} bytes", offset,
                      offset + size, memory.size()));
    }
    if (offset % align != 0) {
      return Status::InvalidArgument(fmt::format(
          "NoncoherentMemory: a 64-bit access at offset {} is not 8-byte aligned", offset));
    }
    return Status::Ok();
  }

  // --- moving lines ---------------------------------------------------------------------
  void Queue(Cache& c, std::size_t line) {
    Pending p{line, c.epoch, {}};
    p.bytes.assign(LineIn(c.data, line), LineIn(c.data, line) + o.line_size);
    c.pending.push_back(std::move(p));
    c.dirty[line] = 0;
  }
  void Land(Cache& c, std::size_t index) {
    const Pending& p = c.pending[index];
    std::memcpy(LineIn(memory, p.line), p.bytes.data(), o.line_size);
    c.pending.erase(c.pending.begin() + static_cast<std::ptrdiff_t>(index));
    ++stats.write_backs;
  }
  // One pending write-back of the oldest epoch lands: any line's, in no particular order, but
  // the write-backs of one line in the order they were made (the memory system keeps one
  // address's writes in order).
  void DrainOne(Cache& c) {
    if (c.pending.empty()) return;
    std::uint64_t oldest = c.pending.front().epoch;
    for (const Pending& p : c.pending) oldest = std::min(oldest, p.epoch);
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < c.pending.size(); ++i) {
      if (c.pending[i].epoch == oldest && FirstForItsLine(c, i)) candidates.push_back(i);
    }
    Land(c, candidates[Pick(candidates.size())]);
  }
  static bool FirstForItsLine(const Cache& c, std::size_t i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (c.pending[j].line == c.pending[i].line) return false;
    }
    return true;
  }
  void Fill(Cache& c, std::size_t line) {
    const std::byte* from = LineIn(memory, line);
    for (auto it = c.pending.rbegin(); it != c.pending.rend(); ++it) {
      if (it->line == line) {  // the core sees its own write-back that has not landed
        from = it->bytes.data();
        break;
      }
    }
    std::memcpy(LineIn(c.data, line), from, o.line_size);
    c.valid[line] = 1;
    c.dirty[line] = 0;
  }
  void Drop(Cache& c, std::size_t line, bool write_back) {
    if (c.dirty[line] && write_back) Queue(c, line);
    if (c.dirty[line]) ++stats.dirty_discarded;
    c.valid[line] = 0;
    c.dirty[line] = 0;
  }

  // The seeded background of every CPU access: evictions, prefetches, landings.
  void Background(Cache& c) {
    ++stats.accesses;
    if (Chance(o.eviction_rate)) {
      const std::size_t line = Pick(lines);
      if (c.valid[line]) {
        Drop(c, line, true);
        ++stats.evictions;
      }
    }
    if (Chance(o.prefetch_rate)) {
      const std::size_t line = Pick(lines);
      if (!c.valid[line]) {
        Fill(c, line);
        ++stats.prefetches;
      }
    }
    TimePasses();
  }
  // Write-backs land whoever runs (a device too): an agent that has finished still has its
  // write-backs reach memory eventually, as hardware's do.
  void TimePasses() {
    if (Chance(o.drain_rate)) DrainOne(caches[Pick(caches.size())]);
  }

  // --- CPU accesses ---------------------------------------------------------------------
  void Access(int cpu, std::size_t offset, std::byte* out, const std::byte* in, std::size_t n) {
    Cache& c = caches[static_cast<std::size_t>(cpu)];
    Background(c);
    while (n > 0) {
      const std::size_t line = offset / o.line_size;
      const std::size_t k = std::min(n, (line + 1) * o.line_size - offset);
      if (!c.valid[line]) Fill(c, line);
      if (in != nullptr) {
        std::memcpy(c.data.data() + offset, in, k);
        c.dirty[line] = 1;
        in += k;
      } else {
        std::memcpy(out, c.data.data() + offset, k);
        out += k;
      }
      offset += k;
      n -= k;
    }
  }

  // The public accesses and maintenance: under the lock, checked first.
  Status CheckedAccess(int cpu, std::size_t offset, std::byte* out, const std::byte* in,
                       std::size_t n, std::size_t align) {
    std::lock_guard lock(mu);
    if (Status s = Check(cpu, offset, n, align); !s.ok()) return s;
    Access(cpu, offset, out, in, n);
    return Status::Ok();
  }
  Status CheckedMaintain(int cpu, coherence::Maintenance m, std::size_t offset, std::size_t size) {
    std::lock_guard lock(mu);
    if (Status s = Check(cpu, offset, size, 1); !s.ok()) return s;
    Maintain(cpu, m, offset, size);
    return Status::Ok();
  }

  void Maintain(int cpu, coherence::Maintenance m, std::size_t offset, std::size_t size) {
    Cache& c = caches[static_cast<std::size_t>(cpu)];
    const auto r = coherence::LinesCovering(offset, size, o.line_size);
    const std::size_t first = r.first / o.line_size;
    for (std::size_t line = first; line < first + r.count; ++line) {
      if (!c.valid[line]) continue;
      if (m == coherence::Maintenance::kWriteBack) {
        if (c.dirty[line]) Queue(c, line);
        continue;
      }
      const bool edge = line * o.line_size < offset || (line + 1) * o.line_size > offset + size;
      const bool write_back =
          m == coherence::Maintenance::kWriteBackInvalidate || edge || !o.invalidate_discards;
      Drop(c, line, write_back);
    }
  }
};

NoncoherentMemory::NoncoherentMemory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NoncoherentMemory::~NoncoherentMemory() = default;

Result<std::unique_ptr<NoncoherentMemory>> NoncoherentMemory::Create(const Options& options) {
  if (Status s = CheckOptions(options); !s.ok()) return s;
  return std::unique_ptr<NoncoherentMemory>(new NoncoherentMemory(std::make_unique<Impl>(options)));
}

Result<std::uint64_t> NoncoherentMemory::Load(int cpu, std::size_t offset) {
  std::uint64_t v = 0;
  if (Status s = impl_->CheckedAccess(cpu, offset, reinterpret_cast<std::byte*>(&v), nullptr, 8, 8);
      !s.ok()) {
    return s;
  }
  return v;
}

Status NoncoherentMemory::Store(int cpu, std::size_t offset, std::uint64_t value) {
  return impl_->CheckedAccess(cpu, offset, nullptr, reinterpret_cast<const std::byte*>(&value), 8,
                              8);
}

Status NoncoherentMemory::Read(int cpu, std::size_t offset, std::span<std::byte> out) {
  return impl_->CheckedAccess(cpu, offset, out.data(), nullptr, out.size(), 1);
}

Status NoncoherentMemory::Write(int cpu, std::size_t offset, std::span<const std::byte> in) {
  return impl_->CheckedAccess(cpu, offset, nullptr, in.data(), in.size(), 1);
}

Status NoncoherentMemory::WriteBack(int cpu, std::size_t offset, std::size_t size) {
  return impl_->CheckedMaintain(cpu, coherence::Maintenance::kWriteBack, offset, size);
}

Status NoncoherentMemory::Invalidate(int cpu, std::size_t offset, std::size_t size) {
  return impl_->CheckedMaintain(cpu, coherence::Maintenance::kInvalidate, offset, size);
}

Status NoncoherentMemory::WriteBackInvalidate(int cpu, std::size_t offset, std::size_t size) {
  return impl_->CheckedMaintain(cpu, coherence::Maintenance::kWriteBackInvalidate, offset, size);
}

Status NoncoherentMemory::Fence(int cpu) {
  std::lock_guard lock(impl_->mu);
  if (Status s = impl_->Check(cpu, 0, 0, 1); !s.ok()) return s;
  ++impl_->caches[static_cast<std::size_t>(cpu)].epoch;
  return Status::Ok();
}

Status NoncoherentMemory::Complete(int cpu) {
  std::lock_guard lock(impl_->mu);
  if (Status s = impl_->Check(cpu, 0, 0, 1); !s.ok()) return s;
  Cache& c = impl_->caches[static_cast<std::size_t>(cpu)];
  while (!c.pending.empty()) impl_->DrainOne(c);
  ++c.epoch;
  return Status::Ok();
}

Result<std::uint64_t> NoncoherentMemory::DeviceLoad(std::size_t offset) {
  std::uint64_t v = 0;
  if (Status s = DeviceRead(offset, {reinterpret_cast<std::byte*>(&v), 8}); !s.ok()) return s;
  return v;
}

Status NoncoherentMemory::DeviceStore(std::size_t offset, std::uint64_t value) {
  return DeviceWrite(offset, {reinterpret_cast<const std::byte*>(&value), 8});
}

Status NoncoherentMemory::DeviceRead(std::size_t offset, std::span<std::byte> out) {
  std::lock_guard lock(impl_->mu);
  if (Status s = impl_->CheckRange(offset, out.size(), 1); !s.ok()) return s;
  impl_->TimePasses();
  std::memcpy(out.data(), impl_->memory.data() + offset, out.size());
  return Status::Ok();
}

Status NoncoherentMemory::DeviceWrite(std::size_t offset, std::span<const std::byte> in) {
  std::lock_guard lock(impl_->mu);
  if (Status s = impl_->CheckRange(offset, in.size(), 1); !s.ok()) return s;
  impl_->TimePasses();
  std::memcpy(impl_->memory.data() + offset, in.data(), in.size());
  return Status::Ok();
}

NoncoherentMemory::Stats NoncoherentMemory::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

const NoncoherentMemory::Options& NoncoherentMemory::options() const { return impl_->o; }

}  // namespace tierflow
