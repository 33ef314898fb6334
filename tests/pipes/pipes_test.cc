// SPDX-License-Identifier: Apache-2.0
// Pipes: locators declared and refused, the three flavours over every kind of end, the planner's
// choices and explanations (on this machine and on fixture topologies with HBM and CXL), spill
// chains, staging, bounces for O_DIRECT alignment, knobs and errors.
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/fixture_topology.h"
#include "testing/manual_engine.h"
#include "testing/random_bytes.h"
#include "testing/temp_dir.h"
#include "tierflow/pipe_runtime.h"

namespace tierflow {
namespace {

using testkit::RandomBytes;
using testkit::TempDir;

std::unique_ptr<PipeRuntime> Runtime(PipeRuntimeOptions o = {}) {
  if (o.calibration_path.empty()) o.calibration_path = "/nonexistent/calibration.json";
  o.cpu_workers = 2;
  Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(*rt) : nullptr;
}

std::unique_ptr<PipeRuntime> FixtureRuntime(const std::string& xml) {
  PipeRuntimeOptions o;
  o.topology_xml = testkit::FixturePath(xml);
  o.model_placement = true;
  o.calibration_path = testkit::FixturePath("calibration-xeon-max.json");
  o.calibration_any_machine = true;
  return Runtime(o);
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Pipes, MemoryToMemoryBlocking) {
  auto rt = Runtime();
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, 8 << 20);
  Result<Locator> b = rt->Node(0, 8 << 20);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  auto data = RandomBytes(8 << 20, 1);
  std::memcpy(a->data(), data.data(), data.size());
  Result<Pipe> p = rt->Connect(*a, *b);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->Transfer(100, 7, (8 << 20) - 100).ok());
  EXPECT_EQ(std::memcmp(b->data() + 7, data.data() + 100, (8 << 20) - 100), 0);
  const PipePlan& plan = p->plan();
  ASSERT_EQ(plan.hops.size(), 1u);
  EXPECT_EQ(plan.hops[0].mechanism, Mechanism::kCpu);
  EXPECT_FALSE(plan.hops[0].calibrated) << "no calibration file: said, not invented";
  EXPECT_TRUE(Contains(plan.ToText(), "rejected io_uring-read: reads files"));
  EXPECT_TRUE(Contains(plan.ToText(), "no calibration at"));
  PipeStats s = p->stats();
  EXPECT_EQ(s.transfers, 1u);
  EXPECT_EQ(s.bytes, (8u << 20) - 100);
  EXPECT_GE(s.chunks, 2u) << "4 MiB chunks";
  EXPECT_GT(s.achieved_gbps, 0);
  // Beyond either end: refused at once, both ranges named.
  Status beyond = p->Transfer(0, 1, 8 << 20);
  EXPECT_EQ(beyond.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(beyond.message(), "beyond the destination")) << beyond.ToString();
  EXPECT_FALSE(p->Transfer(0, 0, 0).ok());
}

TEST(Pipes, FileToMemoryDirectAndBounced) {
  TempDir dir;
  const std::size_t n = (6 << 20) + 4096 * 3;
  auto data = RandomBytes(n, 2);
  const std::string path = dir.Write("in", data);
  auto rt = Runtime();
  Result<Locator> in = rt->File(path, 0, 0, FileMode::kRead);
  Result<Locator> mem = rt->Memory(TierKind::kDram, -1, n + 4096);
  ASSERT_TRUE(in.ok() && mem.ok()) << in.status().ToString();
  EXPECT_EQ(in->capacity(), n);
  Result<Pipe> p = rt->Connect(*in, *mem);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->plan().hops.size(), 1u);
  EXPECT_EQ(p->plan().hops[0].mechanism, Mechanism::kUringRead);
  ASSERT_TRUE(p->Transfer(0, 0, n).ok());
  EXPECT_EQ(std::memcmp(mem->data(), data.data(), n), 0);
  EXPECT_EQ(p->stats().fallbacks, 0u) << "aligned both sides: direct";
  // Misaligned by 100 bytes: every full chunk bounces through aligned staging memory.
  std::memset(mem->data(), 0, n + 4096);
  ASSERT_TRUE(p->Transfer(0, 100, n).ok());
  EXPECT_EQ(std::memcmp(mem->data() + 100, data.data(), n), 0);
  if (in->alignment() > 1) {
    EXPECT_GT(p->stats().fallbacks, 0u);
  }
}

