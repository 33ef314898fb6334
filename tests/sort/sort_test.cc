// SPDX-License-Identifier: Apache-2.0
// The external sort (apps/sort) built against the shared library: both formats sorted and
// verified over memory sizes and threads; nothing lost on bad input, a full disk or a read
// error; temporary files gone on every exit.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sort/format.h"
#include "sort/radix.h"
#include "sort/sort.h"
#include "sort/temp_files.h"
#include "testing/temp_dir.h"

namespace tierflow::extsort {
namespace {

using testkit::SmallFileSystem;
using testkit::TempDir;

// Records of `f` whose keys `key(i)` makes (the rest of each record: its index).
std::vector<std::byte> Records(Format f, std::uint64_t n,
                               const std::function<std::uint64_t(std::uint64_t)>& key) {
  const std::size_t size = RecordBytes(f);
  std::vector<std::byte> out(n * size);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::byte* r = out.data() + i * size;
    const std::uint64_t k = key(i);
    if (f == Format::kU64) {
      std::memcpy(r, &k, 8);
      std::memcpy(r + 8, &i, 8);
    } else {
      for (int b = 0; b < 8; ++b) r[b] = static_cast<std::byte>(k >> (56 - 8 * b));
      r[8] = static_cast<std::byte>(i % 3);  // key bytes 8-9: few values, so ties reach them
      r[9] = static_cast<std::byte>(k & 1);
      std::memcpy(r + 10, &i, 8);
    }
  }
  return out;
}

// SortRun's output is the records in key order (every one of them, each once).
void ExpectSorted(Format f, std::vector<std::byte> in, const std::string& what) {
  const std::size_t size = RecordBytes(f), n = in.size() / size;
  std::vector<std::byte> scratch(SortScratchBytes(f, n) + size);
  std::vector<std::byte> data = in;
  const std::byte* out = SortRun(f, data.data(), scratch.data(), n);
  std::vector<std::string> got, want;  // records as strings: compared and sorted as bytes
  for (std::size_t i = 0; i < n; ++i) {
    got.emplace_back(reinterpret_cast<const char*>(out + i * size), size);
    want.emplace_back(reinterpret_cast<const char*>(in.data() + i * size), size);
  }
  for (std::size_t i = 1; i < n; ++i) {
    ASSERT_FALSE(KeyOf(f, out + i * size) < KeyOf(f, out + (i - 1) * size)) << what << " at " << i;
  }
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want) << what << ": records lost or changed";
}

TEST(Radix, SortRunOrdersEveryDistribution) {
  std::mt19937_64 rng(7);
  const std::pair<const char*, std::function<std::uint64_t(std::uint64_t)>> keys[] = {
      {"uniform", [&](std::uint64_t) { return rng(); }},
      {"all equal", [](std::uint64_t) { return std::uint64_t{42}; }},
      {"record order", [](std::uint64_t i) { return i; }},
      {"reversed", [](std::uint64_t i) { return ~i; }},
      {"few high values, spread low bits",
       [&](std::uint64_t) { return (rng() % 3) << 61 | (rng() & 0xffffffff); }},
      {"zipf-like", [&](std::uint64_t) { return std::uint64_t{1} << (rng() % 40); }},
      {"top digits spread, ties below", [&](std::uint64_t) { return rng() & ~0xfffffULL; }},
      // Digits that repeat one another look spread digit by digit but leave long runs tied.
      {"digits repeating one another",
       [&](std::uint64_t) { return (rng() % 256) * 0x0101010101000000ULL | (rng() & 0xffffff); }},
      {"a few keys, each very often", [&](std::uint64_t) { return rng() % 5 * 0x1234567; }},
  };
  for (Format f : {Format::kU64, Format::kGensort}) {
    for (const auto& [name, key] : keys) {
      for (std::uint64_t n : {0ULL, 1ULL, 2ULL, 33ULL, 40ULL, 1000ULL, 8193ULL, 100000ULL}) {
        ExpectSorted(f, Records(f, n, key), std::string(FormatName(f)) + " " + name);
      }
    }
  }
}

