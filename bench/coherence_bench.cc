// SPDX-License-Identifier: Apache-2.0
#include "bench/coherence_bench.h"

#include <libpmem.h>
#include <sched.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/python.h"
#include "tierflow/buffer.h"
#include "tierflow/coherence.h"
#include "tierflow/topology.h"

namespace tierflow::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Sample timestamps. A 4 KiB write-back takes about 0.5 µs, and steady_clock here advances in
// 10 ns steps (2 % of it), so on x86 with an invariant TSC (CPUID 0x80000007 EDX[8]) the
// study reads the TSC (RDTSCP, ordered by LFENCE), converted to ns with a rate measured
// against steady_clock at start. Elsewhere: steady_clock.
class SampleClock {
 public:
  SampleClock() {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0x80000007, &a, &b, &c, &d) && (d >> 8) & 1) {
      const auto t0 = Clock::now();
      const std::uint64_t c0 = Ticks();
      while (Clock::now() - t0 < std::chrono::milliseconds(50)) {
      }
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      ns_per_tick_ = ns / static_cast<double>(Ticks() - c0);
    }
#endif
  }
  std::uint64_t Now() const {
    if (ns_per_tick_ > 0) return Ticks();
    return static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  }
  double Ns(std::uint64_t begin, std::uint64_t end) const {
    const double d = static_cast<double>(end - begin);
    return ns_per_tick_ > 0 ? d * ns_per_tick_ : d * 1e9 * Clock::period::num / Clock::period::den;
  }
  const char* name() const { return ns_per_tick_ > 0 ? "TSC (RDTSCP)" : "steady_clock"; }

 private:
  static std::uint64_t Ticks() {
#if defined(__x86_64__)
    unsigned aux;
    const std::uint64_t t = __builtin_ia32_rdtscp(&aux);
    __builtin_ia32_lfence();  // later instructions start after the read
    return t;
#else
    return 0;
#endif
  }
  double ns_per_tick_ = 0;
};
using nlohmann::json;

constexpr std::size_t kPage = 4096;
constexpr std::size_t kScatterBytes = std::size_t{256} << 20;
constexpr int kMaxOrder = 10;

enum class State { kDirty, kClean, kUncached };
enum class Layout { kContiguous, kScatteredOneFence, kScatteredFencePerPage };
constexpr std::array<State, 3> kStates = {State::kDirty, State::kClean, State::kUncached};
constexpr std::array<Layout, 3> kLayouts = {Layout::kContiguous, Layout::kScatteredOneFence,
                                            Layout::kScatteredFencePerPage};
const char* Name(State s) {
  return s == State::kDirty ? "dirty" : s == State::kClean ? "clean" : "uncached";
}
const char* Name(Layout l) {
  return l == Layout::kContiguous          ? "contiguous"
         : l == Layout::kScatteredOneFence ? "scattered-1-fence"
                                           : "scattered-fence-per-page";
}

// Chen's Table (variable-order contiguous allocation), p50 in µs, measured on QEMU TCG where
// DC CVAC is a no-op: emulation and tracing cost, not cache maintenance.
const std::map<int, double> kChenP50 = {{0, 9.808},  {2, 13.152},  {4, 21.120},
                                        {6, 70.352}, {8, 303.136}, {10, 1141.312}};

struct Method {
  std::string name;
  bool referee = false;
  LineInstruction instruction = LineInstruction::kAuto;
  bool invalidates = false;
};

// Each instruction this CPU has, named as tierflow names it, then the referee. Those that keep
// the line go through WriteBack, the others through WriteBackInvalidate.
std::vector<Method> Methods() {
  const CoherenceSupport& s = GetCoherenceSupport();
  std::vector<LineInstruction> have;
  if (s.architecture == "x86-64") {
    if (s.clwb) have.push_back(LineInstruction::kClwb);
    if (s.clflushopt) have.push_back(LineInstruction::kClflushopt);
    have.push_back(LineInstruction::kClflush);
  } else {
    have = {LineInstruction::kDcCvac, LineInstruction::kDcCivac};
  }
  std::vector<Method> m;
  for (LineInstruction i : have) {
    const bool keeps = i == LineInstruction::kClwb || i == LineInstruction::kDcCvac;
    m.push_back({std::string(LineInstructionName(i)), false, i, !keeps});
  }
  m.push_back({"pmem_persist", true, LineInstruction::kAuto, false});
  return m;
}

