// SPDX-License-Identifier: Apache-2.0
// The DSA engine on the device model: every submission, completion and resume path.
#include "tierflow/dsa_engine.h"

#include <linux/idxd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/fixture_topology.h"
#include "testing/random_bytes.h"

#include "common/crc32c.h"
#include "dsa/monitor_wait.h"
#include "tierflow/buffer.h"

namespace tierflow {
namespace {

using tierflow::testkit::RandomBytes;

std::shared_ptr<DsaDeviceModel> Model(DsaModelConfig c = {}) {
  Result<std::shared_ptr<DsaDeviceModel>> m = DsaDeviceModel::Create(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : nullptr;
}

std::unique_ptr<DsaEngine> Engine(std::shared_ptr<DsaDeviceModel> m, DsaEngineOptions o = {},
                                  int wq = 0) {
  Result<std::unique_ptr<DsaEngine>> e = DsaEngine::CreateOnModel(std::move(m), wq, o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

Handle Take(Result<Handle> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : Handle();
}

DsaModelConfig Config(bool instant, std::uint64_t max_xfer = 2u << 20) {
  DsaModelConfig c;
  c.instant = instant;
  c.max_transfer_size = max_xfer;
  return c;
}

class DsaOps : public ::testing::TestWithParam<bool> {};  // instant or threaded model

TEST_P(DsaOps, CopyMoveFillCompareAcrossSplitsAndBatches) {
  auto model = Model(Config(GetParam(), 64 << 10));
  auto e = Engine(model);
  ASSERT_TRUE(e->capabilities().is_model);
  EXPECT_EQ(e->capabilities().name, "dsa-model");
  for (std::size_t n : {std::size_t{1}, std::size_t{4095}, std::size_t{64} << 10,
                        (std::size_t{1} << 20) + 333, std::size_t{3} << 20}) {
    auto src = RandomBytes(n, 1);
    std::vector<unsigned char> dst(n);
    ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), n))->Wait().ok()) << n;
    EXPECT_EQ(dst, src) << n;

    std::vector<unsigned char> f(n + 16, 0), ref(n + 16, 0);
    ASSERT_TRUE(e->Submit(Operation::Fill(f.data() + 3, 0x0102030405060708ull, n))->Wait().ok());
    for (std::size_t i = 0; i < n; ++i)
      ref[3 + i] = static_cast<unsigned char>(0x0102030405060708ull >> (8 * (i % 8)));
    EXPECT_EQ(f, ref) << n;

    Result<Handle> eq = e->Submit(Operation::Compare(src.data(), dst.data(), n));
    ASSERT_TRUE(eq->Wait().ok());
    EXPECT_TRUE(eq->result().equal);
    dst[n - 1] ^= 1;
    Result<Handle> ne = e->Submit(Operation::Compare(src.data(), dst.data(), n));
    ASSERT_TRUE(ne->Wait().ok());
    EXPECT_FALSE(ne->result().equal);
    EXPECT_EQ(ne->result().first_difference, n - 1) << n;
  }
  // Overlapping moves both ways.
  auto buf = RandomBytes(300000, 2);
  auto ref = buf;
  std::memmove(ref.data() + 1000, ref.data(), 250000);
  ASSERT_TRUE(e->Submit(Operation::Move(buf.data() + 1000, buf.data(), 250000))->Wait().ok());
  EXPECT_EQ(buf, ref);
  std::memmove(ref.data(), ref.data() + 777, 250000);
  ASSERT_TRUE(e->Submit(Operation::Move(buf.data(), buf.data() + 777, 250000))->Wait().ok());
  EXPECT_EQ(buf, ref);
  DsaEngineStats s = e->device_stats();
  EXPECT_GT(s.batches, 0u) << "a 3 MiB copy in 64 KiB pieces travels in batches";
  EXPECT_EQ(s.errors, 0u);
  EXPECT_TRUE(model->caller_errors().empty());
}

TEST_P(DsaOps, BatchOfOperationsWithCallback) {
  auto e = Engine(Model(Config(GetParam())));
  std::vector<std::vector<unsigned char>> src, dst;
  std::vector<Operation> ops;
  for (int i = 0; i < 40; ++i) {
    src.push_back(RandomBytes(4096 + i, i));
    dst.emplace_back(4096 + i);
    ops.push_back(Operation::Copy(dst.back().data(), src.back().data(), src.back().size()));
  }
  std::atomic<int> calls{0};
  SubmitOptions so;
  so.callback = [&](const Completion& c) {
    EXPECT_TRUE(c.status.ok());
    calls.fetch_add(1);
  };
  Result<Handle> h = e->SubmitBatch(ops, std::move(so));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->Wait(WaitMode::kBlock).ok());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(e->device_stats().batches, 2u) << "40 descriptors in batches of at most 32";
}