Config Basic(const TempDir& dir, Format f, std::uint64_t generate, std::uint64_t memory) {
  Config c;
  c.format = f;
  c.input = dir.File("in");
  c.generate_bytes = generate;
  c.output = dir.File("out");
  c.runs = dir.File("out.tierflow-runs-" + std::to_string(getpid()));
  c.memory_bytes = memory;
  c.verify = true;
  c.measure_floor = false;
  return c;
}

// Only the input and the output are left in the directory.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool Sorted(Format f, const std::vector<unsigned char>& data) {
  const std::size_t r = RecordBytes(f);
  for (std::size_t i = r; i < data.size(); i += r) {
    const auto* p = reinterpret_cast<const std::byte*>(data.data());
    if (KeyOf(f, p + i) < KeyOf(f, p + i - r)) return false;
  }
  return true;
}

struct Case {
  Format format;
  std::uint64_t bytes, memory;
  int threads;
};

// The sanitizer builds sort less of it (the data exactly filling the memory is the plain build's).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::uint64_t kWhole = 16u << 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr std::uint64_t kWhole = 16u << 20;
#else
constexpr std::uint64_t kWhole = 48u << 20;
#endif
#else
constexpr std::uint64_t kWhole = 48u << 20;
#endif

TEST(Sort, SortsAndVerifiesBothFormats) {
  for (Case k :
       {Case{Format::kU64, kWhole, 48u << 20, 2}, Case{Format::kU64, 5000 * 16, 32u << 20, 1},
        Case{Format::kU64, (8u << 20) + 16 * 7, 40u << 20, 3},
        Case{Format::kGensort, 20u << 20, 40u << 20, 2},
        Case{Format::kGensort, 100, 32u << 20, 2}}) {
    TempDir dir;
    Config c = Basic(dir, k.format, k.bytes, k.memory);
    c.threads = k.threads;
    c.measure_floor = k.bytes > (1u << 20);
    Result<Report> r = extsort::Run(c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->input_checksum, r->output_checksum);
    EXPECT_EQ(r->records, k.bytes / RecordBytes(k.format));
    EXPECT_LE(r->temp_peak_bytes, (k.bytes + 4095) / 4096 * 4096 + 4096);
    if (c.measure_floor) {
      EXPECT_GT(r->floor_ms, 0);
    }
    std::vector<unsigned char> out = dir.Read(c.output);
    ASSERT_EQ(out.size(), r->bytes);
    EXPECT_TRUE(Sorted(k.format, out));
    EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"in", "out"}))
        << "runs and partial gone";
  }
}

// The sort is its blueprint instantiated: the arena bound by the runtime, the files bound to
// the paths, five stages (with generating); declared one by one instead, the same output.
TEST(Sort, PlannedByItsBlueprintAsDeclaredOneByOne) {
  TempDir dir;
  Config c = Basic(dir, Format::kU64, 8u << 20, 32u << 20);
  Result<Report> r = extsort::Run(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const BlueprintPlan& p = r->plan;
  EXPECT_EQ(p.name, "tierflow sort");
  ASSERT_EQ(p.bindings.size(), 4u);
  EXPECT_EQ(p.bindings[0].role, "arena");
  EXPECT_EQ(p.bindings[0].kind, "memory");
  EXPECT_EQ(p.bindings[0].bound_to.rfind("dram:", 0), 0u) << p.bindings[0].bound_to;
  EXPECT_EQ(p.bindings[2].role, "runs");
  std::vector<std::string> stages;
  for (const auto& s : p.stages) stages.push_back(s.stage);
  EXPECT_EQ(stages, (std::vector<std::string>{"generate", "read input", "write runs", "read runs",
                                              "write output"}));
  EXPECT_EQ(p.stages[1].plan.hops[0].mechanism, Mechanism::kUringRead);
  std::vector<unsigned char> planned = dir.Read(c.output);
  Config d = c;
  d.generate_bytes = 0;
  d.output = dir.File("declared");
  d.declare_each = true;
  Result<Report> r2 = extsort::Run(d);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_TRUE(r2->plan.stages.empty());
  EXPECT_EQ(dir.Read(d.output), planned);
  EXPECT_EQ(r2->temp_peak_bytes, r->temp_peak_bytes);
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"declared", "in", "out"}));
}