TEST(Pipes, MemoryToFileNeverOverwritesUnlessToldTo) {
  TempDir dir;
  auto rt = Runtime();
  const std::size_t n = 3 << 20;
  auto data = RandomBytes(n, 3);
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, n);
  std::memcpy(mem->data(), data.data(), n);
  Result<Locator> out = rt->File(dir.File("out"), 0, n, FileMode::kCreate);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  PipeOptions o;
  o.sync_writes = true;
  Result<Pipe> p = rt->Connect(*mem, *out, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->plan().hops[0].mechanism, Mechanism::kUringWrite);
  ASSERT_TRUE(p->Transfer(0, 0, n).ok());
  EXPECT_EQ(dir.Read(dir.File("out")), data);
  EXPECT_EQ(p->stats().syncs, 1u) << "sync_writes: one fdatasync per transfer";
  Result<Locator> again = rt->File(dir.File("out"), 0, n, FileMode::kCreate);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(Contains(again.status().message(), "kReplace")) << again.status().ToString();
  EXPECT_EQ(dir.Read(dir.File("out")), data) << "a refused declaration touches nothing";
  // A file declared for reading is no destination.
  Result<Locator> ro = rt->File(dir.File("out"), 0, 0, FileMode::kRead);
  ASSERT_TRUE(ro.ok());
  Result<Pipe> bad = rt->Connect(*mem, *ro);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "declared for reading")) << bad.status().ToString();
  Result<Locator> replace = rt->File(dir.File("out"), 0, n, FileMode::kReplace);
  ASSERT_TRUE(replace.ok());
  EXPECT_EQ(std::filesystem::file_size(dir.File("out")), 0u) << "kReplace truncates";
}

TEST(Pipes, FileToFileUsesCopyFileRange) {
  TempDir dir;
  auto data = RandomBytes((2 << 20) + 11, 4);
  auto rt = Runtime();
  Result<Locator> in = rt->File(dir.Write("in", data), 0, 0, FileMode::kRead);
  Result<Locator> out = rt->File(dir.File("out"), 0, data.size(), FileMode::kCreate);
  ASSERT_TRUE(in.ok() && out.ok());
  Result<Pipe> p = rt->Connect(*in, *out);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->plan().hops[0].mechanism, Mechanism::kCopyFileRange);
  // CPU and DSA cannot reach files; reading and writing through staging lost to the direct path.
  EXPECT_EQ(p->plan().rejected.size(), 3u) << p->plan().ToText();
  ASSERT_TRUE(p->Transfer(0, 0, data.size()).ok());
  EXPECT_EQ(dir.Read(dir.File("out")), data);
}

TEST(Pipes, StreamOfSubmitsWithCallbacks) {
  auto rt = Runtime();
  const std::size_t piece = 256 << 10, count = 64;
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, piece * count);
  Result<Locator> b = rt->Memory(TierKind::kDram, 0, piece * count);
  auto data = RandomBytes(piece * count, 5);
  std::memcpy(a->data(), data.data(), data.size());
  PipeOptions o;
  o.queue_depth = 3;
  o.chunk_bytes = 64 << 10;
  Result<Pipe> p = rt->Connect(*a, *b, o);
  ASSERT_TRUE(p.ok());
  std::atomic<int> called{0};
  std::vector<Handle> handles;
  for (std::size_t i = 0; i < count; ++i) {
    // Reversed order, so that the placement is checked rather than a lucky sequence.
    const std::size_t off = (count - 1 - i) * piece;
    Result<Handle> h = p->Submit(off, off, piece, [&called](const Completion& c) {
      if (c.status.ok()) called.fetch_add(1);
    });
    ASSERT_TRUE(h.ok());
    handles.push_back(std::move(*h));
  }
  ASSERT_TRUE(p->Drain().ok());
  for (Handle& h : handles) EXPECT_TRUE(h.Wait().ok());
  EXPECT_EQ(called.load(), static_cast<int>(count));
  EXPECT_EQ(std::memcmp(b->data(), data.data(), data.size()), 0);
  PipeStats s = p->stats();
  EXPECT_EQ(s.transfers_done, count);
  EXPECT_EQ(s.chunks, count * 4);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.queue_depth, 3u);
}

