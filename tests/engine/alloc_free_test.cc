// SPDX-License-Identifier: Apache-2.0
// The steady-state submit path allocates nothing: this binary replaces operator new to count.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/free_list.h"
#include "testing/engine_fixture.h"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
// Every form that may reach the replaced operator delete allocates with malloc too (the
// library's std::get_temporary_buffer uses the nothrow form).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return ::operator new(n, t);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tierflow {
namespace {

long CountAllocations(const std::function<void()>& body) {
  long before = g_allocations.load();
  body();
  return g_allocations.load() - before;
}

TEST(AllocationFree, InlineSubmitAndWait) {
  auto e = testkit::MakeCpuEngine();
  std::vector<char> src(4096, 1), dst(4096);
  auto loop = [&] {
    for (int i = 0; i < 5000; ++i) {
      Result<Handle> h = e->Submit(Operation::Copy(dst.data(), src.data(), src.size()));
      if (!h.ok() || !h->Wait().ok()) std::abort();
    }
  };
  loop();  // warm the handle pool
  EXPECT_EQ(CountAllocations(loop), 0);
}

TEST(AllocationFree, HandedOffSubmitAndWait) {
  CpuEngineOptions o;
  o.inline_max_bytes = 0;
  auto e = testkit::MakeCpuEngine(o);
  std::vector<char> src(1 << 20, 1), dst(1 << 20);
  auto loop = [&] {
    for (int i = 0; i < 3000; ++i) {
      Result<Handle> h =
          e->Submit(Operation::Copy(dst.data(), src.data(), i % 2 ? 4096 : src.size()));
      if (!h.ok() || !h->Wait(i % 3 ? WaitMode::kSpin : WaitMode::kBlock).ok()) std::abort();
    }
  };
  loop();
  loop();
  EXPECT_EQ(CountAllocations(loop), 0);
}

TEST(AllocationFree, HandlesDroppedBeforeCompletion) {
  // The worker holds the last reference, so states return through the shared list.
  CpuEngineOptions o;
  o.inline_max_bytes = 0;
  auto e = testkit::MakeCpuEngine(o);
  std::vector<char> src(256 << 10, 1), dst(256 << 10);
  std::atomic<int> done{0};
  auto loop = [&] {
    for (int i = 0; i < 2000; ++i) {
      SubmitOptions so;
      so.callback = [&done](const Completion&) { done.fetch_add(1, std::memory_order_release); };
      const int before = done.load();
      {
        Result<Handle> h =
            e->Submit(Operation::Copy(dst.data(), src.data(), src.size()), std::move(so));
        if (!h.ok()) std::abort();
      }
      while (done.load(std::memory_order_acquire) == before) std::this_thread::yield();
    }
  };
  loop();
  EXPECT_EQ(CountAllocations(loop), 0);
}

TEST(AllocationFree, BatchWithCallback) {
  auto e = testkit::MakeCpuEngine();
  std::vector<char> src(64 * 4096, 1), dst(64 * 4096);
  std::vector<Operation> ops;
  for (int i = 0; i < 64; ++i)
    ops.push_back(Operation::Copy(dst.data() + i * 4096, src.data() + i * 4096, 4096));
  int calls = 0;
  auto loop = [&] {
    for (int i = 0; i < 500; ++i) {
      SubmitOptions so;
      so.callback = [&calls](const Completion&) { ++calls; };
      Result<Handle> h = e->SubmitBatch(ops, std::move(so));
      if (!h.ok() || !h->Wait().ok()) std::abort();
    }
  };
  loop();
  loop();
  EXPECT_EQ(CountAllocations(loop), 0);
  EXPECT_EQ(calls, 1500);
}

// Objects moving between threads' lists and the shared one, in numbers none of the lists held
// before (as when a loaded machine leaves many states with the workers), allocate nothing.
TEST(AllocationFree, FreeListMovesObjectsWithoutAllocating) {
  struct Node {
    Node* next_free = nullptr;
  };
  using Pool = FreeList<Node, /*kLocalMax=*/64, /*kRefill=*/16>;
  constexpr int kN = 5000;
  std::vector<Node*> nodes(kN);
  for (Node*& n : nodes) n = Pool::Get();  // new ones: allocated here, before counting
  long on_worker = -1;
  std::thread worker([&] {  // a worker releasing others' objects (std::thread allocates)
    on_worker = CountAllocations([&] {
      for (Node* n : nodes) Pool::PutShared(n);
    });
  });
  worker.join();
  const long on_owner = CountAllocations([&] {
    for (Node*& n : nodes) n = Pool::Get();  // refilled from the shared list
    for (Node* n : nodes) Pool::Put(n);      // the local list spills half at a time
    for (Node*& n : nodes) n = Pool::Get();
  });
  EXPECT_EQ(on_worker, 0);
  EXPECT_EQ(on_owner, 0);
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(std::adjacent_find(nodes.begin(), nodes.end()), nodes.end());  // no object twice
  for (Node* n : nodes) Pool::Put(n);
}

}  // namespace
}  // namespace tierflow
