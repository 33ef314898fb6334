// SPDX-License-Identifier: Apache-2.0
// Protocols proved on the non-coherent memory simulator: each runs under many seeded
// schedules with no false alarm, and each of its write-backs, invalidates and fences is shown
// necessary by running the protocol without it (a mutant) until a schedule fails.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/protocol_runner.h"
#include "tierflow/noncoherent_memory.h"

namespace tierflow::sim {
namespace {

constexpr int kRounds = 8;

std::uint64_t Word(std::uint64_t round, std::size_t j) { return round * 1000 + j + 1; }

// --- 1. producer/consumer ring: head and tail counters, slots of one line each -------------
struct RingLayout {
  std::size_t line, head, tail, slots;
  int capacity = 3;
  std::size_t Slot(std::uint64_t i) const { return slots + (i - 1) % capacity * line; }
};

Task RingProducer(Agent p, RingLayout l) {
  for (std::uint64_t i = 1; i <= kRounds; ++i) {
    for (;;) {
      co_await p.Invalidate(l.tail, 8, "producer invalidates tail");
      if (i - co_await p.Load(l.tail) <= static_cast<std::uint64_t>(l.capacity)) break;
    }
    for (std::size_t j = 0; j < l.line / 8; ++j) co_await p.Store(l.Slot(i) + 8 * j, Word(i, j));
    co_await p.WriteBack(l.Slot(i), l.line, "producer writes back the slot");
    co_await p.Fence("producer fences the slot before head");
    co_await p.Store(l.head, i);
    co_await p.WriteBack(l.head, 8, "producer writes back head");
  }
}

Task RingConsumer(Agent c, RingLayout l) {
  for (std::uint64_t i = 1; i <= kRounds; ++i) {
    for (;;) {
      co_await c.Invalidate(l.head, 8, "consumer invalidates head");
      if (co_await c.Load(l.head) >= i) break;
    }
    co_await c.Invalidate(l.Slot(i), l.line, "consumer invalidates the slot");
    for (std::size_t j = 0; j < l.line / 8; ++j) {
      const std::uint64_t v = co_await c.Load(l.Slot(i) + 8 * j);
      if (v != Word(i, j))
        c.Fail("slot " + std::to_string(i) + " word " + std::to_string(j) + " read " +
               std::to_string(v) + ", released " + std::to_string(Word(i, j)));
    }
    co_await c.Store(l.tail, i);
    co_await c.WriteBack(l.tail, 8, "consumer writes back tail");
  }
}

void Ring(Run& run, std::size_t line) {
  const RingLayout l{line, 0, line, 2 * line};
  run.Spawn(RingProducer(Agent(run, 0), l));
  run.Spawn(RingConsumer(Agent(run, 1), l));
}

// The same ring with head and tail in one line: each side's whole-line write-back carries a
// stale copy of the other's counter. No hook can fix that; the layout must.
void RingWithSharedCounterLine(Run& run, std::size_t line) {
  const RingLayout l{line, 0, 8, 2 * line};
  run.Spawn(RingProducer(Agent(run, 0), l));
  run.Spawn(RingConsumer(Agent(run, 1), l));
}

// --- 2. ownership hand-off: one writer at a time, the token says who ----------------------
Task Owner(Agent a, int me, std::size_t line, int buffer_lines) {
  const std::size_t token = 0, buffer = line, words = buffer_lines * line / 8;
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    if (static_cast<int>(r % 2) != me) continue;
    for (;;) {
      co_await a.Invalidate(token, 8, "owner invalidates the token");
      if (co_await a.Load(token) == r) break;
    }
    co_await a.Invalidate(buffer, words * 8, "owner invalidates the buffer");
    for (std::size_t j = 0; j < words; ++j) {
      const std::uint64_t v = co_await a.Load(buffer + 8 * j);
      if (v != (r == 1 ? 0 : Word(r - 1, j)))
        a.Fail("round " + std::to_string(r) + " word " + std::to_string(j) + " read " +
               std::to_string(v) + ": not what the previous owner released");
    }
    for (std::size_t j = 0; j < words; ++j) co_await a.Store(buffer + 8 * j, Word(r, j));
    co_await a.WriteBack(buffer, words * 8, "owner writes back the buffer");
    co_await a.Fence("owner fences the buffer before the token");
    co_await a.Store(token, r + 1);
    co_await a.WriteBack(token, 8, "owner writes back the token");
  }
}

void HandOff(Run& run, std::size_t line) {
  (void)run.memory().DeviceStore(0, 1);
  run.Spawn(Owner(Agent(run, 0), 0, line, 3));
  run.Spawn(Owner(Agent(run, 1), 1, line, 3));
}

// --- 3. DMA from a device: clean before the device writes, invalidate before reading ------
Task DmaFromDeviceCpu(Agent cpu, std::size_t line) {
  const std::size_t buf = 0, words = 2 * line / 8, go = 2 * line, done = 3 * line;
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    // The CPU used the buffer before handing it over (here: poisoned it).
    for (std::size_t j = 0; j < words; ++j) co_await cpu.Store(buf + 8 * j, 0xdeadull);
    co_await cpu.WriteBack(buf, words * 8, "cpu cleans the buffer before the device writes");
    co_await cpu.Fence("cpu fences the clean before the doorbell");
    co_await cpu.Store(go, r);
    co_await cpu.WriteBack(go, 8, "cpu writes back the doorbell");
    for (;;) {
      co_await cpu.Invalidate(done, 8, "cpu invalidates the completion word");
      if (co_await cpu.Load(done) == r) break;
    }
    co_await cpu.Invalidate(buf, words * 8, "cpu invalidates the buffer before reading");
    for (std::size_t j = 0; j < words; ++j) {
      const std::uint64_t v = co_await cpu.Load(buf + 8 * j);
      if (v != Word(r, j))
        cpu.Fail("round " + std::to_string(r) + " word " + std::to_string(j) + " read " +
                 std::to_string(v) + ", the device wrote " + std::to_string(Word(r, j)));
    }
  }
}