// Drain returns after the callbacks, not only the copies: a callback that takes its time has
// finished (and may use what the caller frees once Drain returns).
TEST(Pipes, DrainWaitsForCallbacks) {
  auto rt = Runtime();
  const std::size_t piece = 64 << 10, count = 4;
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, piece * count);
  Result<Locator> b = rt->Memory(TierKind::kDram, 0, piece * count);
  Result<Pipe> p = rt->Connect(*a, *b);
  ASSERT_TRUE(p.ok());
  std::atomic<int> finished{0};
  for (std::size_t i = 0; i < count; ++i) {
    Result<Handle> h = p->Submit(i * piece, i * piece, piece, [&finished](const Completion&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      finished.fetch_add(1);
    });
    ASSERT_TRUE(h.ok());
  }
  ASSERT_TRUE(p->Drain().ok());
  EXPECT_EQ(finished.load(), static_cast<int>(count));
}

TEST(Pipes, PostAndReapThroughEpoll) {
  TempDir dir;
  const std::size_t piece = 64 << 10, count = 40;
  auto data = RandomBytes(piece * count, 6);
  auto rt = Runtime();
  Result<Locator> in = rt->File(dir.Write("in", data), 0, 0, FileMode::kRead);
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, data.size());
  PipeOptions o;
  o.in_order_completions = true;
  Result<Pipe> p = rt->Connect(*in, *mem, o);
  ASSERT_TRUE(p.ok());
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p->fd(), &ev), 0);
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(p->Post(i * piece, i * piece, piece, 1000 + i).ok());
  }
  EXPECT_FALSE(p->Post(0, 0, data.size() + 1, 9).ok());
  std::vector<std::uint64_t> tags;
  while (tags.size() < count) {
    int ready = 0;
    do {
      ready = epoll_wait(ep, &ev, 1, 10000);
    } while (ready < 0 && errno == EINTR);  // io_uring's task work interrupts the submitter
    ASSERT_EQ(ready, 1) << "the fd must become readable";
    PipeCompletion out[7];
    const std::size_t n = p->Reap(out);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(out[i].status.ok());
      EXPECT_EQ(out[i].bytes, piece);
      tags.push_back(out[i].tag);
    }
  }
  close(ep);
  for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(tags[i], 1000 + i) << "in posted order";
  EXPECT_EQ(p->posted(), 0u);
  EXPECT_EQ(std::memcmp(mem->data(), data.data(), data.size()), 0);
  PipeCompletion none[1];
  EXPECT_EQ(p->Reap(none), 0u);
}

TEST(Pipes, SpillChainFillsTiersInOrder) {
  TempDir dir;
  auto rt = Runtime();
  const std::size_t dram = 1 << 20, file = 4 << 20, n = 3 << 20;
  auto data = RandomBytes(n, 7);
  Result<Locator> src = rt->Memory(TierKind::kDram, 0, n);
  std::memcpy(src->data(), data.data(), n);
  Result<Locator> d0 = rt->Memory(TierKind::kDram, 0, dram);
  Result<Locator> d1 = rt->File(dir.File("spill"), 0, file, FileMode::kCreate);
  ASSERT_TRUE(d0.ok() && d1.ok());
  Result<Locator> chain = rt->Spill({*d0, *d1});
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(chain->capacity(), dram + file);
  Result<Pipe> down = rt->Connect(*src, *chain);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->plan().segments.size(), 2u);
  ASSERT_TRUE(down->Transfer(0, 0, n).ok());
  EXPECT_EQ(std::memcmp(d0->data(), data.data(), dram), 0) << "DRAM first";
  std::vector<unsigned char> spilled = dir.Read(dir.File("spill"));
  ASSERT_EQ(spilled.size(), n - dram) << "the rest went to the file";
  EXPECT_EQ(std::memcmp(spilled.data(), data.data() + dram, n - dram), 0);
  // And back up, across the boundary.
  Result<Locator> back = rt->Memory(TierKind::kDram, 0, n);
  Result<Pipe> up = rt->Connect(*chain, *back);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  ASSERT_TRUE(up->Transfer(dram - 1000, 0, 2000 + (1 << 20)).ok());
  EXPECT_EQ(std::memcmp(back->data(), data.data() + dram - 1000, 2000 + (1 << 20)), 0);
  EXPECT_FALSE(rt->Spill({*d0}).ok());
}