std::vector<MemorySpan> SpansFor(Layout layout, int order, const Buffer& contiguous,
                                 const Buffer& scatter, std::mt19937_64& rng) {
  const std::size_t pages = std::size_t{1} << order;
  if (layout == Layout::kContiguous) return {{contiguous.data(), pages * kPage}};
  std::vector<std::size_t> all(kScatterBytes / kPage);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<MemorySpan> spans;
  for (std::size_t i = 0; i < pages; ++i) spans.push_back({scatter.data() + all[i] * kPage, kPage});
  return spans;
}

// --- the line state before a sample -------------------------------------------------------
void TouchLines(const std::vector<MemorySpan>& spans, bool write) {
  const std::size_t line = GetCoherenceSupport().line_size;
  for (const MemorySpan& s : spans) {
    auto* p = static_cast<volatile char*>(const_cast<void*>(s.data));
    for (std::size_t off = 0; off < s.size; off += line) {
      if (write) {
        p[off] = static_cast<char>(p[off] + 1);
      } else {
        (void)p[off];
      }
    }
  }
}

void Prepare(State state, const std::vector<MemorySpan>& spans) {
  if (state == State::kDirty) return TouchLines(spans, true);
  TouchLines(spans, true);
  (void)WriteBackInvalidate(spans);  // every line written back and out of the caches
  if (state == State::kClean) TouchLines(spans, false);
}

// --- one timed call -----------------------------------------------------------------------
void RunTierflow(const Method& m, Layout layout, const std::vector<MemorySpan>& spans) {
  CoherenceOptions o;
  o.instruction = m.instruction;
  o.fence = MaintenanceFence::kFence;
  auto call = [&](const void* p, std::size_t n) {
    return m.invalidates ? WriteBackInvalidate(p, n, o) : WriteBack(p, n, o);
  };
  if (layout == Layout::kContiguous) {
    (void)call(spans[0].data, spans[0].size);
  } else if (layout == Layout::kScatteredOneFence) {
    (void)(m.invalidates ? WriteBackInvalidate(spans, o) : WriteBack(spans, o));
  } else {
    for (const MemorySpan& s : spans) (void)call(s.data, s.size);
  }
}

void RunReferee(Layout layout, const std::vector<MemorySpan>& spans) {
  if (layout == Layout::kContiguous) {
    pmem_persist(spans[0].data, spans[0].size);
  } else if (layout == Layout::kScatteredOneFence) {
    for (const MemorySpan& s : spans) pmem_flush(s.data, s.size);
    pmem_drain();
  } else {
    for (const MemorySpan& s : spans) pmem_persist(s.data, s.size);
  }
}

double TimeCall(const SampleClock& clock, const Method& m, Layout layout,
                const std::vector<MemorySpan>& spans, bool completed) {
  const std::uint64_t t0 = clock.Now();
  if (m.referee) {
    RunReferee(layout, spans);
  } else {
    RunTierflow(m, layout, spans);
  }
  if (completed) Complete();
  return clock.Ns(t0, clock.Now());
}

double TimeReRead(const SampleClock& clock, const std::vector<MemorySpan>& spans) {
  const std::uint64_t t0 = clock.Now();
  TouchLines(spans, false);
  return clock.Ns(t0, clock.Now());
}

// --- what the kernel says happened on our CPU -----------------------------------------------
struct Disturbance {
  std::uint64_t interrupts = 0;
  std::uint64_t steal = 0;
};

Disturbance ReadDisturbance(int cpu) {
  Disturbance d;
  std::ifstream irq("/proc/interrupts");
  std::string line;
  std::getline(irq, line);  // header: CPU0 CPU1 ...
  while (std::getline(irq, line)) {
    std::istringstream fields(line.substr(line.find(':') + 1));
    std::uint64_t count = 0;
    for (int i = 0; i <= cpu && fields >> count; ++i) {
    }
    if (fields) d.interrupts += count;
  }
  std::ifstream stat("/proc/stat");
  const std::string want = fmt::format("cpu{} ", cpu);
  while (std::getline(stat, line)) {
    if (line.rfind(want, 0) != 0) continue;
    std::istringstream f(line.substr(want.size()));
    std::uint64_t v[8] = {};
    for (auto& x : v) f >> x;
    d.steal = v[7];
  }
  return d;
}