Task DmaFromDeviceDevice(Agent dev, std::size_t line) {
  const std::size_t buf = 0, words = 2 * line / 8, go = 2 * line, done = 3 * line;
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    while (co_await dev.Load(go) != r) {
    }
    for (std::size_t j = 0; j < words; ++j) co_await dev.Store(buf + 8 * j, Word(r, j));
    co_await dev.Store(done, r);
  }
}

void DmaFromDevice(Run& run, std::size_t line) {
  run.Spawn(DmaFromDeviceCpu(Agent(run, 0), line));
  run.Spawn(DmaFromDeviceDevice(Agent(run, -1), line));
}

// --- 4. DMA to a device: clean before ringing the doorbell --------------------------------
Task DmaToDeviceCpu(Agent cpu, std::size_t line) {
  const std::size_t buf = 0, words = 2 * line / 8, bell = 2 * line, done = 3 * line;
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    for (;;) {
      co_await cpu.Invalidate(done, 8, "cpu invalidates the completion word");
      if (co_await cpu.Load(done) == r - 1) break;
    }
    for (std::size_t j = 0; j < words; ++j) co_await cpu.Store(buf + 8 * j, Word(r, j));
    co_await cpu.WriteBack(buf, words * 8, "cpu cleans the buffer");
    co_await cpu.Fence("cpu fences the buffer before the doorbell");
    co_await cpu.Store(bell, r);
    co_await cpu.WriteBack(bell, 8, "cpu writes back the doorbell");
  }
}

Task DmaToDeviceDevice(Agent dev, std::size_t line) {
  const std::size_t buf = 0, words = 2 * line / 8, bell = 2 * line, done = 3 * line;
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    while (co_await dev.Load(bell) != r) {
    }
    for (std::size_t j = 0; j < words; ++j) {
      const std::uint64_t v = co_await dev.Load(buf + 8 * j);
      if (v != Word(r, j))
        dev.Fail("round " + std::to_string(r) + " the device read " + std::to_string(v) +
                 ", the CPU wrote " + std::to_string(Word(r, j)));
    }
    co_await dev.Store(done, r);
  }
}