TEST(Pipes, PlannerStagesFileToHbmWhereCalibrationSaysSo) {
  TempDir dir;
  auto rt = FixtureRuntime("xeon-max-9468-snc4-flat.xml");
  ASSERT_TRUE(rt);
  EXPECT_TRUE(rt->models_placement());
  auto data = RandomBytes(5 << 20, 8);
  Result<Locator> in = rt->File(dir.Write("in", data), 0, 0, FileMode::kRead);
  Result<Locator> hbm = rt->Memory(TierKind::kHbm, 0, data.size());
  ASSERT_TRUE(in.ok() && hbm.ok()) << hbm.status().ToString();
  EXPECT_EQ(hbm->node(), 8) << "the HBM next to node 0";
  EXPECT_TRUE(hbm->modelled());
  Result<Pipe> p = rt->Connect(*in, *hbm);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const PipePlan& plan = p->plan();
  ASSERT_EQ(plan.hops.size(), 2u) << plan.ToText();
  EXPECT_EQ(plan.hops[0].mechanism, Mechanism::kUringRead);
  EXPECT_EQ(plan.hops[0].to, "staging:dram:0");
  EXPECT_EQ(plan.hops[1].mechanism, Mechanism::kCpu);
  EXPECT_DOUBLE_EQ(plan.expected_gbps, 6.5);
  EXPECT_TRUE(Contains(plan.ToText(), "calibrated 3.10 GB/s, below the chosen 6.50 GB/s"))
      << plan.ToText();
  EXPECT_TRUE(Contains(plan.ToText(), "placement is modelled"));
  nlohmann::json j = nlohmann::json::parse(plan.ToJson());
  EXPECT_EQ(j["hops"].size(), 2u);
  EXPECT_EQ(j["hops"][0]["mechanism"], "io_uring-read");
  EXPECT_DOUBLE_EQ(j["hops"][0]["expected_gbps"].get<double>(), 6.5);
  ASSERT_TRUE(p->Transfer(0, 0, data.size()).ok());
  EXPECT_EQ(std::memcmp(hbm->data(), data.data(), data.size()), 0);
  // DRAM -> file stays direct: staging through DRAM cannot beat it.
  Result<Locator> dram = rt->Memory(TierKind::kDram, 0, 1 << 20);
  Result<Locator> out = rt->File(dir.File("o"), 0, 1 << 20, FileMode::kCreate);
  Result<PipePlan> direct = rt->Plan(*dram, *out);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->hops.size(), 1u);
  // An override that cannot serve the path is refused with the reasons.
  PipeOptions o;
  o.mechanism = Mechanism::kDsa;
  Result<Pipe> dsa = rt->Connect(*in, *hbm, o);
  ASSERT_FALSE(dsa.ok());
  EXPECT_TRUE(Contains(dsa.status().message(), "dsa")) << dsa.status().ToString();
}