INSTANTIATE_TEST_SUITE_P(Model, DsaOps, ::testing::Values(true, false),
                         [](const auto& i) { return i.param ? "instant" : "threaded"; });

TEST(DsaEngine, SharedWqFullRetriesThenRetriesLater) {
  DsaModelConfig c = Config(false);
  c.wqs[0].size = 2;
  auto model = Model(c);
  DsaEngineOptions o;
  o.enqcmd_retries = 2;
  auto e = Engine(model, o);
  std::vector<std::vector<unsigned char>> src, dst;
  for (int i = 0; i < 12; ++i) {
    src.push_back(RandomBytes(8192, i));
    dst.emplace_back(8192);
  }
  model->Pause();  // the device takes nothing: the WQ is full after 2
  std::vector<Handle> hs;
  for (int i = 0; i < 12; ++i) {
    hs.push_back(Take(e->Submit(Operation::Copy(dst[i].data(), src[i].data(), 8192))));
  }
  DsaEngineStats s = e->device_stats();
  EXPECT_GE(s.submit_retries, 10u * 3)
      << "10 refused descriptors, 1 try + 2 retries each (and the completion thread tries again)";
  EXPECT_EQ(s.retried_later, 10u);
  EXPECT_EQ(s.cpu_fallbacks, 0u);
  model->Resume();
  for (Handle& h : hs) ASSERT_TRUE(h.Wait().ok());
  EXPECT_EQ(src, dst);
  EXPECT_GE(model->stats().swq_retries, 30u);
}

TEST(DsaEngine, DrainCompletesAfterEverythingSubmittedBefore) {
  auto model = Model(Config(false));
  auto e = Engine(model);
  std::vector<std::vector<unsigned char>> src, dst;
  for (int i = 0; i < 6; ++i) {
    src.push_back(RandomBytes(100000, i));
    dst.emplace_back(100000);
  }
  // Nothing in flight: a drain completes at once.
  Result<Handle> empty = e->Submit(Operation::Drain());
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->done());
  model->Pause();
  std::vector<Handle> before;
  for (int i = 0; i < 4; ++i) {
    before.push_back(Take(e->Submit(Operation::Copy(dst[i].data(), src[i].data(), 100000))));
  }
  std::atomic<bool> earlier_done_at_drain{false};
  SubmitOptions cb;
  cb.callback = [&](const Completion&) {
    bool all = true;
    for (Handle& h : before) all = all && h.done();
    earlier_done_at_drain = all;
  };
  Handle drain = Take(e->Submit(Operation::Drain(), std::move(cb)));
  Handle after = Take(e->Submit(Operation::Copy(dst[4].data(), src[4].data(), 100000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(drain.done()) << "the device has not run the earlier copies";
  model->Resume();
  ASSERT_TRUE(drain.Wait().ok());
  EXPECT_TRUE(earlier_done_at_drain) << "a drain completed before an earlier operation";
  for (Handle& h : before) EXPECT_TRUE(h.done());
  ASSERT_TRUE(after.Wait().ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(src[i], dst[i]) << i;
}

TEST(DsaEngine, DualcastWithDestinationsInDifferentPagePositionsGoesAsTwoCopies) {
  auto model = Model(Config(true));
  auto e = Engine(model);
  const std::size_t n = 10000;
  auto src = RandomBytes(n, 3);
  std::vector<unsigned char> a(n + 8192), b(n + 8192);
  auto* pa = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(a.data()) + 4095) &
                                              ~std::uintptr_t{4095});
  auto* pb = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(b.data()) + 4095) &
                                              ~std::uintptr_t{4095});
  ASSERT_TRUE(e->Submit(Operation::Dualcast(pa, pb, src.data(), n))->Wait().ok());
  EXPECT_EQ(e->device_stats().dualcast_splits, 0u);
  EXPECT_EQ(model->stats().executed, 1u) << "one dualcast descriptor";
  ASSERT_TRUE(e->Submit(Operation::Dualcast(pa, pb + 64, src.data(), n))->Wait().ok());
  EXPECT_EQ(e->device_stats().dualcast_splits, 1u);
  EXPECT_EQ(std::memcmp(pa, src.data(), n), 0);
  EXPECT_EQ(std::memcmp(pb + 64, src.data(), n), 0);

  // The model enforces the rule a hand-built descriptor would break.
  alignas(64) dsa_hw_desc d{};
  alignas(32) dsa_completion_record r{};
  d.opcode = DSA_OPCODE_DUALCAST;
  d.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;
  d.completion_addr = reinterpret_cast<std::uintptr_t>(&r);
  d.src_addr = reinterpret_cast<std::uintptr_t>(src.data());
  d.dst_addr = reinterpret_cast<std::uintptr_t>(pa);
  d.dest2 = reinterpret_cast<std::uintptr_t>(pb + 64);
  d.xfer_size = 100;
  model->Enqueue(0, &d);
  EXPECT_EQ(r.status & DSA_COMP_STATUS_MASK, DSA_COMP_DCAST_ERR);
}

