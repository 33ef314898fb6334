// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the kernel says of this process's threads (/proc/self/task), for tests that check who
// sleeps and who was woken.

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace tierflow::testkit {

inline int ThisThreadId() { return static_cast<int>(syscall(SYS_gettid)); }

inline std::vector<int> ThreadIds() {
  std::vector<int> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') tids.push_back(std::atoi(e->d_name));
  }
  closedir(dir);
  return tids;
}

// The thread's state letter ('R', 'S', ...; '?' when unknown).
inline char ThreadState(int tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const std::size_t paren = line.rfind(')');  // the name may hold spaces and parentheses
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

// Waits until the thread sleeps (state 'S'); false after `limit`.
inline bool AwaitThreadAsleep(int tid, std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < give_up) {
    if (ThreadState(tid) == 'S') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Times the thread left a CPU, voluntarily or not (-1 when unknown): unchanged while it sleeps.
inline long ContextSwitchesOf(int tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  long total = -1;
  for (std::string line; std::getline(status, line);) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos || line.find("ctxt_switches") == std::string::npos) continue;
    total = (total < 0 ? 0 : total) + std::atol(line.c_str() + colon + 1);
  }
  return total;
}

// A thread other than the caller that may run on `cpu` only, once there is one (0 when there
// is none after `limit`).
inline int AwaitThreadPinnedTo(int cpu, std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  do {
    for (int tid : ThreadIds()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (tid == ThisThreadId() || sched_getaffinity(tid, sizeof set, &set) != 0) continue;
      if (CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set)) return tid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (std::chrono::steady_clock::now() < give_up);
  return 0;
}

}  // namespace tierflow::testkit