TEST(Pipes, CxlFixtureAndForcedStaging) {
  TempDir dir;
  auto rt = FixtureRuntime("cxl-host.xml");
  ASSERT_TRUE(rt);
  Result<Locator> cxl = rt->Parse("cxl:0:2MiB", FileMode::kCreate);
  ASSERT_TRUE(cxl.ok()) << cxl.status().ToString();
  EXPECT_EQ(cxl->tier(), TierKind::kCxl);
  EXPECT_EQ(cxl->node(), 2);
  Result<Locator> out = rt->Parse("file:" + dir.File("x") + ":0:2MiB", FileMode::kCreate);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Result<PipePlan> plan = rt->Plan(*cxl, *out);
  ASSERT_TRUE(plan.ok());
  // No figures for cxl:2 in the Xeon Max calibration: direct by preference, and said so.
  EXPECT_EQ(plan->hops.size(), 1u);
  EXPECT_TRUE(Contains(plan->ToText(), "no calibrated figure")) << plan->ToText();
  PipeOptions o;
  o.force_staging = true;
  Result<Pipe> staged = rt->Connect(*cxl, *out, o);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  ASSERT_EQ(staged->plan().hops.size(), 2u);
  std::memset(cxl->data(), 0x3c, 2 << 20);
  ASSERT_TRUE(staged->Transfer(0, 0, 2 << 20).ok());
  EXPECT_EQ(dir.Read(dir.File("x")), std::vector<unsigned char>(2 << 20, 0x3c));
  EXPECT_GT(staged->plan().staging_bytes, 0u);
}

TEST(Pipes, DsaModelAsAMechanism) {
  PipeRuntimeOptions o;
  o.dsa_model = true;
  auto rt = Runtime(o);
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, 6 << 20);
  Result<Locator> b = rt->Memory(TierKind::kDram, 0, 6 << 20);
  auto data = RandomBytes(6 << 20, 12);
  std::memcpy(a->data(), data.data(), data.size());
  PipeOptions po;
  po.mechanism = Mechanism::kDsa;
  Result<Pipe> p = rt->Connect(*a, *b, po);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->plan().hops.size(), 1u);
  EXPECT_EQ(p->plan().hops[0].mechanism, Mechanism::kDsa);
  EXPECT_TRUE(p->plan().hops[0].model);
  EXPECT_TRUE(Contains(p->plan().ToText(), "software device model"));
  ASSERT_TRUE(p->Transfer(0, 0, 6 << 20).ok());
  EXPECT_EQ(std::memcmp(b->data(), data.data(), data.size()), 0);
  // Without the override the CPU comes first: the model is last by preference.
  Result<PipePlan> plain = rt->Plan(*a, *b);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->hops[0].mechanism, Mechanism::kCpu);
}

// The caller's engines serve the mechanism of their kind; anything else is refused with why.
TEST(Pipes, CallerEnginesAreTakenByKind) {
  testkit::ManualEngine storage(0, "store");
  storage.set_kind(EngineKind::kStorage);
  testkit::ManualEngine one(0, "one"), two(0, "two");
  PipeRuntimeOptions o;
  o.calibration_path = "/nonexistent/calibration.json";
  for (std::vector<Engine*> given : {std::vector<Engine*>{nullptr}, {&storage}, {&one, &two}}) {
    o.engines = given;
    Result<std::unique_ptr<PipeRuntime>> rt = PipeRuntime::Create(o);
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
  }
  two.set_kind(EngineKind::kOffload);
  o.engines = {&one, &two};
  auto rt = Runtime(o);
  ASSERT_NE(rt, nullptr);
  const std::vector<Engine*> engines = rt->engines();
  EXPECT_EQ(engines[0], &one);
  EXPECT_EQ(engines[1], &two);
  EXPECT_EQ(engines[2]->capabilities().kind, EngineKind::kStorage);  // its own io_uring
}