// After fork(), the child must not use the parent's portal or wait for the parent's completion
// thread: operations in flight at the fork fail in the child with a message saying why, and
// new ones run on a re-initialised engine. The parent is unaffected.
TEST(DsaEngine, ForkChildReinitialisesAndParentCarriesOn) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support starting threads after a multi-threaded fork";
#endif
  auto model = Model(Config(false));
  auto e = Engine(model);
  auto src = RandomBytes(200000, 8);
  std::vector<unsigned char> dst(src.size()), dst2(src.size());
  model->Pause();
  Handle inflight = Take(e->Submit(Operation::Copy(dst.data(), src.data(), src.size())));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    if (!inflight.done()) rc |= 1;
    if (inflight.status().message().find("when the process forked") == std::string::npos) rc |= 2;
    model->Resume();
    Result<Handle> h = e->Submit(Operation::Copy(dst2.data(), src.data(), src.size()));
    if (!h.ok() || !h->Wait().ok()) rc |= 4;
    if (dst2 != src) rc |= 8;
    Result<Handle> crc = e->Submit(Operation::Crc32c(src.data(), src.size()));
    if (!crc.ok() || !crc->Wait().ok() || crc->result().crc != Crc32c(0, src.data(), src.size())) {
      rc |= 16;
    }
    std::_Exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1 not done, 2 message, 4 submit, 8 data, 16 crc";
  EXPECT_FALSE(inflight.done()) << "the parent's operation is the parent's";
  model->Resume();
  ASSERT_TRUE(inflight.Wait().ok());
  EXPECT_EQ(dst, src);
}

// UMWAIT cannot run without WAITPKG (this build machine has none): the instruction wrapper is
// replaced to observe that the completion thread waits on the record of the only operation in
// flight, and that the operation still completes.
std::atomic<const volatile std::uint8_t*> g_watched{nullptr};
std::atomic<int> g_monitor_calls{0};
// The device (model) publishes the status byte atomically; read it the same way.
std::uint8_t StatusByte(const volatile std::uint8_t* p) {
  return __atomic_load_n(const_cast<const std::uint8_t*>(p), __ATOMIC_ACQUIRE);
}

