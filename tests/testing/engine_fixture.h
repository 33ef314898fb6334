// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <pthread.h>
#include <sched.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"

namespace tierflow::testkit {

inline const Topology& ThisSystem() {
  static const Topology* t = [] {
    TopologyOptions o;
    o.use_environment = false;
    Result<Topology> r = Topology::Discover(o);
    if (!r.ok()) std::abort();
    return new Topology(std::move(r).value());
  }();
  return *t;
}

inline std::unique_ptr<CpuEngine> MakeCpuEngine(CpuEngineOptions o = {}) {
  Result<std::unique_ptr<CpuEngine>> e = CpuEngine::Create(ThisSystem(), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// The CPUs of the node a CPU engine runs on by default, in the order its workers are pinned.
inline std::vector<int> NodeCpus() {
  Result<const NumaNode*> node = ThisSystem().FindNode(CpuEngineOptions{}.node);
  return node.ok() ? (*node)->cpus : std::vector<int>{};
}

// Runs the calling thread on one CPU for its lifetime (where the process may use it), then
// restores the thread's CPUs.
class PinnedToCpu {
 public:
  explicit PinnedToCpu(int cpu) {
    pthread_getaffinity_np(pthread_self(), sizeof old_, &old_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  }
  ~PinnedToCpu() { pthread_setaffinity_np(pthread_self(), sizeof old_, &old_); }
  PinnedToCpu(const PinnedToCpu&) = delete;
  PinnedToCpu& operator=(const PinnedToCpu&) = delete;

 private:
  cpu_set_t old_;
};

}  // namespace tierflow::testkit