// --- one row: every method, interleaved sample by sample --------------------------------------
struct Samples {
  std::vector<double> issued, completed, reread;
};

struct Row {
  std::string op;
  bool referee = false;
  State state = State::kDirty;
  Layout layout = Layout::kContiguous;
  int order = 0;
  int run = 0;
  std::size_t lines = 0;
  double p25 = 0, p50 = 0, p75 = 0, p99 = 0, max = 0;  // completed, ns
  double issued_p50 = 0, reread_p50 = 0;
  std::uint64_t interrupts = 0, steal = 0;
  bool flagged = false;
};

Row MakeRow(const Method& m, Samples& s, std::size_t lines, const Disturbance& d) {
  Row r;
  r.op = m.name;
  r.referee = m.referee;
  r.lines = lines;
  for (auto* v : {&s.completed, &s.issued, &s.reread}) std::sort(v->begin(), v->end());
  r.p25 = Percentile(s.completed, 0.25);
  r.p50 = Percentile(s.completed, 0.50);
  r.p75 = Percentile(s.completed, 0.75);
  r.p99 = Percentile(s.completed, 0.99);
  r.max = s.completed.back();
  r.issued_p50 = Percentile(s.issued, 0.5);
  r.reread_p50 = Percentile(s.reread, 0.5);
  r.interrupts = d.interrupts;
  r.steal = d.steal;
  r.flagged = r.p99 > 5 * r.p50 && (d.interrupts > 0 || d.steal > 0);
  return r;
}

struct Study {
  Study(const CoherenceBenchConfig& c, Buffer near, Buffer far)
      : config(c), contiguous(std::move(near)), scatter(std::move(far)) {}
  const CoherenceBenchConfig& config;
  std::vector<Method> methods = Methods();
  Buffer contiguous;  // the largest contiguous range
  Buffer scatter;     // where scattered pages are drawn from
  std::mt19937_64 rng{42};
  SampleClock clock;
  int cpu = -1;  // the study is pinned there (-1: the kernel did not say)
  int node = 0;  // its memory: the CPU's node
  std::vector<Row> rows;

  void MeasureRow(State state, Layout layout, int order, int run) {
    const std::vector<MemorySpan> spans = SpansFor(layout, order, contiguous, scatter, rng);
    const std::size_t lines = (std::size_t{1} << order) * kPage / GetCoherenceSupport().line_size;
    std::vector<Samples> samples(methods.size());
    const Disturbance before = ReadDisturbance(cpu);
    for (int i = 0; i < config.samples; ++i) {
      for (std::size_t k = 0; k < methods.size(); ++k) {
        const Method& m = methods[(k + static_cast<std::size_t>(i)) % methods.size()];
        Samples& s = samples[(k + static_cast<std::size_t>(i)) % methods.size()];
        Prepare(state, spans);
        s.issued.push_back(TimeCall(clock, m, layout, spans, false));
        Prepare(state, spans);
        s.completed.push_back(TimeCall(clock, m, layout, spans, true));
        s.reread.push_back(TimeReRead(clock, spans));
      }
    }
    const Disturbance after = ReadDisturbance(cpu);
    const Disturbance d{after.interrupts - before.interrupts, after.steal - before.steal};
    for (std::size_t k = 0; k < methods.size(); ++k) {
      Row r = MakeRow(methods[k], samples[k], lines, d);
      r.state = state;
      r.layout = layout;
      r.order = order;
      r.run = run;
      rows.push_back(std::move(r));
    }
  }

  void Run(Progress& progress) {
    for (int run = 0; run < config.runs; ++run) {
      for (State state : kStates) {
        for (Layout layout : kLayouts) {
          for (int order : config.orders) {
            progress.Step(
                fmt::format("run {} {} {} order {}", run, Name(state), Name(layout), order));
            MeasureRow(state, layout, order, run);
          }
        }
      }
    }
  }
};