TEST(DsaEngine, CompletionThreadWaitsWithUmwaitOnTheOnlyRecordInFlight) {
  auto saved_has = dsa::internal::cpu_has_waitpkg;
  auto saved_wait = dsa::internal::monitor_wait;
  g_watched = nullptr;
  g_monitor_calls = 0;
  auto model = Model(Config(false));
  DsaEngineOptions o;
  o.completion_wait = DsaCompletionWait::kUmwait;
  dsa::internal::cpu_has_waitpkg = [] { return false; };
  Result<std::unique_ptr<DsaEngine>> refused = DsaEngine::CreateOnModel(model, 0, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lacks WAITPKG"), std::string::npos);

  dsa::internal::cpu_has_waitpkg = [] { return true; };
  dsa::internal::monitor_wait = [](const volatile std::uint8_t* status, std::uint64_t,
                                   std::uint64_t) {
    g_watched = status;
    ++g_monitor_calls;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return StatusByte(status) != 0;
  };
  {
    auto e = Engine(model, o);
    EXPECT_NE(e->description().find("completion wait: umwait"), std::string::npos);
    auto src = RandomBytes(64 << 10, 12);
    std::vector<unsigned char> dst(src.size());
    model->Pause();
    Handle h = Take(e->Submit(Operation::Copy(dst.data(), src.data(), src.size())));
    for (int i = 0; i < 5000 && g_monitor_calls == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GT(g_monitor_calls.load(), 0);
    ASSERT_NE(g_watched.load(), nullptr);
    EXPECT_EQ(StatusByte(g_watched.load()), 0)
        << "the device has not written the watched record yet";
    model->Resume();
    ASSERT_TRUE(h.Wait().ok());
    EXPECT_EQ(dst, src);
    EXPECT_NE(StatusByte(g_watched.load()), 0)
        << "the watched record is the one the device completed";
    EXPECT_GT(e->device_stats().monitor_waits, 0u);
  }
  dsa::internal::cpu_has_waitpkg = saved_has;
  dsa::internal::monitor_wait = saved_wait;
  o.completion_wait = DsaCompletionWait::kPause;
  auto plain = Engine(model, o);
  EXPECT_NE(plain->description().find("completion wait: pause"), std::string::npos);
}

TEST(DsaEngine, UmwaitMaxTimeComesFromTheKernel) {
  char dir[] = "/tmp/tierflow-umwait-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string root = dir;
  EXPECT_EQ(dsa::UmwaitMaxCycles(root), 100000u) << "the kernel's default when the file is missing";
  ASSERT_EQ(
      std::system(("mkdir -p " + root + "/devices/system/cpu/umwait_control && echo 50000 > " +
                   root + "/devices/system/cpu/umwait_control/max_time")
                      .c_str()),
      0);
  EXPECT_EQ(dsa::UmwaitMaxCycles(root), 50000u);
  ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}

// Batch descriptors hold 2..max_batch_size members: more operations go as several batches,
// a lone last one on its own; the model refuses a batch outside the limits as hardware does.
TEST(DsaEngine, BatchLimits) {
  DsaModelConfig c = Config(true);
  c.max_batch_size = 4;
  auto model = Model(c);
  auto e = Engine(model);
  std::vector<std::vector<unsigned char>> src, dst;
  std::vector<Operation> ops;
  for (int i = 0; i < 9; ++i) {
    src.push_back(RandomBytes(1000, 40 + i));
    dst.emplace_back(1000);
  }
  for (int i = 0; i < 9; ++i) ops.push_back(Operation::Copy(dst[i].data(), src[i].data(), 1000));
  ASSERT_TRUE(e->SubmitBatch(ops)->Wait().ok());
  EXPECT_EQ(src, dst);
  EXPECT_EQ(e->device_stats().batches, 2u) << "4 + 4 as batches, the ninth alone";
  EXPECT_EQ(model->stats().descriptors, 3u);
  EXPECT_EQ(model->stats().executed, 9u);

  DsaEngineOptions capped;
  capped.max_batch = 2;
  auto e2 = Engine(model, capped);
  ASSERT_TRUE(e2->SubmitBatch(ops)->Wait().ok());
  EXPECT_EQ(e2->device_stats().batches, 4u);

  alignas(64) dsa_hw_desc list[8] = {};
  alignas(64) dsa_hw_desc batch{};
  alignas(32) dsa_completion_record r{};
  batch.opcode = DSA_OPCODE_BATCH;
  batch.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;
  batch.completion_addr = reinterpret_cast<std::uintptr_t>(&r);
  batch.desc_list_addr = reinterpret_cast<std::uintptr_t>(list);
  for (std::uint32_t count : {1u, 5u}) {
    std::memset(&r, 0, sizeof r);
    batch.desc_count = count;
    model->Enqueue(0, &batch);
    EXPECT_EQ(r.status & DSA_COMP_STATUS_MASK, DSA_COMP_DESC_CNT_ERANGE) << count;
  }
}

TEST(DsaEngine, SharedWqFullFallsBackToCpu) {
  DsaModelConfig c = Config(false);
  c.wqs[0].size = 1;
  auto model = Model(c);
  DsaEngineOptions o;
  o.enqcmd_retries = 1;
  o.on_swq_full = DsaSwqFullPolicy::kCpu;
  auto e = Engine(model, o);
  std::vector<std::vector<unsigned char>> src, dst;
  for (int i = 0; i < 8; ++i) {
    src.push_back(RandomBytes(4096, 10 + i));
    dst.emplace_back(4096);
  }
  model->Pause();
  std::vector<Handle> hs;
  for (int i = 0; i < 8; ++i) {
    hs.push_back(Take(e->Submit(Operation::Copy(dst[i].data(), src[i].data(), 4096))));
  }
  EXPECT_EQ(e->device_stats().cpu_fallbacks, 7u);
  for (int i = 1; i < 8; ++i) EXPECT_TRUE(hs[i].done()) << "ran on the CPU at submission";
  model->Resume();
  for (Handle& h : hs) ASSERT_TRUE(h.Wait().ok());
  EXPECT_EQ(src, dst);
}

TEST(DsaEngine, DedicatedWqNeverExceedsItsCredits) {
  DsaModelConfig c = Config(false, 16 << 10);
  c.wqs[0].shared = false;
  c.wqs[0].size = 2;
  c.engine_delay_ns = 50000;
  auto model = Model(c);
  DsaEngineOptions o;
  o.use_batches = false;  // every piece its own descriptor: 32 descriptors through 2 credits
  auto e = Engine(model, o);
  EXPECT_NE(e->description().find("dedicated"), std::string::npos);
  auto src = RandomBytes(512 << 10, 3);
  std::vector<unsigned char> dst(src.size());
  ASSERT_TRUE(e->Submit(Operation::Copy(dst.data(), src.data(), src.size()))->Wait().ok());
  EXPECT_EQ(dst, src);
  EXPECT_GT(e->device_stats().credit_waits, 0u);
  EXPECT_EQ(model->stats().dwq_overflows, 0u);
  EXPECT_TRUE(model->caller_errors().empty()) << model->caller_errors()[0];
}

TEST(DsaEngine, ModelReportsDedicatedWqOverflowAsCallerBug) {
  DsaModelConfig c = Config(false);
  c.wqs[0].shared = false;
  c.wqs[0].size = 1;
  auto model = Model(c);
  // Paused, the device takes nothing off the WQ, so the first descriptor still holds the only
  // slot when the second arrives however long this thread is descheduled between them (a
  // delay-based version failed once on a loaded CI machine).
  model->Pause();
  dsa_completion_record rec[3]{};
  alignas(64) dsa_hw_desc d{};
  d.opcode = DSA_OPCODE_NOOP;
  for (auto& r : rec) {
    d.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;
    d.completion_addr = reinterpret_cast<std::uintptr_t>(&r);
    model->Enqueue(0, &d);
  }
  EXPECT_GE(model->stats().dwq_overflows, 1u);
  ASSERT_FALSE(model->caller_errors().empty());
  EXPECT_NE(model->caller_errors()[0].find("overflowed"), std::string::npos);
  EXPECT_EQ(model->occupancy(0), 1u);
  model->Resume();
  // The accepted descriptor writes rec[0]: let it finish before rec goes out of scope.
  while (model->occupancy(0) != 0) std::this_thread::yield();
  EXPECT_EQ(rec[0].status, DSA_COMP_SUCCESS);
}

TEST(DsaEngine, ModelCompletesNoopAndDrainWithoutATransferSize) {
  auto model = Model(Config(false));
  model->Pause();
  std::vector<unsigned char> src(4096, 7), dst(4096, 0);
  dsa_completion_record rec[3]{};
  alignas(64) dsa_hw_desc d{};
  d.opcode = DSA_OPCODE_MEMMOVE;
  d.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;
  d.src_addr = reinterpret_cast<std::uintptr_t>(src.data());
  d.dst_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  d.xfer_size = 4096;
  d.completion_addr = reinterpret_cast<std::uintptr_t>(&rec[0]);
  model->Enqueue(0, &d);
  for (std::uint8_t op : {std::uint8_t{DSA_OPCODE_NOOP}, std::uint8_t{DSA_OPCODE_DRAIN}}) {
    d = dsa_hw_desc{};
    d.opcode = op;
    d.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;
    d.completion_addr = reinterpret_cast<std::uintptr_t>(&rec[op == DSA_OPCODE_NOOP ? 1 : 2]);
    model->Enqueue(0, &d);
  }
  model->Resume();
  while (model->occupancy(0) != 0) std::this_thread::yield();
  for (const auto& r : rec) EXPECT_EQ(r.status, DSA_COMP_SUCCESS);
  EXPECT_EQ(dst, src);
  EXPECT_TRUE(model->caller_errors().empty());
}

class DsaFaults : public ::testing::TestWithParam<bool> {};  // instant or threaded

TEST_P(DsaFaults, CopyResumesAfterReadAndWriteFaults) {
  auto model = Model(Config(GetParam()));
  auto e = Engine(model);
  Result<Buffer> src = Buffer::OnNode(0, 1 << 20), dst = Buffer::OnNode(0, 1 << 20);
  ASSERT_TRUE(src.ok() && dst.ok());
  auto data = RandomBytes(src->size(), 5);
  std::memcpy(src->data(), data.data(), data.size());
  model->InjectPageFault(reinterpret_cast<char*>(src->data()) + 300000);  // read fault
  model->InjectPageFault(reinterpret_cast<char*>(dst->data()) + 700000);  // write fault
  Result<Handle> h = e->Submit(Operation::Copy(dst->data(), src->data(), src->size()));
  ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
  EXPECT_EQ(h->bytes_completed(), src->size());
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), src->size()), 0);
  EXPECT_EQ(e->device_stats().faults_resumed, 2u);
  EXPECT_EQ(model->stats().page_faults, 2u);
}

