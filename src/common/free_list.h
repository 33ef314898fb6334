// Objects recycled through per-thread free lists: taking and returning one on the thread that
// uses it takes no lock and writes no line another thread writes. A thread's list spills half
// of itself to one global list beyond kLocalMax; a thread whose list is empty refills kRefill
// from there, and when that is empty too allocates kGrow at once (a thread needs spares beyond
// what it has in flight, or its next request would allocate). Objects are never freed — a
// device may still write into a released one, and a reused one keeps what it had allocated —
// and a thread that exits hands its list to the global one. The global list's lock is reset in
// a fork() child (common/fork_guard.h). Users: the handles' operation states, the DSA jobs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

#include "common/fork_guard.h"

namespace tierflow {

template <typename T, std::size_t kLocalMax, std::size_t kRefill, std::size_t kGrow = 1>
class FreeList {
 public:
  static_assert(kLocalMax >= 2 && kRefill >= 1 && kGrow >= 1);

  static T* Get() {
    std::vector<T*>& local = Local().items;
    if (local.empty()) Refill(local);
    if (local.empty()) {
      for (std::size_t i = 1; i < kGrow; ++i) local.push_back(new T);
      return new T;
    }
    T* t = local.back();
    local.pop_back();
    return t;
  }

  static void Put(T* t) {
    std::vector<T*>& local = Local().items;
    local.push_back(t);
    if (local.size() <= kLocalMax) return;
    Shared& g = Global();
    std::lock_guard lock(g.mu);
    g.items.insert(g.items.end(), local.end() - static_cast<std::ptrdiff_t>(kLocalMax / 2),
                   local.end());
    local.resize(local.size() - kLocalMax / 2);
  }

  // Straight to the global list: for a thread that releases objects it will not take back (a
  // worker completing operations other threads submitted).
  static void PutShared(T* t) {
    Shared& g = Global();
    std::lock_guard lock(g.mu);
    g.items.push_back(t);
  }

 private:
  struct Shared final : ForkAware {
    std::mutex mu;
    std::vector<T*> items;
    Shared() { RegisterForkAware(this, /*leaf=*/true); }
    void PrepareFork() override { mu.lock(); }
    void AfterForkParent() override { mu.unlock(); }
    void AfterForkChild() override { new (&mu) std::mutex(); }
  };
  struct PerThread {
    std::vector<T*> items;
    ~PerThread() {  // thread exit: hand the objects to the global list
      if (items.empty()) return;
      Shared& g = Global();
      std::lock_guard lock(g.mu);
      g.items.insert(g.items.end(), items.begin(), items.end());
    }
  };
  static Shared& Global() {
    static Shared* g = new Shared;  // never destroyed: threads may exit after main
    return *g;
  }
  static PerThread& Local() {
    thread_local PerThread local;
    return local;
  }
  static void Refill(std::vector<T*>& local) {
    Shared& g = Global();
    std::lock_guard lock(g.mu);
    const std::size_t n = std::min(kRefill, g.items.size());
    local.insert(local.end(), g.items.end() - static_cast<std::ptrdiff_t>(n), g.items.end());
    g.items.resize(g.items.size() - n);
  }
};

}  // namespace tierflow