// --- derived figures ----------------------------------------------------------------------
const Row* Find(const std::vector<Row>& rows, std::string_view op, State s, Layout l, int order,
                int run) {
  for (const Row& r : rows) {
    if (r.op == op && r.state == s && r.layout == l && r.order == order && r.run == run) return &r;
  }
  return nullptr;
}

// Least-squares slope of p50 (ns) against lines over the orders measured: the per-line cost.
double Slope(const std::vector<Row>& rows, const std::string& op, State s, Layout l, int run) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Row& r : rows) {
    if (r.op != op || r.state != s || r.layout != l || r.run != run) continue;
    const double x = static_cast<double>(r.lines);
    n += 1;
    sx += x;
    sy += r.p50;
    sxx += x * x;
    sxy += x * r.p50;
  }
  const double den = n * sxx - sx * sx;
  return n >= 2 && den > 0 ? (n * sxy - sx * sy) / den : 0;
}

json RowJson(const Row& r) {
  return {{"op", r.op},
          {"state", Name(r.state)},
          {"layout", Name(r.layout)},
          {"order", r.order},
          {"run", r.run},
          {"size_bytes", (std::size_t{1} << r.order) * kPage},
          {"lines", r.lines},
          {"p25_us", r.p25 / 1e3},
          {"p50_us", r.p50 / 1e3},
          {"p75_us", r.p75 / 1e3},
          {"p99_us", r.p99 / 1e3},
          {"max_us", r.max / 1e3},
          {"issued_p50_us", r.issued_p50 / 1e3},
          {"reread_p50_us", r.reread_p50 / 1e3},
          {"ns_per_line", r.p50 / static_cast<double>(r.lines)},
          {"interrupts", r.interrupts},
          {"steal_ticks", r.steal},
          {"flagged", r.flagged}};
}

std::string AutoWriteBack() {
  return std::string(LineInstructionName(GetCoherenceSupport().write_back));
}

// For every run, state and order measured: the row of tierflow's default write-back (kAuto's
// instruction) laid out as `ours` and pmem_persist's laid out as `theirs`.
template <typename Emit>
void ForEachPair(const Study& st, Layout ours, Layout theirs, Emit emit) {
  const std::string op = AutoWriteBack();
  for (int run = 0; run < st.config.runs; ++run) {
    for (State s : kStates) {
      for (int order : st.config.orders) {
        const Row* t = Find(st.rows, op, s, ours, order, run);
        const Row* p = Find(st.rows, "pmem_persist", s, theirs, order, run);
        if (t != nullptr && p != nullptr) emit(*t, *p);
      }
    }
  }
}

// Contiguous, against pmem_persist.
json VsPmem(const Study& st) {
  json out = json::array();
  ForEachPair(st, Layout::kContiguous, Layout::kContiguous, [&](const Row& t, const Row& p) {
    const double ratio = t.p50 / p.p50;
    out.push_back({{"run", t.run},
                   {"state", Name(t.state)},
                   {"order", t.order},
                   {"op", t.op},
                   {"ratio", ratio},
                   {"within_3pct", std::abs(ratio - 1) <= 0.03}});
  });
  return out;
}

// One scattered list with one fence against pmem_persist page by page.
json ScatterSpeedup(const Study& st) {
  json out = json::array();
  ForEachPair(st, Layout::kScatteredOneFence, Layout::kScatteredFencePerPage,
              [&](const Row& t, const Row& p) {
                out.push_back({{"run", t.run},
                               {"state", Name(t.state)},
                               {"order", t.order},
                               {"op", t.op},
                               {"speedup", p.p50 / t.p50}});
              });
  return out;
}

json Slopes(const Study& st) {
  json out = json::array();
  for (const Method& m : st.methods) {
    for (State s : kStates) {
      for (Layout l : kLayouts) {
        json per_run = json::array();
        for (int run = 0; run < st.config.runs; ++run)
          per_run.push_back(Slope(st.rows, m.name, s, l, run));
        double lo = per_run[0], hi = per_run[0], sum = 0;
        for (double v : per_run) lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
        const double mean = sum / static_cast<double>(per_run.size());
        out.push_back({{"op", m.name},
                       {"state", Name(s)},
                       {"layout", Name(l)},
                       {"ns_per_line", per_run},
                       {"spread", mean > 0 ? std::max(hi / mean - 1, 1 - lo / mean) : 0.0}});
      }
    }
  }
  return out;
}