TEST_P(DsaFaults, DescendingMoveResumesFromTheEnd) {
  auto model = Model(Config(GetParam()));
  auto e = Engine(model);
  Result<Buffer> b = Buffer::OnNode(0, 1 << 20);
  ASSERT_TRUE(b.ok());
  auto data = RandomBytes(b->size(), 6);
  std::memcpy(b->data(), data.data(), data.size());
  auto* p = reinterpret_cast<unsigned char*>(b->data());
  const std::size_t n = 900000, shift = 5000;
  std::memmove(data.data() + shift, data.data(), n);
  model->InjectPageFault(p + 200000);  // hit while moving down from the end
  Result<Handle> h = e->Submit(Operation::Move(p + shift, p, n));
  ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
  EXPECT_EQ(std::memcmp(p, data.data(), data.size()), 0);
  EXPECT_GE(e->device_stats().faults_resumed, 1u);
}

TEST_P(DsaFaults, BatchMemberFaultIsResumedAlone) {
  auto model = Model(Config(GetParam()));
  auto e = Engine(model);
  Result<Buffer> src = Buffer::OnNode(0, 64 << 10), dst = Buffer::OnNode(0, 64 << 10);
  ASSERT_TRUE(src.ok() && dst.ok());
  std::memset(src->data(), 0x5a, src->size());
  std::vector<Operation> ops;
  for (int i = 0; i < 8; ++i) {
    ops.push_back(Operation::Copy(reinterpret_cast<char*>(dst->data()) + i * 8192,
                                  reinterpret_cast<char*>(src->data()) + i * 8192, 8192));
  }
  model->InjectPageFault(reinterpret_cast<char*>(dst->data()) + 3 * 8192 + 4096);
  Result<Handle> h = e->SubmitBatch(ops);
  ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), src->size()), 0);
  EXPECT_EQ(e->device_stats().faults_resumed, 1u);
  EXPECT_EQ(e->device_stats().batches, 1u);
}

