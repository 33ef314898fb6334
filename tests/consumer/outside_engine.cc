// SPDX-License-Identifier: Apache-2.0
// An engine written outside the library, against the installed headers only
// (tierflow/engine_module.h): one worker thread that copies and fills with the C library. It is
// then used as any engine is: submitted to, split with the CPU engine under a copy policy,
// chosen by the auto policy for what it is (an offload engine, by its EngineKind, whatever its
// name), given to the offloading cache, and given to a pipe runtime whose pipes then run on it.
// Exit status 0 when everything arrived and the counters add up.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <tierflow/cache.h>
#include <tierflow/copy_policy.h>
#include <tierflow/cpu_engine.h>
#include <tierflow/engine_module.h>
#include <tierflow/pipe_runtime.h>
#include <tierflow/topology.h>

namespace {

class LibcEngine final : public tierflow::Engine {
 public:
  LibcEngine(int node, tierflow::EngineKind kind) {
    caps_.name = "libc";
    caps_.kind = kind;
    caps_.ops = tierflow::OpBit(tierflow::OpKind::kCopy) | tierflow::OpBit(tierflow::OpKind::kFill);
    caps_.max_op_bytes = std::uint64_t{1} << 32;
    caps_.max_batch = 64;
    caps_.node = node;
    worker_ = std::thread([this] { Work(); });
  }
  ~LibcEngine() override {  // reports every part it holds before it goes
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  const tierflow::EngineCapabilities& capabilities() const override { return caps_; }

 protected:
  tierflow::Status Enqueue(std::span<const tierflow::Operation> ops,
                           tierflow::Submission& submission) override {
    submission.AddParts(static_cast<std::uint32_t>(ops.size()));  // before any can complete
    counters().Add(tierflow::EngineCounters::kInFlight, ops.size());
    {
      std::lock_guard lock(mu_);
      for (const tierflow::Operation& op : ops) queue_.push_back({submission.op(), op});
    }
    cv_.notify_one();
    return tierflow::Status::Ok();
  }
  tierflow::EngineQueue queue() const override {
    std::lock_guard lock(mu_);
    return {1024, queue_.size()};
  }

 private:
  struct Part {
    tierflow::OpRef op;
    tierflow::Operation what;
  };
  void Work() {
    for (;;) {
      Part p;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        p = queue_.front();
        queue_.pop_front();
      }
      if (p.what.kind == tierflow::OpKind::kCopy) {
        std::memcpy(p.what.dst, p.what.src, p.what.size);
      } else {
        for (std::size_t i = 0; i < p.what.size; ++i) {
          static_cast<unsigned char*>(p.what.dst)[i] =
              static_cast<unsigned char>(p.what.pattern >> (8 * (i % 8)));
        }
      }
      counters().Add(tierflow::EngineCounters::kPiecesCompleted);
      counters().Add(tierflow::EngineCounters::kBytesCompleted, p.what.size);
      counters().Sub(tierflow::EngineCounters::kInFlight);
      p.op.CompletePart(p.what.size);  // the last part runs the callback and wakes waiters
    }
  }
  tierflow::EngineCapabilities caps_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Part> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

int Fail(const char* what, const tierflow::Status& s) {
  std::fprintf(stderr, "outside_engine: %s: %s\n", what, s.ToString().c_str());
  return 1;
}
// 5. A pipe runtime given `offload` and a CPU-kind engine of the same make: a pipe between
// memory locators runs on the engine its plan's mechanism names.
int RunPipes(LibcEngine& offload, int node, const std::vector<char>& src) {
  LibcEngine libc_cpu(node, tierflow::EngineKind::kCpu);
  tierflow::PipeRuntimeOptions ro;
  ro.engines = {&libc_cpu, &offload};
  ro.use_dsa = false;
  auto rt = tierflow::PipeRuntime::Create(ro);
  if (!rt.ok()) return Fail("pipe runtime", rt.status());
  std::vector<char> dst(src.size());
  auto from = (*rt)->Borrow(const_cast<char*>(src.data()), src.size(), node);
  auto to = (*rt)->Borrow(dst.data(), dst.size(), node);
  if (!from.ok() || !to.ok()) return Fail("locators", from.status());
  for (tierflow::Mechanism m : {tierflow::Mechanism::kCpu, tierflow::Mechanism::kDsa}) {
    tierflow::PipeOptions po;
    po.mechanism = m;
    auto pipe = (*rt)->Connect(*from, *to, po);
    if (!pipe.ok()) return Fail("connect", pipe.status());
    std::fill(dst.begin(), dst.end(), 0);
    if (tierflow::Status s = pipe->Transfer(0, 0, src.size()); !s.ok() || dst != src) {
      return Fail("pipe transfer", s);
    }
  }
  if (libc_cpu.stats().bytes_completed != src.size()) {
    std::fprintf(stderr, "outside_engine: the pipe's cpu hop did not run on the caller's engine\n");
    return 1;
  }
  return 0;
}

// 2 and 3: one copy split between `libc` and the CPU engine by a copy policy; the auto policy
// sends a small copy to the CPU engine and a medium one to the offload engine. Sets `share`
// to the bytes of the split that `libc` copied.
int Policies(LibcEngine& libc, tierflow::Engine& cpu, const tierflow::Topology& topo, int node,
             const std::vector<char>& src, std::uint64_t& share) {
  std::vector<char> dst(src.size());
  tierflow::CopyPolicy policy;
  policy.kind = tierflow::PolicyKind::kBruteForce;
  std::vector<tierflow::Engine*> engines = {&libc, &cpu};
  auto plan = tierflow::PlanCopy(policy, topo, engines, node, node, src.size());
  if (!plan.ok()) return Fail("plan", plan.status());
  auto split =
      tierflow::SubmitParts(tierflow::Operation::Copy(dst.data(), src.data(), src.size()), *plan);
  if (!split.ok()) return Fail("split", split.status());
  if (tierflow::Status s = split->Wait(); !s.ok() || dst != src) return Fail("split result", s);
  share = 0;
  for (const tierflow::CopyPart& part : *plan) share += part.engine == &libc ? part.size : 0;

  policy.kind = tierflow::PolicyKind::kAuto;
  auto small = tierflow::PlanCopy(policy, topo, engines, node, node, 4096);
  auto medium = tierflow::PlanCopy(policy, topo, engines, node, node, 1 << 20);
  if (!small.ok() || !medium.ok()) return Fail("auto plan", small.status());
  if ((*small)[0].engine != &cpu || (*medium)[0].engine != &libc) {
    std::fprintf(stderr, "outside_engine: the auto policy did not choose by kind\n");
    return 1;
  }
  return 0;
}

// 4. The offloading cache filled by `libc`.
int FillCache(LibcEngine& libc, const tierflow::Topology& topo, int node,
              const std::vector<char>& src) {
  tierflow::CacheConfig config;
  config.engines = {&libc};
  config.capacity[node] = 8 << 20;
  auto cache = tierflow::OffloadCache::Create(topo, config);
  if (!cache.ok()) return Fail("cache", cache.status());
  auto entry = (*cache)->Access(src.data(), src.size());
  if (!entry.ok()) return Fail("access", entry.status());
  if (tierflow::Status s = entry->Wait(); !s.ok()) return Fail("fill", s);
  return entry->cached() && std::memcmp(entry->data(), src.data(), src.size()) == 0 ? 0 : 1;
}

}  // namespace

int main() {
  tierflow::Result<tierflow::Topology> topo = tierflow::Topology::Discover();
  if (!topo.ok()) return Fail("topology", topo.status());
  const int node = topo->nodes().front().os_index;
  // Named "libc", and an offload engine by its kind: planners must go by the kind.
  LibcEngine libc(node, tierflow::EngineKind::kOffload);
  auto cpu = tierflow::CpuEngine::Create(*topo, {.node = node});
  if (!cpu.ok()) return Fail("cpu engine", cpu.status());

  // 1. Submitted to directly: a batch, and an operation it does not offer.
  std::vector<char> src(1 << 20), dst(1 << 20);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 13);
  std::vector<tierflow::Operation> batch;
  for (int i = 0; i < 4; ++i) {
    batch.push_back(
        tierflow::Operation::Copy(dst.data() + i * (1 << 18), src.data() + i * (1 << 18), 1 << 18));
  }
  auto h = libc.SubmitBatch(batch);
  if (!h.ok()) return Fail("batch", h.status());
  if (tierflow::Status s = h->Wait(); !s.ok() || dst != src) return Fail("batch result", s);
  if (libc.Submit(tierflow::Operation::Crc32c(src.data(), 64)).ok()) return 1;

  std::uint64_t share = 0;
  if (int rc = Policies(libc, **cpu, *topo, node, src, share); rc != 0) return rc;
  if (int rc = FillCache(libc, *topo, node, src); rc != 0) return rc;
  if (int rc = RunPipes(libc, node, src); rc != 0) return rc;

  const tierflow::EngineStats st = libc.stats();
  std::printf(
      "outside_engine: %llu operations, %llu pieces, %llu bytes through an engine built "
      "outside tierflow (a policy, the cache and a pipe chose it by kind)\n",
      static_cast<unsigned long long>(st.ops_submitted),
      static_cast<unsigned long long>(st.pieces_completed),
      static_cast<unsigned long long>(st.bytes_completed));
  // The batch, its share of the split, the cache's fill and the pipe's offload hop.
  const std::uint64_t expected = src.size() + share + src.size() + src.size();
  return st.in_flight == 0 && st.bytes_completed == expected && share > 0 ? 0 : 1;
}