json Document(const Study& st) {
  const CoherenceSupport& s = GetCoherenceSupport();
  json rows = json::array(), referee = json::array();
  for (const Row& r : st.rows) (r.referee ? referee : rows).push_back(RowJson(r));
  json chen = json::array();
  for (auto [order, p50] : kChenP50) chen.push_back({{"order", order}, {"p50_us", p50}});
  return {{"architecture", s.architecture},
          {"line_size", s.line_size},
          {"line_size_source", s.line_size_source},
          {"auto_write_back", AutoWriteBack()},
          {"auto_invalidate", std::string(LineInstructionName(s.invalidate))},
          {"samples", st.config.samples},
          {"runs", st.config.runs},
          {"cpu", st.cpu},
          {"node", st.node},
          {"clock", st.clock.name()},
          {"rows", rows},
          {"referee", referee},
          {"vs_pmem_p50", VsPmem(st)},
          {"scatter_one_fence_vs_pmem_per_page", ScatterSpeedup(st)},
          {"slopes", Slopes(st)},
          {"chen_qemu_tcg_noop", chen}};
}

// --- text ------------------------------------------------------------------------------------
void PrintRows(const Study& st, std::ostream& out) {
  out << fmt::format("{:<13}{:<10}{:<26}{:>5}{:>8}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>8}{:>9}  {}\n",
                     "op", "state", "layout", "order", "size", "p25", "p50", "p75", "p99", "max",
                     "issued", "ns/line", "re-read", "flag");
  for (const Row& r : st.rows) {
    out << fmt::format(
        "{:<13}{:<10}{:<26}{:>5}{:>8}{:>9.2f}{:>9.2f}{:>9.2f}{:>9.2f}{:>9.1f}{:>9.2f}{:>8.2f}{:>9."
        "2f}  {}"
        "\n",
        r.op, Name(r.state), Name(r.layout), r.order,
        FormatSize((std::size_t{1} << r.order) * kPage), r.p25 / 1e3, r.p50 / 1e3, r.p75 / 1e3,
        r.p99 / 1e3, r.max / 1e3, r.issued_p50 / 1e3, r.p50 / static_cast<double>(r.lines),
        r.reread_p50 / 1e3,
        r.flagged ? fmt::format("tail: {} interrupts, {} steal ticks", r.interrupts, r.steal) : "");
  }
}

void PrintChen(const Study& st, std::ostream& out) {
  out << "\nChen's medians beside this machine's (contiguous, dirty, completed p50, µs; run 0):\n";
  out << fmt::format("{:>5}  {:>28}", "order", "Chen p50 (QEMU TCG, no-op)");
  for (const Method& m : st.methods) out << fmt::format("{:>14}", m.name);
  out << "\n";
  for (int order : st.config.orders) {
    auto chen = kChenP50.find(order);
    out << fmt::format("{:>5}  {:>28}", order,
                       chen == kChenP50.end() ? "-" : fmt::format("{:.3f}", chen->second));
    for (const Method& m : st.methods) {
      const Row* r = Find(st.rows, m.name, State::kDirty, Layout::kContiguous, order, 0);
      out << fmt::format("{:>14.3f}", r == nullptr ? 0.0 : r->p50 / 1e3);
    }
    out << "\n";
  }
}

void PrintSummary(const json& doc, std::ostream& out) {
  out << fmt::format("\ntierflow {} (auto write-back) ÷ pmem_persist, contiguous p50:\n",
                     doc["auto_write_back"].get<std::string>());
  for (const json& v : doc["vs_pmem_p50"]) {
    out << fmt::format("  run {} {:<9} order {:>2}: {:.3f}{}\n", v["run"].get<int>(),
                       v["state"].get<std::string>(), v["order"].get<int>(),
                       v["ratio"].get<double>(),
                       v["within_3pct"].get<bool>() ? "" : "  (outside ±3 %)");
  }
  out << "\nOne scattered list with one fence: speed-up over pmem_persist page by page (p50):\n";
  for (const json& v : doc["scatter_one_fence_vs_pmem_per_page"]) {
    out << fmt::format("  run {} {:<9} order {:>2}: {:.2f}×\n", v["run"].get<int>(),
                       v["state"].get<std::string>(), v["order"].get<int>(),
                       v["speedup"].get<double>());
  }
  out << "\nPer-line cost (least-squares slope of p50 over the orders), ns per line, by run:\n";
  for (const json& v : doc["slopes"]) {
    out << fmt::format("  {:<13}{:<10}{:<26}{}  spread ±{:.1f} %\n", v["op"].get<std::string>(),
                       v["state"].get<std::string>(), v["layout"].get<std::string>(),
                       v["ns_per_line"].dump(), 100 * v["spread"].get<double>());
  }
}