TEST(Sort, ManyRunsInLittleMemory) {
  TempDir dir;
  Config c = Basic(dir, Format::kU64, 96u << 20, 48u << 20);
  Result<Report> r = extsort::Run(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(r->runs, 20u);
  EXPECT_TRUE(r->verified);
}

TEST(Sort, BadInputLosesNothing) {
  TempDir dir;
  Config c = Basic(dir, Format::kU64, 1u << 20, 32u << 20);
  ASSERT_TRUE(extsort::Run(c).ok());
  const std::vector<unsigned char> in = dir.Read(c.input), out = dir.Read(c.output);
  // The output exists: refused, nothing touched.
  Config again = c;
  again.generate_bytes = 0;
  Status exists = extsort::Run(again).status();
  EXPECT_NE(exists.message().find("exists"), std::string::npos) << exists.ToString();
  // Generating over the existing input: refused.
  Config regen = c;
  regen.output = dir.File("out2");
  Status over = extsort::Run(regen).status();
  EXPECT_NE(over.message().find("generating would overwrite"), std::string::npos)
      << over.ToString();
  // Not whole records.
  const std::string odd = dir.Write("odd", std::vector<unsigned char>(1000, 1));
  Config bad = Basic(dir, Format::kU64, 0, 32u << 20);
  bad.input = odd;
  bad.output = dir.File("out3");
  Status whole = extsort::Run(bad).status();
  EXPECT_NE(whole.message().find("not a whole number"), std::string::npos) << whole.ToString();
  // Too little memory for two passes: the message gives what would work.
  Config tiny = Basic(dir, Format::kU64, 0, 17u << 20);
  tiny.input = c.input;
  tiny.output = dir.File("out4");
  tiny.threads = 64;
  Status small = extsort::Run(tiny).status();
  EXPECT_NE(small.message().find("give at least"), std::string::npos) << small.ToString();
  EXPECT_EQ(dir.Read(c.input), in);
  EXPECT_EQ(dir.Read(c.output), out);
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"in", "odd", "out"}));
}

TEST(Sort, AFullDiskEndsWithAnErrorNamingTheFile) {
  SmallFileSystem fs(6u << 20);
  if (!fs.mounted()) GTEST_SKIP() << "mounting a small tmpfs needs root (CAP_SYS_ADMIN)";
  TempDir dir;
  Config c = Basic(dir, Format::kU64, 4u << 20, 32u << 20);
  c.output = fs.File("out");  // 4 MiB fit; the runs (4 MiB) beside them do not
  c.runs = fs.File("out.tierflow-runs-" + std::to_string(getpid()));
  Result<Report> r = extsort::Run(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(r.status().message().find(fs.File("")) != std::string::npos) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(c.output)) << "no truncated 'sorted' output";
  EXPECT_TRUE(std::filesystem::is_empty(fs.File(""))) << "runs and partial removed";
}

TEST(Sort, AReadErrorEndsWithAnErrorNamingTheInput) {
  TempDir dir;
  Config c = Basic(dir, Format::kU64, 8u << 20, 32u << 20);
  // The input shrinks behind the sort's back as the first pass starts.
  c.progress = [&c](const std::string& phase, std::uint64_t, std::uint64_t) {
    if (phase == "runs") std::filesystem::resize_file(c.input, 1u << 20);
  };
  Result<Report> r = extsort::Run(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(c.input), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(c.output));
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"in"}));
}