void DmaToDevice(Run& run, std::size_t line) {
  run.Spawn(DmaToDeviceCpu(Agent(run, 0), line));
  run.Spawn(DmaToDeviceDevice(Agent(run, -1), line));
}

// --- 5. an unaligned range whose edge lines hold the consumer's own bytes -----------------
struct Unaligned {
  std::size_t line, begin, end, go, flag;
  explicit Unaligned(std::size_t l)
      : line(l), begin(l - 5), end(3 * l + 7), go(4 * l), flag(5 * l) {}
  std::vector<std::byte> Range(std::uint64_t r) const {
    std::vector<std::byte> v(end - begin);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = std::byte(r * 31 + k);
    return v;
  }
  // The consumer's bytes: the rest of the first and the last line.
  std::vector<std::byte> Low(std::uint64_t r) const { return Bytes(begin, r * 17); }
  std::vector<std::byte> High(std::uint64_t r) const { return Bytes(4 * line - end, r * 13); }
  static std::vector<std::byte> Bytes(std::size_t n, std::uint64_t base) {
    std::vector<std::byte> v(n);
    for (std::size_t k = 0; k < n; ++k) v[k] = std::byte(base + 3 * k);
    return v;
  }
};

Task UnalignedProducer(Agent p, Unaligned u) {
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    for (;;) {
      co_await p.Invalidate(u.go, 8, "producer invalidates go");
      if (co_await p.Load(u.go) == r) break;
    }
    co_await p.Invalidate(u.begin, u.end - u.begin, "producer invalidates the range");
    const std::vector<std::byte> data = u.Range(r);
    co_await p.Write(u.begin, data);
    co_await p.WriteBack(u.begin, u.end - u.begin, "producer writes back the range");
    co_await p.Fence("producer fences the range before the flag");
    co_await p.Store(u.flag, r);
    co_await p.WriteBack(u.flag, 8, "producer writes back the flag");
  }
}

Task UnalignedConsumer(Agent c, Unaligned u) {
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    const std::vector<std::byte> low = u.Low(r), high = u.High(r);
    co_await c.Write(0, low);
    co_await c.Write(u.end, high);
    co_await c.WriteBack(0, u.begin, "consumer writes back its bytes");
    co_await c.WriteBack(u.end, high.size(), "consumer writes back its bytes");
    co_await c.Fence("consumer fences its bytes before go");
    co_await c.Store(u.go, r);
    co_await c.WriteBack(u.go, 8, "consumer writes back go");
    for (;;) {
      co_await c.Invalidate(u.flag, 8, "consumer invalidates the flag");
      if (co_await c.Load(u.flag) == r) break;
    }
    co_await c.Invalidate(u.begin, u.end - u.begin, "consumer invalidates the range");
    std::vector<std::byte> got(u.end - u.begin), got_low(low.size()), got_high(high.size());
    co_await c.Read(u.begin, got);
    co_await c.Read(0, got_low);
    co_await c.Read(u.end, got_high);
    if (got != u.Range(r))
      c.Fail("round " + std::to_string(r) + ": the range is not what the producer released");
    if (got_low != low || got_high != high)
      c.Fail("round " + std::to_string(r) +
             ": the consumer's own bytes beside the range were overwritten");
  }
}

void UnalignedRange(Run& run, std::size_t line) {
  const Unaligned u(line);
  run.Spawn(UnalignedProducer(Agent(run, 1), u));
  run.Spawn(UnalignedConsumer(Agent(run, 0), u));
}

// --- the harness ---------------------------------------------------------------------------
using Protocol = void (*)(Run&, std::size_t line);