TEST_P(DsaFaults, FinishOnCpuPolicy) {
  auto model = Model(Config(GetParam()));
  DsaEngineOptions o;
  o.on_fault = DsaFaultPolicy::kFinishOnCpu;
  auto e = Engine(model, o);
  Result<Buffer> src = Buffer::OnNode(0, 256 << 10), dst = Buffer::OnNode(0, 256 << 10);
  ASSERT_TRUE(src.ok() && dst.ok());
  std::memset(src->data(), 0x33, src->size());
  model->InjectPageFault(reinterpret_cast<char*>(dst->data()) + 100000);
  Result<Handle> h = e->Submit(Operation::Copy(dst->data(), src->data(), src->size()));
  ASSERT_TRUE(h->Wait().ok());
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), src->size()), 0);
  EXPECT_EQ(e->device_stats().faults_on_cpu, 1u);
  EXPECT_EQ(e->device_stats().faults_resumed, 0u);
}

TEST_P(DsaFaults, CrcComparePatternAndDualcastResumeMidPiece) {
  for (DsaFaultPolicy policy : {DsaFaultPolicy::kTouchAndResume, DsaFaultPolicy::kFinishOnCpu}) {
    auto model = Model(Config(GetParam(), 256 << 10));
    DsaEngineOptions o;
    o.on_fault = policy;
    auto e = Engine(model, o);
    const std::size_t n = 1 << 20;
    Result<Buffer> src = Buffer::OnNode(0, n), a = Buffer::OnNode(0, n), b = Buffer::OnNode(0, n);
    ASSERT_TRUE(src.ok() && a.ok() && b.ok());
    auto data = RandomBytes(n, 21);
    std::memcpy(src->data(), data.data(), n);
    auto* s = reinterpret_cast<unsigned char*>(src->data());

    // CRC: the partial CRC in the record seeds the rest of the piece.
    model->InjectPageFault(s + 300000);
    Result<Handle> crc = e->Submit(Operation::Crc32c(s, n, 5));
    ASSERT_TRUE(crc->Wait().ok()) << crc->status().ToString();
    EXPECT_EQ(crc->result().crc, Crc32c(5, data.data(), n));

    // Dualcast: a write fault on the second destination.
    model->InjectPageFault(reinterpret_cast<char*>(b->data()) + 600000);
    Result<Handle> dc = e->Submit(Operation::Dualcast(a->data(), b->data(), s, n));
    ASSERT_TRUE(dc->Wait().ok()) << dc->status().ToString();
    EXPECT_EQ(dc->result().bytes_completed, n);
    EXPECT_EQ(std::memcmp(a->data(), s, n), 0);
    EXPECT_EQ(std::memcmp(b->data(), s, n), 0);

    // Compare-pattern: faults before the difference, the difference found after resuming.
    std::memset(s, 0x77, n);
    s[700001] = 0;
    model->InjectPageFault(s + 650000);
    Result<Handle> cp = e->Submit(Operation::ComparePattern(s, 0x7777777777777777ull, n));
    ASSERT_TRUE(cp->Wait().ok());
    EXPECT_FALSE(cp->result().equal);
    EXPECT_EQ(cp->result().first_difference, 700001u);

    DsaEngineStats st = e->device_stats();
    if (policy == DsaFaultPolicy::kTouchAndResume) {
      EXPECT_EQ(st.faults_resumed, 3u);
    } else {
      EXPECT_EQ(st.faults_on_cpu, 3u);
    }
  }
}