std::string FirstLineOf(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A marker as a run of process `pid` on `host` (this host: empty) would have left it.
std::string Marker(const std::string& pid, const std::string& host,
                   const std::vector<std::string>& files) {
  char ns[128] = {};
  EXPECT_GT(readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1), 0);
  std::string text = "tierflow sort owner 1\nhost " +
                     (host.empty() ? FirstLineOf("/etc/machine-id") : host) + "\nboot " +
                     FirstLineOf("/proc/sys/kernel/random/boot_id") + "\npidns " + ns + "\npid " +
                     pid + "\nstart 12345\n";
  for (const std::string& f : files) text += "file " + f + "\n";
  return text;
}

// Security review, item 3: only what a dead run's own marker claims is removed; a file that
// merely looks like a temporary one, or one claimed by a run elsewhere, stays.
TEST(Sort, OnlyWhatADeadRunClaimedIsRemoved) {
  TempDir dir;
  dir.Write("out.tierflow-partial-99999999", std::vector<unsigned char>(10, 0));
  dir.Write("out.tierflow-runs-99999999", std::vector<unsigned char>(10, 0));
  dir.Write(
      ".tierflow-sort-99999999-aa.owner",
      Marker("99999999", "", {"out.tierflow-partial-99999999", "out.tierflow-runs-99999999"}));
  const std::string lookalike = "users.tierflow-runs-99999998";  // a user's file, no marker
  dir.Write(lookalike, std::vector<unsigned char>(10, 0));
  const std::string remote = "nfs.tierflow-runs-99999997";  // a run on another host
  dir.Write(remote, std::vector<unsigned char>(10, 0));
  dir.Write(".tierflow-sort-99999997-bb.owner", Marker("99999997", "another-host", {remote}));
  Config c = Basic(dir, Format::kU64, 1u << 20, 32u << 20);
  Result<Report> r = extsort::Run(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->stale_removed.size(), 2u);
  EXPECT_NE(r->stale_removed[0].find("99999999"), std::string::npos) << r->stale_removed[0];
  EXPECT_EQ(Files(dir.path()),
            (std::vector<std::string>{".tierflow-sort-99999997-bb.owner", "in",
                                      "nfs.tierflow-runs-99999997", "out", lookalike}));
}

// A run that exited without being reaped (a zombie, as the ranks of an MPI job whose launcher
// is gone may stay) is dead: its claimed files go. A live run's stay.
TEST(Sort, AZombieRunsFilesAreRemovedALiveRunsAreNot) {
  TempDir dir;
  const pid_t zombie = fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) {
    Result<Claim> claim = Claim::Make(dir.path(), {"zombie.tierflow-runs-1"});
    if (!claim.ok()) _exit(1);
    const int fd = open((dir.path() + "/zombie.tierflow-runs-1").c_str(), O_CREAT | O_WRONLY, 0600);
    close(fd);
    _exit(0);  // without releasing: as if killed
  }
  Result<Claim> live = Claim::Make(dir.path(), {"live.tierflow-runs-2"});
  ASSERT_TRUE(live.ok());
  dir.Write("live.tierflow-runs-2", std::vector<unsigned char>(10, 0));
  siginfo_t info{};
  // Waits for the child's exit without reaping it.
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  ASSERT_EQ(info.si_status, 0);
  const std::vector<std::string> removed = RemoveStale(dir.path());
  waitpid(zombie, nullptr, 0);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_NE(removed[0].find("zombie.tierflow-runs-1"), std::string::npos) << removed[0];
  const std::vector<std::string> left = Files(dir.path());
  EXPECT_EQ(std::count(left.begin(), left.end(), "zombie.tierflow-runs-1"), 0);
  EXPECT_EQ(std::count(left.begin(), left.end(), "live.tierflow-runs-2"), 1);
}

}  // namespace
}  // namespace tierflow::extsort
