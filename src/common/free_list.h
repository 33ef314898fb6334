// SPDX-License-Identifier: Apache-2.0
// Objects recycled through per-thread free lists: taking and returning one on the thread that
// uses it takes no lock and writes no line another thread writes. A thread's list spills half
// of itself to one global list beyond kLocalMax; a thread whose list is empty refills kRefill
// from there, and when that is empty too allocates kGrow at once (a thread needs spares beyond
// what it has in flight, or its next request would allocate). Objects are never freed — a
// device may still write into a released one, and a reused one keeps what it had allocated —
// and a thread that exits hands its list to the global one. The global list's lock is reset in
// a fork() child (common/fork_guard.h). Users: the handles' operation states, the DSA jobs.
#pragma once

#include <cstddef>
#include <mutex>
#include <new>

#include "common/fork_guard.h"

namespace tierflow {

// T carries the link: a member `T* next_free` that belongs to the list while T is in it. Moving
// objects between lists allocates nothing (a vector's growth would: the steady-state submit
// path must not allocate).
template <typename T, std::size_t kLocalMax, std::size_t kRefill, std::size_t kGrow = 1>
class FreeList {
 public:
  static_assert(kLocalMax >= 2 && kRefill >= 1 && kGrow >= 1);

  static T* Get() {
    Chain& local = t_local;
    if (local.head == nullptr) Refill(local);
    if (local.head == nullptr) {
      for (std::size_t i = 1; i < kGrow; ++i) local.Push(new T);
      return new T;
    }
    return local.Pop();
  }

  static void Put(T* t) {
    Chain& local = t_local;
    if (local.tail == nullptr) ArmExitHandOff();  // first object of an empty list
    local.Push(t);
    if (local.count <= kLocalMax) return;
    Chain half;
    for (std::size_t i = 0; i < kLocalMax / 2; ++i) half.Push(local.Pop());
    Shared& g = Global();
    std::lock_guard lock(g.mu);
    g.chain.Splice(half);
  }

  // Straight to the global list: for a thread that releases objects it will not take back (a
  // worker completing operations other threads submitted).
  static void PutShared(T* t) {
    Shared& g = Global();
    std::lock_guard lock(g.mu);
    g.chain.Push(t);
  }

 private:
  struct Chain {
    T* head = nullptr;
    T* tail = nullptr;
    std::size_t count = 0;
    void Push(T* t) {
      t->next_free = head;
      head = t;
      if (tail == nullptr) tail = t;
      ++count;
    }
    T* Pop() {
      T* t = head;
      head = t->next_free;
      if (head == nullptr) tail = nullptr;
      t->next_free = nullptr;
      --count;
      return t;
    }
    void Splice(Chain& other) {  // takes all of `other`
      if (other.head == nullptr) return;
      other.tail->next_free = head;
      if (tail == nullptr) tail = other.tail;
      head = other.head;
      count += other.count;
      other = Chain();
    }
  };
  struct Shared final : ForkAware {
    std::mutex mu;
    Chain chain;
    Shared() { RegisterForkAware(this, /*leaf=*/true); }
    void PrepareFork() override { mu.lock(); }
    void AfterForkParent() override { mu.unlock(); }
    void AfterForkChild() override { new (&mu) std::mutex(); }
  };
  // Thread exit: hands the thread's objects to the global list. Apart from the list, so that
  // the list itself is plain thread-local data, read without a guard of first use.
  struct ExitHandOff {
    bool armed = false;
    ~ExitHandOff() {
      if (t_local.head == nullptr) return;
      Shared& g = Global();
      std::lock_guard lock(g.mu);
      g.chain.Splice(t_local);
    }
  };
  static void ArmExitHandOff() {
    thread_local ExitHandOff hand_off;
    hand_off.armed = true;
  }
  static Shared& Global() {
    static Shared* g = new Shared;  // never destroyed: threads may exit after main
    return *g;
  }
  static inline constinit thread_local Chain t_local{};
  static void Refill(Chain& local) {
    ArmExitHandOff();
    Shared& g = Global();
    std::lock_guard lock(g.mu);
    for (std::size_t i = 0; i < kRefill && g.chain.head != nullptr; ++i) local.Push(g.chain.Pop());
  }
};

}  // namespace tierflow