Status CheckConfig(const CoherenceBenchConfig& c) {
  if (c.orders.empty()) return Status::InvalidArgument("bench coherence: no orders to measure");
  for (int o : c.orders) {
    if (o < 0 || o > kMaxOrder) {
      return Status::InvalidArgument(
          fmt::format("bench coherence: order {} is outside 0..{} (4 KiB to 4 MiB)", o, kMaxOrder));
    }
  }
  if (c.samples < 5) return Status::InvalidArgument("bench coherence: samples must be at least 5");
  if (c.runs < 1) return Status::InvalidArgument("bench coherence: runs must be at least 1");
  return Status::Ok();
}

// Keeps the study on the CPU it started on, so that the kernel's per-CPU counts apply to it.
int PinToThisCpu() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return -1;  // no CPU to pin to; no per-CPU counts then
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
  return cpu;
}

// The NUMA node whose memory is local to `cpu` (the first node with CPUs when unknown).
Result<int> NodeOfCpu(int cpu) {
  Result<Topology> topo = Topology::Discover();
  if (!topo.ok()) return topo.status();
  int fallback = -1;
  for (const NumaNode& n : topo->nodes()) {
    if (std::find(n.cpus.begin(), n.cpus.end(), cpu) != n.cpus.end()) return n.os_index;
    if (fallback < 0 && n.has_cpus()) fallback = n.os_index;
  }
  return fallback >= 0 ? fallback : topo->nodes().front().os_index;
}

void PrintHeader(const Study& st, std::ostream& out) {
  const CoherenceSupport& s = GetCoherenceSupport();
  out << fmt::format(
      "tierflow bench coherence: {}, {}-byte lines ({}); auto: write-back {}, invalidate {}\n"
      "referee: pmem_persist (PMDK libpmem), interleaved sample by sample; {} samples per row "
      "and method; pinned to CPU {}, memory on node {}; clock {}\n"
      "times in µs of \"completed\" (a full fence before the clock stops) unless named; "
      "issued = the instructions and a store fence only\n\n",
      s.architecture, s.line_size, s.line_size_source, AutoWriteBack(),
      LineInstructionName(s.invalidate), st.config.samples, st.cpu, st.node, st.clock.name());
}

}  // namespace

Status RunCoherenceBench(const CoherenceBenchConfig& config, std::ostream& out) {
  if (Status s = CheckConfig(config); !s.ok()) return s;
  const int cpu = PinToThisCpu();
  Result<int> node = NodeOfCpu(cpu);
  if (!node.ok()) return node.status();
  Result<Buffer> contiguous = Buffer::OnNode(*node, (std::size_t{1} << kMaxOrder) * kPage);
  if (!contiguous.ok()) return contiguous.status();
  Result<Buffer> scatter = Buffer::OnNode(*node, kScatterBytes);
  if (!scatter.ok()) return scatter.status();
  Study st(config, std::move(*contiguous), std::move(*scatter));
  st.cpu = cpu;
  st.node = *node;
  Progress progress(config.orders.size() * 9 * static_cast<std::size_t>(config.runs),
                    config.progress && StderrIsTerminal());
  st.Run(progress);
  progress.Finish();
  const json doc = Document(st);
  if (!config.plot_path.empty()) {
    if (Status s = Plot("plot_coherence.py", doc, config.plot_path); !s.ok()) return s;
  }
  if (config.json) {
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  PrintHeader(st, out);
  PrintRows(st, out);
  PrintChen(st, out);
  PrintSummary(doc, out);
  if (!config.plot_path.empty()) out << "\nplot: " << config.plot_path << "\n";
  return Status::Ok();
}

}  // namespace tierflow::bench
