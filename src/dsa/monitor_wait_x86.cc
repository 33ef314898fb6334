// SPDX-License-Identifier: Apache-2.0
// Compiled with -mwaitpkg; see monitor_wait.h.
#include <immintrin.h>
#include <x86intrin.h>

#include <algorithm>
#include <fstream>

#include "dsa/monitor_wait.h"
#include "tierflow/dsa_inventory.h"

namespace tierflow::dsa {

std::uint64_t UmwaitMaxCycles(const std::string& sysfs_root) {
  std::ifstream f(sysfs_root + "/devices/system/cpu/umwait_control/max_time");
  std::uint64_t v = 0;
  if (f >> v && v > 0) return v;
  return 100000;
}

bool MonitorWait(const volatile std::uint8_t* status, std::uint64_t cycles,
                 std::uint64_t max_cycles) {
  const std::uint64_t end = __rdtsc() + cycles;
  for (;;) {
    if (*status != 0) return true;
    const std::uint64_t now = __rdtsc();
    if (now >= end) return false;
    _umonitor(const_cast<std::uint8_t*>(status));
    if (*status != 0) return true;  // written between the check and the monitor
    // Control 1: C0.1, the lighter state that wakes faster (C0.2 saves more power but adds
    // wake-up latency to waits of microseconds).
    _umwait(1, std::min(end, now + max_cycles));
  }
}

namespace internal {
bool (*monitor_wait)(const volatile std::uint8_t*, std::uint64_t, std::uint64_t) = &MonitorWait;
bool (*cpu_has_waitpkg)() = [] { return DsaCpuFeatures::Detect().waitpkg; };
}  // namespace internal

}  // namespace tierflow::dsa