// A batch member that moves up within overlapping ranges runs descending on the device; a
// fault there resumes from the end (result bit 0), inside a batch like alone.
TEST_P(DsaFaults, DescendingMoveInABatchResumesFromTheEnd) {
  auto model = Model(Config(GetParam()));
  auto e = Engine(model);
  Result<Buffer> b = Buffer::OnNode(0, 256 << 10), other = Buffer::OnNode(0, 64 << 10);
  ASSERT_TRUE(b.ok() && other.ok());
  auto data = RandomBytes(b->size(), 31);
  std::memcpy(b->data(), data.data(), data.size());
  auto* p = reinterpret_cast<unsigned char*>(b->data());
  const std::size_t n = 150000, shift = 3000;
  std::memmove(data.data() + shift, data.data(), n);
  std::vector<unsigned char> fill_ref(other->size(), 0xee);
  std::vector<Operation> ops = {
      Operation::Fill(other->data(), 0xeeeeeeeeeeeeeeeeull, other->size()),
      Operation::Move(p + shift, p, n)};
  model->InjectPageFault(p + 40000);  // met while moving down from the end
  Result<Handle> h = e->SubmitBatch(ops);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(h->Wait().ok()) << h->status().ToString();
  EXPECT_EQ(std::memcmp(p, data.data(), data.size()), 0);
  EXPECT_EQ(std::memcmp(other->data(), fill_ref.data(), fill_ref.size()), 0);
  EXPECT_EQ(e->device_stats().batches, 1u);
  EXPECT_GE(e->device_stats().faults_resumed, 1u);
}

TEST_P(DsaFaults, BlockOnFaultOnlyWhereTheWqAllowsIt) {
  DsaModelConfig c = Config(GetParam());
  c.wqs[0].block_on_fault = true;
  c.wqs.push_back(DsaModelWqConfig{});  // wq1: block_on_fault = 0
  auto model = Model(c);
  DsaEngineOptions o;
  o.block_on_fault = true;
  auto bof = Engine(model, o, 0);
  auto plain = Engine(model, o, 1);
  Result<Buffer> src = Buffer::OnNode(0, 64 << 10), dst = Buffer::OnNode(0, 64 << 10);
  ASSERT_TRUE(src.ok() && dst.ok());
  model->InjectPageFault(dst->data());
  ASSERT_TRUE(bof->Submit(Operation::Copy(dst->data(), src->data(), src->size()))->Wait().ok());
  EXPECT_EQ(bof->device_stats().faults_resumed, 0u) << "the device waited the fault out";
  EXPECT_EQ(model->stats().faults_blocked, 1u);
  model->InjectPageFault(dst->data());
  ASSERT_TRUE(plain->Submit(Operation::Copy(dst->data(), src->data(), src->size()))->Wait().ok());
  EXPECT_EQ(plain->device_stats().faults_resumed, 1u)
      << "BOF not set on a WQ without block_on_fault";
}

INSTANTIATE_TEST_SUITE_P(Model, DsaFaults, ::testing::Values(true, false),
                         [](const auto& i) { return i.param ? "instant" : "threaded"; });

TEST(DsaEngine, OverlappingMovesAcrossPiecesKeepTheirOrder) {
  for (bool batches : {true, false}) {
    auto model = Model(Config(false, 16 << 10));
    DsaEngineOptions o;
    o.use_batches = batches;
    auto e = Engine(model, o);
    auto buf = RandomBytes(200000, 9);
    auto ref = buf;
    std::memmove(ref.data() + 5000, ref.data(), 150000);
    model->InjectPageFault(buf.data() + 100000);  // a fault in the middle of the chain
    ASSERT_TRUE(e->Submit(Operation::Move(buf.data() + 5000, buf.data(), 150000))->Wait().ok());
    EXPECT_EQ(buf, ref) << "batches=" << batches;
    std::memmove(ref.data(), ref.data() + 3000, 150000);
    ASSERT_TRUE(e->Submit(Operation::Move(buf.data(), buf.data() + 3000, 150000))->Wait().ok());
    EXPECT_EQ(buf, ref) << "batches=" << batches;
  }
  auto e = Engine(Model(Config(true, 16 << 10)));
  std::vector<unsigned char> b(100000);
  std::vector<Operation> ops = {Operation::Move(b.data() + 10, b.data(), 50000),
                                Operation::Fill(b.data(), 0, 10)};
  Result<Handle> h = e->SubmitBatch(ops);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("submit it on its own"), std::string::npos);
}

TEST(DsaEngine, DescriptorErrorsNameTheCause) {
  auto model = Model(Config(true));
  auto e = Engine(model);
  std::vector<char> a(4096, 1), b(4096);
  model->InjectError(DSA_COMP_XFER_ERANGE);
  Result<Handle> h = e->Submit(Operation::Copy(b.data(), a.data(), a.size()));
  Status s = h->Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("transfer size out of range"), std::string::npos) << s.message();
  model->InjectError(DSA_COMP_TRANSLATION_FAIL);
  s = e->Submit(Operation::Fill(b.data(), 1, b.size()))->Wait();
  EXPECT_NE(s.message().find("memfill: address translation failed"), std::string::npos)
      << s.message();
  EXPECT_EQ(e->device_stats().errors, 2u);
  ASSERT_TRUE(e->Submit(Operation::Copy(b.data(), a.data(), a.size()))->Wait().ok()) << "recovers";
}