TEST(Pipes, BadLocatorsAreRefusedWhenDeclared) {
  TempDir dir;
  auto rt = Runtime();
  const std::string small = dir.Write("small", std::vector<unsigned char>(1000, 1));
  auto code = [](const Result<Locator>& r) { return r.status().code(); };
  auto msg = [](const Result<Locator>& r) { return r.status().message(); };
  Result<Locator> missing = rt->File(dir.File("nope"), 0, 0, FileMode::kRead);
  EXPECT_EQ(code(missing), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(msg(missing), dir.File("nope")));
  EXPECT_TRUE(Contains(msg(rt->File(small, 500, 501, FileMode::kRead)), "beyond the end"));
  EXPECT_TRUE(Contains(msg(rt->File(small, 1001, 0, FileMode::kRead)), "beyond the end"));
  EXPECT_TRUE(Contains(msg(rt->File(dir.File("new"), 0, 0, FileMode::kCreate)), "needs a length"));
  EXPECT_TRUE(Contains(msg(rt->File(dir.File("no/dir/x"), 0, 10, FileMode::kCreate)),
                       "directory does not exist"));
  EXPECT_TRUE(Contains(msg(rt->File(dir.path(), 0, 0, FileMode::kRead)), "directory"));
  Result<Locator> hbm = rt->Memory(TierKind::kHbm, 0, 4096);
  EXPECT_EQ(code(hbm), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(msg(hbm), "has no hbm node")) << msg(hbm);
  EXPECT_FALSE(rt->Node(99, 4096).ok());
  EXPECT_FALSE(rt->Node(0, 0).ok());
  EXPECT_FALSE(rt->Borrow(nullptr, 10).ok());
  for (const char* bad :
       {"", "ram:0", "dram:x", "dram:0:12XB", "dram:0:1:2", "node", "file:", "dram"}) {
    Result<Locator> l = rt->Parse(bad, FileMode::kRead);
    EXPECT_FALSE(l.ok()) << bad;
    EXPECT_FALSE(msg(l).empty()) << bad;
  }
  EXPECT_TRUE(rt->Parse("dram", FileMode::kRead, 4096).ok()) << "a default size";
  Result<Locator> parsed = rt->Parse("file:" + small + ":100:200", FileMode::kRead);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->file_offset(), 100u);
  EXPECT_EQ(parsed->capacity(), 200u);
  EXPECT_FALSE(rt->Connect(Locator(), *parsed).ok());
  // A fixture topology without model_placement can plan but not hold memory.
  PipeRuntimeOptions o;
  o.topology_xml = testkit::FixturePath("xeon-max-9468-snc4-flat.xml");
  auto plan_only = Runtime(o);
  Result<Locator> far = plan_only->Memory(TierKind::kHbm, 0, 4096);
  EXPECT_TRUE(Contains(msg(far), "model_placement")) << msg(far);
}

TEST(Pipes, ReadErrorsNameTheFile) {
  TempDir dir;
  auto rt = Runtime();
  const std::string path = dir.Write("shrinks", RandomBytes(2 << 20, 9));
  Result<Locator> in = rt->File(path, 0, 0, FileMode::kRead);
  Result<Locator> mem = rt->Memory(TierKind::kDram, 0, 2 << 20);
  Result<Pipe> p = rt->Connect(*in, *mem);
  ASSERT_TRUE(p.ok());
  std::filesystem::resize_file(path, 1 << 20);  // truncated behind the pipe's back
  Status s = p->Transfer(0, 0, 2 << 20);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), path)) << s.ToString();
  PipeStats st = p->stats();
  EXPECT_EQ(st.errors, 1u);
  EXPECT_TRUE(Contains(st.last_error, path));
  EXPECT_FALSE(p->Drain().ok()) << "Drain reports the failure once";
  EXPECT_TRUE(p->Drain().ok());
}

TEST(Pipes, BandwidthCapPacesChunks) {
  auto rt = Runtime();
  Result<Locator> a = rt->Memory(TierKind::kDram, 0, 8 << 20);
  Result<Locator> b = rt->Memory(TierKind::kDram, 0, 8 << 20);
  PipeOptions o;
  o.bandwidth_cap = 80 << 20;  // 8 MiB take at least ~87 ms at 80 MiB/s (first chunk free)
  o.chunk_bytes = 1 << 20;
  Result<Pipe> p = rt->Connect(*a, *b, o);
  ASSERT_TRUE(p.ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(p->Transfer(0, 0, 8 << 20).ok());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 80.0) << "a lower bound only: a slow machine cannot make this fail";
  EXPECT_TRUE(Contains(p->plan().ToText(), "bandwidth cap 80MiB/s"));
}

}  // namespace
}  // namespace tierflow