// The seed picks the memory's behaviour as well as the interleaving: no evictions (a line
// stays cached forever, as hardware may keep it) to many, few to many stale prefetches, slow
// to immediate landing of write-backs, and both meanings of invalidate.
NoncoherentMemory::Options MemoryFor(std::uint64_t seed, std::size_t line) {
  std::mt19937_64 g(seed);
  NoncoherentMemory::Options o;
  o.size = 8 * line;
  o.line_size = line;
  o.cpus = 2;
  o.seed = seed;
  const double evictions[] = {0.0, 0.01, 0.1};
  const double prefetches[] = {0.0, 0.05, 0.3};
  const double drains[] = {0.05, 0.3, 1.0};
  o.eviction_rate = evictions[g() % 3];
  o.prefetch_rate = prefetches[g() % 3];
  o.drain_rate = drains[g() % 3];
  o.invalidate_discards = g() % 2 == 1;
  return o;
}

struct Outcome {
  std::string failure;
  std::set<std::string> hooks;
};

Outcome RunOnce(Protocol protocol, std::size_t line, std::uint64_t seed,
                const std::string& mutant) {
  auto memory = NoncoherentMemory::Create(MemoryFor(seed, line));
  EXPECT_TRUE(memory.ok()) << memory.status().message();
  Run run(*memory.value(), seed, mutant);
  protocol(run, line);
  run.Execute(200000);
  return {run.failure(), run.hooks()};
}

std::uint64_t Schedules() {
  const char* n = std::getenv("TIERFLOW_SIM_SCHEDULES");
#ifndef TIERFLOW_SIM_DEFAULT_SCHEDULES
#define TIERFLOW_SIM_DEFAULT_SCHEDULES 10000
#endif
  return n != nullptr ? std::strtoull(n, nullptr, 10) : TIERFLOW_SIM_DEFAULT_SCHEDULES;
}

struct Case {
  const char* name;
  Protocol protocol;
  std::size_t line;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " with " << c.line << "-byte lines";
}

class Protocols : public ::testing::TestWithParam<Case> {};

TEST_P(Protocols, CorrectInEverySchedule) {
  const Case& c = GetParam();
  const std::uint64_t n = Schedules();
  for (std::uint64_t seed = 1; seed <= n; ++seed) {
    const Outcome o = RunOnce(c.protocol, c.line, seed, "");
    ASSERT_EQ(o.failure, "") << c.name << " failed with seed " << seed;
  }
}

TEST_P(Protocols, EveryHookIsNeeded) {
  const Case& c = GetParam();
  const std::set<std::string> hooks = RunOnce(c.protocol, c.line, 1, "").hooks;
  ASSERT_GE(hooks.size(), 3u);
  for (const std::string& hook : hooks) {
    std::uint64_t found = 0;
    std::string failure;
    for (std::uint64_t seed = 1; seed <= 3000 && found == 0; ++seed) {
      failure = RunOnce(c.protocol, c.line, seed, hook).failure;
      if (!failure.empty()) found = seed;
    }
    EXPECT_NE(found, 0u) << c.name << ": without '" << hook
                         << "' no schedule of 3000 failed, so the test cannot tell it is needed";
    if (found != 0)
      std::printf("  without '%s': seed %llu: %s\n", hook.c_str(),
                  static_cast<unsigned long long>(found), failure.c_str());
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (std::size_t line : {32u, 64u, 256u}) {
    cases.push_back({"ring", &Ring, line});
    cases.push_back({"hand_off", &HandOff, line});
    cases.push_back({"dma_from_device", &DmaFromDevice, line});
    cases.push_back({"dma_to_device", &DmaToDevice, line});
    cases.push_back({"unaligned_range", &UnalignedRange, line});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sim, Protocols, ::testing::ValuesIn(Cases()), [](const auto& info) {
  return std::string(info.param.name) + "_" + std::to_string(info.param.line) + "B";
});

TEST(ProtocolsNegative, CountersSharingALineAreCaught) {
  std::uint64_t found = 0;
  for (std::uint64_t seed = 1; seed <= 3000 && found == 0; ++seed) {
    if (!RunOnce(&RingWithSharedCounterLine, 64, seed, "").failure.empty()) found = seed;
  }
  EXPECT_NE(found, 0u) << "head and tail in one line must fail some schedule";
}

}  // namespace
}  // namespace tierflow::sim