TEST(DsaEngine, FaultOnReadOnlyDestinationIsAnErrorNotACrash) {
  auto model = Model(Config(true));
  auto e = Engine(model);
  Result<Buffer> src = Buffer::OnNode(0, 8192);
  ASSERT_TRUE(src.ok());
  // The model faults on the first page; the engine must not touch a page it cannot write.
  void* ro = mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  model->InjectPageFault(ro);
  Status s = e->Submit(Operation::Copy(ro, src->data(), 8192))->Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
  // Without an injected fault the model's IOMMU refuses the write itself, as hardware does.
  Status direct = e->Submit(Operation::Fill(ro, 1, 8192))->Wait();
  EXPECT_EQ(direct.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(direct.message().find("read-only"), std::string::npos) << direct.message();
  std::vector<unsigned char> a(8192);
  Status dual = e->Submit(Operation::Dualcast(a.data(), ro, src->data(), 8192))->Wait();
  EXPECT_NE(dual.message().find("read-only"), std::string::npos) << dual.message();
  DsaEngineOptions o;
  o.prefault = true;
  auto pre = Engine(model, o);
  Result<Handle> h = pre->Submit(Operation::Copy(ro, src->data(), 8192));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("read-only"), std::string::npos) << h.status().message();
  munmap(ro, 8192);
}

TEST(DsaEngine, DestroyedWithWorkInFlight) {
  DsaModelConfig c = Config(false, 16 << 10);
  c.engine_delay_ns = 100000;
  c.wqs[0].size = 4;
  auto model = Model(c);
  std::vector<unsigned char> src(1 << 20, 7), dst(1 << 20);
  std::vector<Handle> hs;
  {
    DsaEngineOptions o;
    o.use_batches = false;
    o.enqcmd_retries = 0;
    auto e = Engine(model, o);
    for (int i = 0; i < 4; ++i) {
      hs.push_back(Take(e->Submit(Operation::Copy(dst.data() + i * 65536, src.data(), 65536))));
    }
  }
  for (Handle& h : hs) {
    ASSERT_TRUE(h.done());
    Status s = h.Wait();
    EXPECT_TRUE(s.ok() || s.code() == StatusCode::kCancelled) << s.ToString();
  }
}

TEST(DsaEngine, ManyThreadsOneEngine) {
  DsaModelConfig c = Config(false, 32 << 10);
  c.engines = 2;
  c.wqs[0].size = 8;
  auto e = Engine(Model(c));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto src = RandomBytes(100000 + t, t);
      std::vector<unsigned char> dst(src.size());
      for (int i = 0; i < 30; ++i) {
        Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
        if (!h.ok() || !h->Wait(i % 2 ? WaitMode::kBlock : WaitMode::kAdaptive).ok() ||
            dst != src) {
          failures.fetch_add(1);
        }
        std::fill(dst.begin(), dst.end(), 0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(DsaEngine, CreateOnHardwareExplainsWhyNot) {
  DsaDiscoveryOptions o;
  o.sysfs_root = testkit::FixturePath("dsa/unusable/sys");
  o.dev_root = testkit::FixturePath("dsa/unusable/dev");
  Result<DsaInventory> inv = DsaInventory::Discover(o);
  ASSERT_TRUE(inv.ok());
  Result<std::unique_ptr<DsaEngine>> e = DsaEngine::Create(*inv);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("dsa2/wq2.0: wq2.0 has type 'kernel'"), std::string::npos)
      << e.status().message();

  o.sysfs_root = testkit::FixturePath("dsa/xeon-max-8swq/sys");
  o.dev_root = testkit::FixturePath("dsa/xeon-max-8swq/dev");
  inv = DsaInventory::Discover(o);
  ASSERT_TRUE(inv.ok());
  DsaEngineOptions eo;
  eo.node = 5;
  e = DsaEngine::Create(*inv, eo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("not a character device"), std::string::npos)
      << e.status().message();

  o.sysfs_root = "/nonexistent";
  inv = DsaInventory::Discover(o);
  e = DsaEngine::Create(*inv);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("device model"), std::string::npos);
}

TEST(DsaEngine, ModelConfigErrors) {
  DsaModelConfig c;
  c.wqs.clear();
  EXPECT_FALSE(DsaDeviceModel::Create(c).ok());
  c.wqs = {DsaModelWqConfig{true, 0, false}};
  EXPECT_NE(DsaDeviceModel::Create(c).status().message().find("size 0"), std::string::npos);
  c.wqs = {DsaModelWqConfig{}};
  c.engines = 9;
  EXPECT_FALSE(DsaDeviceModel::Create(c).ok());
  auto m = Model();
  EXPECT_FALSE(DsaEngine::CreateOnModel(m, 3).ok());
  EXPECT_FALSE(DsaEngine::CreateOnModel(nullptr, 0).ok());
}

}  // namespace
}  // namespace tierflow
