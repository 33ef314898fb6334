// SPDX-License-Identifier: Apache-2.0
// A worker of an engine held busy, for tests of what happens while no worker is free.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tierflow/engine.h"

namespace tierflow::testkit {

// Keeps one of an engine's workers busy until released (or destroyed): an operation whose
// callback (run by the thread that completes the operation) spins until then. If the
// submitting thread completed it (the worker finished before Submit dropped its guard), the
// callback returns at once and the operation is submitted again: that thread must not be the
// one held. Two of them hold two workers.
class BusyWorker {
 public:
  explicit BusyWorker(Engine& e) : src_(1 << 20, 1), dst_(1 << 20) {
    const std::thread::id me = std::this_thread::get_id();
    for (;;) {
      SubmitOptions so;
      so.callback = [this, me](const Completion&) {
        if (std::this_thread::get_id() == me) {
          on_submitter_ = true;
          return;
        }
        running_ = true;
        while (!release_.load()) std::this_thread::yield();
      };
      Result<Handle> h =
          e.Submit(Operation::Copy(dst_.data(), src_.data(), src_.size()), std::move(so));
      EXPECT_TRUE(h.ok());
      handle_ = std::move(h).value();
      while (!running_.load() && !on_submitter_.load()) std::this_thread::yield();
      if (running_.load()) return;
      EXPECT_TRUE(handle_.Wait().ok());
      on_submitter_ = false;
    }
  }
  ~BusyWorker() { Release(); }
  void Release() {
    release_ = true;
    EXPECT_TRUE(handle_.Wait(WaitMode::kBlock).ok());
  }

 private:
  std::vector<char> src_, dst_;
  std::atomic<bool> running_{false}, release_{false}, on_submitter_{false};
  Handle handle_;
};

}  // namespace tierflow::testkit
